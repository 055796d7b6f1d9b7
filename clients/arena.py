"""The arena: bots play each other, in-process on the engine or through a server, and get rated.

Library and CLI (``python -m clients.arena --help``; ``main(argv)`` is the console script
``stacko-arena``).

- **Duplicate deals.** Each seeded deal is played twice with the seats swapped. The game's
  RNG is a ``DuplicateRandom``: every full deal (a shuffle of all the bricks) comes from a
  stream of its own, so both games of a pair get the same towers and draw stack in every
  round, whatever happened before; reshuffles come from a second stream.
- **Reports.** Per pair: wins/draws/losses, the score rate with a 95% interval (over deals,
  each deal's two games together), rounds finished by each side, and how seat 0 fared
  against seat 1 (seat 0 starts round 1, seat 1 round 2). Per bot: solitaire turns to
  finish a tower (``solitaire_turns``; Stacko only) and a Bradley-Terry rating with a 95%
  bootstrap interval (fitted with ``choix``), as a text table and a PNG.
- **Deterministic** for a given ``--seed``: each game's RNG and each bot's RNG are seeded
  from the seed, the pair and the deal, so the worker count does not change the results.
- **Live** (``--server``, ``run_live_arena``): the same games through a WebSocket server,
  each bot on its own ``StackoClient`` connection, fed the state frames' views converted
  back to engine views (``clients.wire_views``). On the arena's own in-process server
  (``--server local``) the deals are still the duplicate deals (``LocalDealer``) and the
  results equal the in-process ones; a server at a URL deals with its own RNG, so there the
  two games of a deal differ and runs do not repeat (the report says so).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import random
import sys
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from stacko.clients.bots.base import checked_choice, observe_view, reset_bot
from stacko.clients.bots.registry import UnknownBotError, levels, make_bot, parse_spec

T = TypeVar("T")

ELO_PER_NAT = 400.0 / math.log(10.0)
"""Bradley-Terry log-strengths to the Elo scale (a 400-point gap is 10:1 odds)."""

# -- games and their randomness -------------------------------------------------------------


class DuplicateRandom(random.Random):
    """A game RNG that deals the same way however the game went.

    A shuffle of a list of ``deal_size`` items (a Stacko deal: all the bricks) draws from
    the deal stream, anything else (a reshuffle of the discard pile) from this generator
    itself. Two games with the same seed thus get the same deal in every round, even when
    one of them reshuffled more often.
    """

    def __init__(self, seed: str, deal_size: int) -> None:
        super().__init__(f"{seed}:reshuffles")
        self.deal_stream = random.Random(f"{seed}:deals")
        self.deal_size = deal_size

    def shuffle(self, x: Any) -> None:
        if len(x) == self.deal_size:
            self.deal_stream.shuffle(x)
        else:
            super().shuffle(x)


def new_game(game: str, rng: random.Random, options: Any = None) -> Any:
    """A new game of ``game`` from the engine's registry (Stakko looked up lazily)."""
    from stacko.engine.games import GAMES

    spec = GAMES.get(game)
    if spec is not None:
        return spec.new_game(options, rng)
    if game == "stakko":
        from stacko.engine.stakko import Stakko

        return Stakko(options, rng=rng)
    raise UnknownBotError(f"no game {game!r} (known: {', '.join(sorted(GAMES))})")


def deal_size(game: str, options: Any = None) -> int:
    if game == "stacko":
        from stacko.engine.stacko import StackoOptions

        return (options or StackoOptions()).bricks
    return -1  # no deal to keep: a game without hidden cards uses the plain stream


# -- one game ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Entrant:
    """A bot in the arena: ``game:level`` and the label it is reported under."""

    game: str
    level: str

    @property
    def label(self) -> str:
        return self.level

    def make(self, rng: random.Random) -> Any:
        return make_bot(self.game, self.level, rng)


@dataclass(frozen=True, slots=True)
class GameRecord:
    """One finished game, seats as played (``seats[s]``: index of the entrant in seat s)."""

    pair: int
    deal: int
    swapped: bool
    seats: tuple[int, int]
    winner: int | None
    """Winning seat, ``None`` for a draw."""
    scores: tuple[int, int]
    finishers: tuple[int | None, ...]
    """Per round: the seat that finished its tower, ``None`` when the turn cap ended it."""
    plies: int


MAX_PLIES = 100_000
"""A safety net only: Stacko's turn cap ends every round long before."""


def play_game(
    game: str,
    entrants: tuple[Entrant, Entrant],
    seed: str,
    options: Any = None,
) -> tuple[Any, int]:
    """Play one game in-process; returns the final state and the number of plies.

    Each bot sees only its seat's views: ``choose`` on its turn, ``observe`` for every other
    position (what the SDK will feed it from state frames).
    """
    rng = DuplicateRandom(seed, deal_size(game, options))
    state = new_game(game, rng, options)
    bots = [
        e.make(random.Random(f"{seed}:bot:{seat}:{e.level}")) for seat, e in enumerate(entrants)
    ]
    for bot in bots:
        reset_bot(bot)
    plies = 0
    while state.outcome() is None:
        seat = state.to_move
        other = 1 - seat
        observe_view(bots[other], state.view(other))
        move = checked_choice(bots[seat], state.view(seat), state.legal_moves())
        state.apply(move, seat)
        plies += 1
        if plies > MAX_PLIES:
            raise RuntimeError(f"game {seed} did not end after {MAX_PLIES} plies")
    for seat, bot in enumerate(bots):
        observe_view(bot, state.view(seat))
    return state, plies


