"""The SQLite store's journal: the commit point of every change, and its applier.

A change is committed when its record is in the journal: one copy into a shared mapping of
the file on the event loop (``JournalFile``: about a microsecond, no fsync, like a WAL commit
at ``synchronous=NORMAL``: the page cache has it, so it survives a kill -9 of the process,
not a power loss), after which its frames leave at once. SQLite gets
the change later, from an applier that runs as a process of its own (this file, run as a
script: the standard library only, so it starts in tens of milliseconds), so neither
SQLite's work nor a wait for it is on the way of any frame. Why a process and not a thread:
a thread needs the GIL between SQLite's statements, which the loop holds through each turn,
and then falls behind while the loop is busy (``bench/README.md``, "The scale step's
latency").

Files, in the data directory: ``journal-<gen>.log`` (``gen`` eight digits), appended to by
the server, a new one once the current passes ``ROTATE_BYTES``. A record is a header
(``HEADER``: the payload's length, its CRC-32, the change's ticket) and the payload, the
change's statements as ``marshal`` data (a list of ``(sql, params)``; the server writes it,
nobody else), or, for the commonest change (an event of a game in progress, which only
appends a row to the log: ``LOG_SQL``), ``EVENT``, the game's id and the event's line as the
game holds it (``server.store.packed``): the statement is made here, not on the loop; a
game's end carries the game's events unpacked, ``PACKING`` before its ``marshal`` data, and
they are packed here too.
What SQLite holds is marked in SQLite itself, in the transaction that applied it:
``journal_position`` (a row per journal: the next generation and offset to apply).

A data directory may serve several node processes on one machine (``--node-id``: each its
own journal, ``journal-<node>-<gen>.log``, and lock, ``stacko-<node>.lock``; a server
without one uses ``journal-<gen>.log`` and ``stacko.lock``): SQLite takes their appliers'
transactions in turn. A start applies its own journal, and any other whose lock it can
take (a server that will not come back under that name leaves nothing unapplied).

Recovery (``recover``, at start, before the server listens): every record after that
position is applied, in order; a record cut short or failing its CRC at a file's end (zeros
after it: the file is allocated ahead) is the change a kill -9 interrupted in its copy (its
frames never left) and is dropped, as is everything from a record that runs into a page of
zeros (a power loss: pages not yet written back); one anywhere else means the file is
corrupt and the server refuses to start.

The conversation while the server runs, over two pipes: ``NOTE_DELAY_S`` (of the server,
``server.store.sqlite``) after a change, the server sends ``NOTE`` (generation, end
offset, newest ticket, whether it waits for an answer); the applier applies everything up
to it in one transaction, and answers ``DONE`` (newest ticket applied, and its figures)
when asked (a read waits for it), or at most every ``ANSWER_EVERY_S``. When the server
closes the note pipe, the applier applies what is left, checkpoints, deletes the finished
journal and exits 0; on any error it writes a line to stderr and exits 1 (the server then
stops: fail-stop, like a failed commit).
"""

from __future__ import annotations

import argparse
import contextlib
import marshal
import mmap
import os
import re
import signal
import sqlite3
import struct
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from typing import Any

