"""Variants of the strong bot, each against the unchanged one (issue 19).

    python bench/tower_value_variants.py --exact 4 --variant temperature=2 --variant mix=0.3
    nice -n 15 python bench/tower_value_variants.py --towers 1000 --variant retake=5
    python bench/tower_value_variants.py --towers 1000 --seed 7 --variant gap_temperature=1.25 \
        --variant alone_discard_weight=1.0 --variant temperature=3    # the last: summed costs

``--exact SLOTS`` (4 or 5): the greedy player of each *summed gap cost* variant
(``TowerModel``, what strong played before the gap model; the first line is its default) in
the exact model of ``bench/exact_solitaire.py`` (independent draws, 4 bricks a slot), in %
over the optimum; noise-free, 0.5 s a variant at 4 slots, about a minute at 5 (the gap
model's: ``bench/exact_solitaire.py --policy gaps``). ``--towers N``: the engine's solitaire
(``clients.arena.solitaire_turns``, what ``bench/solitaire.py`` measures) over the same N
seeded towers for every variant, with the mean paired difference to the first one (the
unchanged strong bot, on the gap model) and its 95 % interval.

A variant is ``name=value,...`` of:

- ``temperature``, ``k_power``, ``m_power``, ``gap_cost``: the shape of ``TowerModel``
  (``TowerParams``); any of these (or ``mix``, ``retake``) makes the bot play the summed
  gap costs instead of the gap model;
- ``mix``: the value becomes ``(1 - mix) * (soft minimum over keep sets of the summed gap
  costs) + mix * (least over keep sets of the largest gap cost)``: gaps fill in parallel
  from the same draws, so the slowest one, not the sum, bounds the time;
- ``retake``: a placement is worth ``min(V, retake + V after putting the brick it removes
  into another slot next turn)`` (the engine lets a player take its own last discard back:
  a swap in two turns), ``retake`` the cost of that turn in the value's units;
- any attribute of ``StrongStackoBot``: ``discard_weight``, ``opponent_weight``, and the
  gap model's ``gap_temperature``, ``tower_weight``, ``alone_tower_weight``,
  ``alone_discard_weight``, ``margin``, ``screen``, and alone its lookahead's
  ``lookahead``, ``alone_temperature``, ``backup_screen``...

The summed-cost variants found nothing better than the unchanged summed value; the gap
model (``bots/tower_gaps.py``) replaced it (figures in bench/README.md).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.exact_solitaire import evaluate_values
from stacko.bots.stacko_bots import (
    HOPELESS,
    StrongStackoBot,
    TowerModel,
    TowerParams,
)
from stacko.clients.arena import solitaire_turns

OPTIMUM = {4: 3.1378, 5: 4.5973}
"""``bench/exact_solitaire.py``'s optimum (4 bricks a slot, every deal)."""


class MixModel(TowerModel):
    """``TowerModel`` blended with the least largest gap cost over keep sets (``mix``)."""

    def __init__(self, bricks: int, slots: int, params: TowerParams, mix: float) -> None:
        super().__init__(bricks, slots, params)
        self.mix = mix
        self.hard = TowerModel(bricks, slots, params)
        self.hard.temperature = 0.0

    def values(
        self,
        towers: np.ndarray,
        pools: np.ndarray,
        total: float,
        keepable: np.ndarray | None = None,
    ) -> np.ndarray:
        summed = super().values(towers, pools, total, keepable)
        # The largest gap cost of the best keep set: the same dynamic programme with a
        # maximum instead of a sum, by the costs' p-norm for a large p.
        p = 8.0
        self.hard.k_power, self.hard.m_power = self.k_power * p, self.m_power * p
        worst = self.hard.values(towers, pools, total**p, keepable)
        worst = np.where(worst < HOPELESS, np.maximum(worst, 0.0) ** (1 / p), HOPELESS)
        out: np.ndarray = (1 - self.mix) * summed + self.mix * worst
        return out


def parse(spec: str) -> dict[str, float]:
    return {k: float(v) for k, v in (kv.split("=") for kv in spec.split(",") if kv)}


def split(spec: dict[str, float]) -> tuple[TowerParams, float, dict[str, float]]:
    names = {f.name for f in fields(TowerParams)}
    params = TowerParams(**{k: v for k, v in spec.items() if k in names})
    rest = {k: v for k, v in spec.items() if k not in names}
    return params, rest.pop("mix", 0.0), rest


