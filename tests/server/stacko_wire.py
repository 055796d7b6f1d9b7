"""Shared helpers of the server tests: a real-socket test client, a harness around an
in-process ``Server`` with a ``FakeClock``, and a leak checker that compares every frame a
receiver got with the server's own engine state at the moment the frame was produced.

The leak checker works on *quiescent* snapshots: after every change the tests provoke (a
move round trip, a clock advance, a join ...) they call ``Harness.snap(code)``, which copies
``server.hub.rooms[code].game`` under the room's current ``seq``. Every ``state`` frame must
then match the snapshot of its ``(room, seq)`` exactly, field by field, as the receiver may
know it; a state frame whose ``seq`` was never snapshotted fails the test (so a change the
test did not expect cannot slip through unchecked).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import ValidationError
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from stacko.engine.outcome import Termination
from stacko.engine.stacko import (
    Drew,
    GameEnded,
    Passed,
    Phase,
    Placed,
    Reshuffled,
    RoundEnded,
    Stacko,
    Took,
)
from stacko.engine.stakko import Moved, Stakko
from stacko.engine.stakko import Passed as StakkoPassed
from stacko.protocol.messages import SERVER
from stacko.server.app import Server
from stacko.server.clock import FakeClock
from stacko.server.config import ServerConfig

TIMEOUT = 5.0
INT = re.compile(r"\d+")

SMALL = {"tower": 3, "bricks": 8, "rounds": 1, "turn_cap": 20}


def ints(text: str) -> set[int]:
    return {int(m) for m in INT.findall(text)}


# -- the client ------------------------------------------------------------------------------


class Client:
    """One WebSocket connection. A background task records every frame it receives (and
    validates it against ``protocol.messages.SERVER``); ``expect`` consumes them in order."""

    def __init__(self, ws: ClientConnection, label: str) -> None:
        self.ws = ws
        self.label = label
        self.raw: list[str | bytes] = []
        self.frames: list[dict[str, Any]] = []
        self.invalid: list[str] = []
        self.sent: dict[Any, Any] = {}
        self.token: str | None = None
        self.latest: dict[str, dict[str, Any]] = {}
        """The last ``state`` frame received per room."""
        self._consumed: list[bool] = []
        self._first = 0
        self._new = asyncio.Event()
        self.done = asyncio.Event()
        self._ids = itertools.count(1)
        self._reader = asyncio.create_task(self._read())

    def __repr__(self) -> str:
        return f"<Client {self.label}>"

    @classmethod
    async def open(cls, url: str, label: str = "client") -> Client:
        ws = await connect(
            url, max_size=2**22, ping_interval=None, compression=None, open_timeout=20,
            close_timeout=2,
        )  # fmt: skip
        return cls(ws, label)

    async def _read(self) -> None:
        try:
            while True:
                self._record(await self.ws.recv())
        except ConnectionClosed:
            pass
        finally:
            self.done.set()
            self._new.set()

    def _record(self, data: str | bytes) -> None:
        self.raw.append(data)
        if isinstance(data, bytes):
            self.invalid.append(f"binary frame from the server: {data[:80]!r}")
            frame: dict[str, Any] = {"type": "<binary>"}
        else:
            try:
                SERVER.validate_json(data)
            except ValidationError as exc:
                self.invalid.append(f"{exc}\nframe: {data[:500]}")
            frame = orjson.loads(data)
            if frame.get("type") == "state":
                self.latest[frame["room"]] = frame
        self.frames.append(frame)
        self._consumed.append(False)
        self._new.set()

    # -- sending --------------------------------------------------------------------------

    async def send(self, obj: Any) -> None:
        await self.ws.send(orjson.dumps(obj).decode())

    async def send_raw(self, data: str | bytes) -> None:
        await self.ws.send(data)

    def next_id(self) -> int:
        return next(self._ids)

    async def request(self, kind: str, rid: Any = None, **fields: Any) -> Any:
        """Send a request with an id (a fresh int unless given); returns the id."""
        if rid is None:
            rid = self.next_id()
        msg = {"type": kind, **fields, "id": rid}
        self.sent[rid] = msg
        await self.send(msg)
        return rid

    async def call(self, kind: str, rid: Any = None, **fields: Any) -> dict[str, Any]:
        """A request and the first frame that echoes its id (the answer or an error)."""
        rid = await self.request(kind, rid, **fields)
        return await self.expect(id=rid)

    async def hello(self, name: str = "player", token: str | None = None) -> dict[str, Any]:
        fields: dict[str, Any] = {"protocol": 1, "name": name}
        if token is not None:
            fields["token"] = token
        welcome = await self.call("hello", **fields)
        assert welcome["type"] == "welcome", welcome
        self.token = welcome["session"]
        return welcome

    # -- receiving ------------------------------------------------------------------------

    def _find(self, kind: str | None, match: dict[str, Any]) -> dict[str, Any] | None:
        frames, consumed = self.frames, self._consumed
        while self._first < len(frames) and consumed[self._first]:
            self._first += 1
        for i in range(self._first, len(frames)):
            if consumed[i]:
                continue
            f = frames[i]
            if kind is not None and f.get("type") != kind:
                continue
            if all(f.get(k) == v for k, v in match.items()):
                consumed[i] = True
                return f
        return None

    async def expect(
        self,
        kind: str | None = None,
        timeout: float = TIMEOUT,  # noqa: ASYNC109
        **match: Any,
    ) -> dict[str, Any]:
        """The first not yet consumed frame of ``kind`` whose fields equal ``match``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            found = self._find(kind, match)
            if found is not None:
                return found
            if self.done.is_set():
                raise AssertionError(
                    f"{self.label}: closed ({self.ws.close_code} {self.ws.close_reason!r}) "
                    f"before a {kind} frame {match}; got {self.frames[-5:]}"
                )
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(
                    f"{self.label}: no {kind} frame {match} within {timeout} s; "
                    f"last frames: {self.frames[-5:]}"
                )
            self._new.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._new.wait(), remaining)

    def pending(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Received frames (of ``kind``) not consumed by ``expect`` yet."""
        return [
            f
            for f, used in zip(self.frames, self._consumed, strict=True)
            if not used and (kind is None or f.get("type") == kind)
        ]

    def drain(self) -> list[dict[str, Any]]:
        """Consume and return everything received so far."""
        out = self.pending()
        self._consumed = [True] * len(self._consumed)
        return out

    async def barrier(self) -> None:
        """A ping round trip: every frame the server sent this connection before the pong
        (including those caused by other clients' finished requests) has arrived."""
        reply = await self.call("ping")
        assert reply["type"] == "pong", reply

    async def closed(self, timeout: float = TIMEOUT) -> tuple[int | None, str | None]:  # noqa: ASYNC109
        await asyncio.wait_for(self.done.wait(), timeout)
        return self.ws.close_code, self.ws.close_reason

    async def close(self) -> None:
        await self.ws.close()
        await asyncio.wait_for(self.done.wait(), TIMEOUT)


# -- the leak checker ---------------------------------------------------------------------


@dataclass
class Track:
    """What the checker knows of one client from its own frames (never from the server)."""

    seats: dict[str, int | None] = field(default_factory=dict)
    last_seq: dict[str, int] = field(default_factory=dict)
    last_state: dict[str, dict[str, Any]] = field(default_factory=dict)
    pos: int = 0
    states: int = 0


def visible(game: Stacko, seat: int | None, s: int, i: int) -> bool:
    outcome = game.outcome()
    reveal = outcome is not None and outcome.termination is Termination.COMPLETED
    return reveal or s == seat or game.seen[s][i]


def holding(game: Stacko) -> bool:
    return game.drawn is not None and game.phase is Phase.DRAWN


def hidden_bricks(game: Stacko, seat: int | None) -> set[int]:
    """Current-round bricks ``seat`` (None: a spectator) may not know where they are: hidden
    tower slots, the draw stack, a brick someone else holds."""
    hidden = set(game.stack)
    for s in (0, 1):
        for i, b in enumerate(game.towers[s]):
            if not visible(game, seat, s, i):
                hidden.add(b)
    if game.drawn is not None and not (holding(game) and seat is not None and seat == game.to_move):
        hidden.add(game.drawn)  # held by someone else (or kept after a resignation)
    return hidden


def expected_event(e: Any, seat: int | None) -> dict[str, Any]:
    """The wire form of one engine event as ``seat`` may know it (written independently of
    the server's codec)."""
    if isinstance(e, Took | Placed):
        kind = "took" if isinstance(e, Took) else "placed"
        return {
            "kind": kind, "seat": e.seat, "slot": e.slot, "brick": e.brick, "removed": e.removed
        }  # fmt: skip
    if isinstance(e, Drew):
        return {"kind": "drew", "seat": e.seat, "brick": e.brick if e.seat == seat else None}
    if isinstance(e, Passed):
        return {"kind": "passed", "seat": e.seat, "brick": e.brick}
    if isinstance(e, Reshuffled):
        return {"kind": "reshuffled", "stack": e.stack_size}
    if isinstance(e, RoundEnded):
        r = e.result
        return {
            "kind": "round_ended", "round": r.round, "finisher": r.finisher,
            "towers": [list(r.towers[0]), list(r.towers[1])], "scores": list(r.scores),
        }  # fmt: skip
    assert isinstance(e, GameEnded)
    o = e.outcome
    return {
        "kind": "game_ended", "termination": o.termination.value, "winner": o.winner,
        "scores": list(o.scores),
    }  # fmt: skip


def check_view(
    frame: dict[str, Any],
    seat: int | None,
    game: Stacko,
    label: str = "",
    names: Iterable[str] = (),
) -> None:
    """A state frame for ``seat`` against the engine state it was built from; ``names``, the
    players' names, are taken out of the text before it is scanned for numbers."""
    v = frame["view"]
    where = f"{label} seat={seat} seq={frame['seq']}"
    assert v["game"] == "stacko"
    assert v["seat"] == seat, where
    assert v["ply"] == game.ply, where
    assert v["round"] == game.round, where
    assert v["to_move"] == game.to_move, where
    assert v["phase"] == game.phase.value, where
    assert v["turns"] == game.turns, where
    assert v["totals"] == list(game.totals), where
    assert v["seen"] == [list(game.seen[0]), list(game.seen[1])], where
    assert v["discard"] == list(game.discard), where
    assert v["stack"] == len(game.stack), where
    assert v["holding"] == holding(game), where
    mine = holding(game) and seat is not None and seat == game.to_move
    expected_drawn = game.drawn if mine else None
    assert v["drawn"] == expected_drawn, f"{where}: drawn {v['drawn']} != {expected_drawn}"
    towers = [
        [b if visible(game, seat, s, i) else None for i, b in enumerate(game.towers[s])]
        for s in (0, 1)
    ]
    assert v["towers"] == towers, f"{where}: towers {v['towers']} != {towers}"
    # round-end reveals: exactly the rounds the engine has completed, nothing earlier
    results = [
        {"round": r.round, "finisher": r.finisher, "towers": [list(r.towers[0]), list(r.towers[1])],
         "scores": list(r.scores)}
        for r in game.results
    ]  # fmt: skip
    assert v["results"] == results, where
    if game.outcome() is None:
        assert len(v["results"]) == game.round - 1, where
    events = [expected_event(e, seat) for e in game.events]
    assert v["events"] == events, f"{where}: events {v['events']} != {events}"
    o = game.outcome()
    if o is None:
        assert v["outcome"] is None, where
    else:
        assert v["outcome"] == {
            "termination": o.termination.value, "winner": o.winner, "scores": list(o.scores)
        }, where  # fmt: skip
    if seat is not None and seat == game.to_move:
        legal = [
            {"action": m.action.value} if m.slot is None
            else {"action": m.action.value, "slot": m.slot}
            for m in game.legal_moves()
        ]  # fmt: skip
        assert frame["legal"] == legal, where
    else:
        assert frame["legal"] is None, where

    # -- the scan: no hidden brick anywhere in the current-round fields or the text --------
    hidden = hidden_bricks(game, seat)
    current = {"towers": v["towers"], "discard": v["discard"], "drawn": v["drawn"]}
    found = ints(orjson.dumps(current).decode()) & hidden
    assert not found, f"{where}: hidden bricks {found} in {current}"
    round_over = any(e["kind"] == "round_ended" for e in v["events"])
    legit_text: set[int] = {0, 1}
    for e in v["events"]:
        legit_text.update(x for k, x in e.items() if isinstance(x, int) and k != "seat")
        for k in ("scores",):
            legit_text.update(e.get(k, []))
        for tower in e.get("towers", []):
            legit_text.update(tower)
        if round_over or e["kind"] in ("round_ended", "game_ended", "reshuffled"):
            continue  # an earlier round's bricks, revealed with the round's end
        if e["kind"] in ("took", "placed"):
            assert e["brick"] not in hidden, f"{where}: event {e} names hidden brick"
        if e["kind"] == "drew":
            if e["seat"] != seat:
                assert e["brick"] is None, f"{where}: the opponent's drawn brick: {e}"
            elif e["brick"] is not None:
                assert e["brick"] == v["drawn"], where
        # "removed" / "passed" bricks went face up on the discard pile: public
    legit_text.update(v["totals"])
    text = frame["text"]
    for name in sorted(names, key=len, reverse=True):  # "a2 drew": the 2 is a name's
        text = text.replace(name, "")
    leaked = (ints(text) & hidden) - legit_text
    assert not leaked, f"{where}: text {frame['text']!r} names hidden bricks {leaked}"


COLOURS = ["white", "black", "gray", "red"]


def expected_stakko_event(e: Any) -> dict[str, Any]:
    """A Stakko engine event on the wire (written independently of the server's codec)."""
    if isinstance(e, Moved):
        return {
            "kind": "moved", "seat": e.seat, "stack": e.stack, "count": e.count,
            "target": e.target, "discs": [COLOURS[d] for d in e.discs], "closed": e.closed,
        }  # fmt: skip
    if isinstance(e, StakkoPassed):
        return {"kind": "passed", "seat": e.seat}
    o = e.outcome
    return {
        "kind": "game_ended", "termination": o.termination.value, "winner": o.winner,
        "scores": list(o.scores),
    }  # fmt: skip


def check_stakko_view(
    frame: dict[str, Any], seat: int | None, game: Stakko, label: str = ""
) -> None:
    """Stakko hides nothing: every receiver's view is the whole engine state, disc by disc.
    Only ``seat`` (and so ``legal``) differs between receivers."""
    v = frame["view"]
    where = f"{label} seat={seat} seq={frame['seq']}"
    o = game.outcome()
    expected = {
        "game": "stakko",
        "seat": seat,
        "variant": game.options.variant,
        "to_move": game.to_move,
        "ply": game.ply,
        "ply_cap": game.options.ply_cap,
        "line": [[COLOURS[d] for d in stack] for stack in game.line],
        "owned": [game.owned(0), game.owned(1)],
        "heights": list(game.heights()),
        "passes": list(game.passes),
        "events": [expected_stakko_event(e) for e in game.events],
        "outcome": None if o is None else {
            "termination": o.termination.value, "winner": o.winner, "scores": list(o.scores)
        },
    }  # fmt: skip
    assert v == expected, f"{where}: {v} != {expected}"
    assert sum(len(stack) for stack in v["line"]) == 27, where
    if seat is not None and seat == game.to_move:
        legal = [{"stack": m.stack, "count": m.count} for m in game.legal_moves()]
        assert frame["legal"] == legal, where
    else:
        assert frame["legal"] is None, where


class LeakChecker:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.snaps: dict[tuple[str, int], Stacko | Stakko] = {}
        self.tracks: dict[Client, Track] = {}
        self.errors_checked = 0
        self.names: set[str] = set()
        """Every player name the harness used (texts carry them)."""

    def snap(self, code: str) -> int | None:
        room = self.server.hub.rooms.get(code)
        if room is None or room.game is None:
            return None
        game = room.game
        assert isinstance(game, Stacko | Stakko)
        key = (code, room.seq)
        old = self.snaps.get(key)
        if old is not None:
            assert old == game, f"room {code} changed without a new seq ({room.seq})"
        else:
            self.snaps[key] = game.copy()
        return room.seq

    def check(self, clients: Iterable[Client]) -> None:
        for c in clients:
            self._check_client(c)

    def _check_client(self, c: Client) -> None:
        track = self.tracks.setdefault(c, Track())
        while track.pos < len(c.frames):
            frame = c.frames[track.pos]
            track.pos += 1
            self._check_frame(c, track, frame)

    def _check_frame(self, c: Client, track: Track, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == "welcome":
            if c.token is not None:
                assert frame["session"] == c.token
        elif kind == "joined":
            seat = frame["seat"] if frame["role"] == "player" else None
            assert (seat is None) == (frame["role"] == "spectator"), frame
            track.seats[frame["room"]] = seat
        elif kind == "left":
            track.seats.pop(frame["room"], None)
        elif kind == "state":
            code, seq = frame["room"], frame["seq"]
            assert code in track.seats, f"{c.label}: a state frame for a room it never joined"
            game = self.snaps.get((code, seq))
            assert game is not None, f"{c.label}: state {code}/{seq} was never snapshotted"
            last = track.last_seq.get(code)
            if last is not None:
                assert seq >= last, f"{c.label}: seq went back from {last} to {seq}"
                if seq == last:  # the same state sent again (stale move, reconnect)
                    assert frame["view"] == track.last_state[code]["view"]
            if isinstance(game, Stakko):
                check_stakko_view(frame, track.seats[code], game, c.label)
            else:
                names = self.names | {s.name for s in self.server.hub.sessions.values()}
                check_view(frame, track.seats[code], game, c.label, names)
            track.last_seq[code] = seq
            track.last_state[code] = frame
            track.states += 1
        elif kind == "error":
            self._check_error(c, track, frame)

    def _check_error(self, c: Client, track: Track, frame: dict[str, Any]) -> None:
        """An error's text may only name numbers the receiver knows: its own request's,
        the config's, the current ply; never a brick hidden from it."""
        cfg = self.server.config
        legit = {0, 1, cfg.max_frame_bytes, cfg.hard_frame_bytes, cfg.burst}
        legit |= ints(str(cfg.hello_timeout_s)) | ints(str(cfg.rate_per_second))
        request = c.sent.get(frame["id"]) if frame["id"] is not None else None
        if request is not None:
            legit |= ints(orjson.dumps(request).decode())
        codes = [frame["room"]] if frame["room"] is not None else list(track.seats)
        text = frame["message"]
        for code in codes:
            seq = track.last_seq.get(code)
            game = self.snaps.get((code, seq)) if seq is not None else None
            if not isinstance(game, Stacko):
                continue  # nothing is hidden in other games
            allowed = legit | {game.ply, game.options.tower - 1, game.options.tower}
            leaked = (ints(text) & hidden_bricks(game, track.seats.get(code))) - allowed
            assert not leaked, f"{c.label}: error {frame} names hidden bricks {leaked}"
        self.errors_checked += 1


# -- the harness ---------------------------------------------------------------------------


class Game:
    """Two players (seat 0, seat 1) and maybe spectators in one room."""

    def __init__(self, h: Harness, code: str, seats: list[Client], spectators: list[Client]):
        self.h = h
        self.code = code
        self.seats = seats
        self.spectators = spectators

    @property
    def everyone(self) -> list[Client]:
        return [*self.seats, *self.spectators]

    @property
    def room(self) -> Any:
        return self.h.server.hub.rooms[self.code]

    @property
    def engine(self) -> Any:
        return self.room.game

    def current(self) -> dict[str, Any]:
        return self.seats[0].latest[self.code]

    async def move(self, move: dict[str, Any] | None = None, ply: int | None = None) -> dict:
        """The seat to move plays ``move`` (default: a random legal one) with the current
        ply; waits until every receiver has the new state; checks all frames."""
        h = self.h
        to_move = self.engine.to_move
        assert to_move is not None
        mover = self.seats[to_move]
        mine = mover.latest[self.code]
        assert mine["view"]["to_move"] == to_move and mine["legal"], mine
        if move is None:
            move = h.rng.choice(mine["legal"])
        if ply is None:
            ply = mine["view"]["ply"]
        before = self.room.seq
        reply = await mover.call("move", room=self.code, ply=ply, move=move)
        assert reply["type"] == "state", reply
        h.snap(self.code)
        assert reply["seq"] == before + 1
        await self.settle(reply["seq"], skip=mover)
        return reply

    async def settle(self, seq: int, skip: Client | None = None) -> None:
        """Every receiver has the state frame ``seq``; then check all frames."""
        for c in self.everyone:
            if c is not skip and not c.done.is_set():
                await c.expect("state", room=self.code, seq=seq)
        self.h.checker.check(self.everyone)

    async def play_out(self, max_moves: int = 100_000) -> dict[str, Any]:
        for _ in range(max_moves):
            if self.engine.outcome() is not None:
                break
            await self.move()
        outcome = self.engine.outcome()
        assert outcome is not None, "the game did not end"
        return self.current()["view"]["outcome"]


class Harness:
    """A server on an ephemeral port with a FakeClock, its clients and the leak checker."""

    def __init__(self, server: Server, clock: FakeClock, seed: int) -> None:
        self.server = server
        self.clock = clock
        self.url = server.url
        self.checker = LeakChecker(server)
        self.clients: list[Client] = []
        self.rng = random.Random(seed)

    @classmethod
    async def start(
        cls,
        seed: int = 1,
        bots: tuple[dict[str, list[str]], Any] = ({}, None),
        store: Any = None,
        **config: Any,
    ) -> Harness:
        """``bots``: levels and factory (none by default: the leak checker does not follow
        bot rooms). ``store``: a ``server.store`` backend (not yet open) to record the games in."""
        config.setdefault("burst", 1_000_000)  # the FakeClock never refills the buckets
        config.setdefault("hello_burst_per_ip", 1_000_000)
        config.setdefault("api_burst_per_ip", 1_000_000)
        clock = FakeClock()
        deals = random.Random(seed)
        server = Server(
            ServerConfig(port=0, **config), clock=clock,
            rng_factory=lambda: random.Random(deals.getrandbits(64)), bots=bots,
            store=store,
        )  # fmt: skip
        await server.start()
        return cls(server, clock, seed)

    async def stop(self) -> None:
        await asyncio.gather(*(c.ws.close() for c in self.clients if not c.done.is_set()))
        await self.server.shutdown()
        self.final_checks()

    def final_checks(self) -> None:
        """Every frame of every client: schema-valid, leak-free, and no other session's
        token anywhere in it."""
        self.check()
        for c in self.clients:
            assert not c.invalid, f"{c.label}: invalid frames: {c.invalid[:3]}"
        tokens = {c.token for c in self.clients if c.token is not None}
        for c in self.clients:
            for t in tokens - {c.token}:
                for raw in c.raw:
                    text = raw if isinstance(raw, str) else raw.decode(errors="replace")
                    assert t not in text, f"{c.label} received another session's token"

    def snap(self, code: str) -> int | None:
        return self.checker.snap(code)

    def check(self) -> None:
        self.checker.check(self.clients)

    def advance(self, seconds: float, *codes: str) -> None:
        """Move the FakeClock (timers fire synchronously), then snapshot ``codes``."""
        self.clock.advance(seconds)
        for code in codes:
            self.snap(code)

    async def client(
        self, name: str = "player", hello: bool = True, token: str | None = None
    ) -> Client:
        c = await Client.open(self.url, f"{name}#{len(self.clients)}")
        self.clients.append(c)
        self.checker.names.add(name)
        if hello:
            await c.hello(name, token)
        return c

    async def create(
        self,
        c: Client,
        options: dict[str, Any] | None = None,
        game: str = "stacko",
        **fields: Any,
    ) -> str:
        reply = await c.call("create_room", game=game, options=options or {}, **fields)
        assert reply["type"] == "joined", reply
        return reply["room"]

    async def game(
        self,
        options: dict[str, Any] | None = None,
        spectators: int = 0,
        names: tuple[str, str] = ("alice", "bob"),
        public: bool = True,
        game: str = "stacko",
    ) -> Game:
        """A started game: alice creates (seat 0), bob joins (seat 1), spectators watch."""
        a = await self.client(names[0])
        b = await self.client(names[1])
        code = await self.create(a, options, game=game, public=public)
        joined = await b.call("join", room=code)
        assert joined["type"] == "joined" and joined["seat"] == 1, joined
        update = await a.expect("room", room=code)
        assert update["text"] == f"{names[1]} joined", update  # a name, not a seat
        self.snap(code)
        seq = self.server.hub.rooms[code].seq
        sa = await a.expect("state", room=code, seq=seq)
        sb = await b.expect("state", room=code, seq=seq)
        assert sa["view"]["to_move"] == 0 and sb["view"]["to_move"] == 0
        specs = []
        for i in range(spectators):
            s = await self.client(f"watcher{i}")
            j = await s.call("join", room=code, role="spectator")
            assert j["type"] == "joined" and j["role"] == "spectator" and j["seat"] is None, j
            await s.expect("state", room=code, seq=seq)
            specs.append(s)
        self.checker.check([a, b, *specs])
        return Game(self, code, [a, b], specs)


def token_bits(token: str) -> int:
    assert re.fullmatch(r"[A-Za-z0-9_-]+", token), token
    return len(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))) * 8


async def reconnect(game: Game, seat: int) -> Client:
    """Drop seat ``seat``'s connection and come back with its token: the seat, a ``joined``
    and a full ``state`` return; the others see ``connected`` false, then true."""
    h = game.h
    old = game.seats[seat]
    token = old.token
    assert token is not None
    others = [c for c in game.everyone if c is not old]
    await old.close()
    for c in others:
        gone = await c.expect("room", room=game.code)
        me = next(p for p in gone["info"]["players"] if p["seat"] == seat)
        assert me["connected"] is False
        assert gone["forfeit_ms"] == {str(seat): int(h.server.config.reconnect_grace_s * 1000)}
    new = await h.client(old.label.split("#")[0], hello=False)
    welcome = await new.hello(old.label.split("#")[0], token)
    assert welcome["resumed"] is True and welcome["session"] == token
    assert game.code in welcome["rooms"]
    joined = await new.expect("joined", room=game.code)
    assert joined["seat"] == seat and joined["role"] == "player"
    state = await new.expect("state", room=game.code)
    assert state["seq"] == game.room.seq and state["view"]["seat"] == seat
    for c in others:
        back = await c.expect("room", room=game.code)
        me = next(p for p in back["info"]["players"] if p["seat"] == seat)
        assert me["connected"] is True and back["forfeit_ms"] == {}
    game.seats[seat] = new
    h.check()
    return new


# -- a bare WebSocket client: exact bytes on the wire ------------------------------------------


async def raw_ws(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A bare WebSocket connection: the upgrade, then whatever bytes the test writes (it never
    answers pings by itself: a client gone silent)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        (f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
         "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
         "Sec-WebSocket-Version: 13\r\n\r\n").encode()
    )  # fmt: skip
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101")
    return reader, writer


def text_frame(obj: Any, mask: bytes = b"\0\0\0\0", first: int = 0x81) -> bytes:
    """One client frame (FIN + text unless ``first`` says otherwise), masked with ``mask``
    (the default all-zero key leaves the payload readable)."""
    payload = obj if isinstance(obj, bytes) else orjson.dumps(obj)
    n = len(payload)
    size = bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big")
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([first]) + size + mask + masked


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The next server frame: (opcode, payload)."""
    b0, b1 = await reader.readexactly(2)
    n = b1 & 0x7F
    if n == 126:
        n = int.from_bytes(await reader.readexactly(2), "big")
    elif n == 127:
        n = int.from_bytes(await reader.readexactly(8), "big")
    return b0 & 0x0F, await reader.readexactly(n)