def _record(
    state: Any, pair: int, deal: int, swapped: bool, seats: tuple[int, int], plies: int
) -> GameRecord:
    outcome = state.outcome()
    return _make_record(outcome, getattr(state, "results", ()), pair, deal, swapped, seats, plies)


def _make_record(
    outcome: Any,
    results: Sequence[Any],
    pair: int,
    deal: int,
    swapped: bool,
    seats: tuple[int, int],
    plies: int,
) -> GameRecord:
    return GameRecord(
        pair=pair,
        deal=deal,
        swapped=swapped,
        seats=seats,
        winner=outcome.winner,
        scores=tuple(outcome.scores),
        finishers=tuple(r.finisher for r in results),
        plies=plies,
    )


class GameRunner(Protocol):
    """Plays the two games of one duplicate deal (``InProcessRunner``; ``LiveRunner`` is
    its asynchronous twin, playing through a server)."""

    def play_deal(self, task: DealTask) -> list[GameRecord]: ...


@dataclass(frozen=True, slots=True)
class DealTask:
    game: str
    entrants: tuple[Entrant, ...]
    pair: int
    i: int
    j: int
    deal: int
    seed: int


class InProcessRunner:
    """Runs both games of a deal on the engine in this process."""

    def play_deal(self, task: DealTask) -> list[GameRecord]:
        out = []
        a, b = task.entrants[task.i], task.entrants[task.j]
        for swapped in (False, True):
            seats = (task.j, task.i) if swapped else (task.i, task.j)
            pair = (b, a) if swapped else (a, b)
            seed = f"{task.seed}:{task.deal}"  # the same deal for both games, and every pair
            state, plies = play_game(task.game, pair, seed)
            out.append(_record(state, task.pair, task.deal, swapped, seats, plies))
        return out


def _run_deal(task: DealTask) -> list[GameRecord]:
    return InProcessRunner().play_deal(task)


# -- live: through a WebSocket server ---------------------------------------------------------

LOCAL = "local"
"""``--server local``: start a server in this process, on 127.0.0.1 and a free port."""

LOCAL_RATE, LOCAL_BURST = 1000.0, 2000
"""The local server's rate limit, lifted: a whole game is about 220 frames per player."""


class LiveError(RuntimeError):
    """A live game went wrong: an error frame, a closed connection, a timeout."""


class LocalDealer:
    """The ``rng_factory`` of the arena's own in-process server: each game it starts gets
    the ``DuplicateRandom`` the arena set for it, so live games are dealt exactly like the
    in-process ones. A remote server deals with its own RNG instead (no duplicate deals).

    ``LiveRunner`` sets ``next`` under ``lock`` just before the join that starts a game (the
    server starts it while handling that join, before it answers), and checks it was taken.
    """

    def __init__(self, seed: int) -> None:
        self.next: random.Random | None = None
        self.fallback = random.Random(f"{seed}:server")
        self.lock = asyncio.Lock()

    def __call__(self) -> random.Random:
        rng, self.next = self.next, None
        return rng if rng is not None else random.Random(self.fallback.getrandbits(64))


class LiveRunner:
    """Plays the two games of a deal through a server at ``url``, each bot on its own
    connection (``clients.client.StackoClient``), seeing only what its seat's state frames
    carry, converted back to engine views by ``clients.wire_views``.

    Per game: the bot of seat 0 creates a private room (default options, no clock) and sits
    in seat 0, the other bot joins, and each answers the state frames that offer it moves
    (``legal``) with the frame's ``ply``; every other state frame goes to its ``observe``.
    With a ``dealer`` (the arena's own server) the deals are the arena's duplicate deals.
    """

    def __init__(
        self, url: str, dealer: LocalDealer | None = None, game_timeout: float = 600.0
    ) -> None:
        self.url = url
        self.dealer = dealer
        self.game_timeout = game_timeout

    async def play_deal(self, task: DealTask) -> list[GameRecord]:
        a, b = task.entrants[task.i], task.entrants[task.j]
        seed = f"{task.seed}:{task.deal}"
        played = await _all_or_none(
            self.play_game(task.game, (a, b), seed), self.play_game(task.game, (b, a), seed)
        )
        out = []
        for swapped, (outcome, results, plies) in zip((False, True), played, strict=True):
            seats = (task.j, task.i) if swapped else (task.i, task.j)
            out.append(_make_record(outcome, results, task.pair, task.deal, swapped, seats, plies))
        return out

    async def play_game(
        self, game: str, entrants: tuple[Entrant, Entrant], seed: str
    ) -> tuple[Any, tuple[Any, ...], int]:
        """One game through the server: (outcome, finished rounds, plies played)."""
        from stacko.clients.client import StackoClient

        bots = [
            e.make(random.Random(f"{seed}:bot:{seat}:{e.level}")) for seat, e in enumerate(entrants)
        ]
        for bot in bots:
            reset_bot(bot)
        plies = [0]
        async with contextlib.AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(
                    StackoClient(self.url, name=f"{e.label} (arena)", timeout=30.0)
                )
                for e in entrants
            ]
            async with asyncio.timeout(self.game_timeout):
                joined = await clients[0].create_room(game, public=False, seat=0)
                room = joined["room"]
                if self.dealer is None:
                    await clients[1].join(room)
                else:
                    opts = _room_options(game, joined)
                    async with self.dealer.lock:
                        self.dealer.next = DuplicateRandom(seed, deal_size(game, opts))
                        await clients[1].join(room)
                        if self.dealer.next is not None:
                            raise LiveError(f"room {room}: the game did not start on join")
                views = await _all_or_none(
                    *(_play_seat(clients[s], joined, room, s, bots[s], game, plies) for s in (0, 1))
                )
        final = views[0]
        return final.outcome, tuple(getattr(final, "results", ())), plies[0]