def model(bricks: int, slots: int, spec: dict[str, float]) -> TowerModel:
    params, mix, _ = split(spec)
    return MixModel(bricks, slots, params, mix) if mix else TowerModel(bricks, slots, params)


def exact_value(slots: int, spec: dict[str, float]) -> Callable[[np.ndarray], np.ndarray]:
    bricks = 4 * slots
    m = model(bricks, slots, spec)

    def value(towers: np.ndarray) -> np.ndarray:
        pools = np.ones((len(towers), bricks + 2))
        pools[:, 0] = pools[:, -1] = 0.0
        pools[np.arange(len(towers))[:, None], towers] = 0.0
        return m.values(towers, pools, float(bricks - slots))

    return value


SUMMED = {f.name for f in fields(TowerParams)} | {"mix", "retake"}
"""Knobs of the summed gap costs (``TowerModel``): a variant with one plays that model, as
strong did before the gap model; any other knob is an attribute of ``StrongStackoBot``."""


class VariantBot(StrongStackoBot):
    """The strong bot with a variant's knobs (``retake``: the swap lookahead)."""

    retake: float | None = None

    def __init__(self, rng: random.Random, spec: dict[str, float]) -> None:
        super().__init__(rng)
        _, _, rest = split(spec)
        self.retake = rest.pop("retake", None)
        self._summed = model(40, 10, spec) if SUMMED & spec.keys() else None
        for name, v in rest.items():
            if not hasattr(StrongStackoBot, name):
                raise SystemExit(f"no such knob {name!r}")
            setattr(self, name, type(getattr(StrongStackoBot, name))(v))

    def _make_model(self, bricks: int, slots: int) -> None:
        super()._make_model(bricks, slots)
        if self._summed is not None:  # the summed costs, alone too
            self.model = self.screen_model = self._summed
            self.gaps = None

    def _best_place(
        self,
        tower: list[int],
        brick: int,
        pool: list[float],
        total: float,
        forbid: int | None = None,
    ) -> tuple[int | None, float]:
        if self.retake is None:
            return super()._best_place(tower, brick, pool, total, forbid)
        towers, pools = self._placements(tower, brick, pool)
        v = self._values(towers, pools, total)
        slots = len(tower)
        parts = [self._placements(list(towers[s]), tower[s], list(pools[s])) for s in range(slots)]
        after = self._values(
            np.concatenate([t for t, _ in parts]), np.concatenate([p for _, p in parts]), total
        ).reshape(slots, slots)
        after[np.arange(slots), np.arange(slots)] = np.inf  # back where it was: no move
        v = np.minimum(v, self.retake + after.min(axis=1))
        if self._gift is not None:
            v = v + self._gift[tower]
        if forbid is not None:
            v[forbid] = np.inf
        s = int(np.argmin(v))
        return s, float(v[s])


def solitaire(spec: dict[str, float], towers: int, seed: int) -> list[int]:
    out = []
    for k in range(towers):
        bot: Any = VariantBot(random.Random(f"{seed}:b:{k}"), spec)
        out.append(solitaire_turns(bot, f"{seed}:s:{k}"))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variant", action="append", default=[], metavar="NAME=VALUE,...")
    p.add_argument("--exact", type=int, choices=(4, 5), default=None, metavar="SLOTS")
    p.add_argument("--towers", type=int, default=0)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args(argv)
    specs = ["", *args.variant]
    if args.exact:
        for spec in specs:
            start = time.monotonic()
            turns = evaluate_values(
                args.exact, 4 * args.exact, exact_value(args.exact, parse(spec))
            )
            over = 100 * (turns / OPTIMUM[args.exact] - 1)
            print(
                f"{args.exact}/{4 * args.exact} {spec or 'summed':<40}{turns:8.4f}{over:+7.2f} %"
                f" ({time.monotonic() - start:.1f} s)",
                flush=True,
            )
    if args.towers:
        base: list[int] = []
        for spec in specs:
            start = time.monotonic()
            turns = solitaire(parse(spec), args.towers, args.seed)
            base = base or turns
            diff = [a - b for a, b in zip(turns, base, strict=True)]
            ci = 1.96 * statistics.stdev(diff) / len(diff) ** 0.5 if len(diff) > 1 else 0.0
            print(
                f"10/40 engine {spec or 'strong':<34}{statistics.mean(turns):8.3f}"
                f" {statistics.mean(diff):+.3f} +- {ci:.3f} ({time.monotonic() - start:.0f} s)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
