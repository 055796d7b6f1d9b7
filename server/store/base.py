"""What every backend shares: group commit bookkeeping, the output gate, the record queries.

The output gate: ``submit`` hands a batch of statements (one change of a game) to the
backend's writer and takes a ticket; from then until that ticket is committed, every frame
the server sends (``Connection.send`` asks ``gate.holding``) waits in the gate
(``server.batch.OutputGate``, compiled: it is on the way of every frame), in the order it
was sent, in one list per ticket (the newest at that moment). When the writer reports a
commit, the lists its ticket covers go out in order. So no frame that shows a change leaves
before the change is on disk, and frames to one socket never overtake each other. A frame
sent while nothing is pending goes straight out (``holding`` is False).

A failed commit is fatal (fail-stop): held frames are dropped, ``holding`` stays True so
nothing more leaves, and ``on_failure`` tells the server, which exits non-zero; the restart
recovers from what was committed.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from stacko.server.batch import OutputGate
from stacko.server.store import journal, packed
from stacko.server.store.journal import FENCE as FENCE
from stacko.server.store.journal import runs as runs

log = logging.getLogger("stacko.store")

Op = tuple[str, tuple[Any, ...]]
"""One SQL statement (``?`` placeholders) and its parameters."""

COMMIT_BUCKETS: tuple[float, ...] = (
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
)  # fmt: skip


class StoreError(Exception):
    """The store cannot be used (a clear message for the operator; the server exits)."""


# ``FENCE`` (from ``server.store.journal``, which runs alone): a pseudo statement,
# ``(FENCE, (game_id, owner, epoch))``: the change that carries it commits only if the
# game's row still names ``owner`` and ``epoch`` (checked, with the row locked, in the same
# transaction). Only the PostgreSQL backend is shared by nodes that take games over
# (``server.cluster.takeover``); the other backends never see one.


class Fenced(StoreError):
    """A change of a game another node has taken over: nothing of its batch was committed.
    Fail-stop, as for any failed commit: this node's picture of those games is stale."""

    def __init__(self, games: list[str]) -> None:
        super().__init__(f"games taken over by another node: {', '.join(sorted(games))}")
        self.games = games


@dataclass
class StoreStats:
    """Counters for ``/metrics`` (plain ints and floats; read when scraped)."""

    commits: int = 0
    changes: int = 0
    """Changes (``submit`` calls) committed: changes / commits is the mean batch size."""
    statements: int = 0
    commit_seconds: float = 0.0
    commit_buckets: list[int] = field(default_factory=lambda: [0] * (len(COMMIT_BUCKETS) + 1))
    batch_max: int = 0
    errors: int = 0
    held_frames: int = 0
    applies: int = 0
    """SQLite transactions of the journal's applier (``server.store.journal``)."""
    applied_changes: int = 0
    apply_seconds: float = 0.0


@dataclass(frozen=True)
class Filters:
    """``GET /api/games`` filters, already checked (``server.records`` parses them)."""

    game: str | None = None
    player: str | None = None
    code: str | None = None
    result: str | None = None
    cursor: tuple[int, str] | None = None
    limit: int = 20


RESULTS = {
    "draw": ("winner IS NULL", ()),
    "seat0": ("winner = ?", (0,)),
    "seat1": ("winner = ?", (1,)),
}
"""``result=`` filter values besides a termination name (``completed``, ``resignation``...)."""


def _unindexed(column: str) -> str:
    """``column`` in a form no index serves (``code || ''``; an integer: ``winner + 0``), the
    same in SQLite and PostgreSQL: the filters besides the one a query seeks on are checked
    on the rows that seek finds, so the planner cannot pick a worse index for them."""
    return f"{column} + 0" if column == "winner" else f"{column} || ''"


