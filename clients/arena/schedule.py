"""Scheduling a round robin of duplicate deals, in-process or live, into an ``ArenaResult``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from stacko.clients.arena.live import LOCAL, _run_live
from stacko.clients.arena.play import DealTask, Entrant, GameRecord, _run_deal
from stacko.clients.arena.solitaire import run_solitaire
from stacko.clients.arena.workers import parallel_map


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
    for games in parallel_map(
        _run_deal, tasks, workers, "deals (2 games each)", progress, deadline
    ):
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
