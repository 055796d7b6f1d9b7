"""The hub: sessions, rooms, the matchmaking queue, and the dispatch of client requests.

Synchronous like ``room``: each request is handled to the end before the next one, so the
hub needs no locks. Connections (``server.connection``) call ``hello``, ``handle`` and
``disconnected``; everything they send back goes through ``Peer.send``.
"""

from __future__ import annotations

import base64
import bisect
import ipaddress
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

from stacko.engine.errors import InvalidOptionsError
from stacko.engine.games import GAMES
from stacko.protocol import frames, messages
from stacko.protocol.errors import ErrorCode, ProtocolError
from stacko.protocol.games import CODECS
from stacko.server.botpool import InlineThinker
from stacko.server.clock import Clock, Timer
from stacko.server.config import ServerConfig
from stacko.server.rng import system_shuffle
from stacko.server.room import Chooser, Peer, Player, Room, RoomHooks, Thinker

log = logging.getLogger("stacko.hub")

ROOM_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no I, O, 0, 1: easy to read aloud
ROOM_CODE_LENGTH = 8
"""8 of 32 letters: 40 bits, so guessing a private room's code at the hello and rate limits
is hopeless."""
SERVER_VERSION = "stacko/0.1.0"
PAGE_CACHE = 16
"""Encoded ``list_rooms`` pages kept per listing (all stale ones go when it is full)."""
PENDING_MAX = 16
"""Frames a connection may send after a ``hello`` with an account before its ``welcome``."""

BotFactory = Callable[[str, str, random.Random], Chooser]
"""(game, level, rng) -> a bot; raises KeyError for an unknown level."""