async def _all_or_none(*coros: Coroutine[Any, Any, T]) -> list[T]:
    """``asyncio.gather``, but the first failure cancels the others (no orphan tasks)."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for t in tasks:
            t.cancel()


def _room_options(game: str, joined: dict[str, Any]) -> Any:
    from stacko.clients.wire_views import options_from_info

    return options_from_info(game, joined["info"])


async def _play_seat(
    client: Any,
    joined: dict[str, Any],
    room: str,
    seat: int,
    bot: Any,
    game: str,
    plies: list[int],
) -> Any:
    """One bot's side of a live game, until the state frame with the outcome; its view."""
    from stacko.clients.wire_views import move_to_wire, moves_from_wire, view_from_wire

    options = _room_options(game, joined)
    moved_at = -1
    async for frame in client:
        kind = frame.get("type")
        if kind == "error":
            raise LiveError(
                f"room {room}, seat {seat}: {frame.get('code')}: {frame.get('message')}"
            )
        if kind != "state" or frame.get("room") != room:
            continue
        view = view_from_wire(game, frame["view"], options)
        if view.seat != seat:
            raise LiveError(f"room {room}: a frame for seat {view.seat} reached seat {seat}")
        legal = frame.get("legal")
        if legal and view.ply > moved_at:
            move = checked_choice(bot, view, moves_from_wire(game, legal))
            moved_at = view.ply
            plies[0] += 1
            await client.send(
                {"type": "move", "room": room, "ply": view.ply, "move": move_to_wire(game, move)}
            )
        else:
            observe_view(bot, view)
        if view.outcome is not None:
            return view
    raise LiveError(
        f"room {room}, seat {seat}: connection closed ({client.close_code}"
        f" {client.close_reason}) before the game ended"
    )


async def _run_live(
    tasks: list[DealTask],
    server: str,
    *,
    parallel: int,
    progress: bool,
    deadline: float | None,
    game_timeout: float,
) -> tuple[list[list[GameRecord] | None], list[str], str]:
    """Every deal of ``tasks`` through ``server`` (a URL, or ``LOCAL``), up to ``parallel``
    deals at a time; per task its records (``None`` if not played or failed), the failures,
    and the URL played on."""
    from tqdm import tqdm  # type: ignore[import-untyped,unused-ignore]

    from stacko.clients.client import Disconnected, ServerError

    results: list[list[GameRecord] | None] = [None] * len(tasks)
    failures: list[str] = []
    async with contextlib.AsyncExitStack() as stack:
        dealer = None
        url = server
        if server == LOCAL:
            from stacko.server.app import Server
            from stacko.server.config import ServerConfig

            dealer = LocalDealer(tasks[0].seed if tasks else 0)
            config = ServerConfig(
                host="127.0.0.1", port=0, rate_per_second=LOCAL_RATE, burst=LOCAL_BURST,
                # two connections per game, all from loopback: no per-address hello limit
                hello_rate_per_ip=1e9, hello_burst_per_ip=10**9,
            )  # fmt: skip
            srv = await stack.enter_async_context(Server(config, rng_factory=dealer))
            url = srv.url
        runner = LiveRunner(url, dealer, game_timeout)
        bar = stack.enter_context(
            tqdm(
                total=len(tasks),
                desc="live deals",
                disable=not progress,
                unit="deal",
                file=sys.stderr,
            )
        )
        queue = iter(enumerate(tasks))

        async def worker() -> None:
            for k, task in queue:
                if deadline is not None and time.monotonic() > deadline:
                    return
                try:
                    results[k] = await runner.play_deal(task)
                except (LiveError, ServerError, Disconnected, TimeoutError, OSError) as exc:
                    failures.append(f"pair {task.pair} deal {task.deal}: {exc!r}")
                    if len(failures) >= MAX_LIVE_FAILURES:
                        return
                bar.update()

        await asyncio.gather(*(worker() for _ in range(max(1, parallel))))
    return results, failures, url


MAX_LIVE_FAILURES = 5
"""A live run stops after this many failed deals (a server that refuses us)."""


# -- solitaire ----------------------------------------------------------------------------------


SOLITAIRE_DEALS = ("normal", "one-tower")


