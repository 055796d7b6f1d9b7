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

from engine.errors import IllegalMoveError
from engine.game import GameSpec, GameState
from engine.outcome import Termination
from protocol import frames
from protocol.errors import ErrorCode, ProtocolError, to_error_code
from protocol.games import GameCodec
from server.clock import Clock, Timer

log = logging.getLogger("stacko.room")

Status = Literal["waiting", "playing", "finished"]


class Peer(Protocol):
    """A live connection, as a room sees it."""

    def send(self, frame: bytes) -> None: ...


class Chooser(Protocol):
    """A built-in bot: picks a move from its seat's view, like any remote client."""

    name: str

    def choose(self, view: Any, legal: Any) -> Any: ...


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

    @property
    def connected(self) -> bool:
        return self.bot is not None or self.peer is not None


@dataclass
class RoomHooks:
    """What a room needs from its host, injected so the room stays testable alone."""

    clock: Clock
    rng_factory: Callable[[], random.Random]
    schedule_soon: Callable[[Callable[[], None]], None]
    on_empty: Callable[[Room], None]
    max_expiries: int = 3
    reconnect_grace_s: float = 60.0


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
                {"seat": s, "name": p.name, "connected": p.connected, "bot": p.bot_level}
                for s, p in enumerate(self.players)
                if p is not None
            ],
            "spectators": len(self.spectators),
            "options": self.codec.options_to_wire(self.options, self.clock_ms),
            "clock_ms": self.clock_ms,
        }

    def seat_of(self, session: Any) -> int | None:
        for s, p in enumerate(self.players):
            if p is not None and p.session is session:
                return s
        return None

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
        return seat

    def ready(self) -> bool:
        return self.game is None and all(p is not None for p in self.players)

    def watch(self, peer: Peer) -> None:
        self.spectators[peer] = None

    def unwatch(self, peer: Peer) -> None:
        self.spectators.pop(peer, None)

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
            self._end(seat, Termination.ABANDONED, f"seat {seat} left")
        self.players[seat] = None
        self.rematch.discard(seat)
        self._room_update(f"seat {seat} left")
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
        self._room_update(f"seat {seat} disconnected")

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
        self._room_update(f"seat {seat} reconnected", skip=seat)

    def _grace_over(self, seat: int) -> None:
        self._forfeit_timers.pop(seat, None)
        player = self.players[seat]
        if player is None or player.peer is not None:
            return
        if self.status == "playing":
            self._end(seat, Termination.ABANDONED, f"seat {seat} did not come back in time")
        self.players[seat] = None
        self.rematch.discard(seat)
        if player.session is not None:
            player.session.rooms.pop(self.code, None)
        self._room_update(f"seat {seat} is gone")
        self._check_empty()

    def _cancel_forfeit(self, seat: int) -> None:
        timer = self._forfeit_timers.pop(seat, None)
        if timer is not None:
            timer.cancel()

    def _check_empty(self) -> None:
        if all(p is None or p.bot is not None for p in self.players):
            self._stop_clock()
            for timer in self._forfeit_timers.values():
                timer.cancel()
            self._forfeit_timers.clear()
            self.hooks.on_empty(self)

    # -- the game -------------------------------------------------------------------------

    def start(self, request: tuple[int, frames.RequestId] | None = None) -> None:
        """Deal a new game with a fresh RNG (the OS source in production) and tell everyone."""
        self.game = self.spec.new_game(self.options, self.hooks.rng_factory())
        self.rematch.clear()
        self.expiries = [0, 0]
        self._changed(request=request)

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
            game.apply(self.codec.move_from_wire(wire_move), seat)
        except IllegalMoveError as exc:
            raise ProtocolError(to_error_code(exc.reason), exc.message) from None
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
            self._room_update(f"seat {seat} asks for a rematch")
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
        self._changed(note=note, request=request)

    def _changed(self, note: str = "", request: tuple[int, frames.RequestId] | None = None) -> None:
        """After every change: new version, new deadline, a frame for everyone, maybe a bot."""
        self.seq += 1
        game = self.game
        assert game is not None
        # The old timer is cancelled and the new one booked after the frames are out: both
        # are interpreted asyncio calls, and at light load the opponent's frame waited ~20 us
        # for them. Nothing runs in between (sending does not call back into the room), and
        # a failing send must not leave the old timer running nor the new one unbooked.
        old_timer = self._clock_timer
        self._clock_timer = None
        self.deadline = None
        if self.clock_ms is not None and game.outcome() is None:
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
            self._end(seat, Termination.TIMEOUT, f"seat {seat} ran out of time too often")
            return
        for move in game.timeout_moves():
            game.apply(move, seat)
        self._changed(note=f"seat {seat}'s clock ran out")

    def _bot_turn(self, seat: int, ply: int) -> None:
        game = self.game
        player = self.players[seat]
        if game is None or game.ply != ply or game.to_move != seat or player is None:
            return  # the position moved on (resignation, forfeit) before the bot's turn came
        assert player.bot is not None
        view = game.view(seat)
        try:
            move = player.bot.choose(view, view.legal_moves())
            game.apply(move, seat)
        except Exception:  # a broken bot must not take the room down: it loses instead
            log.exception("bot %s failed in room %s", player.bot.name, self.code)
            self._end(seat, Termination.ABANDONED, "the bot failed")
            return
        self._changed()

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
        if self.deadline is not None:
            deadline_ms = int(self.deadline_wall * 1000)
            clock_ms = max(0, int(self.deadline * 1000) - int(self.hooks.clock.monotonic() * 1000))
        return frames.state(
            self.codec, self.game.view(seat), room=self.code, seq=self.seq,
            deadline_ms=deadline_ms, clock_ms=clock_ms, id=request_id, note=note,
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
        self._room_update(f"seat {seat} joined", skip=seat, starting=self.ready())

    def _room_update(self, text: str, skip: int | None = None, *, starting: bool = False) -> None:
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
