"""Solitaire turns per Stacko bot level: how many turns each needs to finish a tower alone.

    python bench/solitaire.py                      # 2,000 towers per level, all levels
    python bench/solitaire.py --towers 500 --levels strong --workers 2
    python bench/solitaire.py --deal one-tower     # only the bot's tower dealt (Rack-O-like)

"Alone" is defined by ``clients.arena.solitaire_turns``: 40 bricks, 10 slots, the turn coming
straight back to the bot, so the open brick is always its own last discard; a turn is a
take, or a draw with its place or pass. ``--deal normal`` (the default, and the arena's): a
normal deal whose other tower is never played (its 10 bricks stay out of play, 20 cycle);
``--deal one-tower``: only the bot's tower is dealt and 30 bricks cycle, as in solitaire
Rack-O (the setting of the published TD-learned player's 8.88 turns).

Prints the mean with a normal 95% interval, the median and the worst tower. Bounded: every
tower is capped at 500 turns, and ``--time-limit`` (default 900 s) stops early, saying so.
Deterministic for a given ``--seed``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stacko.clients.arena import SOLITAIRE_DEALS, Entrant, mean_ci, run_solitaire
from stacko.clients.bots.registry import levels


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--towers", type=int, default=2000, help="towers per level (default 2000)")
    p.add_argument("--levels", default=None, help="comma-separated levels (default: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--deal", choices=SOLITAIRE_DEALS, default="normal", help="default: normal")
    p.add_argument("--workers", type=int, default=1, choices=(1, 2))
    p.add_argument("--time-limit", type=float, default=900.0, metavar="SECONDS")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    names = args.levels.split(",") if args.levels else levels("stacko")
    deadline = time.monotonic() + args.time_limit
    complete = True
    print(f"solitaire, {args.deal} deal, seed {args.seed}")
    print(f"{'level':<10}{'towers':>7}{'mean':>8}{'±95%':>7}{'median':>8}{'max':>6}{'s/tower':>9}")
    for name in names:
        entrant = Entrant("stacko", name)
        start = time.monotonic()
        turns = run_solitaire(
            [entrant],
            args.towers,
            args.seed,
            args.workers,
            not args.no_progress,
            deadline,
            deal=args.deal,
        )[entrant.label]
        spent = time.monotonic() - start
        if len(turns) < args.towers:
            complete = False
        if not turns:
            print(f"{name:<10}{0:>7}  (time limit reached)")
            continue
        mean, ci = mean_ci(turns)
        print(
            f"{name:<10}{len(turns):>7}{mean:>8.2f}{ci:>7.2f}{statistics.median(turns):>8.1f}"
            f"{max(turns):>6}{spent / len(turns):>9.3f}",
            flush=True,
        )
    if not complete:
        print("time limit reached: fewer towers than asked")
    return 0 if complete else 1


if __name__ == "__main__":
    raise SystemExit(main())
