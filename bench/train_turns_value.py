"""Approximate policy iteration in turns for the strong bot's tower value (issue 19).

    nice -n 15 python bench/train_turns_value.py --towers 600 --iterations 2 --check 1000

The strong bot's value of a tower (``TowerModel``) is in its own units (about 62 for a dealt
tower that takes about 10 turns). This fits a value in *turns*: the strong policy plays
seeded engine towers alone (``solitaire_turns``); every turn's start (the tower, the pool the
bot believes in, its total) is recorded with the turns that were still to come, and
``turns ~ w . features(tower)`` is fitted by least squares (features: ``tower_features``,
among them the model's own value; ``--one-hot`` adds a (slot, brick) one-hot). The bot then
decides on ``UNITS * w . features`` (policy improvement), plays again, and the fit is redone
on all states so far. ``--check`` plays that many other towers with the last fit and the
unchanged value, paired, and prints the difference. ``--exact SLOTS`` fits the same features
to the exact optimum of a small tower instead and evaluates the fit's greedy player exactly.

Not shipped (issue 19, bench/README.md): neither form beat the unchanged value. The small
features gained -0.046 +- 0.101 and -0.032 +- 0.099 turns over 2,000 paired towers (within
the noise); the one-hot form overfitted and played worse (13.97 turns after one iteration);
fitted to the exact optimum at 4 / 16 and 5 / 20, the features give greedy players worse than
strong's own rule (3.2679 and 4.8046 against 3.1991 and 4.7400).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stacko.bots.stacko_bots import StrongStackoBot  # noqa: E402
from stacko.clients.arena import solitaire_turns  # noqa: E402
from stacko.engine.stacko import Phase  # noqa: E402

UNITS = 6.2
"""Model units per turn: the learned value is scaled to the units the other knobs use."""


def lds(towers: np.ndarray) -> np.ndarray:
    """Longest strictly decreasing subsequence of each row."""
    c, slots = towers.shape
    best = np.ones((c, slots), dtype=np.int64)
    for j in range(1, slots):
        ok = towers[:, :j] > towers[:, j : j + 1]
        best[:, j] = 1 + np.where(ok, best[:, :j], 0).max(axis=1)
    out: np.ndarray = best.max(axis=1)
    return out


ONE_HOT = False
"""Also a one-hot of (slot, brick) in the features (``--one-hot``)."""


def tower_features(u: np.ndarray, towers: np.ndarray, bricks: int) -> np.ndarray:
    """Features of each candidate tower, ``u`` its ``TowerModel`` value."""
    c, slots = towers.shape
    if ONE_HOT:
        oh = np.zeros((c, slots * (bricks + 1)))
        oh[np.arange(c)[:, None], np.arange(slots)[None, :] * (bricks + 1) + towers] = 1.0
    ideal = bricks - np.arange(slots) * (bricks - 1) / (slots - 1)
    dev = np.abs(towers - ideal[None, :])
    hopeless = u >= 1e5
    uu = np.clip(np.where(hopeless, 200.0, u), 0.0, 200.0)
    down = towers[:, 1:] < towers[:, :-1]
    good_pairs = down.sum(axis=1)
    cols = [
        np.ones(c),
        uu,
        np.sqrt(uu),
        np.log1p(uu),
        lds(towers).astype(float),
        (dev <= 2).sum(axis=1),
        (dev > 8).sum(axis=1),
        good_pairs,
    ]
    out = np.stack([np.asarray(x, dtype=float) for x in cols], axis=1)
    return np.concatenate([out, oh], axis=1) if ONE_HOT else out


class TurnsBot(StrongStackoBot):
    """Strong with ``UNITS * w . tower_features`` as the tower value (``w`` None: unchanged).
    Records every turn's start for the fit."""

    def __init__(self, rng: random.Random, w: np.ndarray | None) -> None:
        super().__init__(rng)
        self.w = w
        self.record: list[tuple[np.ndarray, int]] = []
        self.turn = 0

    def reset(self) -> None:
        super().reset()
        self.record = []
        self.turn = 0

    def choose(self, view: Any, legal: Any, *, should_stop: Any = None) -> Any:
        if view.phase is Phase.TURN:
            self.turn += 1
            self._pending = view
        move = super().choose(view, legal, should_stop=should_stop)
        return move

    def _values(self, towers: np.ndarray, pools: np.ndarray, total: float) -> np.ndarray:
        assert self.model is not None
        u = self.model.values(towers, pools, total)
        f = tower_features(u, towers, self.model.bricks)
        if len(towers) == 1 and getattr(self, "_pending", None) is not None:
            self.record.append((f[0], self.turn))
            self._pending = None
        if self.w is None:
            v = u
        else:
            v = UNITS * (f @ self.w)
            v = np.where(u >= 1e5, 1e6, v)
        if self._bonus:
            v = v - self._bonus * _runs_np(towers)
        return v


