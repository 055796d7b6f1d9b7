"""The Stacko rules engine on one core: how fast it applies moves, builds views, resamples.

    python bench/engine.py                     # about 3 s per figure
    python bench/engine.py --seconds 1 --seed 7

Three figures, each measured for ``--seconds`` in this one thread (no other threads or
processes are started, so it is one core's work):

- moves/s: ``Stacko.apply`` in random play with the default options (40 bricks, towers of
  10, 2 rounds, turn cap 200); a new game is dealt whenever one ends, and that deal counts
  as part of play. Moves are picked from a pregenerated table of random numbers, so the
  figure is the engine's, not ``random.choice``'s.
- views/s: ``Stacko.view(seat)`` for seats 0, 1 and the spectator in turn, over positions
  taken from random play (every phase, both rounds, finished games).
- resamples/s: ``resample(view, rng)`` over the views of those positions, seats 0 and 1.

A figure is "per CPU-second" (this thread's CPU time), so other load on the machine does
not lower it; the wall-clock rate is printed beside it. The table ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repo, not bench/, goes on sys.path
    sys.path[0:1] = [str(Path(__file__).resolve().parent.parent)]

from stacko.engine.stacko import Phase, Stacko, StackoOptions
from stacko.engine.stacko_view import StackoView, resample

TARGETS: dict[str, float | None] = {
    "moves_per_s": 200_000,
    "views_per_s": 100_000,
    "resamples_per_s": None,
}
LABELS = {
    "moves_per_s": "moves/s (apply)",
    "views_per_s": "views/s",
    "resamples_per_s": "resamples/s",
}
BATCH = 500
"""Calls between two looks at the clock."""


def measure(seconds: float, batch: Callable[[], int]) -> tuple[float, float]:
    """Run ``batch`` (which returns how many calls it made) for ``seconds`` of wall time;
    the rate per CPU-second of this thread and per wall-clock second."""
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    deadline = wall0 + seconds
    calls = 0
    while True:
        calls += batch()
        wall = time.perf_counter()
        if wall >= deadline:
            break
    cpu = time.thread_time() - cpu0
    return calls / max(cpu, 1e-9), calls / (wall - wall0)


def move_batch(seed: int) -> Callable[[], int]:
    """Random play with the default options, ``BATCH`` applied moves per call."""
    rng = random.Random(seed)
    picks = [rng.getrandbits(30) for _ in range(1 << 16)]
    mask = len(picks) - 1
    options = StackoOptions()
    game_rng = random.Random(seed + 1)
    game = Stacko(options, rng=game_rng)
    i = 0

    def batch() -> int:
        nonlocal game, i
        for _ in range(BATCH):
            if game.phase is Phase.OVER:
                game = Stacko(options, rng=game_rng)
            moves = game.legal_moves()
            game.apply(moves[picks[i & mask] % len(moves)])
            i += 1
        return BATCH

    return batch


def positions(seed: int, count: int = 400) -> list[Stacko]:
    """Positions from random play: every ``k``-th state of a run of default games."""
    rng = random.Random(seed)
    game = Stacko(rng=random.Random(seed + 2))
    found: list[Stacko] = []
    while len(found) < count:
        if game.outcome() is not None:
            found.append(game.copy())
            game = Stacko(rng=random.Random(rng.getrandbits(32)))
            continue
        game.apply(rng.choice(game.legal_moves()))
        if rng.random() < 0.05:
            found.append(game.copy())
    return found


def view_batch(states: list[Stacko]) -> Callable[[], int]:
    seats = (0, 1, None)
    jobs = [(state, seats[i % 3]) for i, state in enumerate(states)]
    i = 0

    def batch() -> int:
        nonlocal i
        for _ in range(BATCH):
            state, seat = jobs[i % len(jobs)]
            state.view(seat)
            i += 1
        return BATCH

    return batch


def resample_batch(states: list[Stacko], seed: int) -> Callable[[], int]:
    views: list[StackoView] = [s.view(seat) for s in states for seat in (0, 1)]
    rng = random.Random(seed + 3)
    i = 0

    def batch() -> int:
        nonlocal i
        for _ in range(BATCH):
            resample(views[i % len(views)], rng)
            i += 1
        return BATCH

    return batch


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=3.0, help="time per figure (default 3)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the random play (default 1)")
    args = ap.parse_args(argv)
    if args.seconds <= 0:
        ap.error("--seconds must be positive")

    states = positions(args.seed)
    batches = {
        "moves_per_s": move_batch(args.seed),
        "views_per_s": view_batch(states),
        "resamples_per_s": resample_batch(states, args.seed),
    }
    cpu_rates: dict[str, float] = {}
    wall_rates: dict[str, float] = {}
    for name, batch in batches.items():
        batch()  # warm up
        cpu_rates[name], wall_rates[name] = measure(args.seconds, batch)

    print(f"Stacko engine, one thread, {args.seconds:g} s per figure, seed {args.seed}")
    print(f"Python {platform.python_version()} on {platform.machine()}")
    print()
    print(f"{'figure':<17} {'per CPU-s':>11} {'per wall-s':>11} {'target':>11}  met")
    ok = True
    for name, rate in cpu_rates.items():
        target = TARGETS[name]
        met = "-" if target is None else ("yes" if rate >= target else "NO")
        ok = ok and met != "NO"
        shown = "-" if target is None else f">= {target:,.0f}"
        print(f"{LABELS[name]:<17} {rate:>11,.0f} {wall_rates[name]:>11,.0f} {shown:>11}  {met}")
    result: dict[str, Any] = {
        "bench": "engine",
        **{name: round(rate) for name, rate in cpu_rates.items()},
        "wall": {name: round(rate) for name, rate in wall_rates.items()},
        "targets": TARGETS,
        "ok": ok,
        "seconds": args.seconds,
        "seed": args.seed,
        "python": platform.python_version(),
    }
    print()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