def finished_query(columns: str, f: Filters) -> tuple[str, tuple[Any, ...]]:
    """``GET /api/games`` as SQL: an index seek on the most selective filter given (room
    code, then player, then game, then result), newest first, the other filters checked on
    what it finds. Each filter has its own index over the finished games (schema 3) ordered
    by ``(ended_ms, id)``, so a page costs its rows whatever the number of games: a player
    is two seeks (``player0``, ``player1``) merged, never a walk of every finished game
    (an OR of the two columns did that: SQLite preferred the status index, 237 ms for an
    unknown name at 500,000 games)."""
    # (column, comparison, parameters), most selective first: the first is the seek
    conds: list[tuple[str, str, tuple[Any, ...]]] = []
    if f.code is not None:
        conds.append(("code", "= ?", (f.code,)))
    if f.code is not None and f.player is not None:  # a room's few games, then the name
        conds.append(("player0", f"= ? OR {_unindexed('player1')} = ?", (f.player, f.player)))
    if f.game is not None:
        conds.append(("game", "= ?", (f.game,)))
    if f.result is not None:
        if f.result in RESULTS:
            clause, extra = RESULTS[f.result]
            conds.append(("winner", clause.removeprefix("winner "), extra))
        else:
            conds.append(("termination", "= ?", (f.result,)))
    order = "ORDER BY ended_ms DESC, id DESC"
    limit = f"LIMIT {int(f.limit) + 1}"

    def branch(seek: str, seek_params: tuple[Any, ...]) -> tuple[str, list[Any]]:
        """``seek`` (a player's seat) or, if empty, the first condition is the seek."""
        where = ["status = 'finished'"] + ([seek] if seek else [])
        params = list(seek_params)
        for i, (column, cmp, extra) in enumerate(conds):
            seeking = i == 0 and not seek
            where.append(f"({column if seeking else _unindexed(column)} {cmp})")
            params += extra
        if f.cursor is not None:
            where.append("(ended_ms < ? OR (ended_ms = ? AND id < ?))")
            params += [f.cursor[0], f.cursor[0], f.cursor[1]]
        return f"SELECT {columns} FROM games WHERE {' AND '.join(where)} {order} {limit}", params

    if f.code is not None or f.player is None:
        sql, params = branch("", ())
        return sql, tuple(params)
    # A player: their games in seat 0, and in seat 1 (not already counted in seat 0).
    a, pa = branch("player0 = ?", (f.player,))
    b, pb = branch("player1 = ? AND player0 <> ?", (f.player, f.player))
    sql = f"SELECT * FROM ({a}) AS seat0 UNION ALL SELECT * FROM ({b}) AS seat1 {order} {limit}"
    return sql, tuple(pa + pb)


def once(rows: list[tuple[Any, ...]], key: int) -> list[tuple[Any, ...]]:
    """``rows`` (sorted) without those whose first ``key`` columns repeat the previous row's."""
    out: list[tuple[Any, ...]] = []
    for row in rows:
        if not out or out[-1][:key] != row[:key]:
            out.append(row)
    return out


def encode_cursor(ended_ms: int, game_id: str) -> str:
    return base64.urlsafe_b64encode(f"{ended_ms}:{game_id}".encode()).decode().rstrip("=")


def is_game_id(text: str) -> bool:
    """What ``recorder.new_game_id`` makes: 16 lowercase hex digits."""
    return len(text) == 16 and all(c in "0123456789abcdef" for c in text)


def decode_cursor(text: str) -> tuple[int, str]:
    """ValueError unless ``text`` came from ``encode_cursor``."""
    if not text or len(text) > 80:
        raise ValueError("bad cursor")
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
    ms, _, game_id = raw.partition(":")
    if not (ms.isascii() and ms.isdigit()) or len(ms) > 15:
        raise ValueError("bad cursor")
    if not is_game_id(game_id):  # anything else (a NUL say) failed PostgreSQL's query: a 500
        raise ValueError("bad cursor")
    return int(ms), game_id


Waiters = list[tuple[int, asyncio.Future[None]]]
"""Futures waiting for a ticket (a commit, or the journal's applier)."""


def wake(waiters: Waiters, ticket: int) -> Waiters:
    """Resolve the waiters for tickets up to ``ticket``; the others, still waiting."""
    keep = []
    for want, fut in waiters:
        if want <= ticket:
            if not fut.done():
                fut.set_result(None)
        else:
            keep.append((want, fut))
    return keep


def fail_all(waiters: Waiters, exc: BaseException) -> None:
    for _, fut in waiters:
        if not fut.done():
            fut.set_exception(exc)


