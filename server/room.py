"""A room: two seats, spectators, one game at a time, its clock and its rematches.

Everything here is synchronous: a room is changed by one call at a time on the event loop,
never across an ``await``, so two moves can never interleave. Frames leave through
``Peer.send`` (a bounded outbox), and every state frame is built from the receiver's own
``view`` (``_frame_for``): there is no other path from a game to the wire.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, Protocol

from stacko.engine.errors import IllegalMoveError, IllegalReason
from stacko.engine.game import GameSpec, GameState, Shuffler
from stacko.engine.outcome import Termination
from stacko.protocol import frames
from stacko.protocol.errors import ErrorCode, ProtocolError, to_error_code
from stacko.protocol.games import GameCodec
from stacko.server.clock import Clock, Timer

log = logging.getLogger("stacko.room")

Status = Literal["waiting", "playing", "finished"]


class Peer(Protocol):
    """A live connection, as a room sees it."""

    def send(self, frame: bytes) -> None: ...


class Chooser(Protocol):
    """A built-in bot: picks a move from its seat's view, like any remote client."""

    name: str

    def choose(self, view: Any, legal: Any) -> Any: ...


BotDone = Callable[[Any, Any, "str | None"], None]
"""``done(move, bot, error)``: how a ``Thinker`` answers (see ``server.botpool``)."""


class Thinker(Protocol):
    """Runs a bot's decision somewhere else (``server.botpool``) and calls ``done`` on the
    loop when it has the answer; returns a function that drops the decision."""

    def think(
        self, bot: Any, view: Any, legal: Any, budget_s: float, done: BotDone
    ) -> Callable[[], None]: ...


def _on_status(room: Room) -> None:
    """The default ``RoomHooks.on_status`` and ``on_info``: nobody indexes the room."""


@dataclass(eq=False)
class Player:
    """Who holds a seat: a human session (through its current connection) or a bot."""

    name: str
    peer: Peer | None = None
    session: Any = None
    bot: Chooser | None = None
    bot_level: str | None = None
    gone_at: float | None = None
    """When a human's connection dropped (``None`` while connected)."""
    account: str | None = None
    """``"human"`` or ``"bot"``: the kind of account the player signed in as (``None``: a
    guest, or a built-in bot)."""

    @property
    def connected(self) -> bool:
        return self.bot is not None or self.peer is not None


class Recorder(Protocol):
    """Where a room's changes are recorded before anyone sees them (``server.store.recorder``)."""

    def begin(self, room: Room, rng: Shuffler) -> Shuffler: ...

    def record(
        self, room: Room, kind: str, seat: int | None, move: Any, termination: str | None
    ) -> None: ...

    def room(self, room: Room, open_: bool = True) -> None: ...


@dataclass
class RoomHooks:
    """What a room needs from its host, injected so the room stays testable alone."""

    clock: Clock
    rng_factory: Callable[[], random.Random]
    schedule_soon: Callable[[Callable[[], None]], None]
    on_empty: Callable[[Room], None]
    max_expiries: int = 3
    reconnect_grace_s: float = 60.0
    thinker: Thinker | None = None
    """Where bots decide; ``None``: rooms hold no bots."""
    bot_budget_s: float = 2.0
    """Time a bot has per decision (at most half its clock left) before the room plays
    ``timeout_moves`` for it."""
    on_status: Callable[[Room], None] = _on_status
    """Called when the status may have changed to or from ``finished`` (a game ended, a
    game started): the hub keeps its index of listable rooms with it."""
    on_info: Callable[[Room], None] = _on_status
    """Called when what ``info`` shows may have changed (players, their connections,
    spectators): the hub's cached ``list_rooms`` pages that hold the room are stale."""
    late_bot_answers: list[int] = field(default_factory=lambda: [0])
    """Bot answers that came after the room moved on and were dropped (one counter shared
    by every room of a hub; a list so that rooms can add to it)."""
    recorder: Recorder | None = None
    """Records every change before its frames go out (``None``: nothing is recorded)."""


