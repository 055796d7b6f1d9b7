"""The hub: sessions, rooms, the matchmaking queue, and the dispatch of client requests.

Synchronous like ``room``: each request is handled to the end before the next one, so the
hub needs no locks. Connections (``server.connection``) call ``hello``, ``handle`` and
``disconnected``; everything they send back goes through ``Peer.send``.
"""

from __future__ import annotations

import base64
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from engine.errors import InvalidOptionsError
from engine.games import GAMES
from protocol import frames, messages
from protocol.errors import ErrorCode, ProtocolError
from protocol.games import CODECS
from server.clock import Clock, Timer
from server.config import ServerConfig
from server.rng import SystemShuffle
from server.room import Chooser, Peer, Player, Room, RoomHooks

log = logging.getLogger("stacko.hub")

ROOM_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no I, O, 0, 1: easy to read aloud
ROOM_CODE_LENGTH = 6
SERVER_VERSION = "stacko/0.1.0"

BotFactory = Callable[[str, str, random.Random], Chooser]
"""(game, level, rng) -> a bot; raises KeyError for an unknown level."""


@dataclass(eq=False)
class Session:
    """A player's identity across connections; ``token`` is its only credential."""

    token: str
    name: str
    peer: Peer | None = None
    rooms: dict[str, Room] = field(default_factory=dict)
    """Rooms where this session holds a seat."""
    queued_for: str | None = None
    expiry: Timer | None = None


