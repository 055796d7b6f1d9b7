"""Playing through a WebSocket server: every bot on its own connection (``--server``)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from stacko.bots.base import checked_choice, observe_view, reset_bot
from stacko.clients.arena.play import (
    DealTask,
    DuplicateRandom,
    Entrant,
    GameRecord,
    _make_record,
    deal_size,
)

T = TypeVar("T")


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
                # two connections per game, all from loopback: no per-address limits
                hello_rate_per_ip=1e9, hello_burst_per_ip=10**9, max_connections_per_ip=0,
                max_waiting_per_ip=0,
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