def solitaire_turns(bot: Any, seed: str, cap: int = 500, deal: str = "normal") -> int:
    """Turns ``bot`` needs to finish one Stacko tower alone; ``cap`` if it never does.

    The bot plays seat 0 and after each of its turns the turn comes straight back to it
    (the opponent never acts, so the open brick is always the bot's own last discard). A
    turn is a take, or a draw with its place or pass. No turn cap. 40 bricks, 10 slots.

    ``deal="normal"``: a normal one-round deal, so 10 of the 40 bricks sit in the absent
    opponent's tower, out of play, and 20 cycle through the stack and the discard pile.
    ``deal="one-tower"``: only the bot's tower is dealt and the other 30 bricks cycle, as in
    solitaire Rack-O (the setting of the published TD-learned player's 8.88 turns); the
    opponent's slots show as hidden and empty, and its 10 bricks are shuffled into the stack.
    """
    from stacko.engine.stacko import Phase, Stacko, StackoOptions

    if deal not in SOLITAIRE_DEALS:
        raise ValueError(f"deal must be one of {SOLITAIRE_DEALS}, not {deal!r}")
    rng = DuplicateRandom(seed, 40)
    state = Stacko(StackoOptions(rounds=1, turn_cap=None), rng=rng)
    if deal == "one-tower":
        # No second tower: its bricks join the stack (shuffled in), and its slots hold no
        # brick. They are never shown to seat 0 (hidden slots) and never played.
        state.stack.extend(state.towers[1])
        rng.shuffle(state.stack)
        state.towers[1] = [0] * len(state.towers[1])
    reset_bot(bot)
    turns = 0
    while state.outcome() is None and turns < cap:
        if state.to_move != 0:
            # The engine has no "skip a turn": hand the turn straight back to seat 0.
            state._to_move = 0
        view = state.view(0)
        state.apply(checked_choice(bot, view, view.legal_moves()), 0)
        if state.phase is not Phase.DRAWN:
            turns += 1
    return turns


@dataclass(frozen=True, slots=True)
class SolitaireTask:
    entrant: Entrant
    index: int
    seed: int
    deal: str = "normal"


def _run_solitaire(task: SolitaireTask) -> tuple[str, int]:
    rng = random.Random(f"{task.seed}:solitaire-bot:{task.index}:{task.entrant.level}")
    bot = task.entrant.make(rng)
    seed = f"{task.seed}:solitaire:{task.index}"
    return task.entrant.label, solitaire_turns(bot, seed, deal=task.deal)


def run_solitaire(
    entrants: Sequence[Entrant],
    towers: int,
    seed: int,
    workers: int = 1,
    progress: bool = False,
    deadline: float | None = None,
    deal: str = "normal",
) -> dict[str, list[int]]:
    """``solitaire_turns`` for ``towers`` deals per bot (the same deals for every bot),
    by label; fewer if ``deadline`` (a ``time.monotonic()`` value) passes first."""
    tasks = [SolitaireTask(e, k, seed, deal) for e in entrants for k in range(towers)]
    out: dict[str, list[int]] = {e.label: [] for e in entrants}
    for label, turns in _map(_run_solitaire, tasks, workers, "solitaire", progress, deadline):
        out[label].append(turns)
    return out


