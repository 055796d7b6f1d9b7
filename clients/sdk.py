"""The bot SDK: write the decision, the SDK plays it on a live server.

A bot is ``choose(state) -> move``, where ``state`` is one seat's ``State`` (the wire view of
PROTOCOL.md, the ``legal`` moves, room, seat, ply, the time left) and the move is one of
``state.legal``. Either pass a plain function, or subclass ``Bot`` when the bot wants memory
(``observe``, reset by ``new_game``), a say in what happens at the deadline (``fallback``)
or the results (``game_over``)::

    from stacko.clients.sdk import run

    def choose(state):
        return state.legal[0]

    for result in run(choose, "ws://127.0.0.1:8765/", games=3):   # three quick matches
        print(result)                                             # "won 50:5 (completed) ..."

The SDK does the protocol so a bot does not have to:

- connects, says ``hello``, and joins: a quick match (``games=N`` of them, one after the
  other, or several at once with ``asyncio.gather`` over one connection), a room by its code,
  or a room it creates (options, public or private; ``bot="strong"`` seats one of the
  server's built-in bots as the opponent), with rematches for ``games=N``; it says what it
  waits for (``on_status``: ``run`` prints it), so a bot run alone does not sit in silence;
- sends each move with the ``ply`` of the state it was chosen from, never twice for one
  state; after ``stale_ply`` it waits for the current state and decides again (PROTOCOL.md
  "Ply and stale moves");
- runs a plain ``choose`` in a thread of its own per room, so a slow bot never stalls the
  connection (keepalive, other games), and when the clock of a decision is about to run out
  it sends ``fallback(state)`` instead (``State.time_left()`` is the bot's budget);
  ``async def choose`` runs on the event loop;
- after a dropped connection, reconnects with the session token, gets the seats back and
  goes on with the games (PROTOCOL.md "Presence, reconnection and forfeit");
- returns a ``GameResult`` per game (outcome, seat, scores).

``BuiltinBot`` runs the bots of ``bots`` (which decide on engine views) through the
SDK: it turns each wire view back into the engine view (``clients.wire_views``).
``stacko-bot`` (``clients.botcli``) is that, as a command.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import queue
import random
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from stacko.bots.base import checked_choice, observe_view
from stacko.bots.registry import make_bot
from stacko.clients.client import (  # noqa: F401  (register: part of the SDK)
    Disconnected,
    Frame,
    ServerError,
    StackoClient,
    register,
    websocket_url,
)
from stacko.clients.wire_views import move_to_wire, options_from_info, view_from_wire

log = logging.getLogger("stacko.sdk")

DEFAULT_URL = "ws://127.0.0.1:8765/"

Move = dict[str, Any]
"""A wire move, one of ``State.legal``: ``{"action": "take", "slot": 3}`` in Stacko,
``{"stack": 1, "count": 2}`` in Stakko."""

ChooseFn = Callable[["State"], Move | Awaitable[Move]]
"""A bot as a plain function (or ``async def``): the state in, one of ``state.legal`` out."""

T = TypeVar("T")


class BotError(Exception):
    """The bot failed: ``choose`` raised, or returned a move that is not in ``legal``. The SDK
    stops that game's runner rather than guess (the seat stays held; its clock runs on)."""


class ChallengeRefused(Exception):
    """A challenge ended without a game; ``str()`` is the reason (``declined``, ``expired``,
    ``cancelled``)."""


class ConnectionLost(Exception):
    """The connection dropped and the session could not be resumed (reconnection off,
    refused, or not within the server's grace period): the seats are gone."""


# -- what a bot sees and what it gets back --------------------------------------------------


