"""Fit the shape of the strong bot's tower value by simulation, and check it exactly.

    nice -n 10 python bench/train_tower_value.py --time-limit 600     # search, check, write
    python bench/train_tower_value.py --check temperature=1.5         # figures of one shape

The value is ``TowerModel`` (a soft minimum over the keep sets of a tower of the costs of its
gaps) with the shape of the gap cost and the softness as parameters (``TowerParams``). They
are fitted by coordinate search on simulated solitaire: the bot plays seeded 10-slot /
40-brick towers alone in the engine (``solitaire_turns``, what ``bench/solitaire.py``
measures), the same towers for every candidate (common random numbers, so differences are
less noise). The result is checked against the exact optimum at 4 slots / 16 bricks and
5 / 20 (``bench/exact_solitaire.py``) and written as JSON to ``--out``.

Not shipped (issue 19, see bench/README.md): the best shape found, a softer minimum
(temperature 1.5), took solitaire from 10.40 to 10.29 turns on the training towers but lost
head to head (0.475 +- 0.037 against the unchanged value over 150 duplicate deals), so the
strong level keeps the default shape.

Bounded: ``--time-limit`` (default 600 s) stops the search and keeps the best so far; the
check after it takes a few minutes more.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.exact_solitaire import evaluate_values, solve  # noqa: E402
from stacko.bots.stacko_bots import (  # noqa: E402
    StrongV1StackoBot,
    TowerModel,
    TowerParams,
    _runs,
)
from stacko.clients.arena import solitaire_turns  # noqa: E402


def tower_value(params: TowerParams, slots: int, bricks: int, run_bonus: float) -> object:
    """The greedy value used in the model: the tower value with every brick outside the
    tower in the pool (weight 1), minus the bot's run bonus."""
    model = TowerModel(bricks, slots, params)

    def value(towers: np.ndarray) -> np.ndarray:
        pools = np.ones((len(towers), bricks + 2))
        pools[:, 0] = pools[:, -1] = 0.0
        pools[np.arange(len(towers))[:, None], towers] = 0.0
        out: np.ndarray = model.values(towers, pools, float(bricks - slots))
        return out - run_bonus * _runs(towers)

    return value


def simulate(params: TowerParams, towers: int, seed: int) -> float:
    """Mean solitaire turns (``clients.arena.solitaire_turns``, the engine's own game, the
    measure of ``bench/solitaire.py``) of the strong bot with ``params`` over ``towers``
    seeded towers: the same towers for every candidate."""
    total = 0
    for k in range(towers):
        bot = StrongV1StackoBot(random.Random(f"{seed}:train-bot:{k}"), params)
        total += solitaire_turns(bot, f"{seed}:train:{k}")
    return total / towers


def exact_gap(params: TowerParams) -> dict[str, float]:
    """Per size: the greedy player's exact expected turns, and % over the optimum."""
    out = {}
    for slots, bricks in ((4, 16), (5, 20)):
        opt = solve(slots, bricks, tol=1e-4).mean_all
        turns = evaluate_values(
            slots, bricks, tower_value(params, slots, bricks, StrongV1StackoBot.run_bonus)
        )
        out[f"{slots}/{bricks}"] = 100 * (turns / opt - 1)
    return out


GRID = {
    "temperature": (1.5, 2.0, 3.0, 4.0, 6.0),
    "k_power": (1.6, 1.8, 2.0, 2.2, 2.4),
    "m_power": (0.8, 0.9, 1.0, 1.1, 1.2),
    "gap_cost": (-2.0, -1.0, 0.0, 1.0, 2.0),
}


def search(towers: int, seed: int, deadline: float, rounds: int) -> tuple[TowerParams, float]:
    best = TowerParams()
    best_turns = simulate(best, towers, seed)
    print(f"start {best}: {best_turns:.3f}", flush=True)
    for r in range(rounds):
        improved = False
        for name, values in GRID.items():
            for x in values:
                if time.monotonic() > deadline:
                    print("time limit: keeping the best so far", flush=True)
                    return best, best_turns
                cand = replace(best, **{name: x})
                if cand == best:
                    continue
                turns = simulate(cand, towers, seed)
                mark = ""
                if turns < best_turns - 0.05:
                    best, best_turns, improved, mark = cand, turns, True, "  *"
                print(f"round {r} {name}={x}: {turns:.3f}{mark}", flush=True)
        if not improved:
            break
    return best, best_turns


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--towers", type=int, default=400)
    p.add_argument("--seed", type=int, default=19)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--time-limit", type=float, default=600.0)
    p.add_argument("--check", default=None, metavar="NAME=VALUE,...", help="no search")
    p.add_argument("--out", type=Path, default=Path("artifacts/tower_params.json"))
    args = p.parse_args(argv)
    start = time.monotonic()
    if args.check is not None:
        fields = dict(kv.split("=") for kv in args.check.split(",") if kv)
        params = TowerParams(**{k: float(v) for k, v in fields.items()})
        turns = simulate(params, args.towers, args.seed + 1)
    else:
        params, _ = search(args.towers, args.seed, start + args.time_limit, args.rounds)
        turns = simulate(params, args.towers, args.seed + 1)  # fresh towers for the figure
    base = simulate(TowerParams(), args.towers, args.seed + 1)
    gaps = exact_gap(params)
    base_gaps = exact_gap(TowerParams())
    print(f"fitted {params}")
    print(f"10/40 solitaire turns: fitted {turns:.3f}, strong-v1 {base:.3f} ({args.towers} towers)")
    for k in gaps:
        print(f"{k}: fitted {gaps[k]:+.2f} %, strong-v1 {base_gaps[k]:+.2f} % over the optimum")
    if args.check is None:
        data = {
            "params": asdict(params),
            "fitted_by": "bench/train_tower_value.py",
            "towers": args.towers,
            "seed": args.seed,
            "model_turns_10_40": round(turns, 3),
            "over_optimum_percent": {k: round(v, 2) for k, v in gaps.items()},
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(data, indent=2) + "\n")
        print(f"wrote {args.out} in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