def mean_ci(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its normal 95% interval."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    mean = sum(values) / n
    if n == 1:
        return mean, math.nan
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, 1.96 * math.sqrt(var / n)


# -- running many games -----------------------------------------------------------------------


def _map(
    fn: Callable[[Any], Any],
    tasks: list[Any],
    workers: int,
    desc: str,
    progress: bool,
    deadline: float | None,
) -> Iterator[Any]:
    """Ordered map over ``tasks`` with up to 2 processes, a tqdm bar and a time limit."""
    from tqdm import tqdm  # type: ignore[import-untyped,unused-ignore]

    bar = tqdm(
        total=len(tasks),
        desc=desc,
        disable=not progress,
        unit="task",
        file=sys.stderr,
        smoothing=0.05,
    )
    try:
        if workers <= 1 or len(tasks) < 4:
            for task in tasks:
                if deadline is not None and time.monotonic() > deadline:
                    break
                yield fn(task)
                bar.update()
            return
        import multiprocessing

        ctx = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
        with ctx.Pool(min(workers, 2)) as pool:
            for result in pool.imap(fn, tasks, chunksize=max(1, min(16, len(tasks) // 64))):
                yield result
                bar.update()
                if deadline is not None and time.monotonic() > deadline:
                    pool.terminate()
                    break
    finally:
        bar.close()


@dataclass
class ArenaResult:
    game: str
    seed: int
    entrants: list[Entrant]
    deals_asked: int
    records: list[GameRecord] = field(default_factory=list)
    solitaire: dict[str, list[int]] = field(default_factory=dict)
    solitaire_cap: int = 500
    complete: bool = True
    seconds: float = 0.0
    server: str | None = None
    """The server the games went through (``None``: in-process, on the engine)."""
    duplicate: bool = True
    """Both games of a deal had the same deal (false on a remote server: it deals itself)."""
    failures: list[str] = field(default_factory=list)
    """Live deals that failed (left out of ``records``)."""


def _schedule(
    entrants: Sequence[Entrant], deals: int, seed: int, pairs: Sequence[tuple[int, int]] | None
) -> tuple[ArenaResult, list[DealTask]]:
    if not entrants:
        raise ValueError("no bots")
    game = entrants[0].game
    if any(e.game != game for e in entrants):
        raise ValueError("all bots of an arena play the same game")
    if len({e.label for e in entrants}) != len(entrants):
        raise ValueError("each bot may enter only once")
    result = ArenaResult(game, seed, list(entrants), deals)
    if pairs is None:
        pairs = [(i, j) for i in range(len(entrants)) for j in range(i + 1, len(entrants))]
    ents = tuple(entrants)
    tasks = [
        DealTask(game, ents, p, i, j, d, seed)
        for p, (i, j) in enumerate(pairs)
        for d in range(deals)
    ]
    return result, tasks


def run_arena(
    entrants: Sequence[Entrant],
    deals: int,
    seed: int,
    *,
    solitaire: int = 0,
    workers: int = 1,
    progress: bool = False,
    time_limit: float | None = None,
    pairs: Sequence[tuple[int, int]] | None = None,
    server: str | None = None,
    parallel: int = 1,
    game_timeout: float = 600.0,
) -> ArenaResult:
    """A round robin (every pair, or ``pairs``) of ``deals`` duplicate deals each, plus
    ``solitaire`` towers per bot. Stops scheduling at ``time_limit`` seconds (the result is
    then marked incomplete).

    With ``server`` (a ``ws://`` URL, or ``LOCAL``) the games are played through a server
    instead: see ``run_live_arena`` (no solitaire there; ``workers`` unused)."""
    if server is not None:
        if solitaire:
            raise ValueError("solitaire towers are played in-process only (no opponent moves)")
        return asyncio.run(
            run_live_arena(
                entrants,
                deals,
                seed,
                server,
                progress=progress,
                time_limit=time_limit,
                pairs=pairs,
                parallel=parallel,
                game_timeout=game_timeout,
            )
        )
    start = time.monotonic()
    deadline = None if time_limit is None else start + time_limit
    result, tasks = _schedule(entrants, deals, seed, pairs)
    for games in _map(_run_deal, tasks, workers, "deals (2 games each)", progress, deadline):
        result.records.extend(games)
    if len(result.records) < 2 * len(tasks):
        result.complete = False
    if solitaire and result.game == "stacko":
        result.solitaire = run_solitaire(entrants, solitaire, seed, workers, progress, deadline)
        if sum(len(v) for v in result.solitaire.values()) < solitaire * len(entrants):
            result.complete = False
    result.seconds = time.monotonic() - start
    return result


async def run_live_arena(
    entrants: Sequence[Entrant],
    deals: int,
    seed: int,
    server: str,
    *,
    progress: bool = False,
    time_limit: float | None = None,
    pairs: Sequence[tuple[int, int]] | None = None,
    parallel: int = 1,
    game_timeout: float = 600.0,
) -> ArenaResult:
    """``run_arena`` through a WebSocket server: each bot its own connection (``LiveRunner``).

    ``server`` is a URL (``ws://host:port/``), or ``LOCAL`` to start a server in this process
    on 127.0.0.1 (free port, rate limit lifted). Only the local server can deal the arena's
    duplicate deals (``LocalDealer``): its results equal the in-process ones for the same
    seed. A remote server deals each game with its own RNG, so both games of a "deal" get
    different bricks and a rerun gives different results; the result says so (``duplicate``
    false). ``parallel`` deals are played at once (2 games, 4 connections each). A failed
    deal is left out and listed in ``failures`` (the result is then incomplete)."""
    start = time.monotonic()
    deadline = None if time_limit is None else start + time_limit
    result, tasks = _schedule(entrants, deals, seed, pairs)
    played, failures, url = await _run_live(
        tasks,
        server,
        parallel=parallel,
        progress=progress,
        deadline=deadline,
        game_timeout=game_timeout,
    )
    for games in played:
        if games is not None:
            result.records.extend(games)
    result.failures = failures
    result.server = url
    result.duplicate = server == LOCAL
    result.complete = len(result.records) == 2 * len(tasks)
    result.seconds = time.monotonic() - start
    return result


# -- statistics -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PairStats:
    a: str
    b: str
    games: int
    wins: int
    draws: int
    losses: int
    """From ``a``'s side."""
    score: float
    """``a``'s score rate: (wins + draws/2) / games."""
    score_ci: float
    rounds_a: int
    rounds_b: int
    rounds_capped: int
    seat0_wins: int
    seat1_wins: int
    seat_draws: int


def pair_stats(result: ArenaResult) -> list[PairStats]:
    by_pair: dict[int, list[GameRecord]] = {}
    for rec in result.records:
        by_pair.setdefault(rec.pair, []).append(rec)
    out = []
    for _pair, recs in sorted(by_pair.items()):
        first = recs[0]
        i, j = (first.seats[1], first.seats[0]) if first.swapped else first.seats
        wins = draws = losses = ra = rb = rc = s0 = s1 = sd = 0
        per_deal: dict[int, float] = {}
        for rec in recs:
            a_seat = rec.seats.index(i)
            if rec.winner is None:
                draws += 1
                sd += 1
                pts = 0.5
            elif rec.winner == a_seat:
                wins += 1
                pts = 1.0
            else:
                losses += 1
                pts = 0.0
            if rec.winner == 0:
                s0 += 1
            elif rec.winner == 1:
                s1 += 1
            per_deal[rec.deal] = per_deal.get(rec.deal, 0.0) + pts / 2
            for f in rec.finishers:
                if f is None:
                    rc += 1
                elif f == a_seat:
                    ra += 1
                else:
                    rb += 1
        n = len(recs)
        _, ci = mean_ci(list(per_deal.values()))
        out.append(
            PairStats(
                result.entrants[i].label,
                result.entrants[j].label,
                n,
                wins,
                draws,
                losses,
                (wins + draws / 2) / n,
                ci,
                ra,
                rb,
                rc,
                s0,
                s1,
                sd,
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class Rating:
    label: str
    elo: float
    low: float
    high: float
    games: int


def _comparisons(result: ArenaResult, recs: Sequence[GameRecord]) -> Any:
    import numpy as np

    n = len(result.entrants)
    comp = np.zeros((n, n))
    for rec in recs:
        x, y = rec.seats
        if rec.winner is None:
            comp[x, y] += 0.5
            comp[y, x] += 0.5
        elif rec.winner == 0:
            comp[x, y] += 1
        else:
            comp[y, x] += 1
    return comp


def _fit_bt(comp: Any, alpha: float) -> Any:
    import choix  # Bradley-Terry by iterative Luce spectral ranking
    import numpy as np

    params = choix.ilsr_pairwise_dense(comp, alpha=alpha, max_iter=1000)
    params = np.asarray(params, dtype=float)
    return (params - params.mean()) * ELO_PER_NAT


def ratings(result: ArenaResult, bootstrap: int = 200, alpha: float = 0.01) -> list[Rating]:
    """Bradley-Terry ratings on the Elo scale (mean 0), with 95% bootstrap intervals.

    A draw counts as half a win each way; ``alpha`` is choix's light regularisation, which
    keeps a perfect record finite. The bootstrap resamples whole duplicate deals within each
    pair (both games of a deal together), with its own fixed seed.
    """
    import numpy as np

    if len(result.entrants) < 2 or not result.records:
        return []
    point = _fit_bt(_comparisons(result, result.records), alpha)
    groups: dict[tuple[int, int], list[GameRecord]] = {}
    for rec in result.records:
        groups.setdefault((rec.pair, rec.deal), []).append(rec)
    by_pair: dict[int, list[list[GameRecord]]] = {}
    for (pair, _deal), recs in sorted(groups.items()):
        by_pair.setdefault(pair, []).append(recs)
    rng = np.random.default_rng(result.seed)
    samples = []
    for _ in range(bootstrap):
        picked: list[GameRecord] = []
        for deals in by_pair.values():
            for k in rng.integers(0, len(deals), size=len(deals)):
                picked.extend(deals[k])
        samples.append(_fit_bt(_comparisons(result, picked), alpha))
    n_games = [0] * len(result.entrants)
    for rec in result.records:
        for s in rec.seats:
            n_games[s] += 1
    out = []
    for k, e in enumerate(result.entrants):
        if samples:
            col = np.array([s[k] for s in samples])
            low, high = float(np.percentile(col, 2.5)), float(np.percentile(col, 97.5))
        else:
            low = high = math.nan
        out.append(Rating(e.label, float(point[k]), low, high, n_games[k]))
    return sorted(out, key=lambda r: -r.elo)


# -- reports ----------------------------------------------------------------------------------


def report(result: ArenaResult, rated: Sequence[Rating]) -> str:
    if result.server is None:
        where = "in-process"
    elif result.duplicate:
        where = f"live through the arena's own server {result.server}"
    else:
        where = (
            f"live through {result.server}: the server dealt every game itself, so the two"
            " games of a deal were NOT dealt alike and a rerun differs"
        )
    deals = "duplicate deals" if result.duplicate else "deals"
    why = "time limit" if not result.failures else f"{len(result.failures)} deals failed"
    lines = [
        f"arena: {result.game}, seed {result.seed}, {result.deals_asked} {deals} per"
        f" pair (2 games each, seats swapped), {len(result.records)} games in"
        f" {result.seconds:.0f} s" + ("" if result.complete else f"  ** INCOMPLETE: {why} **"),
        f"games played {where}",
        *(f"failed: {f}" for f in result.failures),
        "",
    ]
    stats = pair_stats(result)
    if stats:
        lines.append(
            f"{'pair':<22}{'games':>6}{'W':>6}{'D':>5}{'L':>6}{'score':>8}{'±95%':>7}"
            f"{'rounds A:B:cap':>17}{'seat0:seat1:draw':>19}"
        )
        for p in stats:
            lines.append(
                f"{p.a + ' vs ' + p.b:<22}{p.games:>6}{p.wins:>6}{p.draws:>5}{p.losses:>6}"
                f"{p.score:>8.3f}{p.score_ci:>7.3f}"
                f"{f'{p.rounds_a}:{p.rounds_b}:{p.rounds_capped}':>17}"
                f"{f'{p.seat0_wins}:{p.seat1_wins}:{p.seat_draws}':>19}"
            )
        s0 = sum(p.seat0_wins for p in stats)
        s1 = sum(p.seat1_wins for p in stats)
        sd = sum(p.seat_draws for p in stats)
        total = s0 + s1 + sd
        if total:
            lines.append(
                f"first mover (seat 0 starts round 1): seat 0 won {s0}, seat 1 won {s1},"
                f" draws {sd}; seat 0 score rate {(s0 + sd / 2) / total:.3f}"
            )
        lines.append("")
    if rated:
        lines.append(f"{'bot':<12}{'rating':>8}{'95% interval':>20}{'games':>8}")
        for r in rated:
            lines.append(
                f"{r.label:<12}{r.elo:>8.0f}{f'[{r.low:.0f}, {r.high:.0f}]':>20}{r.games:>8}"
            )
        lines.append("(Bradley-Terry via choix, Elo scale, mean 0; bootstrap over deals)")
        lines.append("")
    if result.solitaire:
        lines.append(f"{'solitaire':<12}{'towers':>7}{'mean turns':>12}{'±95%':>7}{'capped':>8}")
        for label, turns in result.solitaire.items():
            m, ci = mean_ci(turns)
            capped = sum(t >= result.solitaire_cap for t in turns)
            lines.append(f"{label:<12}{len(turns):>7}{m:>12.2f}{ci:>7.2f}{capped:>8}")
        lines.append("(turns to finish one tower alone: see clients.arena.solitaire_turns)")
    return "\n".join(lines)


def plot(result: ArenaResult, rated: Sequence[Rating], path: Path) -> None:
    """Ratings with intervals, and the matrix of pairwise score rates, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    labels = [e.label for e in result.entrants]
    n = len(labels)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ys = np.arange(len(rated))
    elo = np.array([r.elo for r in rated])
    err = np.array([[r.elo - r.low for r in rated], [r.high - r.elo for r in rated]])
    ax1.errorbar(elo, ys, xerr=err, fmt="o", capsize=4)
    ax1.set_yticks(ys, [r.label for r in rated])
    ax1.invert_yaxis()
    ax1.set_xlabel("Bradley-Terry rating (Elo scale, mean 0), 95% bootstrap interval")
    ax1.set_title(f"{result.game}: ratings")
    ax1.grid(axis="x", alpha=0.3)
    rate = np.full((n, n), np.nan)
    for p in pair_stats(result):
        i, j = labels.index(p.a), labels.index(p.b)
        rate[i, j] = p.score
        rate[j, i] = 1 - p.score
    im = ax2.imshow(rate, vmin=0, vmax=1, cmap="RdBu")
    ax2.set_xticks(range(n), labels)
    ax2.set_yticks(range(n), labels)
    for i in range(n):
        for j in range(n):
            if not np.isnan(rate[i, j]):
                ax2.text(j, i, f"{rate[i, j]:.2f}", ha="center", va="center")
    ax2.set_title("score rate of row vs column")
    fig.colorbar(im, ax=ax2, fraction=0.046)
    fig.suptitle(
        f"{len(result.records)} games, {result.deals_asked}"
        f" {'duplicate deals' if result.duplicate else 'deals'} per pair, seed {result.seed}"
        + ("" if result.server is None else ", live")
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(result: ArenaResult, rated: Sequence[Rating], text: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.txt").write_text(text + "\n")
    data = {
        "game": result.game,
        "seed": result.seed,
        "deals_per_pair": result.deals_asked,
        "complete": result.complete,
        "seconds": result.seconds,
        "server": result.server,
        "duplicate_deals": result.duplicate,
        "failures": result.failures,
        "pairs": [asdict(p) for p in pair_stats(result)],
        "ratings": [asdict(r) for r in rated],
        "solitaire": {
            k: {"towers": len(v), "mean": mean_ci(v)[0], "ci95": mean_ci(v)[1]}
            for k, v in result.solitaire.items()
        },
    }
    (out / "results.json").write_text(json.dumps(data, indent=2) + "\n")
    if rated:
        plot(result, rated, out / "ratings.png")


# -- command line -----------------------------------------------------------------------------


DESCRIPTION = """\
Play bots against each other and rate them: a match (two bots) or a round robin (more).

Duplicate deals: each deal is played twice with the seats swapped, both games getting the
same bricks in every round, so luck of the deal cancels out. The report gives per pair
wins/draws/losses, the score rate with a 95% interval, rounds finished by each side and the
first-mover split; per bot a Bradley-Terry rating (Elo scale, via choix) with a 95% bootstrap
interval and, for Stacko, the turns it needs to finish a tower alone (solitaire). It is
printed and written to --out as report.txt, results.json and ratings.png.

Deterministic: the same --seed (and bots, --deals, --solitaire) gives the same games and
figures, whatever --workers (and with --server local whatever --parallel); a different seed
gives other deals. Only the timings differ from run to run. A progress bar runs on
stderr while it plays (--no-progress to hide it); --time-limit bounds a run (exit status 1
and the report marked INCOMPLETE if it stopped early)."""

EPILOG = """\
live mode (--server):
  The same games played through a WebSocket server, each bot on its own connection, seeing
  only what its state frames carry (converted back to engine views).
  --server local   starts a server in this process on 127.0.0.1 (a free port, rate limit
                   lifted) that deals the arena's duplicate deals: the results equal the
                   in-process ones for the same seed.
  --server URL     plays on a running server (e.g. ws://127.0.0.1:8765/) in private rooms,
                   at that server's rate limit. It deals with its own RNG: the two games of
                   a deal are NOT dealt alike and a rerun gives other results; this checks
                   that the bots play over the wire, reported the same way.
  No solitaire in live mode (the absent opponent has no wire form).

examples:
  stacko-arena --deals 2000 --solitaire 500 --seed 1 --out artifacts/arena
  stacko-arena --bots easy,medium --deals 200
  stacko-arena --game stakko --deals 50
  stacko-arena --server local --deals 20
  stacko-arena --server ws://127.0.0.1:8765/ --bots medium,strong --deals 5 --parallel 2

exit status: 0 done, 1 incomplete (time limit, failed live games), 2 bad arguments."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stacko-arena",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--game", default="stacko", help="game of the bots (default: stacko)")
    p.add_argument(
        "--bots",
        default=None,
        help="comma-separated levels or GAME:LEVEL specs (default: every level of"
        " --game); two bots make a match, more a round robin",
    )
    p.add_argument(
        "--deals",
        type=int,
        default=100,
        help="duplicate deals per pair; each is 2 games (default: 100)",
    )
    p.add_argument("--seed", type=int, default=1, help="base seed (default: 1)")
    p.add_argument(
        "--solitaire",
        type=int,
        default=None,
        help="towers per bot for the solitaire turns (Stacko, in-process only; 0: skip;"
        " default 200, and 0 with --server)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        choices=(1, 2),
        help="processes to play in (at most 2; default 1; in-process only)",
    )
    p.add_argument(
        "--bootstrap",
        type=int,
        default=200,
        help="bootstrap samples for the rating intervals (default: 200)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop scheduling games after this long (report marked incomplete)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("artifacts/arena"),
        help="directory for report.txt, results.json, ratings.png (default: artifacts/arena)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--server",
        metavar="URL|local",
        default=None,
        help="play through a WebSocket server: a ws:// URL, or 'local' for one started in"
        " this process (see live mode below)",
    )
    p.add_argument(
        "--parallel",
        type=int,
        default=1,
        metavar="N",
        help="live mode: deals played at once, 2 games and 4 connections each (default: 1)",
    )
    p.add_argument(
        "--game-timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="live mode: a game taking longer fails (default: 600)",
    )
    return p


ARENA_EXTRA = ("choix", "matplotlib", "tqdm")
"""What the ratings, the chart and the progress bar need: ``pip install 'stacko[arena]'``."""


def missing_extra() -> list[str]:
    import importlib.util

    return [m for m in ARENA_EXTRA if importlib.util.find_spec(m) is None]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    missing = missing_extra()
    if missing:
        print(
            f"arena: needs {', '.join(missing)}; install the arena extra: "
            "python3 -m pip install 'stacko[arena]' (or '.[arena]' in a checkout)",
            file=sys.stderr,
        )
        return 2
    live = args.server is not None
    solitaire = args.solitaire if args.solitaire is not None else (0 if live else 200)
    if args.deals < 0 or solitaire < 0 or args.bootstrap < 0:
        print("arena: --deals, --solitaire and --bootstrap must be >= 0", file=sys.stderr)
        return 2
    if live and solitaire:
        print("arena: no solitaire in live mode (--solitaire 0 or no --server)", file=sys.stderr)
        return 2
    if live and args.server != LOCAL and not args.server.startswith(("ws://", "wss://")):
        print(f"arena: --server wants ws://HOST:PORT/ or 'local', not {args.server!r}",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.parallel < 1 or args.game_timeout <= 0:
        print("arena: --parallel must be >= 1 and --game-timeout > 0", file=sys.stderr)
        return 2
    try:
        specs = args.bots.split(",") if args.bots else levels(args.game)
        entrants = [Entrant(*parse_spec(s, args.game)) for s in specs if s.strip()]
        for e in entrants:
            e.make(random.Random(0))  # fail early on an unknown bot
        if len(entrants) < 2:
            raise ValueError("need at least two bots")
    except (ValueError, UnknownBotError) as exc:
        print(f"arena: {exc}", file=sys.stderr)
        return 2
    try:
        result = run_arena(
            entrants,
            args.deals,
            args.seed,
            solitaire=solitaire,
            workers=args.workers,
            progress=not args.no_progress,
            time_limit=args.time_limit,
            server=args.server,
            parallel=args.parallel,
            game_timeout=args.game_timeout,
        )
    except OSError as exc:  # the server cannot be reached at all
        print(f"arena: cannot play on {args.server}: {exc}", file=sys.stderr)
        return 1
    rated = ratings(result, args.bootstrap)
    text = report(result, rated)
    print(text)
    write_outputs(result, rated, text, args.out)
    print(f"\nwrote {args.out / 'report.txt'}, results.json" + (", ratings.png" if rated else ""))
    return 0 if result.complete else 1


if __name__ == "__main__":
    raise SystemExit(main())