class Store:
    """A backend's shared half. Subclasses start a writer that calls ``_committed`` and
    ``_failed`` on the event loop, and implement ``_enqueue``, ``fetch`` and ``close``."""

    kind = "?"
    location = ""

    def __init__(self) -> None:
        self.gate = OutputGate()
        """Where frames wait (``Connection.send`` asks ``gate.holding``): compiled, in
        ``server.batch``, as it is on the way of every frame."""
        self.failed: BaseException | None = None
        self._stats = StoreStats()
        self.on_failure: Callable[[BaseException], None] = self._log_failure
        self._waiters: Waiters = []
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def appended(self) -> int:
        """The newest change submitted (its ticket)."""
        return self.gate.ticket

    @appended.setter
    def appended(self, ticket: int) -> None:
        self.gate.ticket = ticket

    @property
    def committed(self) -> int:
        """The newest change committed: everything up to it is on disk."""
        return self.gate.committed

    @committed.setter
    def committed(self, ticket: int) -> None:
        self.gate.committed = ticket

    @property
    def holding(self) -> bool:
        """True while a submitted change is not yet committed: frames must wait."""
        return self.gate.holding

    @property
    def stats(self) -> StoreStats:
        self._stats.held_frames = self.gate.held_frames
        return self._stats

    # -- writing ----------------------------------------------------------------------

    def submit(self, ops: Sequence[Op]) -> None:
        """One change, to be committed (with whatever else is waiting) by the writer."""
        if self.failed is not None:
            return  # nothing leaves any more; the server is going down
        gate = self.gate
        ticket = gate.ticket = gate.ticket + 1
        gate.holding = True
        self._enqueue(ticket, list(ops))

    event_writer: journal.EventWriter | None = None
    """Where the recorder commits a move itself, in compiled code, when the backend has one
    (the journal's): ``submit_line`` is then its way only when that refuses."""

    takes_lines = False
    """Whether the recorder hands a move over as its line (``submit_line``) rather than as
    a statement: where the writer keeps the line as it is (the journal's)."""

    cleans_log = False
    """Whether a game's rows in the event log are deleted with its result, by the writer
    (the journal's applier: ``journal.LogRows``), rather than by the recorder's compaction."""

    packs_records = False
    """Whether the recorder hands a finished game's events over unpacked, in
    ``journal.FINISH_EVENTS_SQL``: where the writer packs them off the loop (the journal's
    applier)."""

    def submit_line(self, game_id: str, line: bytes) -> None:
        """One change that appends event ``line`` (``packed.line``) of ``game_id`` to the
        log: its statement (``journal.event_op``), submitted as any change."""
        self.submit([journal.event_op(game_id, line)])

    def hold(self, release: Callable[[Any], None], arg: Any) -> None:
        """Call ``release(arg)`` (a frame's delivery, a close) once everything submitted so
        far is committed, after everything held before it."""
        self.gate.hold(release, arg)

    def _count_commit(self, changes: int, statements: int, seconds: float) -> None:
        """One commit in the figures (``/metrics``)."""
        s = self._stats
        s.commits += 1
        s.changes += changes
        s.statements += statements
        if s.batch_max < changes:
            s.batch_max = changes
        s.commit_seconds += seconds
        i = 0
        while i < len(COMMIT_BUCKETS) and seconds > COMMIT_BUCKETS[i]:
            i += 1
        s.commit_buckets[i] += 1

    def _committed(self, ticket: int, changes: int, statements: int, seconds: float) -> None:
        """On the loop: the writer committed every change up to ``ticket``."""
        if self.failed is not None:
            return
        self._count_commit(changes, statements, seconds)
        self.committed = ticket
        gate = self.gate
        gate.release(ticket)
        gate.holding = self.committed < self.appended
        if self._waiters:
            self._waiters = wake(self._waiters, ticket)

    def _failed(self, exc: BaseException) -> None:
        """On the loop: a commit failed. Fail-stop: nothing more leaves, the server exits."""
        if self.failed is not None:
            return
        self.failed = exc
        self._stats.errors += 1
        self.gate.drop()
        fail_all(self._waiters, StoreError(f"the store failed: {exc}"))
        self._waiters = []
        self.on_failure(exc)

    def fail(self, exc: BaseException) -> None:
        """Fail-stop from outside the writer: a node that finds its games taken over."""
        self._failed(exc)

    def _log_failure(self, exc: BaseException) -> None:
        log.critical("the %s store failed, nothing more can be committed: %s", self.kind, exc)

    async def flush(self) -> None:
        """Wait until everything submitted so far is committed (and its frames released)."""
        if self.failed is not None:
            raise StoreError(f"the store failed: {self.failed}")
        if self.committed >= self.appended:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((self.appended, fut))
        await fut

    def _enqueue(self, ticket: int, ops: list[Op]) -> None:
        raise NotImplementedError

    # -- lifecycle and reading ---------------------------------------------------------

    async def open(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def fetch(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    async def execute(self, ops: Sequence[Op]) -> None:
        """Statements in one transaction outside the writer (retention, tests)."""
        raise NotImplementedError

    # -- the record queries (the same SQL on every backend) ----------------------------

    GAME_COLUMNS = (
        "id, code, game, variant, options, rules_version, public, players, status, result, "
        "started_ms, ended_ms, plies, last_seq"
    )

    async def list_finished(self, f: Filters) -> list[tuple[Any, ...]]:
        """Finished games, newest first (``ended_ms`` then ``id`` descending), at most
        ``f.limit`` + 1 (the extra row says there is a next page)."""
        sql, params = finished_query(self.GAME_COLUMNS, f)
        return await self.fetch(sql, params)

    async def game(self, game_id: str) -> tuple[Any, ...] | None:
        rows = await self.fetch(f"SELECT {self.GAME_COLUMNS} FROM games WHERE id = ?", (game_id,))
        return rows[0] if rows else None

    async def events(self, game_id: str) -> list[tuple[Any, ...]]:
        """``(seq, kind, seat, ply, payload, at_ms)`` in order: a finished game's from
        ``games.record`` (``payload`` a dict; schema 6) or, if it ended before schema 6,
        from ``events``; a game in progress's from the log (a walk of the log: for a rare
        reader, such as a node taking a game over, never per request)."""
        return packed.events_of(await self.stored_events(game_id))

    async def stored_events(self, game_id: str) -> bytes | list[tuple[Any, ...]]:
        """``events`` as stored: a finished game's packed record as it is (``bytes``, for
        ``packed.unpack``: unpacking a long game's is a millisecond, which a reader off the
        loop can take, ``server.recordworker``), else the rows."""
        found = await self.fetch("SELECT record FROM games WHERE id = ?", (game_id,))
        if found and found[0][0] is not None:
            return bytes(found[0][0])
        rows = await self.fetch(
            "SELECT seq, kind, seat, ply, payload, at_ms FROM events WHERE game_id = ? "
            "ORDER BY seq",
            (game_id,),
        )
        if rows:
            return rows
        return once(
            await self.fetch(
                "SELECT seq, kind, seat, ply, payload, at_ms FROM event_log WHERE game_id = ? "
                "ORDER BY seq, id",
                (game_id,),
            ),
            key=1,
        )

    async def in_progress(self) -> list[tuple[Any, ...]]:
        return await self.fetch(
            f"SELECT {self.GAME_COLUMNS} FROM games WHERE status = 'playing' ORDER BY started_ms"
        )

    async def in_progress_events(self, ids: Sequence[str] | None = None) -> list[tuple[Any, ...]]:
        """``(game_id, seq, kind, seat, ply, payload, at_ms)`` of every game in progress (or
        of the games ``ids``), by game then seq, each once (a compaction cut short leaves
        some twice in the log): one query for a whole recovery (one per 500 ``ids``)."""
        if ids is None:
            return once(
                await self.fetch(
                    "SELECT e.game_id, e.seq, e.kind, e.seat, e.ply, e.payload, e.at_ms "
                    "FROM event_log e JOIN games g ON g.id = e.game_id "
                    "WHERE g.status = 'playing' ORDER BY e.game_id, e.seq, e.id"
                ),
                key=2,
            )
        rows: list[tuple[Any, ...]] = []
        wanted = sorted(set(ids))
        for i in range(0, len(wanted), 500):
            part = wanted[i : i + 500]
            rows += await self.fetch(
                "SELECT game_id, seq, kind, seat, ply, payload, at_ms FROM event_log "
                f"WHERE game_id IN ({', '.join('?' * len(part))}) ORDER BY game_id, seq, id",
                tuple(part),
            )
        return once(rows, key=2)

    def drop_log_op(self, after: int, upto: int, keep: Sequence[str]) -> Op:
        """The statement that deletes the log's rows with ids in ``(after, upto]`` but those
        of the games ``keep`` (``Recorder.compact``)."""
        return (
            "DELETE FROM event_log WHERE id > ? AND id <= ? "
            "AND game_id NOT IN (SELECT value FROM json_each(?))",
            (after, upto, orjson.dumps(list(keep)).decode()),
        )

    async def claim_own(self, owner: str) -> dict[str, int]:
        """At the start of a node that shares the store (``owner``): its games in progress
        and those of no owner (a single node's, from before the cluster), each with its
        epoch bumped (compare-and-set: a node taking them over at the same moment loses, or
        fences this one). ``{game_id: epoch}``."""
        rows = await self.fetch(
            "UPDATE games SET owner = ?, epoch = epoch + 1 WHERE status = 'playing' "
            "AND (owner = ? OR owner IS NULL) RETURNING id, epoch",
            (owner, owner),
        )
        return {str(i): int(e) for i, e in rows}

    CHUNK = 500
    """Games per ``IN (...)`` list when reading some games' records."""

    async def games_rows(self, ids: list[str]) -> list[tuple[Any, ...]]:
        """``GAME_COLUMNS`` rows of the games ``ids``, by ``started_ms``."""
        rows: list[tuple[Any, ...]] = []
        for i in range(0, len(ids), self.CHUNK):
            part = ids[i : i + self.CHUNK]
            marks = ", ".join("?" * len(part))
            sql = f"SELECT {self.GAME_COLUMNS} FROM games WHERE id IN ({marks})"
            rows += await self.fetch(sql, tuple(part))
        return sorted(rows, key=lambda r: (r[10], r[0]))

    async def games_sessions(self, ids: list[str]) -> list[tuple[Any, ...]]:
        """As ``in_progress_sessions``, of the games ``ids``."""
        rows: list[tuple[Any, ...]] = []
        for i in range(0, len(ids), self.CHUNK):
            part = ids[i : i + self.CHUNK]
            marks = ", ".join("?" * len(part))
            rows += await self.fetch(
                f"SELECT game_id, seat, token_hash FROM sessions WHERE game_id IN ({marks})",
                tuple(part),
            )
        return rows

    async def in_progress_sessions(self) -> list[tuple[Any, ...]]:
        """``(game_id, seat, token_hash)`` of every game in progress."""
        return await self.fetch("SELECT game_id, seat, token_hash FROM sessions")

    async def sessions(self, game_id: str) -> list[tuple[Any, ...]]:
        """``(seat, token_hash)`` of a game in progress."""
        return await self.fetch(
            "SELECT seat, token_hash FROM sessions WHERE game_id = ? ORDER BY seat", (game_id,)
        )

    PURGE_CHUNK = 10
    """Games deleted per transaction by ``purge``: a few thousand rows, a few ms, so that
    the frames waiting behind it (and, with the loop writer, the loop) never wait long."""

    async def purge(self, ended_before_ms: int) -> int:
        """Retention: delete finished games that ended before ``ended_before_ms``, a few
        at a time through the writer (one writer per database, in order with the rest)."""
        gone = 0
        while True:
            rows = await self.fetch(
                "SELECT id FROM games WHERE status = 'finished' AND ended_ms < ? "
                f"ORDER BY ended_ms LIMIT {self.PURGE_CHUNK}",
                (ended_before_ms,),
            )
            if not rows:
                return gone
            ops: list[Op] = []
            for (game_id,) in rows:  # its log rows go at the log's next compaction
                # (rows in ``events``: a game that ended before schema 6)
                ops.append(("DELETE FROM events WHERE game_id = ?", (game_id,)))
                ops.append(("DELETE FROM games WHERE id = ?", (game_id,)))
            self.submit(ops)
            await self.flush()
            gone += len(rows)