@dataclass(frozen=True, slots=True)
class State:
    """One seat's view of one game, as the last ``state`` frame gave it."""

    room: str
    game: str
    """``"stacko"`` or ``"stakko"`` (``view["game"]``)."""
    seat: int
    view: dict[str, Any]
    """The frame's ``view`` exactly as PROTOCOL.md describes it (``null`` is ``None``)."""
    legal: list[Move]
    """Your legal moves; empty when it is not your turn (``observe`` only)."""
    options: dict[str, Any]
    """The room's options, defaults filled in (e.g. ``bricks``, which the view leaves out)."""
    seq: int
    """The room's state version (grows by one with every change)."""
    deadline: float | None
    """``time.monotonic()`` at which the SDK stops waiting for ``choose`` and plays
    ``fallback`` (a margin before the server's clock runs out); ``None`` without a clock."""
    frame: Frame = field(repr=False)
    """The whole ``state`` frame (``text``, ``clock_ms`` ...)."""

    @property
    def ply(self) -> int:
        """The ply this state is at; the SDK sends it with the move."""
        return int(self.view["ply"])

    @property
    def my_turn(self) -> bool:
        return bool(self.legal)

    @property
    def outcome(self) -> dict[str, Any] | None:
        """``termination``, ``winner``, ``scores`` once the game is over, else ``None``."""
        outcome: dict[str, Any] | None = self.view.get("outcome")
        return outcome

    def time_left(self) -> float | None:
        """Seconds until ``deadline`` (the bot's budget for this decision), or ``None``."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())


@dataclass(frozen=True, slots=True)
class GameResult:
    """How one game ended for this seat, plus what the SDK had to do to get there."""

    room: str
    game: str
    seat: int
    termination: str
    """``completed``, ``resignation``, ``abandoned``, ``timeout`` or ``turn_cap``."""
    winner: int | None
    """The winning seat, ``None`` for a draw."""
    scores: tuple[int, int]
    """By seat: ``scores[seat]`` is yours."""
    plies: int
    """Plies the game lasted."""
    moves: int = 0
    """Moves this seat sent that the server applied."""
    fallbacks: int = 0
    """Decisions where ``choose`` ran out of time and ``fallback`` was played."""
    stale: int = 0
    """Moves refused as ``stale_ply`` (the game moved on first: a clock expiry, a retry)."""
    game_id: str | None = None
    """The finished game's record on the server (``GET /api/games/{game_id}``, the web page
    ``/games/{game_id}``, ``stacko-client --replay``); ``None`` from a server that keeps no
    records."""
    rated: bool = False
    """The game was rated (both seats accounts): the new ratings are in the ``rating`` frame
    that follows, and at ``GET /api/players/{name}``."""

    @property
    def outcome(self) -> str:
        """``"won"``, ``"lost"`` or ``"draw"``, for this seat."""
        if self.winner is None:
            return "draw"
        return "won" if self.winner == self.seat else "lost"

    @property
    def score(self) -> int:
        return self.scores[self.seat]

    @property
    def opponent_score(self) -> int:
        return self.scores[1 - self.seat]

    def __str__(self) -> str:
        return (
            f"{self.outcome} {self.score}:{self.opponent_score} ({self.termination}) "
            f"as seat {self.seat}, {self.game} room {self.room}, {self.plies} plies"
        )


def default_fallback(state: State) -> Move:
    """The move played when ``choose`` is out of time: the least harmful one the server would
    play for an expired clock (Stacko: pass a drawn brick, else draw), else the first."""
    for quiet in ({"action": "pass"}, {"action": "draw"}):
        if quiet in state.legal:
            return quiet
    return state.legal[0]


class Bot:
    """Subclass this for a bot with memory or hooks; only ``choose`` is required.

    One instance serves every game of a runner: ``state.room`` tells games apart. Calls for
    one room never overlap and come in order; with several rooms at once (and plain, not
    ``async``, methods) calls for different rooms may run at the same time in their threads.
    """

    name = "bot"

    def choose(self, state: State) -> Move | Awaitable[Move]:
        """One of ``state.legal`` (never empty here). May be ``async def``."""
        raise NotImplementedError

    def new_game(self, state: State) -> None:
        """A game starts (the first deal, or a rematch): ``state`` is its first state, and
        ``observe`` follows with it. Reset per-game memory here; default: nothing."""

    def observe(self, state: State) -> None:
        """Every ``state`` frame of your games, in order, before ``choose`` (if it is your
        turn) and also when the game is over; default: nothing to remember."""

    def fallback(self, state: State) -> Move:
        """The move to play when ``choose`` has not answered by ``state.deadline``; must be
        quick. Default: ``default_fallback``."""
        return default_fallback(state)

    def game_over(self, result: GameResult) -> None:
        """A game of this bot ended; default: nothing."""


class _FunctionBot(Bot):
    """A plain ``choose`` function as a ``Bot``."""

    def __init__(self, fn: ChooseFn) -> None:
        self.fn = fn
        self.name = getattr(fn, "__name__", "bot")

    def choose(self, state: State) -> Move | Awaitable[Move]:
        return self.fn(state)


def as_bot(bot: Bot | ChooseFn) -> Bot:
    """A ``Bot`` for either way of writing one."""
    return bot if isinstance(bot, Bot) else _FunctionBot(bot)


def _is_async(bot: Bot) -> bool:
    fn: Any = bot.fn if isinstance(bot, _FunctionBot) else bot.choose
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 (an object with an async __call__)
    )


# -- the built-in bots through the SDK ----------------------------------------------------


class BuiltinBot(Bot):
    """A bot of ``bots.registry`` (``game``, ``level``) playing through the SDK.

    Those bots decide on engine views, so each wire view is turned back into one by
    ``clients.wire_views`` (the inverse of the server's ``view_to_wire``, with the room's
    options for what the view leaves out) and the chosen engine move into its wire form.
    Each game gets a fresh engine bot (their memory is per game) with its own RNG: with
    ``seed`` the n-th game this instance starts uses ``Random(f"{seed}:{n}")``, so a seeded
    run replays its choices.
    """

    def __init__(self, game: str, level: str, *, seed: int | str | None = None) -> None:
        options_from_info(game, {"options": {}})  # a game without wire views fails here ...
        make_bot(game, level, random.Random(0))  # ... and an unknown level, not mid-game
        self.game, self.level, self.seed = game, level, seed
        self.name = f"{game}:{level}"
        self._games: dict[str, tuple[Any, Any]] = {}
        """Room -> its game's engine bot and engine options."""
        self._started = 0
        self._lock = threading.Lock()  # rooms' threads may start games at the same time

    def _engine(self, state: State) -> tuple[Any, Any]:
        """The room's engine bot and the engine view of ``state``."""
        if state.game != self.game:
            raise ValueError(f"a {self.game} bot cannot play {state.game}")
        with self._lock:
            entry = self._games.get(state.room)
            if entry is None:
                seed = f"{self.seed}:{self._started}" if self.seed is not None else None
                self._started += 1
                bot = make_bot(self.game, self.level, random.Random(seed))
                options = options_from_info(self.game, {"options": state.options})
                entry = self._games[state.room] = (bot, options)
        bot, options = entry
        return bot, view_from_wire(self.game, state.view, options)

    def observe(self, state: State) -> None:
        bot, view = self._engine(state)
        observe_view(bot, view)

    def choose(self, state: State) -> Move:
        bot, view = self._engine(state)
        move = move_to_wire(self.game, checked_choice(bot, view, view.legal_moves()))
        if move not in state.legal:  # the engine and the server disagree: a codec bug
            raise ValueError(f"engine move {move} is not in the server's legal moves")
        return move

    def game_over(self, result: GameResult) -> None:
        with self._lock:
            self._games.pop(result.room, None)  # a rematch in this room starts a fresh bot


