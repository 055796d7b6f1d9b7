"""A game's events as one value: how a game in progress holds them, and how a finished
game's record is stored (``games.record``, schema 6; ``schema.RECORD_FORMAT``).

While a game runs, the recorder keeps its events as JSON arrays
``[seq,kind,seat,ply,payload,at_ms]`` joined by commas in one ``bytearray`` (``append``):
the event's JSON and a comma (60-120 bytes), where a tuple of SQL parameters per event
took 3 x that (a tuple, a payload ``str``, an ``int``: 346 bytes against 122 for events
with clocks, ``tests/server/test_store_replay.py``), held for every game in progress.
When it ends, ``pack`` wraps them into a JSON array and compresses it (zlib, level
``LEVEL``): one value written with the game's result instead of a row per event.
"""

from __future__ import annotations

import zlib
from typing import Any

import orjson

LEVEL = 1
"""zlib's fastest level: a game's events compress 4-6 x at it (the JSON repeats its keys),
and packing runs on the event loop at every game's end."""

MAX_UNPACKED = 64 << 20
"""Bytes a stored record may unpack to at most (a corrupt or hostile value stops there)."""


def append(buf: bytearray, seq: int, kind: str, seat: int | None, ply: int, payload: str,
           at_ms: int) -> None:  # fmt: skip
    """One event at the end of ``buf`` (``payload``: the event's JSON object, as text)."""
    if buf:
        buf += b","
    seat_text = b"null" if seat is None else b"%d" % seat
    buf += b'[%d,"%s",%s,%d,%s,%d]' % (seq, kind.encode(), seat_text, ply, payload.encode(), at_ms)


def rows(buf: bytes | bytearray) -> list[tuple[Any, ...]]:
    """``(seq, kind, seat, ply, payload, at_ms)`` of every event in ``buf`` (``append``'s),
    ``payload`` as JSON text: the log's rows (``recorder.LOG_SQL`` without the game id)."""
    return [
        (seq, kind, seat, ply, orjson.dumps(payload).decode(), at)
        for seq, kind, seat, ply, payload, at in orjson.loads(b"[" + buf + b"]")
    ]


def pack(buf: bytes | bytearray) -> bytes:
    """The stored record of the events in ``buf``."""
    return zlib.compress(b"[" + buf + b"]", LEVEL)


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
        if not (isinstance(item, list) and len(item) == 6 and isinstance(item[4], dict)):
            raise ValueError("a stored record with a malformed event")
        out.append(tuple(item))
    return out