class Hub:
    def __init__(
        self,
        config: ServerConfig,
        clock: Clock,
        *,
        rng_factory: Callable[[], random.Random] = SystemShuffle,
        schedule_soon: Callable[[Callable[[], None]], None],
        bots: dict[str, list[str]] | None = None,
        bot_factory: BotFactory | None = None,
        ids: random.Random | None = None,
    ) -> None:
        """``ids`` draws session tokens and room codes: the OS's secure source unless a test
        or a document generator needs them repeatable."""
        self.config = config
        self.clock = clock
        self.sessions: dict[str, Session] = {}
        self.rooms: dict[str, Room] = {}
        self.queues: dict[str, list[Session]] = {name: [] for name in GAMES}
        self.watching: dict[Peer, set[str]] = {}
        self.closed = 0
        """Rooms closed and sessions expired since start (``server.gcpacer`` reads it: what
        went away may have left reference cycles behind)."""
        self.bots = bots or {}
        self.bot_factory = bot_factory
        self._hooks = RoomHooks(
            clock=clock,
            rng_factory=rng_factory,
            schedule_soon=schedule_soon,
            on_empty=self._close_room,
            max_expiries=config.max_expiries,
            reconnect_grace_s=config.reconnect_grace_s,
        )
        self._bot_rng = rng_factory()
        self._ids = ids if ids is not None else random.SystemRandom()

    # -- sessions -----------------------------------------------------------------------

    def hello(self, peer: Peer, msg: messages.Hello) -> Session:
        """Answer a first frame. Raises a fatal ProtocolError for an unsupported version."""
        if msg.protocol not in messages.SUPPORTED_VERSIONS:
            raise ProtocolError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"protocol {msg.protocol} is not supported; this server speaks "
                f"{sorted(messages.SUPPORTED_VERSIONS)}",
                fatal=True, request_id=msg.id,
            )  # fmt: skip
        session = self.sessions.get(msg.token) if msg.token else None
        resumed = session is not None
        if session is None:
            session = Session(self._token(), msg.name)
            self.sessions[session.token] = session
        else:
            if session.expiry is not None:
                session.expiry.cancel()
                session.expiry = None
            old = session.peer
            if old is not None and old is not peer:
                # The newer connection wins; the old one's disconnect is then ignored.
                replace = getattr(old, "replace", None)
                if replace is not None:
                    replace()
            session.name = msg.name
        session.peer = peer
        cfg = self.config
        peer.send(
            frames.reply(
                "welcome", msg.id, protocol=messages.PROTOCOL_VERSION, session=session.token,
                name=session.name, resumed=resumed, rooms=sorted(session.rooms),
                server=SERVER_VERSION,
                limits={
                    "max_frame_bytes": cfg.max_frame_bytes, "rate_per_second": cfg.rate_per_second,
                    "burst": cfg.burst, "hello_timeout_s": cfg.hello_timeout_s,
                    "reconnect_grace_s": cfg.reconnect_grace_s,
                },
            )
        )  # fmt: skip
        for room in list(session.rooms.values()):
            seat = room.seat_of(session)
            if seat is not None:
                room.returned(seat, peer)
        return session

    def disconnected(self, peer: Peer, session: Session | None) -> None:
        for code in self.watching.pop(peer, set()):
            room = self.rooms.get(code)
            if room is not None:
                room.unwatch(peer)
        if session is None or session.peer is not peer:
            return  # never said hello, or already replaced by a newer connection
        session.peer = None
        self._detach(session)
        session.expiry = self.clock.call_at(
            self.clock.monotonic() + self.config.reconnect_grace_s, lambda: self._expire(session)
        )

    def _detach(self, session: Session) -> None:
        self._unqueue(session)
        for room in list(session.rooms.values()):
            seat = room.seat_of(session)
            if seat is not None:
                room.dropped(seat)

    def _token(self) -> str:
        """192 random bits, URL-safe base64 (``secrets.token_urlsafe(24)`` from ``_ids``)."""
        return base64.urlsafe_b64encode(self._ids.randbytes(24)).decode()

    def _expire(self, session: Session) -> None:
        session.expiry = None
        if session.peer is None and not session.rooms:
            self.sessions.pop(session.token, None)
            self.closed += 1

    # -- requests -----------------------------------------------------------------------

    def handle(self, peer: Peer, session: Session, msg: messages.ClientMessage) -> None:
        """One request. Raises ProtocolError (with the request id) if it is refused."""
        try:
            self._dispatch(peer, session, msg)
        except ProtocolError as exc:
            exc.request_id = msg.id
            raise

    def _dispatch(self, peer: Peer, session: Session, msg: messages.ClientMessage) -> None:
        match msg:  # moves first: nearly every frame is one
            case messages.MoveMessage():
                room, seat = self._my_seat(peer, session, msg.room)
                room.move(seat, msg.ply, msg.move, msg.id)
            case messages.Ping():
                peer.send(frames.reply("pong", msg.id))
            case messages.ListGames():
                peer.send(frames.reply("games", msg.id, games=self._games()))
            case messages.ListRooms():
                rooms = [
                    r.info()
                    for r in self.rooms.values()
                    if r.public and r.status != "finished" and msg.game in (None, r.spec.name)
                ]
                peer.send(frames.reply("rooms", msg.id, rooms=rooms[:200]))
            case messages.CreateRoom():
                self._create(peer, session, msg)
            case messages.Join():
                self._join(peer, session, msg)
            case messages.QuickMatch():
                self._quick_match(peer, session, msg)
            case messages.CancelMatch():
                if session.queued_for is None:
                    raise ProtocolError(ErrorCode.NOT_QUEUED, "you are not waiting for a match")
                self._unqueue(session)
                peer.send(frames.reply("unqueued", msg.id))
            case messages.Resign():
                room, seat = self._my_seat(peer, session, msg.room)
                room.resign(seat, msg.id)
            case messages.Rematch():
                room, seat = self._my_seat(peer, session, msg.room)
                room.ask_rematch(seat, msg.id)
            case messages.Leave():
                self._leave(peer, session, msg)
            case messages.Hello():
                raise ProtocolError(
                    ErrorCode.ALREADY_WELCOMED, "this connection already said hello"
                )

    def _games(self) -> list[dict[str, Any]]:
        return [
            {
                "game": spec.name,
                "title": spec.title,
                "seats": spec.seats,
                "options": CODECS[spec.name].options_model.model_json_schema(),
                "bots": self.bots.get(spec.name, []),
            }
            for spec in GAMES.values()
        ]

    def _room(self, code: str) -> Room:
        room = self.rooms.get(code)
        if room is None:
            raise ProtocolError(ErrorCode.UNKNOWN_ROOM, f"no room {code}")
        return room

    def _my_seat(self, peer: Peer, session: Session, code: str) -> tuple[Room, int]:
        room = self._room(code)
        seat = room.seat_of(session)
        if seat is None:
            if peer in room.spectators:
                raise ProtocolError(ErrorCode.NOT_A_PLAYER, "spectators cannot play")
            raise ProtocolError(ErrorCode.NOT_IN_ROOM, f"you are not in room {code}")
        return room, seat

    def _new_room(
        self, game: str, raw_options: dict[str, Any], public: bool, clock_ms: int | None = None
    ) -> Room:
        spec = GAMES.get(game)
        if spec is None:
            raise ProtocolError(ErrorCode.UNKNOWN_GAME, f"no game {game!r}; see list_games")
        if len(self.rooms) >= self.config.max_rooms:
            raise ProtocolError(ErrorCode.SERVER_BUSY, "the server holds as many rooms as it can")
        codec = CODECS[game]
        try:
            options, room_clock = codec.options_from_wire(raw_options)
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ProtocolError(ErrorCode.BAD_OPTIONS, f"options.{where}: {first['msg']}") from None
        except InvalidOptionsError as exc:
            raise ProtocolError(ErrorCode.BAD_OPTIONS, str(exc)) from None
        code = self._room_code()
        room = Room(code, spec, codec, options, clock_ms or room_clock, public, self._hooks)
        self.rooms[code] = room
        return room

    def _room_code(self) -> str:
        while True:
            code = "".join(self._ids.choice(ROOM_ALPHABET) for _ in range(ROOM_CODE_LENGTH))
            if code not in self.rooms:
                return code

    def _close_room(self, room: Room) -> None:
        self.rooms.pop(room.code, None)
        self.closed += 1
        for player in room.players:
            if player is not None and player.session is not None:
                player.session.rooms.pop(room.code, None)

    def _take_seat(self, peer: Peer, session: Session, room: Room, seat: int | None) -> int:
        seat = room.seat(Player(session.name, peer=peer, session=session), seat)
        session.rooms[room.code] = room
        return seat

    def _create(self, peer: Peer, session: Session, msg: messages.CreateRoom) -> None:
        bot = None
        if msg.bot is not None:
            bot = self._make_bot(msg.game, msg.bot)
        room = self._new_room(msg.game, dict(msg.options), msg.public)
        seat = self._take_seat(peer, session, room, msg.seat)
        if bot is not None:  # seated first, so that joined already lists the opponent
            room.seat(Player(f"{bot.name} (bot)", bot=bot, bot_level=msg.bot), 1 - seat)
        peer.send(room.joined_frame(seat, msg.id, starting=bot is not None))
        if bot is not None:
            room.start()

    def _make_bot(self, game: str, level: str) -> Chooser:
        if level not in self.bots.get(game, []) or self.bot_factory is None:
            levels = ", ".join(self.bots.get(game, [])) or "none"
            raise ProtocolError(
                ErrorCode.UNKNOWN_BOT, f"no bot {level!r} for {game} (levels: {levels})"
            )
        return self.bot_factory(game, level, random.Random(self._bot_rng.getrandbits(64)))

    def _join(self, peer: Peer, session: Session, msg: messages.Join) -> None:
        room = self._room(msg.room)
        if room.seat_of(session) is not None:
            raise ProtocolError(ErrorCode.ALREADY_IN_ROOM, f"you already play in room {room.code}")
        if msg.role == "spectator":
            room.watch(peer)
            self.watching.setdefault(peer, set()).add(room.code)
            peer.send(room.joined_frame(None, msg.id))
            room.send_state(peer, None)
            return
        seat = self._take_seat(peer, session, room, None)
        peer.send(room.joined_frame(seat, msg.id, starting=room.ready()))
        room.announce_join(seat)
        if room.ready():
            room.start(request=(seat, None))

    def _leave(self, peer: Peer, session: Session, msg: messages.Leave) -> None:
        room = self._room(msg.room)
        seat = room.seat_of(session)
        if seat is not None:
            session.rooms.pop(room.code, None)
            room.leave(seat)
        elif peer in room.spectators:
            room.unwatch(peer)
            self.watching.get(peer, set()).discard(room.code)
        else:
            raise ProtocolError(ErrorCode.NOT_IN_ROOM, f"you are not in room {msg.room}")
        peer.send(frames.reply("left", msg.id, room=room.code))

    def _quick_match(self, peer: Peer, session: Session, msg: messages.QuickMatch) -> None:
        if msg.game not in GAMES:
            raise ProtocolError(ErrorCode.UNKNOWN_GAME, f"no game {msg.game!r}; see list_games")
        if session.queued_for is not None:
            raise ProtocolError(
                ErrorCode.ALREADY_QUEUED, f"already waiting for {session.queued_for}"
            )
        queue = self.queues[msg.game]
        if not queue:
            queue.append(session)
            session.queued_for = msg.game
            peer.send(frames.reply("queued", msg.id, game=msg.game, waiting=len(queue)))
            return
        # The room first: if it cannot be created (server_busy), the waiting player stays queued.
        room = self._new_room(msg.game, {}, False, clock_ms=self.config.quick_match_clock_ms)
        other = queue.pop(0)
        other.queued_for = None
        pair = ((other, None), (session, msg.id))
        for s, (who, _) in enumerate(pair):  # both seats first: joined lists both players
            assert who.peer is not None
            self._take_seat(who.peer, who, room, s)
        for s, (who, rid) in enumerate(pair):
            assert who.peer is not None
            who.peer.send(room.joined_frame(s, rid, starting=True))
        room.start()

    def _unqueue(self, session: Session) -> None:
        if session.queued_for is not None:
            queue = self.queues[session.queued_for]
            if session in queue:
                queue.remove(session)
            session.queued_for = None