# -- the runner -----------------------------------------------------------------------------


class _Worker:
    """One daemon thread running one room's bot calls in order.

    A daemon thread, not an executor: a bot stuck in ``choose`` must not keep the process
    alive at exit (executors join their threads)."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[
            tuple[Callable[[], Any], asyncio.Future[Any], asyncio.AbstractEventLoop] | None
        ] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((fn, future, loop))
        return future

    def stop(self) -> None:
        self._jobs.put(None)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, future, loop = job
            try:
                result, error = fn(), None
            except Exception as exc:
                result, error = None, exc
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(_settle, future, result, error)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _consume(future: asyncio.Future[Any]) -> None:
    """Retrieve a result nobody waits for any more (no "never retrieved" warning)."""
    if not future.cancelled() and future.exception() is not None:
        log.warning("a late bot call failed: %r", future.exception())


@dataclass(eq=False)
class _Room:
    """A room where this session holds a seat, and the task that plays its games."""

    code: str
    game: str
    seat: int
    options: dict[str, Any]
    inbox: asyncio.Queue[tuple[float, Frame]] = field(default_factory=asyncio.Queue)
    done: asyncio.Future[list[GameResult]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    task: asyncio.Task[None] | None = None
    worker: _Worker | None = None
    games_wanted: int = 1
    results: list[GameResult] = field(default_factory=list)
    latest_seq: int = -1
    """The newest state's seq routed to this room (a decision for an older one is dropped)."""
    acted_seq: int = -1
    """The seq of the state the last move was sent for: at most one move per state."""
    over: bool = False
    in_game: bool = False
    """A game of this room has started and ``new_game`` was called for it."""
    rematch_asked: bool = False
    moves: int = 0
    fallbacks: int = 0
    stale: int = 0
    observe_error: BaseException | None = None
    late: asyncio.Future[Any] | None = None
    """A ``choose`` that ran out of time and is still running in the room's thread."""


