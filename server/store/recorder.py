"""Recording games as events, and rebuilding them from their events.

A record is the game's options and seats, then every change in order: the deal (``deal``,
with the permutations of every shuffle it made), each move (``move``, seat and move), a
clock expiry (``timeout``: the seat's timeout moves were played), and an ending that is not
a move (``end``: resignation, abandonment, timeout forfeit; ``seat`` is the loser). Every
event carries its time, the mover's clock, and the permutations of any shuffle it caused
(Stacko's reshuffle, the next round's deal). Chance is recorded as it happened, never as a
seed: ``RecordingRng`` wraps the room's RNG (the OS's in production) and notes the
permutation each ``shuffle`` applied; ``ReplayRng`` applies the recorded ones again. Python
only promises that ``random()`` repeats across versions, not ``shuffle``.

Where the events go (schema 3): while a game runs, each is one row appended to
``event_log``; when it ends, all of them go into ``games.record`` as one packed value
(schema 6, ``server.store.packed``) by the statement that records the result (``record``),
and ``compact`` trims the log now and then. Rooms that outlive a
game (waiting for a player or a rematch) are kept in ``rooms`` (``room``).

A record of a game in progress holds what the live game holds (the server's memory), and
nothing else: who may read what of it is decided where it is served (``server.records``).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import logging
import secrets
from collections.abc import MutableSequence, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from stacko.engine.game import GameSpec, GameState, Shuffler
from stacko.engine.games import GAMES
from stacko.engine.outcome import Termination
from stacko.protocol.games import CODECS, GameCodec
from stacko.protocol.games.common import outcome_to_wire
from stacko.server.store import journal, packed
from stacko.server.store.base import FENCE, Op, Store

log = logging.getLogger("stacko.store")

RULES_VERSION = 1
"""The rules the engines play today; a replay of another version would need its engine."""


def token_hash(token: str) -> str:
    """What the store keeps of a session token: its sha256, never the token."""
    return hashlib.sha256(token.encode()).hexdigest()


DORMANT = "sha256:"
"""The token of a session restored from the store until its owner comes back with the real
one (``recover``): this prefix and the stored hash, which ``session_hash`` gives back, so
that a room written again meanwhile keeps the hash. No client can send it: real tokens are
URL-safe base64."""


def session_hash(token: str) -> str:
    return token[len(DORMANT) :] if token.startswith(DORMANT) else token_hash(token)


def new_game_id() -> str:
    return secrets.token_hex(8)


class RecordingRng:
    """``inner``'s shuffles, each noted as the permutation it applied (``perms``): the game's
    only source of chance (``engine.game.Shuffler``), which draws nothing else (no
    ``random()``, no ``choice``: chance that is not a shuffle could not be recorded). Not a
    ``random.Random``: one is held per game in progress, and each ``random.Random`` carries
    2.5 KB of Mersenne Twister state (2.9 KB in all, against 0.1 KB for this)."""

    __slots__ = ("inner", "perms")

    def __init__(self, inner: Shuffler) -> None:
        self.inner = inner
        self.perms: list[list[int]] = []

    def shuffle(self, x: MutableSequence[Any]) -> None:
        perm = list(range(len(x)))
        self.inner.shuffle(perm)
        old = list(x)
        x[:] = [old[i] for i in perm]
        self.perms.append(perm)

    def take(self) -> list[list[int]]:
        perms, self.perms = self.perms, []
        return perms


class ReplayRng:
    """Applies recorded permutations, in order, instead of drawing (a ``Shuffler``, as
    ``RecordingRng`` is: the engines draw nothing else)."""

    def __init__(self, perms: Sequence[Sequence[int]] = ()) -> None:
        self.perms: collections.deque[Sequence[int]] = collections.deque(perms)

    def shuffle(self, x: MutableSequence[Any]) -> None:
        if not self.perms:
            raise ValueError("the record has no permutation left for this shuffle")
        perm = self.perms.popleft()
        if sorted(perm) != list(range(len(x))):
            raise ValueError(f"a recorded permutation of {len(perm)} for a shuffle of {len(x)}")
        old = list(x)
        x[:] = [old[i] for i in perm]


@dataclass
class GameRecord:
    """The recorder's handle on one game (``Room.record``)."""

    id: str
    rng: RecordingRng
    seq: int = 0
    pending: list[Op] = field(default_factory=list)
    events: bytearray = field(default_factory=bytearray)
    """Every event so far, packed (``packed.append``): written whole into ``games.record``
    when the game ends, and into the log again when the log is compacted. Held for every
    game in progress, hence packed (a tuple of SQL parameters per event took 3 x more)."""
    owner: str | None = None
    """The node that serves the game, when nodes share the store; then every change is
    fenced by ``owner`` and ``epoch`` (``server.store.base.FENCE``)."""
    epoch: int = 0
    prefix: bytes = b""
    """What the journal's record of each event of this game starts with, and its CRC-32
    (``journal.event_prefix``: made at the first move)."""
    prefix_crc: int = 0
    room_row: tuple[Any, ...] | None = None
    """The room's row as last written while this game is recorded (``_row_key``): at the
    game's end, the row needs no writing if it is still this one (the rows of a game's
    start and end differ only in their time)."""

    @property
    def held(self) -> int:
        """The events in ``events`` (a line each; counted where needed, at the game's end)."""
        return self.events.count(b"\n")


