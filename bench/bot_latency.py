"""How long a bot takes to decide: per-choice wall time over whole games (p50, p99, max).

    python bench/bot_latency.py                        # strong vs strong-v1, 20 games
    python bench/bot_latency.py --bot strong --games 50 --bricks 200 --tower 20
    python bench/bot_latency.py --solitaire --games 50   # alone: strong's gap model

Plays in-process games of ``--bot`` against ``--against`` (seeded, duplicate deals as in the
arena) and times every ``choose`` of the measured bot with ``time.perf_counter``. The target
of issue 19 is 10 ms at p99 at the default options on the project's 2-core machine; large
options rely on the anytime ``should_stop`` instead (see ``bots.base``).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stacko.bots.base import observe_view
from stacko.bots.registry import make_bot
from stacko.clients.arena import DuplicateRandom, solitaire_turns
from stacko.engine.stacko import Stacko, StackoOptions


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bot", default="strong")
    p.add_argument("--against", default="strong-v1")
    p.add_argument("--games", type=int, default=20)
    p.add_argument("--bricks", type=int, default=40)
    p.add_argument("--tower", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--solitaire",
        action="store_true",
        help="time the bot finishing towers alone (clients.arena.solitaire_turns; --games"
        " towers, the default options), where strong plays the gap model",
    )
    args = p.parse_args(argv)
    opts = StackoOptions(bricks=args.bricks, tower=args.tower)
    times: list[float] = []
    for g in range(args.games if args.solitaire else 0):
        bot = make_bot("stacko", args.bot, random.Random(f"{args.seed}:latency-bot:{g}"))
        choose = bot.choose

        def timed(*a: Any, _choose: Any = choose, **k: Any) -> Any:
            t = time.perf_counter()
            move = _choose(*a, **k)
            times.append(time.perf_counter() - t)
            return move

        bot.choose = timed  # type: ignore[method-assign]
        solitaire_turns(bot, f"{args.seed}:latency-solitaire:{g}")
    for g in range(0 if args.solitaire else args.games):
        seed = f"{args.seed}:latency:{g}"
        state = Stacko(opts, rng=DuplicateRandom(seed, opts.bricks))
        bots: list[Any] = [
            make_bot("stacko", args.bot, random.Random(f"{seed}:a")),
            make_bot("stacko", args.against, random.Random(f"{seed}:b")),
        ]
        if g % 2:
            bots.reverse()
        measured = bots.index(next(b for b in bots if b.name == args.bot))
        while state.outcome() is None:
            seat = state.to_move
            observe_view(bots[1 - seat], state.view(1 - seat))
            view = state.view(seat)
            t = time.perf_counter()
            move = bots[seat].choose(view, view.legal_moves())
            if seat == measured:
                times.append(time.perf_counter() - t)
            state.apply(move, seat)
    ms = sorted(t * 1000 for t in times)
    pick = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]  # noqa: E731
    what = "towers alone" if args.solitaire else "games"
    print(
        f"{args.bot} ({args.bricks} bricks, {args.tower} slots): {len(ms)} choices in"
        f" {args.games} {what}; p50 {pick(0.5):.2f} ms, p99 {pick(0.99):.2f} ms,"
        f" max {ms[-1]:.2f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