class BotRunner:
    """One connection (and session) playing ``bot`` in any number of games.

    ``async with BotRunner(bot, url) as runner:`` then ``quick_match``, ``join``, ``create``
    (or ``create_room`` and ``play_room``); each returns the ``GameResult`` list of its
    games. Calls may run concurrently (``asyncio.gather``): every game has its own task.

    ``margin``: seconds before the server's clock runs out at which ``fallback`` is played
    (default: a fifth of the clock, between 0.2 s and 1 s). ``threaded=False`` calls a plain
    ``choose`` on the event loop (only for bots that take microseconds). ``reconnect=False``
    gives up on a dropped connection instead of resuming the session.
    """

    def __init__(
        self,
        bot: Bot | ChooseFn,
        url: str = DEFAULT_URL,
        *,
        name: str = "bot",
        margin: float | None = None,
        threaded: bool = True,
        reconnect: bool = True,
        on_result: Callable[[GameResult], None] | None = None,
        timeout: float = 10.0,
        on_status: Callable[[str], None] | None = None,
        account: str | None = None,
        accept_challenges: bool = False,
        on_challenge: Callable[[Frame], bool] | None = None,
    ) -> None:
        self.bot = as_bot(bot)
        self.account = account
        """An account token (``register``): games against other accounts are rated."""
        self.accept_challenges = accept_challenges
        self.on_challenge = on_challenge
        """Called with each ``challenged`` frame; True accepts, False declines (default:
        ``accept_challenges``)."""
        self.challenge_results: asyncio.Queue[GameResult | BaseException] = asyncio.Queue()
        self._challenge_tasks: set[asyncio.Task[None]] = set()
        self._challenging: asyncio.Future[str] | None = None
        self._challenge_id: str | None = None
        self._challenge_lock = asyncio.Lock()
        self.url, self.name, self.timeout = websocket_url(url), name, timeout
        self.margin, self.threaded, self.reconnect = margin, threaded, reconnect
        self.on_result = on_result
        self.on_status = on_status
        """Told what the runner waits for, in words ("waiting for an opponent ...")."""
        self.client: StackoClient | None = None
        """The current connection (a new one after each reconnection)."""
        self.welcome: Frame | None = None
        self.reconnects = 0
        """Connections resumed after a drop."""
        self._async = _is_async(self.bot)
        self._rooms: dict[str, _Room] = {}
        self._left: set[str] = set()
        self._room_waiters: dict[str, asyncio.Future[_Room]] = {}
        self._queue_lock = asyncio.Lock()
        self._pairing: asyncio.Future[str] | None = None
        self._pairing_ids: set[int] = set()
        self._queued = False
        self._pairing_game = "stacko"
        self._connected = asyncio.Event()
        self._failure: BaseException | None = None
        self._closing = False
        self._dispatcher: asyncio.Task[None] | None = None

    # -- the connection ---------------------------------------------------------------------

    async def connect(self) -> Frame:
        """Connect and say hello; returns the ``welcome`` frame. Raises ``OSError``,
        ``TimeoutError``, ``ServerError`` (a fatal error frame) or a ``websockets`` error."""
        client = StackoClient(self.url, self.name, timeout=self.timeout, account=self.account)
        try:
            self.welcome = await client.connect()
        except BaseException:
            await _quietly_close(client)
            raise
        self.client = client
        self._connected.set()
        self._dispatcher = asyncio.create_task(self._dispatch(), name="sdk-dispatch")
        return self.welcome

    async def close(self) -> None:
        """Close the connection and stop every game task (seats stay held for the grace
        period: ``leave`` happens only after a room's last game)."""
        self._closing = True
        if self.client is not None:
            await self.client.close()
        if self._dispatcher is not None:
            self._dispatcher.cancel()  # it may be between two connections
            with contextlib.suppress(asyncio.CancelledError):
                await self._dispatcher
        tasks = [room.task for room in self._rooms.values() if room.task is not None]
        tasks += list(self._challenge_tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for room in list(self._rooms.values()):
            self._drop_room(room, ConnectionLost("the runner was closed"))

    async def __aenter__(self) -> BotRunner:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def session(self) -> str | None:
        """The session token (it resumes the seats; keep it secret)."""
        return self.client.session if self.client is not None else None

    async def _client(self) -> StackoClient:
        """The live connection, waiting through a reconnection."""
        while True:
            if self._failure is not None:
                raise self._failure
            if self._connected.is_set() and self.client is not None:
                return self.client
            await self._connected.wait()

    # -- ways into games ------------------------------------------------------------------

    async def quick_match(self, game: str = "stacko", *, games: int = 1) -> list[GameResult]:
        """Play ``games`` quick matches of ``game``, one after the other."""
        results: list[GameResult] = []
        for _ in range(games):
            code = await self._queue(game)
            results += await self.play_room(code)
        return results

    async def join(self, code: str, *, games: int = 1) -> list[GameResult]:
        """Take the free seat of room ``code`` and play ``games`` games (rematches after the
        first). Raises ``ServerError`` (``unknown_room``, ``room_full`` ...)."""
        code = code.upper()
        while True:
            client = await self._client()
            try:
                await client.join(code)
            except Disconnected:
                continue  # on a new connection: either the join went through or it retries
            except ServerError as exc:
                # A retried join the resumed session already holds (the seat is ours).
                if not (exc.code == "already_in_room" and code in self._rooms):
                    raise
            return await self.play_room(code, games=games)

    async def create_room(
        self,
        game: str = "stacko",
        *,
        options: dict[str, Any] | None = None,
        public: bool = True,
        bot: str | None = None,
    ) -> str:
        """Create a room of ``game`` and take seat 0; returns its code. The game starts when
        someone joins, or at once with ``bot`` (a built-in bot's level, e.g. ``"strong"``,
        takes the other seat): ``play_room(code)`` plays it."""
        client = await self._client()
        joined = await client.create_room(game, public=public, options=options or {}, bot=bot)
        code = str(joined["room"])
        if bot is None:
            self._status(f"room {code}: waiting for an opponent (stacko-client --join {code})")
        return code

    def _status(self, text: str) -> None:
        if self.on_status is not None:
            self.on_status(text)

    async def create(
        self,
        game: str = "stacko",
        *,
        options: dict[str, Any] | None = None,
        public: bool = True,
        games: int = 1,
        on_room: Callable[[str], None] | None = None,
        bot: str | None = None,
    ) -> list[GameResult]:
        """Create a room, tell ``on_room`` its code (to share), and play ``games`` games in
        it (rematches after the first) once someone joins, or against the built-in ``bot``."""
        code = await self.create_room(game, options=options, public=public, bot=bot)
        if on_room is not None:
            on_room(code)
        return await self.play_room(code, games=games)

    async def play_room(self, code: str, *, games: int = 1) -> list[GameResult]:
        """Play ``games`` games in a room where this session holds a seat, asking for a
        rematch after each but the last; then leave the room. Fewer results come back if
        the opponent leaves or refuses (``no_rematch``)."""
        if games < 1:
            raise ValueError("games must be at least 1")
        room = await self._room(code)
        if room.task is not None:
            raise RuntimeError(f"room {code} is already being played")
        room.games_wanted = games
        room.task = asyncio.create_task(self._play(room), name=f"sdk-room-{code}")
        return await room.done

    async def _queue(self, game: str) -> str:
        """Wait in the quick-match queue (one wait at a time per session); the room code."""
        async with self._queue_lock:
            loop = asyncio.get_running_loop()
            pairing: asyncio.Future[str] = loop.create_future()
            self._pairing = pairing
            self._pairing_game = game
            try:
                while True:
                    client = await self._client()
                    try:
                        answer = await client.quick_match(game)
                    except Disconnected:
                        if pairing.done():
                            break
                        continue  # the queue belongs to the connection: queue again
                    except ServerError as exc:
                        if exc.code != "already_queued":  # a reconnection queued us already
                            raise
                        break
                    if answer["type"] == "joined":
                        return str(answer["room"])
                    self._queued = True
                    self._status(
                        f"waiting for an opponent for {game} ({answer['waiting']} waiting): "
                        "start another bot, or take a quick match in the browser"
                    )
                    break
                return await pairing
            finally:
                self._pairing, self._queued = None, False
                self._pairing_ids.clear()

    async def _room(self, code: str) -> _Room:
        """The room once its ``joined`` frame has come through the dispatcher."""
        if code in self._rooms:
            return self._rooms[code]
        if self._failure is not None:
            raise self._failure
        waiter = self._room_waiters.get(code)
        if waiter is None:
            waiter = self._room_waiters[code] = asyncio.get_running_loop().create_future()
        async with asyncio.timeout(self.timeout):
            return await waiter

    # -- frames in ------------------------------------------------------------------------

    async def _dispatch(self) -> None:
        """Route every frame to its room; reconnect when the connection drops."""
        while True:
            client = self.client
            assert client is not None
            async for frame in client:
                self._route(frame)
            if self._closing:
                return
            self._connected.clear()
            try:
                await self._reconnect(client)
            except ConnectionLost as exc:
                self._fail(exc)
                return

    def _route(self, frame: Frame) -> None:
        kind = frame.get("type")
        code = frame.get("room")
        if kind == "joined" and frame.get("role") == "player" and isinstance(code, str):
            self._on_joined(code, frame)
            return
        if kind == "challenged":
            self._on_challenged(frame)
            return
        if kind == "challenge_over" and frame.get("challenge") == self._challenge_id:
            waiting = self._challenging
            if waiting is not None and not waiting.done():
                waiting.set_exception(ChallengeRefused(str(frame.get("reason"))))
            return
        room = self._rooms.get(code) if isinstance(code, str) else None
        if room is None:
            if kind == "error" and frame.get("fatal"):
                log.warning("fatal error from the server: %s", frame.get("message"))
            return
        if kind == "state":
            room.latest_seq = max(room.latest_seq, int(frame["seq"]))
        if kind in ("state", "room", "error"):
            room.inbox.put_nowait((time.monotonic(), frame))

    def _on_joined(self, code: str, frame: Frame) -> None:
        if code in self._left:
            return
        room = self._rooms.get(code)
        if room is None:
            room = _Room(code, frame["game"], frame["seat"], frame["info"]["options"])
            self._rooms[code] = room
            # A pairing arrives unasked (id null), or answers a quick_match sent again.
            rid = frame.get("id")
            pairing = self._pairing
            if (
                pairing is not None
                and not pairing.done()
                and (rid is None or rid in self._pairing_ids)
            ):
                pairing.set_result(code)
            elif rid is None and self._challenging is not None and not self._challenging.done():
                self._challenging.set_result(code)  # our challenge was accepted
            waiter = self._room_waiters.pop(code, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(room)
        room.inbox.put_nowait((time.monotonic(), frame))

    # -- challenges -------------------------------------------------------------------------

    def _on_challenged(self, frame: Frame) -> None:
        decide = self.on_challenge
        accept = self.accept_challenges if decide is None else bool(decide(frame))
        task = asyncio.create_task(self._answer(frame, accept), name="sdk-challenge")
        self._challenge_tasks.add(task)
        task.add_done_callback(self._challenge_tasks.discard)

    async def _answer(self, frame: Frame, accept: bool) -> None:
        who = frame.get("name")
        kind = "accept_challenge" if accept else "decline_challenge"
        try:
            client = await self._client()
            answer = await client.request({"type": kind, "challenge": frame["challenge"]})
        except (ServerError, Disconnected) as exc:
            self._status(f"the challenge from {who} could not be answered: {exc}")
            return
        if not accept:
            self._status(f"declined a challenge from {who}")
            return
        code = str(answer["room"])
        self._status(f"accepted a challenge from {who}: room {code}")
        try:
            for result in await self.play_room(code):
                self.challenge_results.put_nowait(result)
        except Exception as exc:
            self.challenge_results.put_nowait(exc)

    async def challenge(
        self,
        to: str,
        game: str = "stacko",
        *,
        options: dict[str, Any] | None = None,
        rated: bool = False,
    ) -> list[GameResult]:
        """Challenge the account ``to`` and play the game if it accepts; raises
        ``ChallengeRefused`` (``declined``, ``expired``) or ``ServerError`` (``not_online``)."""
        async with self._challenge_lock:
            self._challenging = asyncio.get_running_loop().create_future()
            try:
                client = await self._client()
                sent = await client.request(
                    {"type": "challenge", "to": to, "game": game, "options": options or {},
                     "rated": rated}
                )  # fmt: skip
                self._challenge_id = str(sent["challenge"])
                self._status(f"challenged {sent['to']}; waiting for an answer")
                code = await self._challenging
            finally:
                self._challenging = None
                self._challenge_id = None
        return await self.play_room(code)

    async def serve_challenges(self, games: int = 0) -> list[GameResult]:
        """Stay online and play the challenges ``accept_challenges`` (or ``on_challenge``)
        takes: returns after ``games`` of them (0: never; cancel the task to stop)."""
        if self.on_challenge is None and not self.accept_challenges:
            raise ValueError("serve_challenges needs accept_challenges=True or on_challenge")
        name = (self.welcome or {}).get("name", self.name)
        self._status(f"online as {name}, waiting for challenges")
        results: list[GameResult] = []
        while games <= 0 or len(results) < games:
            got = await self.challenge_results.get()
            if isinstance(got, BaseException):
                log.warning("a challenge game failed: %s", got)
                continue
            results.append(got)
        return results

    # -- reconnection -----------------------------------------------------------------------

    async def _reconnect(self, old: StackoClient) -> None:
        """Resume the session on a new connection, or raise ``ConnectionLost``."""
        why = f"{old.close_code} {old.close_reason}".strip()
        if not self.reconnect:
            raise ConnectionLost(f"connection closed ({why}); reconnection is off")
        if old.close_reason == "session_replaced":
            raise ConnectionLost("another connection took over this session")
        log.info("connection closed (%s); resuming the session", why)
        self._status(f"connection closed ({why}); resuming the session")
        limits = (self.welcome or {}).get("limits", {})
        try:
            client = await old.reconnect(give_up_after=float(limits.get("reconnect_grace_s", 60.0)))
        except Exception as exc:
            raise ConnectionLost(f"could not reconnect to {self.url}: {exc}") from exc
        welcome = client.welcome
        assert welcome is not None
        held = set(welcome["rooms"])
        seated = any(not room.done.done() for room in self._rooms.values())
        if not welcome["resumed"] and seated:
            await _quietly_close(client)
            raise ConnectionLost("the server did not resume the session: its seats are gone")
        # (not resumed, no seat: a restart keeps no session without a seat and starts with
        # empty queues; nothing is lost, and a queued runner's new session queues again below)
        self.client, self.welcome = client, welcome
        self.reconnects += 1
        for room in list(self._rooms.values()):
            if room.code in held:
                room.acted_seq = -1  # the last move may have been lost: decide again
            elif not room.done.done():
                self._drop_room(room, ConnectionLost(f"room {room.code} is gone"))
        if self._queued and not (held - self._rooms.keys()):
            # Queueing belongs to the connection: queue again (a room we do not know yet
            # among the resumed ones is the pairing that happened while we were away).
            self._pairing_ids.add(
                await client.send({"type": "quick_match", "game": self._pairing_game})
            )
        self._connected.set()

    def _fail(self, exc: BaseException) -> None:
        """The session is lost: every waiter gets ``exc``."""
        self._failure = exc
        self._connected.set()  # wake ``_client`` waiters: they raise
        if self._pairing is not None and not self._pairing.done():
            self._pairing.set_exception(exc)
        for waiter in self._room_waiters.values():
            if not waiter.done():
                waiter.set_exception(exc)
        for room in list(self._rooms.values()):
            if room.task is not None:
                room.task.cancel()
            self._drop_room(room, exc)

    def _drop_room(self, room: _Room, exc: BaseException) -> None:
        if not room.done.done():
            room.done.set_exception(exc)
            room.done.exception()  # retrieved: a room nobody plays must not warn
        if room.worker is not None:
            room.worker.stop()
            room.worker = None
        self._rooms.pop(room.code, None)

    # -- playing one room -------------------------------------------------------------------

    async def _play(self, room: _Room) -> None:
        """The room's task: its failure goes to whoever waits for its results."""
        try:
            await self._play_games(room)
        except Exception as exc:
            self._drop_room(room, exc)

    async def _play_games(self, room: _Room) -> None:
        if self.threaded and not self._async:
            room.worker = _Worker(f"sdk-bot-{room.code}")
        while True:
            arrived, frame = await room.inbox.get()
            kind = frame["type"]
            if kind == "joined":  # a rematch seats us anew (the seats swap), or a resume
                room.seat, room.options = frame["seat"], frame["info"]["options"]
            elif kind == "state":
                if await self._on_state(room, frame, arrived):
                    break
            elif kind == "room" and room.rematch_asked and len(frame["info"]["players"]) < 2:
                log.info("room %s: the opponent left; no rematch", room.code)
                break
            elif kind == "error":
                if frame["code"] == "no_rematch" and room.rematch_asked:
                    log.info("room %s: no rematch (%s)", room.code, frame["message"])
                    break
                log.warning("room %s: %s (%s)", room.code, frame["message"], frame["code"])
        await self._finish(room)

    async def _on_state(self, room: _Room, frame: Frame, arrived: float) -> bool:
        """Observe, decide and move; True when the room's last game is over."""
        if room.observe_error is not None:
            raise BotError(f"observe failed in room {room.code}") from room.observe_error
        view = frame["view"]
        legal = frame["legal"] or []
        clock = frame.get("clock_ms")
        deadline = None
        if legal and clock is not None:
            margin = self.margin if self.margin is not None else min(1.0, max(0.2, clock / 5000))
            deadline = arrived + clock / 1000 - margin
        state = State(
            room.code, view["game"], room.seat, view, legal, room.options,
            int(frame["seq"]), deadline, frame,
        )  # fmt: skip
        if not room.in_game and view["outcome"] is None:
            room.in_game = True
            self._call(room, lambda: self.bot.new_game(state))
        self._observe(room, state)
        if view["outcome"] is not None:
            return await self._game_over(room, state)
        room.over = room.rematch_asked = False
        if not legal or state.seq <= room.acted_seq or state.seq < room.latest_seq:
            return False  # not our turn, already answered, or overtaken by a newer state
        move, fell_back = await self._decide(room, state)
        if state.seq < room.latest_seq:
            return False  # the game moved on while the bot thought (a clock expiry)
        room.acted_seq = state.seq
        room.fallbacks += fell_back
        await self._send_move(room, state, move)
        return False

    def _observe(self, room: _Room, state: State) -> None:
        self._call(room, lambda: self.bot.observe(state))

    def _call(self, room: _Room, hook: Callable[[], None]) -> None:
        """A bot hook in the room's order (its thread, if it has one); a failure stops the
        room at its next state."""
        if room.worker is None:
            hook()
            return
        future = room.worker.submit(hook)

        def check(f: asyncio.Future[None]) -> None:
            if not f.cancelled() and f.exception() is not None:
                room.observe_error = f.exception()

        future.add_done_callback(check)

    async def _decide(self, room: _Room, state: State) -> tuple[Move, bool]:
        """The bot's move, or its fallback when ``state.deadline`` comes first."""
        budget = state.time_left()
        try:
            if self._async:
                chosen: Any = self.bot.choose(state)
                move = await (chosen if budget is None else asyncio.wait_for(chosen, budget))
            elif room.worker is None:
                move = self.bot.choose(state)
            else:
                future = room.worker.submit(lambda: self.bot.choose(state))
                try:
                    move = await (
                        future
                        if budget is None
                        else asyncio.wait_for(asyncio.shield(future), budget)
                    )
                except TimeoutError:
                    future.add_done_callback(_consume)
                    room.late = future
                    raise
        except TimeoutError:
            move = self.bot.fallback(state)
            if move not in state.legal:
                log.warning("room %s: fallback %r is not legal", room.code, move)
                move = default_fallback(state)
            log.info("room %s ply %d: out of time, playing %s", room.code, state.ply, move)
            return move, True
        except Exception as exc:
            raise BotError(
                f"{self.bot.name} failed in room {room.code} at ply {state.ply}"
            ) from exc
        if move not in state.legal:
            raise BotError(
                f"{self.bot.name} chose {move!r} in room {room.code} at ply {state.ply}, "
                f"not one of the legal moves {state.legal}"
            )
        return dict(move), False

    async def _send_move(self, room: _Room, state: State, move: Move) -> None:
        try:
            client = await self._client()
            room.acted_seq = state.seq  # after a reconnection, which may have reset it
            await client.move(room.code, state.ply, move)
            room.moves += 1
        except ServerError as exc:
            if exc.code == "stale_ply":
                room.stale += 1  # the current state follows in the stream: decide on that
            elif exc.code != "game_over":  # a resignation or forfeit came first
                log.warning("room %s: move %s refused: %s", room.code, move, exc)
        except (Disconnected, TimeoutError):
            pass  # a resumed session gets the current state again, and we decide on it

    async def _game_over(self, room: _Room, state: State) -> bool:
        if room.over:
            return False  # the final state again (after a resume)
        room.over, room.in_game = True, False
        outcome = state.view["outcome"]
        result = GameResult(
            room.code, state.game, room.seat, outcome["termination"], outcome["winner"],
            (outcome["scores"][0], outcome["scores"][1]), state.ply,
            room.moves, room.fallbacks, room.stale, state.frame.get("game_id"),
            bool(state.frame.get("rated")),
        )  # fmt: skip
        room.moves = room.fallbacks = room.stale = 0
        room.results.append(result)
        if room.worker is None:
            self.bot.game_over(result)
        elif room.late is not None and not room.late.done():
            # Not awaited: the thread is still in a late ``choose``, maybe for good.
            room.worker.submit(lambda: self.bot.game_over(result)).add_done_callback(_consume)
        else:  # after every ``observe`` before it: the bot is up to date when results return
            try:
                await room.worker.submit(lambda: self.bot.game_over(result))
            except Exception as exc:
                raise BotError(f"{self.bot.name}.game_over failed in room {room.code}") from exc
            if room.observe_error is not None:
                raise BotError(f"observe failed in room {room.code}") from room.observe_error
        if self.on_result is not None:
            self.on_result(result)
        if len(room.results) >= room.games_wanted:
            return True
        client = await self._client()
        room.rematch_asked = True
        await client.rematch(room.code)
        return False

    async def _finish(self, room: _Room) -> None:
        """The room's games are done: leave it (freeing the seat) and hand the results on."""
        self._left.add(room.code)
        if room.worker is not None:
            room.worker.stop()
            room.worker = None
        self._rooms.pop(room.code, None)
        with contextlib.suppress(ServerError, Disconnected, TimeoutError, ConnectionLost):
            client = await self._client()
            await client.leave(room.code)
        if not room.done.done():
            room.done.set_result(list(room.results))


async def _quietly_close(client: StackoClient) -> None:
    with contextlib.suppress(Exception):
        await client.close()


# -- one call ---------------------------------------------------------------------------------


async def play(
    player: Bot | ChooseFn,
    /,
    url: str = DEFAULT_URL,
    *,
    name: str = "bot",
    game: str = "stacko",
    join: str | None = None,
    create: bool = False,
    bot: str | None = None,
    options: dict[str, Any] | None = None,
    public: bool = True,
    games: int = 1,
    on_room: Callable[[str], None] | None = None,
    on_result: Callable[[GameResult], None] | None = None,
    on_status: Callable[[str], None] | None = None,
    margin: float | None = None,
    threaded: bool = True,
    account: str | None = None,
    accept_challenges: bool = False,
    on_challenge: Callable[[Frame], bool] | None = None,
) -> list[GameResult]:
    """Connect, play ``games`` games and return their results: in room ``join``, in a room
    of its own (``create``, whose code goes to ``on_room``), against a built-in bot
    (``bot="strong"``: a room of its own where that bot takes the other seat), or by
    quick match (default). ``on_status`` hears what it waits for ("waiting for an
    opponent ..."). ``account``: an account token (``clients.client.register``), so games
    against other accounts are rated. ``accept_challenges=True`` (or ``on_challenge``)
    stays online playing the challenges it accepts: ``games`` of them (0: until stopped)."""
    if bot is not None and join is not None:
        raise ValueError("bot= creates a room with a built-in bot; it cannot go with join=")
    async with BotRunner(
        player, url, name=name, margin=margin, threaded=threaded, on_result=on_result,
        on_status=on_status, account=account, accept_challenges=accept_challenges,
        on_challenge=on_challenge,
    ) as runner:  # fmt: skip
        if accept_challenges or on_challenge is not None:
            return await runner.serve_challenges(games)
        if join is not None:
            return await runner.join(join, games=games)
        if create or bot is not None:
            return await runner.create(
                game, options=options, public=public, games=games, on_room=on_room, bot=bot
            )
        return await runner.quick_match(game, games=games)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run(player: Bot | ChooseFn, /, url: str = DEFAULT_URL, **kwargs: Any) -> list[GameResult]:
    """``play`` for scripts: runs its own event loop (``asyncio.run``) and, unless
    ``on_status`` says otherwise, prints what it waits for on stderr ("waiting for an
    opponent for stacko ..."), so a bot run alone does not sit in silence."""
    kwargs.setdefault("on_status", _say)
    return asyncio.run(play(player, url, **kwargs))