HEADER = struct.Struct("<IIQ")
"""A record's header: payload bytes, CRC-32 of the payload, ticket."""
NOTE = struct.Struct("<QQQQ")
"""Server to applier: generation, end offset in it, the ticket of the last record there,
and whether the server waits for an answer (a read that must see everything before it)."""
DONE = struct.Struct("<QdQQ")
"""Applier to server: newest ticket applied, then since the last answer: seconds in
transactions, changes applied, transactions."""
ANSWER_EVERY_S = 1.0
"""Unasked, the applier answers at most this often (the figures on ``/metrics``): every
answer wakes the server's loop, which has better things to do."""
MAX_PAYLOAD = 256 << 20
"""A length over this in a header is a corrupt file, not a change."""
ROTATE_BYTES = 64 << 20
"""A journal past this size is closed and a new one started (the applier deletes the old
one once applied): the journal holds what SQLite does not have yet, plus at most this."""
APPLY_MAX_CHANGES = 2_000
"""Changes per transaction of the applier (recovery's catch-up runs in several)."""
EVENT = b"E"
"""The first byte of an event's payload (``encode_event``); no ``marshal`` data starts so
(its lists start ``[``, or 0xDB with its reference flag)."""
PACKING = b"P"
"""The first byte of a record whose statements hold a game's events to pack
(``FINISH_EVENTS_SQL``), before their ``marshal`` data: no ``marshal`` data starts so, so a
server from before this record kind refuses a journal holding one (a record that cannot be
read) rather than storing the events unpacked as the game's record."""
LOG_SQL = (
    "INSERT INTO event_log (game_id, seq, kind, seat, ply, payload, at_ms) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
"""A change of a game in progress, appended to the log (``server.store.recorder``)."""
FINISH_SQL = (
    "UPDATE games SET status = 'finished', result = ?, winner = ?, termination = ?, "
    "ended_ms = ?, plies = ?, last_seq = ?, record = ? WHERE id = ?"
)
"""A game's end: its result and its whole record (``pack``), in one statement
(``server.store.recorder``)."""
FINISH_EVENTS_SQL = "-- events\n" + FINISH_SQL
"""``FINISH_SQL`` with the game's events as it held them (``server.store.packed``) where
the record goes: the journal writer's, so that compressing them (``pack``: at a long game's
end, hundreds of microseconds) is the applier's work, not the loop's (``decode`` makes the
``FINISH_SQL`` of it)."""
RECORD_PARAM = 6
"""Where ``FINISH_SQL``'s parameters hold the record."""
PACK_LEVEL = 1
"""zlib's fastest level: a game's events compress 4-6 x at it (the JSON repeats its keys)."""
ENDED_LOG_SQL = "DELETE FROM event_log WHERE game_id = ? AND id > ?"
"""Rows a compaction wrote again for a game that ended meanwhile (``Recorder.compact``)."""
FINISHED_LOG_SQL = (
    "DELETE FROM event_log WHERE (SELECT status FROM games WHERE id = event_log.game_id) "
    "= 'finished'"
)
"""Log rows of games that ended before an applier deleted them (``LogRows``), run at a
start's recovery: a log written by a version before it kept them for the compaction, which
no longer comes due (``Store.cleans_log``). A walk of the log (about the games in progress)
with a lookup of each row's game by its key."""
FENCE = "FENCE"
"""``server.store.base.FENCE``: a pseudo statement only PostgreSQL checks (defined here so
that this file runs alone)."""

POSITION_TABLE = (
    "CREATE TABLE IF NOT EXISTS journal_position ("
    "journal TEXT PRIMARY KEY, gen INTEGER NOT NULL, offset INTEGER NOT NULL)"
)
_SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.]{0,63}")

Op = tuple[str, tuple[Any, ...]]


class JournalError(Exception):
    """The journal cannot be read or applied (a clear message; the server does not start)."""


def key_of(node_id: str) -> str:
    """The journal's name for a node (``""`` for a server without ``--node-id``): the id
    itself if it is a plain word, else a digest of it (ids may hold any character)."""
    if not node_id or _SAFE.fullmatch(node_id):
        return node_id
    return "h" + zlib.crc32(node_id.encode()).to_bytes(4, "big").hex() + hex(len(node_id))[2:]


def file_name(gen: int, key: str = "") -> str:
    return f"journal-{key}-{gen:08d}.log" if key else f"journal-{gen:08d}.log"


def lock_name(key: str = "") -> str:
    return f"stacko-{key}.lock" if key else "stacko.lock"


def _parse(name: str) -> tuple[str, int] | None:
    if not (name.startswith("journal-") and name.endswith(".log")):
        return None
    key, _, digits = name[len("journal-") : -len(".log")].rpartition("-")
    if len(digits) != 8 or not digits.isdigit():
        return None
    return key, int(digits)


def generations(directory: str, key: str = "") -> list[int]:
    """The generations of journal ``key``'s files in ``directory``, oldest first."""
    found = (_parse(name) for name in os.listdir(directory))
    return sorted(g for k, g in filter(None, found) if k == key)