def _runs_np(towers: np.ndarray) -> np.ndarray:
    down = towers[:, 1:] < towers[:, :-1]
    out: np.ndarray = 1 + np.cumprod(down, axis=1).sum(axis=1)
    return out


def play(w: np.ndarray | None, towers: int, seed: int) -> tuple[list[int], np.ndarray, np.ndarray]:
    turns, xs, ys = [], [], []
    for k in range(towers):
        bot = TurnsBot(random.Random(f"{seed}:b:{k}"), w)
        n = solitaire_turns(bot, f"{seed}:s:{k}")
        turns.append(n)
        for f, t in bot.record:
            xs.append(f)
            ys.append(n - t + 1)
    return turns, np.array(xs), np.array(ys, dtype=float)


def fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    w, *_ = np.linalg.lstsq(x, y, rcond=1e-6)
    r = y - x @ w
    print(f"  fit on {len(y)} states: rmse {np.sqrt((r * r).mean()):.3f}, w {np.round(w[:8], 4)}")
    return np.asarray(w)


def exact_fit(slots: int) -> None:
    """Fit the features to the exact optimum of ``slots`` / ``4 slots`` and evaluate the
    greedy player of the fit exactly: how good a value of this form can be at best."""
    from bench.exact_solitaire import Towers, evaluate_values, solve, strong_value

    bricks = 4 * slots
    sol = solve(slots, bricks, 1e-6)
    t = Towers.build(slots, bricks)
    model = strong_value(slots, bricks, run_bonus=0.0)
    towers = t.towers.astype(np.int64)
    todo = ~t.finished
    w = fit(tower_features(model(towers), towers, bricks)[todo], sol.values[todo])

    def fitted(towers: np.ndarray) -> np.ndarray:
        out: np.ndarray = tower_features(model(towers), towers, bricks) @ w
        return out

    print(
        f"{slots}/{bricks}: optimum {sol.mean_all:.4f}, strong's rule"
        f" {evaluate_values(slots, bricks, model):.4f}, greedy on the features fitted to the"
        f" optimum {evaluate_values(slots, bricks, fitted):.4f}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--towers", type=int, default=400)
    p.add_argument("--iterations", type=int, default=2)
    p.add_argument("--seed", type=int, default=100)
    p.add_argument("--check", type=int, default=0)
    p.add_argument("--check-seed", type=int, default=7)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--exact", type=int, default=None, metavar="SLOTS", help="only exact_fit")
    p.add_argument("--one-hot", action="store_true", help="(slot, brick) one-hot features")
    args = p.parse_args(argv)
    global ONE_HOT
    ONE_HOT = args.one_hot
    if args.exact:
        exact_fit(args.exact)
        return 0
    w: np.ndarray | None = None
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    for it in range(args.iterations + 1):
        start = time.monotonic()
        turns, x, y = play(w, args.towers, args.seed + it)
        print(
            f"iteration {it}: {statistics.mean(turns):.3f} turns on {args.towers} training"
            f" towers ({time.monotonic() - start:.0f} s)",
            flush=True,
        )
        if it == args.iterations:
            break
        xs, ys = [*xs, x], [*ys, y]
        w = fit(np.concatenate(xs), np.concatenate(ys))
    if args.out is not None and w is not None:
        args.out.write_text(json.dumps({"units": UNITS, "weights": w.tolist()}) + "\n")
    if args.check and w is not None:
        start = time.monotonic()
        base, _, _ = play(None, args.check, args.check_seed)
        new, _, _ = play(w, args.check, args.check_seed)
        diff = [a - b for a, b in zip(new, base, strict=True)]
        ci = 1.96 * statistics.stdev(diff) / len(diff) ** 0.5
        print(
            f"check on {args.check} towers (seed {args.check_seed}): unchanged"
            f" {statistics.mean(base):.3f}, learned {statistics.mean(new):.3f},"
            f" difference {statistics.mean(diff):+.3f} +- {ci:.3f}"
            f" ({time.monotonic() - start:.0f} s)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