EVENT_SQL = (
    "INSERT INTO events (game_id, seq, kind, seat, ply, payload, at_ms) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
"""A finished game's events as rows of ``events``, written in the transaction that ended it
from schema 3 to 5 (schema 6 writes ``games.record`` instead): what files from before
hold, and what the tests write to build one."""

FINISH_SQL = journal.FINISH_SQL
"""A game's end: its result and its whole record (``packed.pack``), in one statement."""

LOG_SQL = journal.LOG_SQL
"""A change of a game in progress, appended to the log (schema 3): its key is the rowid
(SQLite) or an identity (PostgreSQL), so a commit writes the one or two pages at the log's
end however many games it touches. Keyed by ``(game_id, seq)`` as before, every game a
commit touched cost a page of the key's index (about 5-6 us a move here)."""

LINE = b'[%d,"%b",%d,%d,%d,{"move":%b}]\n'
LINE_CLOCKS = b'[%d,"%b",%d,%d,%d,{"move":%b,"clock_ms":%d,"deadline_ms":%d}]\n'
"""A move's line (``packed.line``) without clocks, and with them: ``(seq, kind, seat, ply,
at_ms, move)``, then the mover's clock and the next deadline (``Recorder.record``)."""

ENDED_LOG_SQL = journal.ENDED_LOG_SQL
"""Rows a compaction wrote again for a game that ended meanwhile (``Recorder.compact``)."""

MOVE_WIRES = 4_096
"""Moves whose JSON the recorder keeps made (``Recorder._wires``): more than every move of
every game and variant, a bound all the same."""

TOKEN_HASHES = 16_384
"""Tokens whose hash the recorder keeps made (``Recorder._hashes``; emptied when full):
about 0.2 KB each, the token itself being the session's."""

COMPACT_MIN_ROWS = 100_000
"""Log rows appended before the log is compacted (at least, and twice the live events)."""
COMPACT_CHUNK_ROWS = 2_000
"""Rows written again per transaction of a compaction (about 5 ms: frames wait behind it)."""
COMPACT_CHUNK_IDS = 2_000
"""Log ids deleted per transaction of a compaction: about 1 ms each here (20,000 took
15 ms, a stall the frames waiting behind it would show)."""


ROOM_SQL = (
    "INSERT INTO rooms (code, game, options, public, rated, seats, game_id, updated_ms, owner) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (code) DO UPDATE SET game = excluded.game, "
    "options = excluded.options, public = excluded.public, rated = excluded.rated, "
    "seats = excluded.seats, game_id = excluded.game_id, updated_ms = excluded.updated_ms, "
    "owner = excluded.owner"
)


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def _row_key(room: Any) -> tuple[Any, ...]:
    """What a room's row (``Recorder.room``) is made of, but its time: equal keys, equal
    rows (the players by identity: what the row holds of them does not change)."""
    return (room, room.game_id, *room.players, *room.rematch, room.public, room.rated)


class Recorder:
    """Turns a room's changes into statements for the store (``RoomHooks.recorder``)."""

    def __init__(self, store: Store, clock: Any) -> None:
        self.store = store
        self.clock = clock
        self.live: dict[str, GameRecord] = {}
        """The games in progress recorded here, by id."""
        self.live_events = 0
        self.log_rows = 0
        """Rows appended to the log since it was last compacted (or counted at recovery)."""
        self.compactions = 0
        self._compacting: asyncio.Task[None] | None = None
        self._ended: tuple[Any, ...] | None = None
        """The room whose row a game's result just wrote (``_row_key``), for the status
        change that follows at once (``room``): the next call to ``room`` clears it."""
        self._hashes: dict[str, str] = {}
        """Session token -> its hash (``_hash``), at most ``TOKEN_HASHES`` of them."""
        self._wires: dict[Any, bytes] = {}
        """A move's JSON (``move_to_wire``) by the engine's move (a frozen value), made once:
        a game has few distinct moves (Stacko 80 at most), and every move is recorded."""
        self.lines = store.takes_lines
        """Whether moves go to the store as their lines (``Store.submit_line``)."""
        self.writer = store.event_writer
        """Where a move's line is committed, if the store has one: a compiled call from
        here, not the store's Python (``journal.EventWriter``)."""
        self.cleans = store.cleans_log
        """Whether the store deletes a game's log rows with its result (the journal's
        applier: ``journal.LogRows``): they then count no more towards a compaction."""
        self.packs = store.packs_records
        """Whether a finished game's events go to the store as they are, for its writer to
        pack (``journal.FINISH_EVENTS_SQL``), rather than packed here."""
        self.on_finish: Any = None
        """``(room, game_id, outcome, at_ms) -> ops`` written with the result (the new
        ratings, ``server.ratings``)."""
        self.owner: str | None = None
        """This node's id when nodes share the store and take each other's games over
        (PostgreSQL with ``--redis-url``): games are recorded as its own, and fenced."""
        self.hub_sessions: dict[str, Any] = {}
        """The hub's sessions (token -> session): where a revived session goes."""
        self.dormant: dict[str, Any] = {}
        """Token hash -> the session of seats restored from the store, until a ``hello``
        (or a forwarded request) with its token revives it (``revive``)."""

    def revive(self, token: str) -> Any:
        """``hub.revive``: the restored session ``token`` holds seats in, if any."""
        session = self.dormant.pop(token_hash(token), None)
        if session is None or not session.rooms:
            return None
        session.token = token
        self.hub_sessions[token] = session
        return session

    def begin(self, room: Any, rng: Shuffler) -> RecordingRng:
        rec = GameRecord(new_game_id(), RecordingRng(rng), owner=self.owner)
        players = []
        for seat, p in enumerate(room.players):
            players.append({"seat": seat, "name": p.name, "bot": p.bot_level})
            if p.session is not None and p.bot is None:
                rec.pending.append(
                    (
                        "INSERT INTO sessions (game_id, seat, token_hash) VALUES (?, ?, ?)",
                        (rec.id, seat, self._hash(p.session.token)),
                    )
                )
        options = room.codec.options_to_wire(room.options, room.clock_ms)
        rec.pending.insert(
            0,
            (
                "INSERT INTO games (id, code, game, variant, options, rules_version, public, "
                "players, player0, player1, status, started_ms, owner) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'playing', ?, ?)",
                (
                    rec.id, room.code, room.spec.name, getattr(room.options, "variant", None),
                    _dumps(options), RULES_VERSION, int(room.public), _dumps(players),
                    players[0]["name"], players[1]["name"], _ms(self.clock.time()), rec.owner,
                ),
            ),
        )  # fmt: skip
        room.record = rec
        room.game_id = rec.id
        self.live[rec.id] = rec
        return rec.rng

    def _hash(self, token: str) -> str:
        """``session_hash``, made once per token: a game's start and end, and a rematch
        asked, each write both seats' (eight a game, about 0.5 us each)."""
        h = self._hashes.get(token)
        if h is None:
            h = session_hash(token)
            if len(self._hashes) >= TOKEN_HASHES:
                self._hashes.clear()
            self._hashes[token] = h
        return h

    def room(self, room: Any, open_: bool = True) -> None:
        """Keep what a restart needs of a room that is open (``open_``): its options, seats
        (a session only as the hash of its token, and whether it asked for a rematch) and
        last game; or forget a closed one.
        Called when seats or the status change, never per move. A game's start and end
        change the status: the start's row goes into the game's own change (its deal), and
        the end's into the result's (``record``), or nowhere if it is the start's row: the
        row does not hold the status (``games`` does) and ``updated_ms`` is when its
        content last changed. One commit fewer each (``_ended``)."""
        ended, self._ended = self._ended, None
        if not open_:
            if room.record is not None:
                room.record.room_row = None
            self.store.submit([("DELETE FROM rooms WHERE code = ?", (room.code,))])
            return
        key = _row_key(room)
        if key == ended:
            return  # the game's result just wrote this row, or found it written (``record``)
        op = self._room_op(room)
        rec: GameRecord | None = room.record
        if rec is not None:
            rec.room_row = key
            if rec.pending:  # a game just begun: with its deal
                rec.pending.append(op)
                return
        self.store.submit([op])

    def _room_op(self, room: Any) -> Op:
        seats: list[dict[str, Any] | None] = []
        for p in room.players:
            if p is None:
                seats.append(None)
                continue
            session = p.session
            token = None if p.bot is not None or session is None else session.token
            seats.append({
                "name": p.name, "bot": p.bot_level, "account": p.account,
                "token_hash": self._hash(token) if token else None,
                "rematch": len(seats) in room.rematch,
            })  # fmt: skip
        options = room.codec.options_to_wire(room.options, room.clock_ms)
        return (
            ROOM_SQL,
            (
                room.code, room.spec.name, _dumps(options), int(room.public), int(room.rated),
                _dumps(seats), room.game_id, _ms(self.clock.time()), self.owner,
            ),
        )  # fmt: skip

    def record(
        self, room: Any, kind: str, seat: int | None, move: Any, termination: str | None
    ) -> None:
        rec: GameRecord | None = room.record
        game = room.game
        if rec is None or game is None:
            return
        at = round(self.clock.time() * 1000)
        outcome = game.outcome()
        rng = rec.rng
        if (
            self.lines and move is not None and outcome is None and termination is None
            and seat is not None and not rng.perms and not rec.pending and rec.owner is None
        ):  # fmt: skip
            # Most changes: a move that ends nothing and draws nothing. Its line is made at
            # once (the same bytes as below: ``test_store_log``) and journaled as it is.
            deadline = room.deadline
            clock_ms = room.clock_ms
            wire = self._wires.get(move)
            if wire is None:
                wire = orjson.dumps(room.codec.move_to_wire(move))
                if len(self._wires) < MOVE_WIRES:
                    self._wires[move] = wire
            head = (rec.seq + 1, kind.encode(), seat, game.ply, at, wire)
            if deadline is not None and clock_ms is not None:
                left = max(0, round((deadline - self.clock.monotonic()) * 1000))
                line = LINE_CLOCKS % (*head, left, at + clock_ms)
            elif deadline is None and clock_ms is None:
                line = LINE % head
            else:
                line = b""
            if line:
                rec.seq += 1
                rec.events += line
                writer = self.writer
                if writer is None:
                    self.store.submit_line(rec.id, line)
                else:
                    if not rec.prefix:
                        rec.prefix, rec.prefix_crc = journal.event_prefix(rec.id)
                    if not writer.write(rec.prefix, rec.prefix_crc, line):
                        self.store.submit_line(rec.id, line)
                self._logged()
                return
        payload: dict[str, Any] = {}
        if rng.perms:
            payload["perms"] = rng.take()
        if move is not None:
            payload["move"] = room.codec.move_to_wire(move)
        if termination is not None:
            payload["termination"] = termination
        deadline = room.deadline
        if deadline is not None and kind != "deal":
            # the mover had left (deadlines are on the monotonic clock, as the room's timers)
            payload["clock_ms"] = max(0, round((deadline - self.clock.monotonic()) * 1000))
        clock_ms = room.clock_ms
        if clock_ms is not None and outcome is None:
            payload["deadline_ms"] = at + clock_ms
        seq = rec.seq = rec.seq + 1
        ply = game.ply
        ended: tuple[Any, ...] | None = None
        payload_json = orjson.dumps(payload)
        line = packed.line(seq, kind, seat, ply, payload_json, at)
        rec.events += line
        ops = rec.pending
        if ops:  # the game's row is in this change: nothing to fence yet
            rec.pending = []
        elif rec.owner is not None:
            ops = [(FENCE, (rec.id, rec.owner, rec.epoch))]
        else:
            ops = []
        if outcome is None:  # into the log; the last one goes with the whole record below
            ops.append((LOG_SQL, (rec.id, seq, kind, seat, ply, payload_json.decode(), at)))
            self._logged()
        else:
            self.live_events -= rec.held - 1
            if self.cleans:
                self.log_rows = max(0, self.log_rows - (rec.held - 1))
            self.live.pop(rec.id, None)
            packs = self.packs
            ops.append(
                (
                    journal.FINISH_EVENTS_SQL if packs else FINISH_SQL,
                    (
                        _dumps(outcome_to_wire(outcome)),
                        outcome.winner,
                        outcome.termination.value,
                        at,
                        ply,
                        seq,
                        bytes(rec.events) if packs else packed.pack(rec.events),
                        rec.id,
                    ),
                )
            )
            ops.append(("DELETE FROM sessions WHERE game_id = ?", (rec.id,)))
            if self.on_finish is not None:
                ops += self.on_finish(room, rec.id, outcome, at)
            room.record = None
            # The room's row as the status change that follows (``on_status``) would write
            # it: finished, with this game, which it is already unless the seats changed
            # since the game's start. That call then finds it written (``room``).
            ended = _row_key(room)
            if ended != rec.room_row:
                ops.append(self._room_op(room))
        self._ended = ended
        # While the game goes on, ``plies`` and ``last_seq`` of its row stay as they were:
        # one statement per move less; recovery reads the events themselves.
        self.store.submit(ops)

    def _logged(self) -> None:
        """A row appended to the log: compact it once it holds mostly ended games' rows."""
        self.log_rows += 1
        self.live_events += 1
        if self.log_rows > COMPACT_MIN_ROWS and self.log_rows > 2 * self.live_events:
            self._compact_soon()

    # -- the log's compaction ---------------------------------------------------------------

    def _compact_soon(self) -> None:
        if self._compacting is None or self._compacting.done():
            self._compacting = asyncio.get_running_loop().create_task(self._compact_logged())

    async def compact(self) -> int:
        """Shrink the log to about what the games in progress need: write each game in
        progress recorded here again as one run of rows at the log's end, then delete every
        row up to where the log ended before (finished games have their record already).
        Rows of games in progress that another server records (PostgreSQL shared by many
        nodes) or that could not be restored stay. Runs through the writer, in chunks, so
        that frames never wait long behind it; returns the rows deleted. A crash halfway
        leaves rows twice, which recovery reads once."""
        store = self.store
        ((first, last),) = await store.fetch("SELECT min(id), max(id) FROM event_log")
        if last is None:
            return 0
        self.log_rows = 0
        self.compactions += 1
        rewritten: set[str] = set()
        ops: list[Op] = []
        for rec in list(self.live.values()):
            if self.live.get(rec.id) is not rec:  # ended meanwhile: in its record now
                continue
            # all of them so far, whatever comes meanwhile
            events = [(rec.id, *row) for row in packed.rows(rec.events)]
            rewritten.add(rec.id)
            for i in range(0, len(events), COMPACT_CHUNK_ROWS):
                if self.live.get(rec.id) is not rec:
                    break  # ended meanwhile: the rest of it is in its record
                if rec.owner is not None:  # nodes share the store: only while it is ours
                    ops.append((FENCE, (rec.id, rec.owner, rec.epoch)))
                ops += [(LOG_SQL, e) for e in events[i : i + COMPACT_CHUNK_ROWS]]
                if len(ops) >= COMPACT_CHUNK_ROWS:
                    store.submit(ops)
                    ops = []
                    await store.flush()
        if ops:
            store.submit(ops)
            await store.flush()
        # A game that ended while it was being written again left rows after ``last``
        # that nothing reads (its record has it all): they go now, not at the next one.
        ended = sorted(gid for gid in rewritten if gid not in self.live)
        if ended:
            store.submit([(ENDED_LOG_SQL, (gid, last)) for gid in ended])
            await store.flush()
        playing = await store.fetch("SELECT id FROM games WHERE status = 'playing'")
        keep = sorted(gid for (gid,) in playing if gid not in rewritten)
        counted = "SELECT count(*) FROM event_log WHERE id <= ?"
        ((before,),) = await store.fetch(counted, (last,))
        lo = int(first) - 1
        while lo < int(last):
            hi = min(lo + COMPACT_CHUNK_IDS, int(last))
            store.submit([store.drop_log_op(lo, hi, keep)])
            await store.flush()
            lo = hi
        ((after,),) = await store.fetch(counted, (last,))
        return int(before) - int(after)

    async def _compact_logged(self) -> None:
        try:
            gone = await self.compact()
        except Exception as exc:  # a failed store stops the server anyway
            log.error("the event log's compaction stopped: %s", exc)
        else:
            log.info("event log compacted: %d rows deleted", gone)
            # A trigger that came while this one ran (``_compact_soon`` skips it) is not lost.
            if self.log_rows > COMPACT_MIN_ROWS and self.log_rows > 2 * self.live_events:
                self._compacting = asyncio.get_running_loop().create_task(self._compact_logged())

    async def close(self) -> None:
        """Stop a compaction under way (what it did is harmless; the next one goes on)."""
        task, self._compacting = self._compacting, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


# -- replay ---------------------------------------------------------------------------------


@dataclass
class Event:
    seq: int
    kind: str
    seat: int | None
    ply: int
    payload: dict[str, Any]
    at_ms: int


def events_from_rows(rows: Sequence[tuple[Any, ...]]) -> list[Event]:
    """``(seq, kind, seat, ply, payload, at_ms)`` rows (``payload`` JSON text, or a dict
    from a packed record) as events."""
    out = []
    for q, kind, s, ply, p, at in rows:
        payload = p if isinstance(p, dict) else orjson.loads(p)
        out.append(Event(int(q), kind, None if s is None else int(s), int(ply), payload, int(at)))
    return out


def options_of(codec: GameCodec, stored: str | dict[str, Any]) -> tuple[Any, int | None]:
    raw = orjson.loads(stored) if isinstance(stored, str) else stored
    return codec.options_from_wire(dict(raw))


class Replay:
    """A game rebuilt event by event, with the same engine the room ran."""

    def __init__(self, spec: GameSpec, codec: GameCodec, options: Any, deal: Event) -> None:
        if deal.kind != "deal":
            raise ValueError(f"a record starts with its deal, not {deal.kind!r}")
        self.spec = spec
        self.codec = codec
        self.rng = ReplayRng(deal.payload.get("perms", ()))
        self.game: GameState = spec.new_game(options, self.rng)
        self.expiries = [0, 0]
        if self.rng.perms:
            raise ValueError("the deal left recorded permutations unused")

    def apply(self, e: Event) -> None:
        """One recorded change; ValueError if the record and the engine disagree."""
        self.rng.perms.extend(e.payload.get("perms", ()))
        game = self.game
        if e.kind == "move":
            model = self.codec.move_model.model_validate(e.payload["move"])
            game.apply(self.codec.move_from_wire(model), e.seat)
        elif e.kind == "timeout":
            assert e.seat is not None
            self.expiries[e.seat] += 1
            for move in game.timeout_moves():
                game.apply(move, e.seat)
        elif e.kind == "end":
            assert e.seat is not None
            if e.payload.get("termination") == Termination.TIMEOUT.value:
                self.expiries[e.seat] += 1
            game.end(e.seat, Termination(e.payload["termination"]))
        else:
            raise ValueError(f"unknown event kind {e.kind!r}")
        if self.rng.perms:
            raise ValueError(f"event {e.seq} left recorded permutations unused")
        if game.ply != e.ply:
            raise ValueError(f"event {e.seq}: the replay is at ply {game.ply}, the record {e.ply}")


def replay(game: str, options: Any, events: Sequence[Event]) -> Replay:
    spec, codec = GAMES[game], CODECS[game]
    r = Replay(spec, codec, options, events[0])
    for e in events[1:]:
        r.apply(e)
    return r


# -- recovery -------------------------------------------------------------------------------


def _dormant(dormant: dict[str, Any], h: str | None, name: str) -> Any:
    """The session that will resume the seats of token hash ``h`` (one per hash, so that a
    token gets all its seats back); a session no token resumes when ``h`` is unknown."""
    from stacko.server.hub import Session

    session = dormant.get(h) if h is not None else None
    if session is None:
        session = Session(DORMANT + h if h is not None else "", name)
        if h is not None:
            dormant[h] = session
    return session


async def _restore_rooms(
    hub: Any, store: Store, dormant: dict[str, Any], owner: str | None = None
) -> int:
    """Rooms without a game in progress (``rooms``): waiting for a player, or finished and
    waiting for a rematch (the finished game replayed, so the room shows it as before).
    Returns the number restored."""
    from stacko.server.room import Player, Room

    restored = 0
    columns = "SELECT code, game, options, public, rated, seats, game_id FROM rooms"
    if owner is None:
        rows = await store.fetch(columns)
    else:  # nodes sharing the store: this node's rooms (a dead node's are not taken over)
        rows = await store.fetch(f"{columns} WHERE owner = ? OR owner IS NULL", (owner,))
    for code, name, options_text, public, rated, seats_text, game_id in rows:
        if code in hub.rooms:  # its game in progress is back already
            continue
        try:
            spec, codec = GAMES[name], CODECS[name]
            options, clock_ms = options_of(codec, options_text)
            finished: Replay | None = None
            events: list[Event] = []
            if game_id is not None:
                row = await store.game(game_id)
                if row is None or row[8] != "finished":
                    log.error("room %s: its game %s is not finished as recorded", code, game_id)
                    continue
                events = events_from_rows(await store.events(game_id))
                finished = replay(name, options, events)
        except Exception as exc:  # a record this server cannot replay: say so, keep the rest
            log.error("room %s cannot be restored: %s", code, exc)
            continue
        room = Room(code, spec, codec, options, clock_ms, bool(public), hub._hooks)
        room.rated = bool(rated)
        seats: list[Player | None] = []
        bots = False
        for seat in orjson.loads(seats_text):
            if seat is None:
                seats.append(None)
            elif seat["bot"] is not None:
                try:
                    bot = hub._make_bot(name, seat["bot"])
                except Exception as exc:  # a bot level this server no longer has
                    log.error("room %s: no bot %s here: %s", code, seat["bot"], exc)
                    break
                seats.append(Player(seat["name"], bot=bot, bot_level=seat["bot"]))
                bots = True
            else:
                session = _dormant(dormant, seat["token_hash"], seat["name"])
                session.rooms[code] = room
                seats.append(Player(seat["name"], session=session, account=seat["account"]))
        if len(seats) != 2 or all(p is None or p.bot is not None for p in seats):
            for p in seats:
                if p is not None and p.session is not None:
                    p.session.rooms.pop(code, None)
            continue
        room.players = seats
        if finished is not None:
            room.game_id = game_id
            room.restore(finished.game, len(events), finished.expiries)
            room.rematch = {
                s for s, p in enumerate(orjson.loads(seats_text)) if p and p.get("rematch")
            }
        hub.rooms[code] = room
        if bots:
            hub.bot_rooms.add(code)
        hub._status_changed(room)  # listed again if public and waiting
        for seat_no, p in enumerate(seats):
            if p is not None and p.bot is None:
                room.dropped(seat_no)
        restored += 1
    return restored


async def recover(hub: Any, store: Store, recorder: Recorder) -> int:
    """Rebuild every game in progress into a room of ``hub`` (same code), seats disconnected
    with a fresh grace, then every other open room (waiting for a player or a rematch); a
    session token from before resumes its seats (``hub.revive``). With ``recorder.owner``
    (nodes sharing the store), only this node's games and rooms (and those of no owner), its
    games claimed again with a new epoch. Returns the number of rooms restored."""
    recorder.hub_sessions = hub.sessions
    hub.revive = recorder.revive
    claimed = None if recorder.owner is None else await store.claim_own(recorder.owner)
    restored = len(await restore(hub, store, recorder, claimed))
    restored += await _restore_rooms(hub, store, recorder.dormant, recorder.owner)
    ((rows,),) = await store.fetch("SELECT count(*) FROM event_log")
    recorder.log_rows = int(rows)  # a log grown long before the restart is compacted soon
    return restored


async def restore(
    hub: Any, store: Store, recorder: Recorder, claimed: dict[str, int] | None
) -> list[Any]:
    """Rebuild games in progress into rooms of ``hub``: those of ``claimed`` (game id ->
    the epoch this node holds them at: a start, or a takeover), or every one (``None``).
    A seat whose session is live here already (its player is connected to this node) gets
    that session back at once; the others wait in ``recorder.dormant``."""
    from stacko.server.hub import Session
    from stacko.server.room import Player, Room

    dormant: dict[str, Session] = recorder.dormant
    live: dict[str, Session] = {}
    if claimed is not None:
        if not claimed:
            return []
        ids = sorted(claimed)
        events_rows = await store.in_progress_events(ids)
        session_rows = await store.games_sessions(ids)
        game_rows = [r for r in await store.games_rows(ids) if r[8] == "playing"]
        for token, s in hub.sessions.items():
            if token:
                live[token[1:] if token.startswith("?") else token_hash(token)[:32]] = s
    else:
        events_rows = await store.in_progress_events()
        session_rows = await store.in_progress_sessions()
        game_rows = await store.in_progress()
    restored: list[Any] = []
    by_game: dict[str, list[tuple[Any, ...]]] = {}
    for game_id, *rest in events_rows:
        by_game.setdefault(game_id, []).append(tuple(rest))
    hashes_by_game: dict[str, dict[int, str]] = {}
    for game_id, seat, h in session_rows:
        hashes_by_game.setdefault(game_id, {})[int(seat)] = h
    for row in game_rows:
        game_id, code, name = row[0], row[1], row[2]
        try:
            spec, codec = GAMES[name], CODECS[name]
            options, clock_ms = options_of(codec, row[4])
            events = events_from_rows(by_game.get(game_id, []))
            r = replay(name, options, events)
        except Exception as exc:  # a record this server cannot replay: say so, keep the rest
            log.error("game %s (room %s) cannot be replayed, left as it is: %s", game_id, code, exc)
            continue
        if r.game.outcome() is not None or code in hub.rooms:
            log.error("game %s (room %s) is not in progress as recorded; skipped", game_id, code)
            continue
        hashes = hashes_by_game.get(game_id, {})
        room = Room(code, spec, codec, options, clock_ms, bool(row[6]), hub._hooks)
        seats: list[Player | None] = []
        back: list[tuple[int, Any]] = []
        for p in orjson.loads(row[7]):
            if p["bot"] is not None:
                try:
                    bot = hub._make_bot(name, p["bot"])
                except Exception as exc:  # a bot level this server no longer has
                    log.error("game %s (room %s): no bot %s here: %s", game_id, code, p["bot"], exc)
                    break
                seats.append(Player(p["name"], bot=bot, bot_level=p["bot"]))
                continue
            h = hashes.get(int(p["seat"]))
            session = None if h is None else live.get(h[:32])
            if session is not None and session.peer is not None:
                back.append((len(seats), session.peer))
            if session is None:
                session = _dormant(dormant, h, p["name"])
            session.rooms[code] = room
            seats.append(Player(p["name"], session=session))
        if len(seats) != 2:
            continue
        room.players = seats
        rec = GameRecord(game_id, RecordingRng(hub._hooks.rng_factory()), seq=events[-1].seq)
        for seq, kind, seat, ply, payload, at_ms in by_game[game_id]:
            packed.append(rec.events, int(seq), kind, seat, int(ply), payload.encode(), int(at_ms))
        recorder.live[game_id] = rec
        recorder.live_events += rec.held
        if claimed is not None:
            rec.owner, rec.epoch = recorder.owner, claimed[game_id]
        game = r.game
        game.rng = rec.rng  # type: ignore[attr-defined]  # both engines keep theirs there
        room.record = rec
        room.game_id = game_id
        hub.rooms[code] = room
        room.restore(game, len(events), r.expiries)
        for seat, p in enumerate(seats):
            if p is not None and p.bot is None:
                room.dropped(seat)
        for seat, peer in back:  # connected here: the seat and its view at once
            room.returned(seat, peer)
        restored.append(room)
    return restored