def address_key(ip: str) -> str:
    """What per-address limits count by: an IPv4 address, or the /64 network of an IPv6 one
    (one host usually has a whole /64 to pick addresses from)."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return ip
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return ip


class Cluster(Protocol):
    """What the hub asks of ``server.cluster.node.ClusterNode`` (a protocol: the hub is
    compiled, the cluster is not, and needs nothing of it at runtime)."""

    def intercepts(self, peer: Peer, session: Session, msg: messages.ClientMessage) -> bool: ...

    def resume(self, peer: Peer, msg: messages.Hello, session: Session | None) -> Session: ...

    def disconnected(self, peer: Peer, session: Session | None) -> None: ...

    def claim_code(self) -> str: ...

    def listing(self, room: Room, listable: bool) -> None: ...

    def room_closed(self, room: Room) -> None: ...

    def seated(self, session: Session, room: Room) -> None: ...


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
    account: Any = None
    """The ``server.accounts.Account`` the session signed in as (``None``: a guest)."""
    queued_at: float = 0.0
    """When it started waiting for a quick match (the rating window widens with it)."""


class Listing:
    """Listable rooms (public, game not finished) in the order they became listable, for
    ``list_rooms`` pages that cost the page, not the number of rooms.

    Entries are never moved: a room leaving the listing is only marked (``Room.listed_at``
    goes to 0, so an entry is live iff its number is the room's), and the lists are rebuilt
    once dead entries outnumber live ones. A page starts by bisection after its cursor."""

    def __init__(self) -> None:
        self.numbers: list[int] = []
        self.rooms: list[Room] = []
        self.live = 0
        self.version = 0
        """Changes with every room that joins or leaves the listing, or whose ``info``
        changes: a page encoded at one version is what a request at the same one gets."""
        self.pages: dict[int, tuple[int, bytes]] = {}
        """Encoded pages by cursor: (version, the ``rooms`` answer without its id)."""

    def add(self, number: int, room: Room) -> None:
        self.numbers.append(number)
        self.rooms.append(room)
        self.live += 1
        self.version += 1

    def removed(self) -> None:
        self.live -= 1
        self.version += 1
        if len(self.rooms) - self.live > max(64, self.live):
            pairs = zip(self.numbers, self.rooms, strict=True)
            kept = [(n, r) for n, r in pairs if r.listed_at == n]
            self.numbers = [n for n, _ in kept]
            self.rooms = [r for _, r in kept]

    def page(self, after: int, size: int) -> tuple[list[Room], int | None]:
        """Up to ``size`` live rooms listed after number ``after``, and the cursor of the next
        page (``None``: this is the last)."""
        numbers, rooms = self.numbers, self.rooms
        out: list[Room] = []
        for i in range(bisect.bisect_right(numbers, after), len(numbers)):
            room = rooms[i]
            if room.listed_at != numbers[i]:
                continue
            if len(out) == size:
                return out, out[-1].listed_at
            out.append(room)
        return out, None


class Hub:
    def __init__(
        self,
        config: ServerConfig,
        clock: Clock,
        *,
        rng_factory: Callable[[], random.Random] = system_shuffle,
        schedule_soon: Callable[[Callable[[], None]], None],
        bots: dict[str, list[str]] | None = None,
        bot_factory: BotFactory | None = None,
        ids: random.Random | None = None,
        thinker: Thinker | None = None,
    ) -> None:
        """``ids`` draws session tokens and room codes: the OS's secure source unless a test
        or a document generator needs them repeatable. ``thinker`` runs bot decisions (the
        server's process pool); by default they run on the loop (``InlineThinker``)."""
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
        self.bot_rooms: set[str] = set()
        """Codes of the rooms where a bot holds a seat (``max_bot_games``)."""
        self.listed: dict[str | None, Listing] = {None: Listing()}
        """Listable rooms per game, and of every game under ``None``."""
        self._listings = 0
        self._games: list[dict[str, Any]] | None = None
        self._hellos: dict[str, tuple[float, float]] = {}
        """Per IP address: (tokens, when counted) of its ``hello`` bucket."""
        self._hellos_pruned = 0
        self.addresses: dict[Peer, str] = {}
        """The address (``address_key``) each connection said ``hello`` from."""
        self.waiting_by_address: dict[str, set[str]] = {}
        """Per address: the codes of the rooms created from it that still wait for an
        opponent (``max_waiting_per_ip``: many sessions from one address must not fill the
        room cap)."""
        self._hooks = RoomHooks(
            clock=clock,
            rng_factory=rng_factory,
            schedule_soon=schedule_soon,
            on_empty=self._close_room,
            max_expiries=config.max_expiries,
            reconnect_grace_s=config.reconnect_grace_s,
            thinker=thinker if thinker is not None else InlineThinker(schedule_soon),
            bot_budget_s=config.bot_budget_s,
            on_status=self._status_changed,
            on_info=self._info_changed,
        )
        self._bot_rng = rng_factory()
        self._ids = ids if ids is not None else random.SystemRandom()
        self.accounts: Any = None
        """``server.accountlink.AccountLink`` when the server has a store: account tokens
        at ``hello``, ratings, challenges. ``None``: guests only."""
        self._pending: dict[Peer, list[messages.ClientMessage]] = {}
        """Connections whose ``hello`` waits for its account check, and what they sent
        meanwhile (handled, in order, after the welcome)."""
        self.cluster: Cluster | None = None
        """The node's link to the others (``server.cluster``); ``None`` on a single node."""
        self._signing_in: dict[Peer, Any] = {}
        """The account a ``hello`` signs in as, while the cluster resumes its session."""
        self.revive: Callable[[str], Session | None] | None = None
        """Token -> a session restored from the store (``server.store.recorder.recover``)."""

    # -- sessions -----------------------------------------------------------------------

    @property
    def late_bot_answers(self) -> int:
        """Bot answers that came too late and were dropped (the room had moved on)."""
        return self._hooks.late_bot_answers[0]

    def hello(self, peer: Peer, msg: messages.Hello, ip: str = "") -> Session:
        """Answer a first frame. Raises a fatal ProtocolError for an unsupported version, a
        name that may not be shown, or an address over its ``hello`` rate (``ip``: the
        peer's address; empty: not limited)."""
        if ip:
            self.addresses[peer] = address_key(ip)
        if ip and not self._hello_allowed(ip):
            raise ProtocolError(
                ErrorCode.TOO_MANY_HELLOS,
                f"too many hello frames from your address (at most "
                f"{self.config.hello_rate_per_ip:g} per second); try again later",
                fatal=True, request_id=msg.id,
            )  # fmt: skip
        if msg.protocol not in messages.SUPPORTED_VERSIONS:
            raise ProtocolError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"protocol {msg.protocol} is not supported; this server speaks "
                f"{sorted(messages.SUPPORTED_VERSIONS)}",
                fatal=True, request_id=msg.id,
            )  # fmt: skip
        problem = messages.name_problem(msg.name)
        if problem is not None:
            raise ProtocolError(ErrorCode.BAD_NAME, problem, fatal=True, request_id=msg.id)
        if msg.account is not None:
            if self.accounts is None:
                raise ProtocolError(
                    ErrorCode.NO_ACCOUNTS, "this server keeps no accounts (no store)",
                    fatal=True, request_id=msg.id,
                )  # fmt: skip
            placeholder = Session("", msg.name)
            self._pending[peer] = []
            self.accounts.check_hello(peer, msg, placeholder)
            return placeholder
        return self.welcome(peer, msg)

    def welcome(self, peer: Peer, msg: messages.Hello, account: Any = None) -> Session:
        """The rest of ``hello`` once the account (if any) is known."""
        session = self.sessions.get(msg.token) if msg.token else None
        if session is None and msg.token and self.revive is not None:
            session = self.revive(msg.token)  # a session from before a restart
        if msg.token and self.cluster is not None:  # its rooms may be on other nodes
            if account is not None:
                self._signing_in[peer] = account  # signed in by ``adopt``, before the welcome
            try:
                return self.cluster.resume(peer, msg, session)
            finally:
                self._signing_in.pop(peer, None)
        resumed = session is not None
        if session is None:
            session = Session(self._token(), msg.name)
            self.sessions[session.token] = session
        else:
            self.adopt(session, peer, msg.name)
        self._sign_in(session, account)
        session.peer = peer
        self.welcome_back(peer, session, msg.id, resumed, sorted(session.rooms))
        return session

    def _sign_in(self, session: Session, account: Any) -> None:
        if account is not None:
            session.account = account
            session.name = account.name
            self.accounts.signed_in(session)

    def adopt(self, session: Session, peer: Peer, name: str) -> None:
        """A known session on a new connection: the newer connection wins."""
        if session.expiry is not None:
            session.expiry.cancel()
            session.expiry = None
        old = session.peer
        if old is not None and old is not peer:
            # The newer connection wins; the old one's disconnect is then ignored.
            replace = getattr(old, "replace", None)
            if replace is not None:
                replace()
            self._unqueue(session)  # queueing belongs to the connection (PROTOCOL.md)
        session.name = name
        session.peer = peer
        self._sign_in(session, self._signing_in.get(peer))

    def welcome_back(
        self,
        peer: Peer,
        session: Session,
        request_id: frames.RequestId,
        resumed: bool,
        rooms: list[str],
    ) -> None:
        """The welcome, then each room of this node where the session holds a seat."""
        if session.account is not None and self.accounts is not None:
            self.accounts.signed_in(session)  # online again, by name (challenges, presence)
        peer.send(self._welcome_frame(session, request_id, resumed, rooms))
        for room in list(session.rooms.values()):
            seat = room.seat_of(session)
            if seat is not None:
                room.returned(seat, peer)

    def _welcome_frame(
        self, session: Session, request_id: frames.RequestId, resumed: bool, rooms: list[str]
    ) -> bytes:
        cfg = self.config
        return frames.reply(
            "welcome", request_id, protocol=messages.PROTOCOL_VERSION, session=session.token,
            name=session.name, resumed=resumed, rooms=rooms, server=SERVER_VERSION,
            limits={
                "max_frame_bytes": cfg.max_frame_bytes, "rate_per_second": cfg.rate_per_second,
                "burst": cfg.burst, "hello_timeout_s": cfg.hello_timeout_s,
                "reconnect_grace_s": cfg.reconnect_grace_s,
            },
            **({"account": session.account.wire()} if session.account is not None else {}),
        )  # fmt: skip

    def _hello_allowed(self, ip: str) -> bool:
        """A token bucket per address; buckets that refilled are forgotten now and then, so
        the table holds only addresses seen lately."""
        cfg = self.config
        now = self.clock.monotonic()
        burst = float(cfg.hello_burst_per_ip)
        ip = address_key(ip)
        tokens, then = self._hellos.get(ip, (burst, now))
        tokens = min(burst, tokens + (now - then) * cfg.hello_rate_per_ip)
        allowed = tokens >= 1.0
        self._hellos[ip] = (tokens - 1.0 if allowed else tokens, now)
        if len(self._hellos) > 2 * self._hellos_pruned + 1024:
            rate = cfg.hello_rate_per_ip
            self._hellos = {
                a: (t, w) for a, (t, w) in self._hellos.items() if t + (now - w) * rate < burst
            }
            self._hellos_pruned = len(self._hellos)
        return allowed

    def take_pending(self, peer: Peer) -> list[messages.ClientMessage] | None:
        """What ``peer`` sent while its account was checked (``None``: it went away)."""
        return self._pending.pop(peer, None)

    def disconnected(self, peer: Peer, session: Session | None) -> None:
        self._pending.pop(peer, None)
        self.addresses.pop(peer, None)
        if self.cluster is not None:
            self.cluster.disconnected(peer, session)
        for code in self.watching.pop(peer, set()):
            room = self.rooms.get(code)
            if room is not None:
                room.unwatch(peer)
        if session is None or session.peer is not peer:
            return  # never said hello, or already replaced by a newer connection
        session.peer = None
        self._detach(session)
        if self.accounts is not None:
            self.accounts.gone(session)
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
        if self._pending:
            waiting = self._pending.get(peer)
            if waiting is not None:  # the hello's account check is not back yet
                if len(waiting) >= PENDING_MAX:
                    raise ProtocolError(
                        ErrorCode.RATE_LIMITED, "wait for welcome", fatal=True, request_id=msg.id
                    )
                waiting.append(msg)
                return
        try:
            self._dispatch(peer, session, msg)
        except ProtocolError as exc:
            exc.request_id = msg.id
            raise

    def _dispatch(self, peer: Peer, session: Session, msg: messages.ClientMessage) -> None:
        if self.cluster is not None and self.cluster.intercepts(peer, session, msg):
            return  # another node's room, or the cluster's queue and lobby
        match msg:  # moves first: nearly every frame is one
            case messages.MoveMessage():
                room, seat = self._my_seat(peer, session, msg.room)
                room.move(seat, msg.ply, msg.move, msg.id)
            case messages.Ping():
                peer.send(frames.reply("pong", msg.id))
            case messages.ListGames():
                peer.send(frames.reply("games", msg.id, games=self._games_info()))
            case messages.ListRooms():
                self._list_rooms(peer, msg)
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
            case messages.Challenge() | messages.AcceptChallenge() | messages.DeclineChallenge():
                if self.accounts is None:
                    raise ProtocolError(ErrorCode.NO_ACCOUNTS, "this server keeps no accounts")
                self.accounts.challenge_message(peer, session, msg)
            case messages.Hello():
                raise ProtocolError(
                    ErrorCode.ALREADY_WELCOMED, "this connection already said hello"
                )

    def _list_rooms(self, peer: Peer, msg: messages.ListRooms) -> None:
        """A page is encoded once per version of its listing (``PAGE_CACHE`` pages kept per
        game): five clients asking at the rate limit cost the loop a dict lookup each, not
        a hundred ``info`` dicts and their encoding (``bench/abuse.py`` ``list_rooms``)."""
        listing = self.listed.get(msg.game)
        if listing is None:
            peer.send(frames.reply("rooms", msg.id, rooms=[], next=None))
            return
        start = int(msg.cursor) if msg.cursor is not None else 0
        cached = listing.pages.get(start)
        if cached is not None and cached[0] == listing.version:
            peer.send(frames.reply_with_id(cached[1], msg.id))
            return
        rooms, after = listing.page(start, self.config.list_rooms_page)
        nxt = str(after) if after is not None else None
        head = frames.reply_head("rooms", rooms=[r.info() for r in rooms], next=nxt)
        pages = listing.pages
        if len(pages) >= PAGE_CACHE:  # cursors are the client's to choose: keep a few
            pages.clear()
        pages[start] = (listing.version, head)
        peer.send(frames.reply_with_id(head, msg.id))

    def _info_changed(self, room: Room) -> None:
        """A listed room's ``info`` changed: its listings' cached pages are stale."""
        if room.listed_at:
            self.listed[None].version += 1
            listing = self.listed.get(room.spec.name)
            if listing is not None:
                listing.version += 1

    def _status_changed(self, room: Room) -> None:
        """Keep ``listed`` current: a room is listed while public, open and not finished.
        And ``waiting_by_address``: a room that started or closed waits no more."""
        if room.address and (room.game is not None or room.code not in self.rooms):
            held = self.waiting_by_address.get(room.address)
            if held is not None:
                held.discard(room.code)
                if not held:
                    del self.waiting_by_address[room.address]
            room.address = ""
        listable = room.public and room.status != "finished" and room.code in self.rooms
        changed = True
        if listable and room.listed_at == 0:
            self._listings += 1
            room.listed_at = self._listings
            self.listed[None].add(self._listings, room)
            self.listed.setdefault(room.spec.name, Listing()).add(self._listings, room)
        elif not listable and room.listed_at != 0:
            room.listed_at = 0
            self.listed[None].removed()
            self.listed[room.spec.name].removed()
        else:
            changed = False
            self._info_changed(room)  # a game started or ended: its status shows
        if room.rated and self.accounts is not None:
            self.accounts.status(room)
        recorder = self._hooks.recorder
        if recorder is not None:  # a room outlives a restart (``server.store.recorder``)
            recorder.room(room, room.code in self.rooms)
        if changed and self.cluster is not None:
            self.cluster.listing(room, listable)

    def _games_info(self) -> list[dict[str, Any]]:
        """Built once: the options' JSON Schemas cost about 2 ms to make."""
        if self._games is None:
            self._games = self._make_games_info()
        return self._games

    def _make_games_info(self) -> list[dict[str, Any]]:
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

    def _not_in(self, code: str) -> ProtocolError:
        """The one answer to a request for a room the sender is not in, whether or not the
        room exists: ``unknown_room`` there would tell which codes are taken."""
        return ProtocolError(ErrorCode.NOT_IN_ROOM, f"you are not in room {code}")

    def _my_seat(self, peer: Peer, session: Session, code: str) -> tuple[Room, int]:
        room = self.rooms.get(code)
        if room is None:
            raise self._not_in(code)
        seat = room.seat_of(session)
        if seat is None:
            if peer in room.spectators:
                raise ProtocolError(ErrorCode.NOT_A_PLAYER, "spectators cannot play")
            raise self._not_in(code)
        return room, seat

    def _check_seats(self, session: Session) -> None:
        """A queued quick match counts as a seat: it becomes one when paired."""
        held = len(session.rooms) + (session.queued_for is not None)
        if held >= self.config.max_seats_per_session:
            raise ProtocolError(
                ErrorCode.TOO_MANY_SEATS,
                f"you hold {held} seats, the most one session may (leave a room first)",
            )

    def _new_room(
        self,
        game: str,
        raw_options: dict[str, Any],
        public: bool,
        clock_ms: int | None = None,
        *,
        quick: bool = False,
    ) -> Room:
        """``quick``: for quick match, which alone may use the rooms ``quick_match_reserve``
        keeps back (one client creating rooms cannot lock everybody out of a game)."""
        spec = GAMES.get(game)
        if spec is None:
            raise ProtocolError(ErrorCode.UNKNOWN_GAME, f"no game {game!r}; see list_games")
        cfg = self.config
        limit = cfg.max_rooms
        if not quick:
            limit -= int(cfg.max_rooms * cfg.quick_match_reserve)
        if len(self.rooms) >= limit:
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
        self._status_changed(room)
        return room

    def _room_code(self) -> str:
        if self.cluster is not None:
            return self.cluster.claim_code()  # unique in the whole cluster
        while True:
            code = "".join(self._ids.choice(ROOM_ALPHABET) for _ in range(ROOM_CODE_LENGTH))
            if code not in self.rooms:
                return code

    def _close_room(self, room: Room) -> None:
        self.rooms.pop(room.code, None)
        if self.cluster is not None:
            self.cluster.room_closed(room)
        self.bot_rooms.discard(room.code)
        self._status_changed(room)
        self.closed += 1
        for player in room.players:
            if player is not None and player.session is not None:
                player.session.rooms.pop(room.code, None)

    def _take_seat(self, peer: Peer, session: Session, room: Room, seat: int | None) -> int:
        kind = session.account.kind if session.account is not None else None
        seat = room.seat(Player(session.name, peer=peer, session=session, account=kind), seat)
        session.rooms[room.code] = room
        room.seats_changed()
        if self.cluster is not None:
            self.cluster.seated(session, room)  # findable from any node (resume)
        return seat

    def _create(self, peer: Peer, session: Session, msg: messages.CreateRoom) -> None:
        cfg = self.config
        self._check_seats(session)
        bot = None
        address: str | None = None
        if msg.bot is not None:
            self._check_bot_level(msg.game, msg.bot)
            mine = sum(1 for code in session.rooms if code in self.bot_rooms)
            if mine >= cfg.max_bot_games_per_session:
                raise ProtocolError(
                    ErrorCode.TOO_MANY_BOT_GAMES,
                    f"you play {mine} bots already, the most one session may",
                )
            if len(self.bot_rooms) >= cfg.max_bot_games:
                raise ProtocolError(
                    ErrorCode.BOTS_BUSY, "the server plays as many bot games as it can"
                )
            bot = self._make_bot(msg.game, msg.bot)  # after the caps: a refusal builds none
        else:
            waiting = sum(1 for r in session.rooms.values() if r.game is None)
            if waiting >= cfg.max_waiting_per_session:
                raise ProtocolError(
                    ErrorCode.TOO_MANY_ROOMS,
                    f"you have {waiting} rooms waiting for an opponent, the most one session "
                    "may (leave one first)",
                )
            address = self.addresses.get(peer)
            held = self.waiting_by_address.get(address, ()) if address else ()
            if cfg.max_waiting_per_ip and len(held) >= cfg.max_waiting_per_ip:
                raise ProtocolError(
                    ErrorCode.TOO_MANY_ROOMS,
                    f"your address has {len(held)} rooms waiting for an opponent, the most "
                    "one address may (join one, or leave one first)",
                )
        room = self._new_room(msg.game, dict(msg.options), msg.public)
        if bot is None and address:
            room.address = address
            self.waiting_by_address.setdefault(address, set()).add(room.code)
        room.rated = msg.rated
        seat = self._take_seat(peer, session, room, msg.seat)
        if bot is not None:  # seated first, so that joined already lists the opponent
            self.bot_rooms.add(room.code)
            room.seat(Player(f"{bot.name} (bot)", bot=bot, bot_level=msg.bot), 1 - seat)
        peer.send(room.joined_frame(seat, msg.id, starting=bot is not None))
        if bot is not None:
            room.start()

    def _check_bot_level(self, game: str, level: str) -> None:
        if level not in self.bots.get(game, []) or self.bot_factory is None:
            levels = ", ".join(self.bots.get(game, [])) or "none"
            raise ProtocolError(
                ErrorCode.UNKNOWN_BOT, f"no bot {level!r} for {game} (levels: {levels})"
            )

    def _make_bot(self, game: str, level: str) -> Chooser:
        self._check_bot_level(game, level)
        assert self.bot_factory is not None
        return self.bot_factory(game, level, random.Random(self._bot_rng.getrandbits(64)))

    def _join(self, peer: Peer, session: Session, msg: messages.Join) -> None:
        room = self._room(msg.room)
        if room.seat_of(session) is not None:
            raise ProtocolError(ErrorCode.ALREADY_IN_ROOM, f"you already play in room {room.code}")
        watched = self.watching.get(peer)
        if msg.role == "spectator":
            if watched is None or room.code not in watched:
                self._check_watching(room, watched)
            room.watch(peer)
            self.watching.setdefault(peer, set()).add(room.code)
            peer.send(room.joined_frame(None, msg.id))
            room.send_state(peer, None)
            return
        self._check_seats(session)
        seat = self._take_seat(peer, session, room, None)
        if watched is not None and room.code in watched:  # a seat ends watching
            room.unwatch(peer)
            watched.discard(room.code)
        peer.send(room.joined_frame(seat, msg.id, starting=room.ready()))
        room.announce_join(seat)
        if room.ready():
            room.start(request=(seat, None))

    def _check_watching(self, room: Room, watched: set[str] | None) -> None:
        cfg = self.config
        if watched is not None and len(watched) >= cfg.max_watching_per_session:
            raise ProtocolError(
                ErrorCode.TOO_MANY_WATCHED,
                f"you watch {len(watched)} rooms, the most one session may (leave one first)",
            )
        if len(room.spectators) >= cfg.max_spectators_per_room:
            raise ProtocolError(
                ErrorCode.TOO_MANY_SPECTATORS, f"room {room.code} has all the spectators it takes"
            )

    def _leave(self, peer: Peer, session: Session, msg: messages.Leave) -> None:
        room = self.rooms.get(msg.room)
        if room is None:
            raise self._not_in(msg.room)
        seat = room.seat_of(session)
        if seat is not None:
            session.rooms.pop(room.code, None)
            room.leave(seat)
        elif peer in room.spectators:
            room.unwatch(peer)
            self.watching.get(peer, set()).discard(room.code)
        else:
            raise self._not_in(msg.room)
        peer.send(frames.reply("left", msg.id, room=room.code))

    def _quick_match(self, peer: Peer, session: Session, msg: messages.QuickMatch) -> None:
        if msg.game not in GAMES:
            raise ProtocolError(ErrorCode.UNKNOWN_GAME, f"no game {msg.game!r}; see list_games")
        if session.queued_for is not None:
            raise ProtocolError(
                ErrorCode.ALREADY_QUEUED, f"already waiting for {session.queued_for}"
            )
        self._check_seats(session)
        queue = self.queues[msg.game]
        pick: int | None = 0 if queue else None
        if queue and self.accounts is not None:  # close ratings first (server.matchmaking)
            pick = self.accounts.partner(queue, session, msg.game)
        if pick is None:
            queue.append(session)
            session.queued_for = msg.game
            session.queued_at = self.clock.time()
            peer.send(frames.reply("queued", msg.id, game=msg.game, waiting=len(queue)))
            if self.accounts is not None:
                self.accounts.waiting(msg.game)
            return
        self._start_match(msg.game, queue[pick], (session, msg.id))

    def _start_match(
        self, game: str, other: Session, newcomer: tuple[Session, frames.RequestId]
    ) -> None:
        """Pair ``other`` (waiting in the queue) with ``newcomer`` (a session and the id of
        its request, or a waiting session and ``None``)."""
        # The room first: if it cannot be created (server_busy), the waiting player stays queued.
        room = self._new_room(
            game, {}, False, clock_ms=self.config.quick_match_clock_ms, quick=True
        )
        queue = self.queues[game]
        for who in (other, newcomer[0]):
            if who in queue:
                queue.remove(who)
            who.queued_for = None
        room.rated = True  # rated when both are accounts (server.ratings)
        pair = ((other, None), newcomer)
        for s, (who, _) in enumerate(pair):  # both seats first: joined lists both players
            assert who.peer is not None
            self._take_seat(who.peer, who, room, s)
        for s, (who, rid) in enumerate(pair):
            assert who.peer is not None
            who.peer.send(room.joined_frame(s, rid, starting=True))
        room.start()

    def start_pair(
        self,
        game: str,
        options: dict[str, Any],
        rated: bool,
        pair: list[tuple[Session, frames.RequestId]],
    ) -> Room:
        """A private room for two sessions that agreed to play (a challenge), started."""
        for who, _ in pair:
            if who.peer is None:
                raise ProtocolError(ErrorCode.NOT_ONLINE, f"{who.name} is not online any more")
            self._check_seats(who)
        room = self._new_room(game, options, False)
        room.rated = rated
        for s, (who, _) in enumerate(pair):
            assert who.peer is not None
            self._take_seat(who.peer, who, room, s)
        for s, (who, rid) in enumerate(pair):
            assert who.peer is not None
            who.peer.send(room.joined_frame(s, rid, starting=True))
        room.start()
        return room

    def pair_waiting(self, game: str, a: Session, b: Session) -> None:
        """Pair two sessions that both wait for ``game`` (the matchmaking sweep)."""
        self._start_match(game, a, (b, None))

    def _unqueue(self, session: Session) -> None:
        if session.queued_for is not None:
            queue = self.queues[session.queued_for]
            if session in queue:
                queue.remove(session)
            session.queued_for = None
