"""A game's events as one value: how a game in progress holds them, and how a finished
game's record is stored (``games.record``, schema 6; ``server.store.schema``).

While a game runs, the recorder keeps its events as JSON arrays
``[seq,kind,seat,ply,at_ms,payload]``, one a line, in one ``bytearray`` (``append``): the
event's JSON and a newline (60-120 bytes), where a tuple of SQL parameters per event
took 3 x that (a tuple, a payload ``str``, an ``int``: 346 bytes against 122 for events
with clocks, ``tests/server/test_store_replay.py``), held for every game in progress.
When it ends, ``pack`` makes them one JSON array and compresses it (zlib, ``journal.PACK_LEVEL``):
one value written with the game's result instead of a row per event. The payload comes last
and the fields before it hold no comma, so the log's rows come back from the lines with two
splits (``rows``: the log's compaction writes them again), with no JSON parsed: JSON text
never holds a raw newline.
"""

from __future__ import annotations

import zlib
from typing import Any

import orjson

from stacko.server.store import journal

MAX_UNPACKED = 64 << 20
"""Bytes a stored record may unpack to at most (a corrupt or hostile value stops there)."""


def line(seq: int, kind: str, seat: int | None, ply: int, payload: bytes, at_ms: int) -> bytes:
    """One event's line, newline included (``payload``: the event's JSON object; ``kind`` a
    word): what a game in progress holds, and what the journal writes of it."""
    seat_text = b"null" if seat is None else b"%d" % seat
    return b'[%d,"%b",%b,%d,%d,%b]\n' % (seq, kind.encode(), seat_text, ply, at_ms, payload)


def append(buf: bytearray, seq: int, kind: str, seat: int | None, ply: int, payload: bytes,
           at_ms: int) -> None:  # fmt: skip
    """One event at the end of ``buf`` (``line``)."""
    buf += line(seq, kind, seat, ply, payload, at_ms)


def rows(buf: bytes | bytearray) -> list[tuple[Any, ...]]:
    """``(seq, kind, seat, ply, payload, at_ms)`` of every event in ``buf`` (``append``'s),
    ``payload`` as JSON text: the log's rows (``recorder.LOG_SQL`` without the game id)."""
    return [journal.parse_line(line) for line in bytes(buf).split(b"\n")[:-1]]


pack = journal.pack
"""The stored record of the events in ``buf`` (``journal.pack``: the applier packs too)."""


def unpack(blob: bytes) -> list[tuple[Any, ...]]:
    """``(seq, kind, seat, ply, payload, at_ms)`` of a stored record, ``payload`` a dict;
    ValueError if it is not one."""
    try:
        d = zlib.decompressobj()
        raw = d.decompress(bytes(blob), MAX_UNPACKED)
        if d.unconsumed_tail or not d.eof:
            raise ValueError("a stored record too large or cut short")
        items = orjson.loads(raw)
    except (zlib.error, orjson.JSONDecodeError) as exc:
        raise ValueError(f"a stored record that cannot be read: {exc}") from None
    if not isinstance(items, list):
        raise ValueError("a stored record that is not a list of events")
    out: list[tuple[Any, ...]] = []
    for item in items:
        if not (isinstance(item, list) and len(item) == 6 and isinstance(item[5], dict)):
            raise ValueError("a stored record with a malformed event")
        seq, kind, seat, ply, at, payload = item
        out.append((seq, kind, seat, ply, payload, at))
    return out


def events_of(stored: bytes | list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The events of ``Store.stored_events``'s answer: a packed record unpacked, rows as
    they are."""
    return unpack(stored) if isinstance(stored, bytes) else stored