def keys(directory: str) -> set[str]:
    """The journals that have files in ``directory``."""
    return {k for k, _ in filter(None, (_parse(name) for name in os.listdir(directory)))}


def encode(ticket: int, ops: list[Op]) -> bytes:
    """One change's record (``PACKING`` first if a game's events are in it to pack)."""
    payload = marshal.dumps(ops)
    if any(sql == FINISH_EVENTS_SQL for sql, _ in ops):
        payload = PACKING + payload
    return HEADER.pack(len(payload), zlib.crc32(payload), ticket) + payload


WINDOW_MIN = 64 << 10
WINDOW_MAX = 4 << 20
"""The part of a journal file mapped at a time (``JournalFile``): from ``WINDOW_MIN`` at
the file's start, growing with the file up to ``WINDOW_MAX``."""


class JournalFile:
    """The server's end of a journal file. A record is copied into a shared mapping of the
    file, which the page cache holds as a ``write()`` would (the applier and a restart read
    it; it survives a kill -9, not a power loss), without a system call: at the scale
    step's load a ``write()`` of a move's record took 2.0 us on the loop, the copy 1.4 us
    (its window's page faults included; 0.36 against 0.2 us in a loop alone). The window
    is allocated (``posix_fallocate``) before it is mapped, so a full disk is an ``OSError``
    there, never a SIGBUS at a copy. The file is as long as the window until it is closed
    (cut to what was written); after a crash it ends in zeros, which recovery reads as its
    end."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.offset = os.fstat(self.fd).st_size
        """Where the next record goes: the end of what was written."""
        self._map: mmap.mmap | None = None
        self._start = self._end = self.offset

    def write(self, record: bytes) -> None:
        """``record`` at ``offset``, whole; OSError if the disk has no room for it."""
        start = self.offset
        end = start + len(record)
        if end > self._end:
            self._slide(end)
        assert self._map is not None
        self._map[start - self._start : end - self._start] = record
        self.offset = end

    def event(self, ticket: int, prefix: bytes, crc: int, line: bytes) -> None:
        """``encode_event``'s record, written as ``write`` would, without making it first:
        the header, then ``prefix`` (``event_prefix``: the game's, whose CRC-32 is ``crc``)
        and ``line``, each copied into the mapping (one allocation fewer, and no copy of the
        line into a record; a move's commonest change, on the loop)."""
        size = len(prefix) + len(line)
        start = self.offset
        end = start + HEADER.size + size
        if end > self._end:
            self._slide(end)
        m = self._map
        assert m is not None
        at = start - self._start
        HEADER.pack_into(m, at, size, zlib.crc32(line, crc), ticket)
        at += HEADER.size
        m[at : at + len(prefix)] = prefix
        at += len(prefix)
        m[at : at + len(line)] = line
        self.offset = end

    def _slide(self, end: int) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
            self._end = self._start  # no window, until one is allocated and mapped
        start = self.offset - self.offset % mmap.ALLOCATIONGRANULARITY
        size = min(WINDOW_MAX, max(WINDOW_MIN, start))
        size = max(size, -(-(end - start) // mmap.PAGESIZE) * mmap.PAGESIZE)
        os.posix_fallocate(self.fd, start, size)
        self._map = mmap.mmap(self.fd, size, offset=start)
        self._start, self._end = start, start + size

    def close(self) -> None:
        """Unmapped, cut to what was written (the zeros of the window go), closed."""
        if self._map is not None:
            self._map.close()
            self._map = None
        try:
            os.ftruncate(self.fd, self.offset)
        except OSError:
            pass  # zeros after the last record read as the journal's end
        finally:
            os.close(self.fd)


def pack(events: bytes | bytearray) -> bytes:
    """The stored record of a game's events (``server.store.packed``: a line each): one JSON
    array of them, compressed."""
    return zlib.compress(b"[" + bytes(events[:-1]).replace(b"\n", b",") + b"]", PACK_LEVEL)


def _packing(ops: list[Op]) -> list[Op]:
    """``ops`` with each ``FINISH_EVENTS_SQL`` made the ``FINISH_SQL`` of its packed events."""
    for i, (sql, params) in enumerate(ops):
        if sql == FINISH_EVENTS_SQL:
            p = list(params)
            p[RECORD_PARAM] = pack(p[RECORD_PARAM])
            ops[i] = (FINISH_SQL, tuple(p))
    return ops


def encode_event(ticket: int, game_id: bytes, line: bytes) -> bytes:
    """The record of an event of a game in progress: ``line`` (``packed.line``'s, with its
    newline) for ``game_id`` (ASCII, under 256 bytes). Per move, on the loop: what
    ``encode`` would cost in tuples, a ``str`` of the payload and ``marshal``, saved."""
    payload = b"%b%c%b%b" % (EVENT, len(game_id), game_id, line)
    return HEADER.pack(len(payload), zlib.crc32(payload), ticket) + payload


def event_prefix(game_id: str) -> tuple[bytes, int]:
    """What ``encode_event``'s payload starts with for ``game_id``, and its CRC-32: made once
    per game (``EventWriter``), not per move."""
    prefix = b"%b%c%b" % (EVENT, len(game_id), game_id.encode())
    return prefix, zlib.crc32(prefix)


class EventWriter:
    """A game's event committed into the journal (``encode_event``'s record), the SQLite
    store's commonest change (a move), here in compiled code from the recorder's call to
    the copy into the file: the same steps as the store's ``submit_line`` and ``_write``
    (the ticket, the copy, the commit's figures, the applier's note), which in the store's
    Python cost about 4 us a move at the scale step, where every microsecond on the loop
    shows about six times in the latency (``bench/README.md``). The store keeps what is
    rare: it opens and rotates the file (``file``), books the note (``on_note``), and
    takes any event this refuses (a change not yet committed, as after a failure).

    ``gate`` is the store's ``server.batch.OutputGate``, which holds its tickets (typed
    ``Any``: this file runs alone, with the standard library only)."""

    def __init__(
        self,
        gate: Any,
        bounds: Sequence[float],
        on_note: Callable[[], None],
        on_full: Callable[[], None],
        on_error: Callable[[OSError], None],
    ) -> None:
        self.gate = gate
        self.file: JournalFile | None = None
        """The journal file events go to; ``None`` while there is none (before the store
        opens, after it closes or fails, or between two files): ``write`` refuses."""
        self.bounds = list(bounds)
        """The commit-latency histogram's bounds (``server.store.base.COMMIT_BUCKETS``)."""
        self.commits = 0
        """Events committed since the store last took the figures (``take``)..."""
        self.seconds = 0.0
        """... the seconds they took ..."""
        self.buckets = [0] * (len(self.bounds) + 1)
        """... and how many fell under each bound."""
        self.note_booked = False
        """Whether the applier's note is booked already (the store's, shared with its own
        writes): the first commit after a note books the next one (``on_note``)."""
        self.on_note = on_note
        self.on_full = on_full
        self.on_error = on_error

    def write(self, prefix: bytes, crc: int, line: bytes) -> bool:
        """Commit event ``line`` of the game whose ``event_prefix`` is ``(prefix, crc)``;
        False if the store must take it (nothing was done)."""
        f = self.file
        gate = self.gate
        if f is None or gate.holding:
            return False
        started = time.perf_counter()
        ticket = gate.ticket + 1
        gate.ticket = ticket
        try:
            f.event(ticket, prefix, crc, line)
        except OSError as exc:  # the disk has no room: fail-stop (the store's)
            self.on_error(exc)
            return True
        gate.committed = ticket
        seconds = time.perf_counter() - started
        self.commits += 1
        self.seconds += seconds
        bounds = self.bounds
        i = 0
        while i < len(bounds) and seconds > bounds[i]:
            i += 1
        self.buckets[i] += 1
        if not self.note_booked:
            self.note_booked = True
            self.on_note()
        if f.offset >= ROTATE_BYTES:
            self.on_full()
        return True

    def take(self) -> tuple[int, float, list[int]]:
        """The figures since the last call: commits, seconds, and the histogram's counts."""
        out = (self.commits, self.seconds, self.buckets)
        self.commits = 0
        self.seconds = 0.0
        self.buckets = [0] * (len(self.bounds) + 1)
        return out


def parse_line(line: bytes) -> tuple[int, str, int | None, int, str, int]:
    """``(seq, kind, seat, ply, payload, at_ms)`` of an event's line (``packed.line``'s,
    without its newline), ``payload`` as JSON text: its fields before the payload hold no
    comma, so two splits, and no JSON parsed. ValueError if it is not one."""
    seq, kind, seat, ply, at, payload = line[1:-1].split(b",", 5)
    return (
        int(seq), kind[1:-1].decode(), None if seat == b"null" else int(seat), int(ply),
        payload.decode(), int(at),
    )  # fmt: skip


def event_op(game_id: str, line: bytes) -> Op:
    """The statement an event's line stands for (``LOG_SQL``)."""
    return (LOG_SQL, (game_id, *parse_line(line.rstrip(b"\n"))))


def _event_ops(payload: bytes) -> list[Op]:
    end = 2 + payload[1]
    return [event_op(payload[2:end].decode(), payload[end:])]


Record = tuple[int, list[Op], int]
"""A decoded record: its ticket, its statements, and the offset just after it."""


def decode(data: bytes, start: int = 0, base: int = 0) -> tuple[list[Record], int, str]:
    """The records of ``data`` from ``start`` (``base``: the file offset of ``data[0]``):
    ``(records, end, trouble)``, where ``end`` is just after the last whole record and
    ``trouble`` says why reading stopped before the end of ``data`` ("" if it did not)."""
    out: list[Record] = []
    pos = start
    size = len(data)
    while pos < size:
        if size - pos < HEADER.size:
            return out, pos, "a record header cut short"
        length, crc, ticket = HEADER.unpack_from(data, pos)
        if length > MAX_PAYLOAD:
            return out, pos, f"a record of {length} bytes"
        body = pos + HEADER.size
        if size - body < length:
            return out, pos, "a record cut short"
        payload = data[body : body + length]
        if zlib.crc32(payload) != crc:
            return out, pos, "a record that fails its CRC"
        try:
            tag = payload[:1]
            if tag == EVENT:
                ops = _event_ops(payload)
            elif tag == PACKING:
                ops = _packing(marshal.loads(payload[1:]))
            else:
                ops = marshal.loads(payload)
        except (EOFError, ValueError, TypeError, IndexError) as exc:
            return out, pos, f"a record that cannot be read ({exc})"
        pos = body + length
        out.append((ticket, ops, base + pos))
    return out, pos, ""


def whole(path: str, start: int) -> list[Record]:
    """The records of the journal file ``path`` from ``start``, where nothing more will be
    written. A record cut short or failing its CRC at the very end is the change a kill -9
    interrupted in its copy (its frames never left): dropped. Anywhere else the file is
    corrupt: JournalError."""
    with open(path, "rb") as f:
        data = f.read()
    if start > len(data):
        raise JournalError(f"{path}: shorter ({len(data)} bytes) than already applied ({start})")
    records, end, trouble = decode(data, start)
    if trouble:
        # A cut record is the file's last bytes: a copy that was interrupted leaves nothing
        # after it, and a power loss (which ``--sync normal`` does not promise to survive,
        # but a start must) may leave zeros there, or the last record's blocks unwritten.
        # Anything after the record's own length: corruption, unless the record runs into
        # a page of zeros (``_unwritten``).
        rest = data[end:].rstrip(b"\0")
        length = HEADER.unpack_from(rest)[0] if len(rest) >= HEADER.size else 0
        if (
            len(rest) > HEADER.size + min(length, MAX_PAYLOAD)
            or len(rest) > MAX_TAIL
            or _holds_a_record(rest)  # a damaged length made whole records look cut
        ) and not _unwritten(data, end, length):
            raise JournalError(f"{path}: {trouble} at byte {end} of {len(data)}")
    return records


PAGE = 4096


def _unwritten(data: bytes, end: int, length: int) -> bool:
    """Whether the record at ``end`` runs into a whole page of zeros: after a power loss,
    pages of the journal the system had not yet written back (its window of the file was
    allocated ahead: ``JournalFile``) read as zeros, and later ones may have been written.
    What follows such a page was never promised (``--sync normal``), so the journal ends
    at ``end``; a damaged byte never makes a page of zeros."""
    first = -(-end // PAGE) * PAGE
    last = min(len(data), end + HEADER.size + min(length, MAX_TAIL))
    return any(
        not data[q : q + PAGE].strip(b"\0") and q + PAGE <= len(data)
        for q in range(first, last + 1, PAGE)
    )


MAX_TAIL = 16 << 20
"""A cut record longer than this is no record the server writes: damage."""


def _holds_a_record(data: bytes) -> bool:
    """Whether a whole record (its CRC right) starts anywhere in ``data`` after its first
    byte: what a kill -9 cut is a prefix of one record, never that."""
    size = len(data)
    for pos in range(1, size - HEADER.size + 1):
        length, crc, _ = HEADER.unpack_from(data, pos)
        body = pos + HEADER.size
        if 0 < length <= size - body and zlib.crc32(data[body : body + length]) == crc:
            return True
    return False


def runs(batch: Sequence[tuple[int, Sequence[Op]]]) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """The statements of a batch of changes, in order, with consecutive uses of one
    statement merged (one ``executemany`` each: the moves of many games in a row)."""
    out: list[tuple[str, list[tuple[Any, ...]]]] = []
    for _, ops in batch:
        for sql, params in ops:
            if sql == FENCE:
                continue  # checked by the backend before the statements
            if out and out[-1][0] == sql:
                out[-1][1].append(params)
            else:
                out.append((sql, [params]))
    return out


def position(conn: sqlite3.Connection, key: str = "") -> tuple[int, int]:
    """Where applying journal ``key`` goes on: ``(generation, offset)``."""
    conn.execute(POSITION_TABLE)
    sql = "SELECT gen, offset FROM journal_position WHERE journal = ?"
    row = conn.execute(sql, (key,)).fetchone()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


class LogRows:
    """The ids of each game's rows in the event log, as they were inserted (and, at a start,
    as the log holds them: ``load``). ``apply`` deletes a game's rows in the transaction
    that stores its result, which holds all its events: the log then holds about the games
    in progress, and the server's compaction (``Recorder.compact``: every game in progress
    written again and every older row deleted, at once) never comes due. At the scale run's
    load it came every 45 s or so, and the applier's hundreds of thousands of deletes beside
    the servers on two cores stalled every game for 0.1-0.6 s (``bench/README.md``). By id,
    not by game, since the log has no index on its games (an index would cost every move's
    insert)."""

    def __init__(self) -> None:
        self.by_game: dict[str, list[int]] = {}

    @classmethod
    def load(cls, conn: sqlite3.Connection) -> LogRows:
        rows = cls()
        for game_id, row_id in conn.execute("SELECT game_id, id FROM event_log ORDER BY id"):
            rows.by_game.setdefault(game_id, []).append(row_id)
        return rows

    def inserted(self, conn: sqlite3.Connection, params: list[tuple[Any, ...]]) -> None:
        """``params`` were just inserted by one ``executemany``, in one transaction: their
        ids are consecutive (an integer primary key is the largest so far plus one), up to
        the last one inserted."""
        (last,) = conn.execute("SELECT last_insert_rowid()").fetchone()
        first = int(last) - len(params) + 1
        for i, row in enumerate(params):
            self.by_game.setdefault(row[0], []).append(first + i)

    def drop(self, conn: sqlite3.Connection, game_ids: Sequence[str]) -> None:
        """Delete the rows of the games ``game_ids`` (ended: their record has them)."""
        ids = [(i,) for g in game_ids for i in self.by_game.pop(g, ())]
        if ids:
            conn.executemany("DELETE FROM event_log WHERE id = ?", ids)


def apply(
    conn: sqlite3.Connection,
    batch: Sequence[Record],
    gen: int,
    offset: int,
    key: str = "",
    log: LogRows | None = None,
) -> int:
    """``batch`` and the new position in one transaction; the statements it ran. With
    ``log``, a game's rows in the event log go with its result (``LogRows``)."""
    statements = 0
    conn.execute("BEGIN")
    try:
        for sql, rows in runs([(t, ops) for t, ops, _ in batch]):
            conn.executemany(sql, rows)
            statements += len(rows)
            if log is None:
                continue
            if sql == LOG_SQL:
                log.inserted(conn, rows)
            elif sql == FINISH_SQL:  # (``decode`` made it of ``FINISH_EVENTS_SQL``)
                log.drop(conn, [row[-1] for row in rows])
            elif sql == ENDED_LOG_SQL:  # a compaction's rows of a game that had ended
                for row in rows:
                    log.by_game.pop(row[0], None)
        conn.execute(
            "INSERT INTO journal_position (journal, gen, offset) VALUES (?, ?, ?) "
            "ON CONFLICT (journal) DO UPDATE SET gen = excluded.gen, offset = excluded.offset",
            (key, gen, offset),
        )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return statements


class Tally:
    """What the applier did since its last answer (``DONE``)."""

    def __init__(self) -> None:
        self.ticket = 0
        self.seconds = 0.0
        self.changes = 0
        self.transactions = 0

    def answer(self) -> bytes:
        out = DONE.pack(self.ticket, self.seconds, self.changes, self.transactions)
        self.seconds = 0.0
        self.changes = self.transactions = 0
        return out


def apply_all(
    conn: sqlite3.Connection,
    records: list[Record],
    gen: int,
    tally: Tally | None = None,
    key: str = "",
    log: LogRows | None = None,
) -> None:
    """``records`` of generation ``gen``, ``APPLY_MAX_CHANGES`` a transaction, counted in
    ``tally`` if given."""
    for i in range(0, len(records), APPLY_MAX_CHANGES):
        part = records[i : i + APPLY_MAX_CHANGES]
        started = time.perf_counter()
        apply(conn, part, gen, part[-1][2], key, log)
        if tally is not None:
            tally.seconds += time.perf_counter() - started
            tally.changes += len(part)
            tally.transactions += 1
            tally.ticket = part[-1][0]


def _finish_file(conn: sqlite3.Connection, directory: str, gen: int, key: str) -> None:
    """Generation ``gen`` is applied wholly: the position moves past it, then it goes."""
    apply(conn, [], gen + 1, 0, key)
    os.unlink(os.path.join(directory, file_name(gen, key)))


def recover(conn: sqlite3.Connection, directory: str, key: str = "") -> tuple[int, int]:
    """Apply whatever the journal files hold past the recorded position, delete them, and
    return ``(changes applied, the generation to write next)``. JournalError if a file is
    corrupt anywhere but at its very end. The caller holds the data directory's lock, so
    no other process writes the journal or applies it meanwhile."""
    gen, offset = position(conn, key)
    applied = 0
    log = LogRows.load(conn)
    for g in generations(directory, key):
        path = os.path.join(directory, file_name(g, key))
        if g < gen:
            os.unlink(path)  # applied: its deletion was cut short
            continue
        records = whole(path, offset if g == gen else 0)
        try:
            apply_all(conn, records, g, None, key, log)
        except (sqlite3.Error, ValueError, TypeError, OverflowError) as exc:
            raise JournalError(
                f"{path}: SQLite refused a change it holds ({exc}). If the disk is full or "
                "the directory not writable, fix that and start again; otherwise the file "
                "holds a change this version cannot apply: move it aside to start without "
                "the changes it holds"
            ) from None
        applied += len(records)
        _finish_file(conn, directory, g, key)
        gen, offset = g + 1, 0
    if gen == 0 or offset:
        # A new journal; or the file the position is in was moved aside (a record in it
        # could not be applied): the next file starts a generation of its own, at 0.
        gen += 1
        apply(conn, [], gen, 0, key)
    conn.execute(FINISHED_LOG_SQL)
    return applied, gen


# -- the applier process --------------------------------------------------------------------


class Applier:
    """The process's state: the file it is in, and how far."""

    def __init__(
        self, conn: sqlite3.Connection, directory: str, gen: int, reply: int, key: str
    ) -> None:
        self.key = key
        self.conn = conn
        self.directory = directory
        self.gen = gen
        self.offset = 0
        self.reply = reply
        self.tally = Tally()
        self.answered = time.monotonic()
        self.log = LogRows.load(conn)

    def answer(self, asked: bool) -> None:
        """Tell the server how far SQLite is, if it asked or has not heard for a while."""
        now = time.monotonic()
        if asked or (self.tally.transactions and now - self.answered >= ANSWER_EVERY_S):
            os.write(self.reply, self.tally.answer())
            self.answered = now

    def upto(self, gen: int, end: int) -> None:
        """Apply every record up to offset ``end`` of generation ``gen`` (the server wrote
        them wholly before it said so, and every file before ``gen`` is finished)."""
        while self.gen < gen:
            path = os.path.join(self.directory, file_name(self.gen, self.key))
            apply_all(self.conn, whole(path, self.offset), self.gen, self.tally, self.key, self.log)
            _finish_file(self.conn, self.directory, self.gen, self.key)
            self.gen += 1
            self.offset = 0
        if end <= self.offset:
            return
        path = os.path.join(self.directory, file_name(gen, self.key))
        with open(path, "rb") as f:
            f.seek(self.offset)
            data = f.read(end - self.offset)
        records, used, trouble = decode(data, 0, self.offset)
        if trouble or len(data) != end - self.offset:
            why = trouble or f"the file ends before byte {end}"
            raise JournalError(f"{path}: {why} at byte {self.offset + used}")
        apply_all(self.conn, records, gen, self.tally, self.key, self.log)
        self.offset = end


IDLE_ENV = "STACKO_JOURNAL_APPLIER_IDLE"
"""``0`` keeps the applier at the scheduler's normal policy (``lower_priority``)."""


def lower_priority() -> None:
    """Run only when the CPU has nothing else to run (Linux ``SCHED_IDLE``).
    Nothing a player waits for waits for the applier (a change is committed once it is in
    the journal), so it should not take a core from the servers and clients: at normal
    priority each of its transactions, woken every ``NOTE_DELAY_S``, preempted a server for
    a few milliseconds. At the scale run (two servers and their clients on two cores) the
    store-on p99 fell from 7.7-11.5 ms to 4.5-6.6 ms and p50 by 0.1-0.2 ms
    (``bench/README.md``). The scheduler still gives it a share of a busy CPU, so a
    backlog is applied, later; reads that wait for it wait longer only on a saturated
    machine."""
    if os.environ.get(IDLE_ENV, "1") == "0" or not hasattr(os, "SCHED_IDLE"):
        return
    with contextlib.suppress(OSError):  # not allowed here: the normal policy, as before
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def _serve(args: argparse.Namespace) -> None:
    lower_priority()
    conn = sqlite3.connect(args.db, isolation_level=None, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={'FULL' if args.sync == 'full' else 'NORMAL'}")
    conn.execute("PRAGMA foreign_keys=OFF")
    applier = Applier(conn, args.dir, args.gen, args.reply, args.key)
    pending = b""
    while True:
        data = os.read(args.notes, NOTE.size * 512)
        if not data:  # the server closed the pipe (or died): apply what is left, and end
            recover(conn, args.dir, args.key)  # (no answer: the server may be gone)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            conn.close()
            return
        pending += data
        whole_notes = len(pending) - len(pending) % NOTE.size
        if not whole_notes:
            continue
        asked = any(NOTE.unpack_from(pending, i)[3] for i in range(0, whole_notes, NOTE.size))
        gen, end, _ticket, _ = NOTE.unpack_from(pending, whole_notes - NOTE.size)
        pending = pending[whole_notes:]
        applier.upto(gen, end)
        applier.answer(asked)


def main(argv: Sequence[str] | None = None) -> int:
    # The terminal's Ctrl-C and a service manager's SIGTERM reach the whole process group:
    # the server decides when this ends (it closes the pipe; if it dies, the pipe closes).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    parser = argparse.ArgumentParser(description="Applies the server's journal to SQLite.")
    parser.add_argument("--db", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--gen", type=int, required=True)
    parser.add_argument("--key", default="")
    parser.add_argument("--sync", default="normal")
    parser.add_argument("--notes", type=int, required=True)
    parser.add_argument("--reply", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        _serve(args)
    except Exception as exc:  # any: the server stops, and says why
        print(f"stacko store applier: {exc!r}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
