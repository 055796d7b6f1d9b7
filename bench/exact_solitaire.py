"""The exact optimum of Stacko solitaire on small towers: the yardstick for a tower's value.

    python bench/exact_solitaire.py                 # 4 slots / 16 bricks and 5 / 20
    python bench/exact_solitaire.py --slots 4 --bricks 16 --policy strong
    python bench/exact_solitaire.py --policy strong --policy gaps   # strong alone: +0.43 / +0.65 %

The model (issue 19) is one tower and independent draws: every turn the player draws a brick
uniformly from the ``bricks - slots`` bricks not in its tower, then places it into any slot
(the brick there leaves the game for good) or passes it. A turn is one draw with its place or
pass; a finished tower (strictly decreasing from slot 0) costs no more turns. The start is a
uniformly dealt tower, *including* the deals that come sorted (they cost 0 turns; the real
game deals again instead). The open brick plays no part: with independent draws the only
open brick is the player's own last discard, and taking it back is left out of the model.

With those readings it reproduces the figures of the issue: 4 slots / 16 bricks 3.1378
expected turns, 5 / 20 4.5973. Other readings give other numbers, which is how the model was
pinned down: over unsorted deals only, 3.2742 and 4.6360; with a fresh independent open brick
to take each turn, 2.61 (4 / 16); with the own last discard to take back into another slot (a
swap in two turns, which the engine allows), 2.38 (4 / 16).

Value iteration over every ordered tower (``bricks! / (bricks - slots)!`` states): with the
values ``W_b`` of the best placement of each brick ``b``, a tower's value is
``min over k of (1 + sum of the k smallest p W_b) / (sum of their p)``: the player waits,
passing, until one of the k best bricks comes. Gauss-Seidel sweeps in the order of the
values (see ``_gauss_seidel``) converge in a handful of sweeps, over one tower of each
mirror pair (``mirrors``): 4 / 16 in 0.3 s, 5 / 20 (1.86 million towers) in about 10 s to
the third decimal (``--tol 2e-3``) and 20-30 s to ``1e-9``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


@dataclass
class Towers:
    """Every ordered tower of ``slots`` distinct bricks from ``1..bricks``, indexed: state
    ``lut[code]`` is the tower whose slot ``s`` holds ``(code // radix[s]) % (bricks + 1)``."""

    slots: int
    bricks: int
    towers: np.ndarray
    """(states, slots) brick values, slot 0 first."""
    code: np.ndarray
    radix: np.ndarray
    lut: np.ndarray
    """Code -> state; ``len(towers)`` (a sentinel) for codes with a repeated brick."""
    finished: np.ndarray

    @classmethod
    def build(cls, slots: int, bricks: int) -> Towers:
        towers = np.array(list(itertools.permutations(range(1, bricks + 1), slots)), np.int32)
        radix = ((bricks + 1) ** np.arange(slots)).astype(np.int32)
        code = towers @ radix
        lut = np.full((bricks + 1) ** slots, len(towers), dtype=np.int32)
        lut[code] = np.arange(len(towers), dtype=np.int32)
        finished = np.all(towers[:, 1:] < towers[:, :-1], axis=1)
        return cls(slots, bricks, towers, code, radix, lut, finished)

    def neighbours(self, idx: np.ndarray, brick: int, slot: int) -> np.ndarray:
        """The states reached from states ``idx`` by putting ``brick`` into ``slot`` (the
        sentinel where the tower already holds the brick elsewhere)."""
        r = self.radix[slot]
        out: np.ndarray = self.lut[self.code[idx] + (brick - self.towers[idx, slot]) * r]
        return out


def wait_value(w: np.ndarray, p: float) -> np.ndarray:
    """Per column of ``w`` (rows: bricks; the value after the best placement of each brick,
    ``inf`` for none): the expected turns when the player waits, passing, for one of its
    best bricks, each drawn with chance ``p`` a turn, choosing how many to wait for."""
    w = np.sort(w, axis=0)
    ok = np.isfinite(w)
    num = 1.0 + np.cumsum(np.where(ok, w, 0.0), axis=0) * p
    den = np.cumsum(ok, axis=0) * p
    with np.errstate(divide="ignore", invalid="ignore"):
        cand = np.where(den > 0, num / den, np.inf)
    out: np.ndarray = cand.min(axis=0)
    return out


@dataclass
class Solution:
    slots: int
    bricks: int
    values: np.ndarray
    """Expected turns from each state under the optimal policy."""
    mean_all: float
    """Over every deal, sorted ones included (0 turns): the issue's figure."""
    mean_unsorted: float
    sweeps: int


def _gauss_seidel(
    t: Towers,
    update: Callable[[np.ndarray, np.ndarray], np.ndarray],
    order: np.ndarray,
    tol: float,
    chunks: int,
    max_sweeps: int,
) -> tuple[np.ndarray, int]:
    """Sweeps of ``update`` (chunk of states, values -> their new values) over the states in
    ``order`` (the states to solve; the others keep ``inf``, or 0 if finished), chunk by
    chunk and in place, from ``inf`` (0 for finished towers), re-ordered by value after each
    sweep; until the largest change is below ``tol`` or after ``max_sweeps`` sweeps.

    A state's value depends only on better states (a player accepts a brick only if it
    leads somewhere better than where it stands), so in the order of the values one sweep
    would be exact; the order of the last sweep's values is nearly that."""
    v = np.full(len(t.towers) + 1, np.inf)  # the last entry: the sentinel, never better
    v[:-1][t.finished] = 0.0
    sweeps = 0
    while sweeps < max_sweeps:
        sweeps += 1
        change = 0.0
        for chunk in np.array_split(order, chunks):
            new = update(chunk, v)
            old = v[chunk]
            with np.errstate(invalid="ignore"):
                diff = np.where(
                    np.isfinite(old), np.abs(new - old), np.where(np.isinf(new), 0, np.inf)
                )
            change = max(change, float(diff.max(initial=0.0)))
            v[chunk] = new
        order = order[np.argsort(v[order], kind="stable")]
        if change < tol:
            break
    return v[:-1].copy(), sweeps


def _inversions(t: Towers) -> np.ndarray:
    n = t.slots
    out: np.ndarray = sum(
        (t.towers[:, i] < t.towers[:, j]).astype(np.int32)
        for i in range(n)
        for j in range(i + 1, n)
    )
    return out


def _longest_run(t: Towers) -> np.ndarray:
    """The longest strictly decreasing subsequence of each tower (the bricks it can keep)."""
    towers = t.towers
    best = np.ones(towers.shape, dtype=np.int32)
    for j in range(t.slots):
        for i in range(j):
            longer = (towers[:, i] > towers[:, j]) & (best[:, i] + 1 > best[:, j])
            best[:, j] = np.where(longer, best[:, i] + 1, best[:, j])
    out: np.ndarray = best.max(axis=1)
    return out


def mirrors(t: Towers) -> np.ndarray:
    """Each state's mirror image: brick ``b`` in slot ``s`` becomes ``bricks + 1 - b`` in
    slot ``slots - 1 - s``. It maps sorted towers to sorted towers and draws to draws, so a
    tower and its mirror have the same value (``solve`` solves one of each pair)."""
    flipped = (t.bricks + 1 - t.towers[:, ::-1]) @ t.radix
    out: np.ndarray = t.lut[flipped]
    return out


def solve(
    slots: int,
    bricks: int,
    tol: float = 1e-9,
    chunks: int | None = None,
    max_sweeps: int = 100,
) -> Solution:
    """The optimal expected turns from every tower (Gauss-Seidel value iteration).

    Only one tower of each mirror pair (``mirrors``) is solved: its neighbours are read
    through ``rep`` (state -> the solved one of its pair), which halves the work. The first
    sweep goes in the order of the longest decreasing run (longest first, then fewest
    inversions), a guess at the order of the values; later sweeps in the order of the values.
    The values approach the optimum from above, so ``tol`` bounds the last sweep's largest
    change, and ``max_sweeps`` the work."""
    t = Towers.build(slots, bricks)
    n = len(t.towers)
    p = 1.0 / (bricks - slots)
    rep = np.minimum(np.arange(n, dtype=np.int32), mirrors(t))
    lut = np.append(rep, np.int32(n))[t.lut]  # code -> the solved state of its pair

    def update(idx: np.ndarray, v: np.ndarray) -> np.ndarray:
        w = np.empty((bricks, len(idx)))
        base = [t.code[idx] - t.towers[idx, s] * t.radix[s] for s in range(slots)]
        for b in range(1, bricks + 1):
            m = v[lut[base[0] + b * t.radix[0]]]
            for s in range(1, slots):
                np.minimum(m, v[lut[base[s] + b * t.radix[s]]], out=m)
            w[b - 1] = m
        out = wait_value(w, p)
        out[t.finished[idx]] = 0.0
        return out

    solved = np.flatnonzero(rep == np.arange(n))
    if chunks is None:  # about 2,000 towers a chunk: many for Gauss-Seidel, few for numpy
        chunks = min(1000, max(1, len(solved) // 2000))
    order = solved[np.lexsort((_inversions(t)[solved], -_longest_run(t)[solved]))]
    v, sweeps = _gauss_seidel(t, update, order, tol, chunks, max_sweeps)
    v = v[rep]
    return Solution(slots, bricks, v, float(v.mean()), float(v[~t.finished].mean()), sweeps)


def evaluate_values(
    slots: int,
    bricks: int,
    value: Callable[[np.ndarray], np.ndarray],
    tol: float = 1e-9,
    chunks: int = 200,
) -> float:
    """Expected turns (over every deal, as ``solve``) of the greedy player of a tower value:
    it places a drawn brick where ``value`` (of a batch of towers, rows slot 0 first) of the
    result is lowest if that is lower than the tower's own, else passes. Exact policy
    evaluation in the same model; the yardstick for a learned value."""
    t = Towers.build(slots, bricks)
    n = len(t.towers)
    p = 1.0 / (bricks - slots)
    here = np.append(value(t.towers.astype(np.int64)), np.inf)
    here[:-1][t.finished] = -np.inf
    # The greedy choice of each state for each brick: the state it goes to, or n (pass).
    target = np.full((bricks, n), n, dtype=np.int64)
    best = np.full((bricks, n), np.inf)
    idx = np.arange(n)
    for b in range(1, bricks + 1):
        for s in range(slots):
            nb = t.neighbours(idx, b, s)
            better = here[nb] < best[b - 1]
            best[b - 1] = np.where(better, here[nb], best[b - 1])
            target[b - 1] = np.where(better, nb, target[b - 1])
    target[best >= here[:-1]] = n
    moves = target < n
    stay = (bricks - slots - moves.sum(axis=0)) * p  # bricks in the tower never come

    def update(chunk: np.ndarray, v: np.ndarray) -> np.ndarray:
        nxt = np.where(moves[:, chunk], v[target[:, chunk]], 0.0).sum(axis=0) * p
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(stay[chunk] < 1 - 1e-12, (1.0 + nxt) / (1.0 - stay[chunk]), np.inf)
        out[t.finished[chunk]] = 0.0
        return out

    order = np.argsort(here[:-1], kind="stable")
    v, _ = _gauss_seidel(t, update, order, tol, chunks, 200)
    return float(v.mean())


def strong_value(
    slots: int, bricks: int, run_bonus: float | None = None
) -> Callable[[np.ndarray], np.ndarray]:
    """The strong bot's tower value in this model: every brick outside the tower may come,
    with weight 1 (``TowerModel`` minus the run bonus, as ``StrongStackoBot`` uses it)."""
    from stacko.bots.stacko_bots import TURN_UNITS, StrongV1StackoBot, TowerModel, _runs

    model = TowerModel(bricks, slots)
    # The bot's bonuses are in turns, TowerModel's units are TURN_UNITS a turn.
    bonus = StrongV1StackoBot.run_bonus * TURN_UNITS if run_bonus is None else run_bonus

    def value(towers: np.ndarray) -> np.ndarray:
        pools = np.ones((len(towers), bricks + 2))
        pools[:, 0] = pools[:, -1] = 0.0
        pools[np.arange(len(towers))[:, None], towers] = 0.0
        out: np.ndarray = model.values(towers, pools, float(bricks - slots)) - bonus * _runs(towers)
        return out

    return value


def gap_value(slots: int, bricks: int, **knobs: float) -> Callable[[np.ndarray], np.ndarray]:
    """The strong bot's tower value since issue 19 (``GapModel``) in this model: every brick
    outside the tower may come, and a brick the tower does not keep comes back when it is
    replaced (``tower_weight`` 1, the model's default)."""
    from stacko.bots.tower_gaps import GapModel

    model = GapModel(bricks, slots, **knobs)

    def value(towers: np.ndarray) -> np.ndarray:
        out = np.empty(len(towers))
        for start in range(0, len(towers), 20_000):  # bounded memory for the keep sets
            part = towers[start : start + 20_000]
            pools = np.ones((len(part), bricks + 2))
            pools[:, 0] = pools[:, -1] = 0.0
            pools[np.arange(len(part))[:, None], part] = 0.0
            out[start : start + len(part)] = model.values(part, pools, float(bricks - slots))
        return out

    return value


def backed_up(
    slots: int, bricks: int, value: Callable[[np.ndarray], np.ndarray]
) -> Callable[[np.ndarray], np.ndarray]:
    """``value`` one draw later: the Bellman step of ``solve`` (``wait_value``) applied once
    to ``value`` (a finished tower 0), the tower value that ``StrongStackoBot`` places a
    drawn brick by when it plays alone (``_backup``, with its ``lookahead``). Tabled over
    every tower, so it answers only for towers of these options."""
    t = Towers.build(slots, bricks)
    n = len(t.towers)
    v = np.append(value(t.towers.astype(np.int64)), np.inf)
    v[:-1][t.finished] = 0.0
    out = np.empty(n)
    for start in range(0, n, 50_000):
        idx = np.arange(start, min(n, start + 50_000))
        w = np.full((bricks, len(idx)), np.inf)
        for b in range(1, bricks + 1):
            for s in range(slots):
                np.minimum(w[b - 1], v[t.neighbours(idx, b, s)], out=w[b - 1])
            # A brick of the tower is never drawn (``solve``'s sweeps may count it: at the
            # optimum, waiting for a brick that changes nothing changes no value).
            w[b - 1][(t.towers[idx] == b).any(axis=1)] = np.inf
        out[idx] = wait_value(w, 1.0 / (bricks - slots))
    out[t.finished] = 0.0
    radix = t.radix.astype(np.int64)

    def looked_up(towers: np.ndarray) -> np.ndarray:
        found: np.ndarray = out[t.lut[towers @ radix]]
        return found

    return looked_up


def policy_value(name: str, slots: int, bricks: int) -> Callable[[np.ndarray], np.ndarray]:
    if name == "strong-v1":
        return strong_value(slots, bricks)
    if name == "strong-summed":  # the summed gap costs strong played before the gap model
        return strong_value(slots, bricks, run_bonus=0.0)
    if name == "gaps":  # one round: nothing left to secure, no run bonus
        return gap_value(slots, bricks)
    if name == "strong":  # alone: the gap model looked ahead one draw
        from stacko.bots.stacko_bots import StrongStackoBot

        temperature = StrongStackoBot.alone_temperature
        return backed_up(slots, bricks, gap_value(slots, bricks, temperature=temperature))
    raise ValueError(f"no policy {name!r}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--slots", type=int, default=None)
    p.add_argument("--bricks", type=int, default=None)
    p.add_argument("--tol", type=float, default=1e-9)
    p.add_argument(
        "--policy",
        action="append",
        default=[],
        help="also the expected turns of a bot's greedy rule (strong: the gap model looked"
        " ahead one draw, as strong plays alone; gaps: the gap model; strong-summed: the summed"
        " gap costs strong used before it; strong-v1)",
    )
    args = p.parse_args(argv)
    cases = [(args.slots, args.bricks)] if args.slots else [(4, 16), (5, 20)]
    print(
        f"{'slots':>5}{'bricks':>7}{'states':>10}{'optimum':>9}{'unsorted':>10}{'sweeps':>7}{'s':>7}"
    )
    for slots, bricks in cases:
        start = time.monotonic()
        sol = solve(slots, bricks or 4 * slots, args.tol)
        print(
            f"{slots:>5}{sol.bricks:>7}{len(sol.values):>10}{sol.mean_all:>9.4f}"
            f"{sol.mean_unsorted:>10.4f}{sol.sweeps:>7}{time.monotonic() - start:>7.1f}",
            flush=True,
        )
        for name in args.policy:
            start = time.monotonic()
            turns = evaluate_values(slots, sol.bricks, policy_value(name, slots, sol.bricks))
            print(
                f"  {name}: {turns:.4f} turns, {100 * (turns / sol.mean_all - 1):+.2f} % over"
                f" the optimum ({time.monotonic() - start:.1f} s)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
