"""Stakko: how often the search bot beats the random bot, per variant and overall.

    python bench/stakko_bots.py                    # 400 games, about 30-40 s on one core
    python bench/stakko_bots.py --games 90 --nodes 300 --seed 7

Games go round-robin over the variants (basic, gray, red) and the searcher's seat
alternates, so every variant gets both seats equally often. Everything is seeded: the same
arguments print the same table. Each game is bounded by the engine's ply cap and the number
of games by ``--games`` (at most 5000). Prints win/draw/loss per variant, the overall rates
with a 95% Wilson lower bound on the win rate, and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections import Counter
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repo, not bench/, goes on sys.path
    sys.path[0:1] = [str(Path(__file__).resolve().parent.parent)]

from stacko.clients.bots.stakko_bots import RandomStakkoBot, SearchStakkoBot, StakkoBot, play
from stacko.engine.stakko import VARIANTS, StakkoOptions


def wilson_lower(wins: int, n: int, z: float = 1.96) -> float:
    """Lower end of the 95% Wilson interval: a win rate we can claim from this sample."""
    if n == 0:
        return 0.0
    p = wins / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--games", type=int, default=400, help="games in all (default 400)")
    ap.add_argument("--nodes", type=int, default=1_000, help="search budget per move")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if not 1 <= args.games <= 5_000:
        ap.error("--games must be 1..5000")
    results: dict[str, Counter[str]] = {v: Counter() for v in VARIANTS}
    start = time.perf_counter()
    for g in range(args.games):
        variant = VARIANTS[g % len(VARIANTS)]
        seat = (g // len(VARIANTS)) % 2
        seed = args.seed * 1_000_003 + g
        searcher = SearchStakkoBot(random.Random(seed), nodes=args.nodes)
        bots: list[StakkoBot] = [RandomStakkoBot(random.Random(f"random-{seed}"))] * 2
        bots[seat] = searcher
        outcome = play(bots, StakkoOptions(variant=variant))
        key = "draw" if outcome.winner is None else "win" if outcome.winner == seat else "loss"
        results[variant][key] += 1
    elapsed = time.perf_counter() - start
    total: Counter[str] = Counter()
    print(f"search (nodes={args.nodes}) vs random, {args.games} games, seed {args.seed}")
    print(f"{'variant':8} {'games':>6} {'win':>5} {'draw':>5} {'loss':>5} {'win rate':>9}")
    for variant, c in results.items():
        n = sum(c.values())
        total += c
        rate = c["win"] / n if n else 0.0
        print(f"{variant:8} {n:6} {c['win']:5} {c['draw']:5} {c['loss']:5} {rate:9.1%}")
    n = sum(total.values())
    win, draw, loss = total["win"] / n, total["draw"] / n, total["loss"] / n
    low = wilson_lower(total["win"], n)
    print(f"{'all':8} {n:6} {total['win']:5} {total['draw']:5} {total['loss']:5} {win:9.1%}")
    print(f"win {win:.1%}  draw {draw:.1%}  loss {loss:.1%}  (95% lower bound on win {low:.1%})")
    print(f"{elapsed:.1f} s wall")
    summary = {
        "games": n, "nodes": args.nodes, "seed": args.seed, "win": total["win"],
        "draw": total["draw"], "loss": total["loss"], "win_rate": round(win, 4),
        "win_rate_lower95": round(low, 4), "seconds": round(elapsed, 1),
        "by_variant": {v: dict(c) for v, c in results.items()},
    }  # fmt: skip
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