@dataclass(eq=False)
class Room:
    code: str
    spec: GameSpec
    codec: GameCodec
    options: Any
    clock_ms: int | None
    public: bool
    hooks: RoomHooks
    players: list[Player | None] = field(default_factory=lambda: [None, None])
    spectators: dict[Peer, None] = field(default_factory=dict)
    game: GameState | None = None
    seq: int = 0
    rematch: set[int] = field(default_factory=set)
    expiries: list[int] = field(default_factory=lambda: [0, 0])
    deadline: float | None = None
    """When the seat to move runs out of time, on the clock's monotonic scale."""
    deadline_wall: float = 0.0
    """The same moment on the wall clock (epoch seconds), as ``deadline_ms`` shows it."""
    _clock_timer: Timer | None = None
    _forfeit_timers: dict[int, Timer] = field(default_factory=dict)
    listed_at: int = 0
    """Its number in the hub's listing of open public rooms (0: not listed)."""
    _bot_timer: Timer | None = None
    """The pending bot decision's budget (``None``: no decision pending)."""
    _bot_cancel: Callable[[], None] | None = None
    record: Any = None
    """The recorder's handle on the current game's record (``None`` without a store)."""
    game_id: str | None = None
    """The id of the current (or last) game's record, set by the recorder; ``None`` without
    a store. The final state frame of a game names it (``GET /api/games/{id}``)."""
    rated: bool = False
    """Games here are rated when both seats are accounts (``server.ratings``)."""
    rating_change: Any = None
    """The rating change of the game that just ended, until it is announced."""
    rated_game: bool = False
    """The last game was rated (``server.ratings`` sets it as it ends): its final state
    says so (``state.rated``), and a ``rating`` frame follows."""
    address: str = ""
    """The address that created it, while it waits for an opponent (the hub counts waiting
    rooms per address); empty after."""

    # -- what the room is -----------------------------------------------------------------

    @property
    def status(self) -> Status:
        if self.game is None:
            return "waiting"
        return "finished" if self.game.outcome() is not None else "playing"

    def info(self, *, starting: bool = False) -> dict[str, Any]:
        """``starting``: the game starts right after the frame this goes in (its ``state``
        follows), so the status already says ``playing``."""
        return {
            "room": self.code,
            "game": self.spec.name,
            "status": "playing" if starting else self.status,
            "public": self.public,
            "players": [
                self._player_info(s, p) for s, p in enumerate(self.players) if p is not None
            ],
            "spectators": len(self.spectators),
            "options": self.codec.options_to_wire(self.options, self.clock_ms),
            "clock_ms": self.clock_ms,
        }

    @staticmethod
    def _player_info(seat: int, p: Player) -> dict[str, Any]:
        info: dict[str, Any] = {
            "seat": seat,
            "name": p.name,
            "connected": p.connected,
            "bot": p.bot_level,
        }
        if p.account is not None:
            info["account"] = p.account
        return info

    def seat_of(self, session: Any) -> int | None:
        for s, p in enumerate(self.players):
            if p is not None and p.session is session:
                return s
        return None

    def name(self, seat: int) -> str:
        """The name texts give a seat ("Bob"; "seat 1" while it is empty)."""
        player = self.players[seat]
        return player.name if player is not None else f"seat {seat}"

    def names(self) -> tuple[str, ...]:
        return (self.name(0), self.name(1))

    def free_seat(self) -> int | None:
        return next((s for s, p in enumerate(self.players) if p is None), None)

    # -- people coming and going ----------------------------------------------------------

    def seat(self, player: Player, seat: int | None = None) -> int:
        """Put ``player`` in ``seat`` (or the free one). Starts the game once both are in."""
        if seat is None:
            seat = self.free_seat()
        if seat is None or self.players[seat] is not None or self.game is not None:
            raise ProtocolError(ErrorCode.ROOM_FULL, f"room {self.code} has no free seat")
        self.players[seat] = player
        self.hooks.on_info(self)
        return seat

    def ready(self) -> bool:
        return self.game is None and all(p is not None for p in self.players)

    def watch(self, peer: Peer) -> None:
        self.spectators[peer] = None
        self.hooks.on_info(self)

    def unwatch(self, peer: Peer) -> None:
        if peer in self.spectators:
            del self.spectators[peer]
            self.hooks.on_info(self)

    def joined_frame(
        self, seat: int | None, request_id: frames.RequestId, *, starting: bool = False
    ) -> bytes:
        role = "spectator" if seat is None else "player"
        return frames.reply(
            "joined", request_id, room=self.code, game=self.spec.name, role=role, seat=seat,
            info=self.info(starting=starting),
        )  # fmt: skip

    def leave(self, seat: int) -> None:
        """A player leaves: a game in progress is lost (abandoned); a waiting seat is freed."""
        self._cancel_forfeit(seat)
        if self.status == "playing":
            self._end(seat, Termination.ABANDONED, f"{self.name(seat)} left")
        name = self.name(seat)
        self.players[seat] = None
        self.rematch.discard(seat)
        self.seats_changed()
        self._room_update(f"{name} left")
        self._check_empty()

    def dropped(self, seat: int) -> None:
        """A player's connection went away: the seat is kept for the grace period."""
        player = self.players[seat]
        if player is None:
            return
        player.peer = None
        player.gone_at = self.hooks.clock.monotonic()
        grace = self.hooks.reconnect_grace_s
        self._forfeit_timers[seat] = self.hooks.clock.call_at(
            player.gone_at + grace, lambda: self._grace_over(seat)
        )
        self._room_update(f"{self.name(seat)} disconnected")

    def returned(self, seat: int, peer: Peer, request_id: frames.RequestId = None) -> None:
        """The player's session came back on a new connection: seat and full view restored."""
        player = self.players[seat]
        if player is None:
            return
        self._cancel_forfeit(seat)
        player.peer = peer
        player.gone_at = None
        peer.send(self.joined_frame(seat, request_id))
        if self.game is not None:
            peer.send(self._frame_for(seat))
        self._room_update(f"{self.name(seat)} reconnected", skip=seat)

    def _grace_over(self, seat: int) -> None:
        self._forfeit_timers.pop(seat, None)
        player = self.players[seat]
        if player is None or player.peer is not None:
            return
        if self.status == "playing":
            self._end(seat, Termination.ABANDONED, f"{player.name} did not come back in time")
        self.players[seat] = None
        self.rematch.discard(seat)
        self.seats_changed()
        if player.session is not None:
            player.session.rooms.pop(self.code, None)
        self._room_update(f"{player.name} is gone")
        self._check_empty()

    def seats_changed(self) -> None:
        """A seat was taken or freed, or a rematch asked for: the store keeps the room's
        seats for a restart."""
        recorder = self.hooks.recorder
        if recorder is not None:
            recorder.room(self)

    def _cancel_forfeit(self, seat: int) -> None:
        timer = self._forfeit_timers.pop(seat, None)
        if timer is not None:
            timer.cancel()

    def _check_empty(self) -> None:
        if all(p is None or p.bot is not None for p in self.players):
            self._stop_clock()
            self._drop_bot_decision()
            for timer in self._forfeit_timers.values():
                timer.cancel()
            self._forfeit_timers.clear()
            self.hooks.on_empty(self)

    # -- the game -------------------------------------------------------------------------

    def start(self, request: tuple[int, frames.RequestId] | None = None) -> None:
        """Deal a new game with a fresh RNG (the OS source in production) and tell everyone."""
        rng: Shuffler = self.hooks.rng_factory()
        recorder = self.hooks.recorder
        self.game_id = None
        self.rated_game = False
        if recorder is not None:  # the deal's permutations go into the record
            rng = recorder.begin(self, rng)
        self.game = self.spec.new_game(self.options, rng)
        self.rematch.clear()
        self.expiries = [0, 0]
        self.hooks.on_status(self)
        self._record("deal", None)
        self._changed(request=request)

    def restore(self, game: GameState, seq: int, expiries: list[int]) -> None:
        """A game rebuilt from its record after a restart: the side to move gets a whole
        clock again (the downtime is not charged), bots to move move."""
        self.game = game
        self.seq = seq
        self.expiries = expiries
        if self.clock_ms is not None and game.outcome() is None:
            clock = self.hooks.clock
            self.deadline = clock.monotonic() + self.clock_ms / 1000
            self.deadline_wall = clock.time() + self.clock_ms / 1000
            self._clock_timer = clock.call_at(self.deadline, self._clock_ran_out)
        to_move = game.to_move
        if to_move is not None:
            player = self.players[to_move]
            if player is not None and player.bot is not None:
                ply = game.ply
                self.hooks.schedule_soon(lambda: self._bot_turn(to_move, ply))

    def _record(
        self, kind: str, seat: int | None, move: Any = None, termination: str | None = None
    ) -> None:
        """Hand the change just applied to the recorder: its frames then wait for the commit."""
        recorder = self.hooks.recorder
        if recorder is not None:
            recorder.record(self, kind, seat, move, termination)

    def move(self, seat: int, ply: int, wire_move: Any, request_id: frames.RequestId) -> None:
        """Checks in the order PROTOCOL.md gives; a refused move changes nothing."""
        game = self._game_on()
        if ply != game.ply:
            peer = self._peer(seat)
            if peer is not None:
                peer.send(
                    frames.error(
                        ErrorCode.STALE_PLY,
                        f"the move was for ply {ply}; the game is at ply {game.ply}",
                        id=request_id, room=self.code,
                    )
                )  # fmt: skip
                peer.send(self._frame_for(seat, request_id))
            return
        if not isinstance(wire_move, self.codec.move_model):
            raise ProtocolError(ErrorCode.WRONG_GAME, f"not a {self.spec.title} move")
        try:
            move = self.codec.move_from_wire(wire_move)
            game.apply(move, seat)
        except IllegalMoveError as exc:
            message = exc.message
            if exc.reason is IllegalReason.NOT_YOUR_TURN and game.to_move is not None:
                message = f"it is {self.name(game.to_move)}'s turn"  # a name, not a seat
            raise ProtocolError(to_error_code(exc.reason), message) from None
        self._record("move", seat, move)
        self._changed(request=(seat, request_id))

    def resign(self, seat: int, request_id: frames.RequestId) -> None:
        self._game_on()
        self._end(seat, Termination.RESIGNATION, "", request=(seat, request_id))

    def ask_rematch(self, seat: int, request_id: frames.RequestId) -> None:
        if self.status != "finished" or any(p is None for p in self.players):
            raise ProtocolError(
                ErrorCode.NO_REMATCH, "a rematch needs a finished game and both players"
            )
        self.rematch.add(seat)
        for s, p in enumerate(self.players):
            if p is not None and p.bot is not None:
                self.rematch.add(s)  # bots always agree
        if len(self.rematch) < 2:
            self.seats_changed()  # a restart keeps who asked
            self._room_update(f"{self.name(seat)} asks for a rematch")
            return
        # Seats swap so that the other player moves first this time.
        self.players.reverse()
        # A dropped player's grace timer is keyed by seat: it must follow the player.
        for timer in self._forfeit_timers.values():
            timer.cancel()
        self._forfeit_timers.clear()
        for s, p in enumerate(self.players):
            if p is not None and p.gone_at is not None:
                self._forfeit_timers[s] = self.hooks.clock.call_at(
                    p.gone_at + self.hooks.reconnect_grace_s, partial(self._grace_over, s)
                )
        for s, p in enumerate(self.players):
            if p is not None and p.peer is not None:
                rid = request_id if s == 1 - seat else None
                p.peer.send(self.joined_frame(s, rid, starting=True))
        self.start(request=(1 - seat, request_id))

    def _game_on(self) -> GameState:
        if self.game is None:
            raise ProtocolError(
                ErrorCode.NOT_STARTED, "the game has not started: waiting for a player"
            )
        if self.game.outcome() is not None:
            raise ProtocolError(ErrorCode.GAME_OVER, "the game is over")
        return self.game

    def _end(
        self,
        loser: int,
        termination: Termination,
        note: str,
        request: tuple[int, frames.RequestId] | None = None,
    ) -> None:
        assert self.game is not None
        self.game.end(loser, termination)
        self._record("end", loser, None, termination.value)
        self._changed(note=note, request=request)

    def _changed(self, note: str = "", request: tuple[int, frames.RequestId] | None = None) -> None:
        """After every change: new version, new deadline, a frame for everyone, maybe a bot."""
        self.seq += 1
        game = self.game
        assert game is not None
        if self._bot_timer is not None:  # the position moved on: a pending answer is stale
            self._drop_bot_decision()
        # The old timer is cancelled and the new one booked after the frames are out: both
        # are interpreted asyncio calls, and at light load the opponent's frame waited ~20 us
        # for them. Nothing runs in between (sending does not call back into the room), and
        # a failing send must not leave the old timer running nor the new one unbooked.
        old_timer = self._clock_timer
        self._clock_timer = None
        self.deadline = None
        over = game.outcome() is not None
        if self.clock_ms is not None and not over:
            clock = self.hooks.clock
            self.deadline = clock.monotonic() + self.clock_ms / 1000
            self.deadline_wall = clock.time() + self.clock_ms / 1000
        try:
            self._broadcast(note, request)
        finally:
            if old_timer is not None:
                old_timer.cancel()
            if self.deadline is not None:
                self._clock_timer = self.hooks.clock.call_at(self.deadline, self._clock_ran_out)
        if over:
            self.hooks.on_status(self)
        to_move = game.to_move
        if to_move is not None:
            player = self.players[to_move]
            if player is not None and player.bot is not None:
                ply = game.ply
                self.hooks.schedule_soon(lambda: self._bot_turn(to_move, ply))

    def _stop_clock(self) -> None:
        if self._clock_timer is not None:
            self._clock_timer.cancel()
            self._clock_timer = None
        self.deadline = None

    def _clock_ran_out(self) -> None:
        """Play the least harmful action for the seat to move; forfeit after too many."""
        self._clock_timer = None
        game = self.game
        if game is None or game.to_move is None:
            return
        seat = game.to_move
        self.expiries[seat] += 1
        if self.expiries[seat] >= self.hooks.max_expiries:
            self._end(seat, Termination.TIMEOUT, f"{self.name(seat)} ran out of time too often")
            return
        for move in game.timeout_moves():
            game.apply(move, seat)
        self._record("timeout", seat)
        self._changed(note=f"{self.name(seat)}'s clock ran out")

    def _bot_turn(self, seat: int, ply: int) -> None:
        """Ask the thinker for the bot's move; the room plays on: a timer plays the fallback
        if no answer comes within the budget (``_bot_overdue``)."""
        game = self.game
        player = self.players[seat]
        if game is None or game.ply != ply or game.to_move != seat or player is None:
            return  # the position moved on (resignation, forfeit) before the bot's turn came
        bot = player.bot
        thinker = self.hooks.thinker
        if bot is None or thinker is None or self._bot_timer is not None:
            return
        clock = self.hooks.clock
        now = clock.monotonic()
        budget = self.hooks.bot_budget_s
        if self.deadline is not None:  # never let the bot's own clock run out
            budget = min(budget, max(0.0, (self.deadline - now) / 2))
        timer = clock.call_at(now + budget, partial(self._bot_overdue, seat, game, ply))
        self._bot_timer = timer
        view = game.view(seat)
        try:
            cancel = thinker.think(
                bot, view, view.legal_moves(), budget,
                partial(self._bot_answer, seat, game, ply, player),
            )  # fmt: skip
            if self._bot_timer is timer:  # not answered at once (a thinker without a loop)
                self._bot_cancel = cancel
        except Exception:  # the decision could not even be sent (a bot that cannot pickle)
            log.exception("bot %s failed in room %s", bot.name, self.code)
            self._drop_bot_decision()
            self._end(seat, Termination.ABANDONED, "the bot failed")

    def _bot_pending(self, seat: int, game: GameState, ply: int, player: Player) -> bool:
        """Whether the decision asked for at (game, ply) is still the one awaited."""
        return (
            self._bot_timer is not None
            and self.game is game
            and game.ply == ply
            and game.to_move == seat
            and self.players[seat] is player
        )

    def _bot_answer(
        self,
        seat: int,
        game: GameState,
        ply: int,
        player: Player,
        move: Any,
        bot: Any,
        error: str | None,
    ) -> None:
        """The thinker's answer, on the loop. Dropped if the room moved on meanwhile (the
        fallback was played, the opponent resigned or left, a new game started)."""
        if not self._bot_pending(seat, game, ply, player):
            self.hooks.late_bot_answers[0] += 1
            return
        self._drop_bot_decision()
        if error is not None:
            log.error("bot %s failed in room %s: %s", player.name, self.code, error)
            self._end(seat, Termination.ABANDONED, "the bot failed")
            return
        if move is None:  # it had no time left to start: the fallback, at once
            self._bot_fallback(seat, game)
            return
        if bot is not None:
            player.bot = bot  # its memory after this decision
        try:
            game.apply(move, seat)
        except Exception:  # a broken bot must not take the room down: it loses instead
            log.exception("bot %s failed in room %s", player.name, self.code)
            self._end(seat, Termination.ABANDONED, "the bot failed")
            return
        self._record("move", seat, move)
        self._changed()

    def _bot_overdue(self, seat: int, game: GameState, ply: int) -> None:
        if self.game is not game or game.ply != ply or game.to_move != seat:
            self._bot_timer = None
            return
        self._drop_bot_decision()
        self._bot_fallback(seat, game)

    def _bot_fallback(self, seat: int, game: GameState) -> None:
        """The move a bot out of time plays: the least harmful one, as for a clock that ran
        out, but it never counts toward ``max_expiries`` (the server was slow, not the bot)."""
        for move in game.timeout_moves():
            game.apply(move, seat)
        self._changed(note=f"seat {seat}'s bot ran out of time")

    def _drop_bot_decision(self) -> None:
        timer, cancel = self._bot_timer, self._bot_cancel
        self._bot_timer = self._bot_cancel = None
        if timer is not None:
            timer.cancel()
        if cancel is not None:
            cancel()

    # -- frames -----------------------------------------------------------------------------

    def _peer(self, seat: int) -> Peer | None:
        player = self.players[seat]
        return player.peer if player is not None else None

    def _frame_for(
        self, seat: int | None, request_id: frames.RequestId = None, note: str = ""
    ) -> bytes:
        """The one path from a game to the wire: ``view(seat)`` for this receiver."""
        assert self.game is not None
        deadline_ms = clock_ms = None
        ended = False
        if self.deadline is not None:
            deadline_ms = int(self.deadline_wall * 1000)
            clock_ms = max(0, int(self.deadline * 1000) - int(self.hooks.clock.monotonic() * 1000))
        else:  # no clock running: maybe the game is over (a running clock says it is not)
            ended = self.game.outcome() is not None
        return frames.state(
            self.codec, self.game.view(seat), room=self.code, seq=self.seq,
            deadline_ms=deadline_ms, clock_ms=clock_ms, id=request_id, note=note,
            names=self.names(), ended=ended, game_id=self.game_id, rated=self.rated_game,
        )  # fmt: skip

    def send_state(self, peer: Peer, seat: int | None, request_id: frames.RequestId = None) -> None:
        if self.game is not None:
            peer.send(self._frame_for(seat, request_id))

    def _broadcast(self, note: str, request: tuple[int, frames.RequestId] | None) -> None:
        # The requester's own frame goes last, so the others see the change soonest.
        asker, rid = request if request is not None else (None, None)
        players = self.players
        for seat, player in enumerate(players):
            if seat != asker and player is not None and player.peer is not None:
                player.peer.send(self._frame_for(seat, None, note))
        if asker is not None:
            player = players[asker]
            if player is not None and player.peer is not None:
                player.peer.send(self._frame_for(asker, rid, note))
        if self.spectators:
            public = self._frame_for(None, None, note)  # identical bytes for every spectator
            for peer in self.spectators:
                peer.send(public)

    def announce_join(self, seat: int) -> None:
        """Tell the others a player took ``seat`` (before the game it completes starts)."""
        self._room_update(f"{self.name(seat)} joined", skip=seat, starting=self.ready())

    def _room_update(self, text: str, skip: int | None = None, *, starting: bool = False) -> None:
        """Tells the room what changed (and the hub, whose listing may show it)."""
        self.hooks.on_info(self)
        now = self.hooks.clock.monotonic()
        grace = self.hooks.reconnect_grace_s
        forfeit = {
            str(s): max(0, int((p.gone_at + grace - now) * 1000))
            for s, p in enumerate(self.players)
            if p is not None and p.gone_at is not None
        }
        frame = frames.encode(
            {
                "type": "room",
                "room": self.code,
                "info": self.info(starting=starting),
                "rematch": sorted(self.rematch),
                "forfeit_ms": forfeit,
                "text": text,
            }
        )
        for s, p in enumerate(self.players):
            if p is not None and p.peer is not None and s != skip:
                p.peer.send(frame)
        for peer in self.spectators:
            peer.send(frame)
