"""A tower's value in turns: how long its gaps take to fill in parallel (issue 19).

The bricks a tower keeps form a strictly decreasing subsequence of its slots (a *keep
set*); between two kept bricks lies a *gap* of ``k`` slots, to be filled from the ``m``
bricks whose values lie between them. Every brick that can come arrives at the same rate,
so the gaps of one keep set fill *at the same time*, each from its own bricks: the tower is
done when the slowest gap is, and its expected time is that of a maximum, not a sum.

``gap_tables`` solves one gap exactly in continuous time (each of its ``m`` bricks arrives
at rate 1, so the time unit is the pool's size in turns): a brick of rank ``r`` placed in
slot ``j`` of the gap splits it into two independent gaps ``(j - 1, r - 1)`` and
``(k - j, m - r)``, which finish at the later of the two; the player places each brick
where that is soonest, and accepts only the ranks worth more than waiting for a better
one. That gives the distribution of the time each ``(k, m)`` takes, ``G[k, m](s)``. A keep
set's value is then ``total * integral of (1 - prod over its gaps of G(s)) ds`` turns, and
a tower's the soft minimum of that over its keep sets (``GapModel.values``): the soft
minimum stands for the freedom to change plans as bricks come.

Measured (bench/README.md, issue 19): the greedy player of this value is 1.0 % over the
exact optimum at 4 slots / 16 bricks and 1.6 % at 5 / 20, against 1.95 % and 3.10 % for the
summed gap costs of ``TowerModel``; in the engine's solitaire it finishes in fewer turns.
Looked ahead one turn, as the strong bot plays it alone (``StrongStackoBot._look_ahead``),
its player is 0.43 % and 0.65 % over.

The tables are data shipped with the package (``gap_tables.npz``, made by
``python -m stacko.bots.tower_gaps``); nothing is computed at start.
"""

from __future__ import annotations

import argparse
from functools import cache, lru_cache
from pathlib import Path

import numpy as np

TABLE_FILE = Path(__file__).with_name("gap_tables.npz")
MAX_GAP = 12
"""Slots of the largest gap in the shipped tables: towers up to this many slots."""
MAX_BRICKS = 60
"""Bricks between two kept bricks, at most, in the shipped tables."""
FINE_STEPS = 6000
"""Steps of the fine time grid the tables are solved on, over ``[0, HORIZON]``."""
HORIZON = 12.0
"""In units of the pool's size: the slowest gap (one slot, one brick) waits 1 on average."""
NODES = 12
"""Quadrature nodes of the shipped tables (``quadrature``)."""
FIRST_NODE = 0.001
LOG_FLOOR = -50.0
"""``log G`` of a gap that cannot be filled yet (``m < k``): effectively never."""


def gap_tables(
    max_gap: int = MAX_GAP, max_bricks: int = MAX_BRICKS, steps: int = FINE_STEPS
) -> tuple[np.ndarray, np.ndarray]:
    """``(s, G)``: the time grid and ``G[k, m, i]``, the chance that a gap of ``k`` slots
    with ``m`` bricks to fill it from is full by time ``s[i]`` (played as the module says).

    Solved from small gaps up: the time to the first accepted brick is exponential with
    rate ``|A|`` (the accepted ranks), then both halves run independently."""
    s = np.linspace(0.0, HORIZON, steps + 1)
    ds = s[1] - s[0]
    g = np.zeros((max_gap + 1, max_bricks + 1, steps + 1))
    g[0] = 1.0
    for k in range(1, max_gap + 1):
        for m in range(k, max_bricks + 1):
            wait = np.full(m, np.inf)
            after = np.zeros((m, steps + 1))
            for r in range(1, m + 1):
                for j in range(max(1, k - m + r), min(k, r) + 1):  # both halves can fill
                    both = g[j - 1, r - 1] * g[k - j, m - r]
                    e = float(np.trapezoid(1.0 - both, s))
                    if e < wait[r - 1]:
                        wait[r - 1], after[r - 1] = e, both
            order = np.argsort(wait)
            best, accept, spent = np.inf, 0, 0.0
            for n, r in enumerate(order, start=1):
                spent += wait[r]
                if (1.0 + spent) / n < best:
                    best, accept = (1.0 + spent) / n, n
            x = after[order[:accept]].mean(axis=0)
            # T = Exp(accept) + X: F' = accept (X - F), exact for X linear on each step.
            d = np.exp(-accept * ds)
            c = 1.0 - (1.0 - d) / (accept * ds)
            f = np.zeros(steps + 1)
            for i in range(1, steps + 1):
                f[i] = f[i - 1] * d + (1.0 - d) * x[i - 1] + (x[i] - x[i - 1]) * c
            g[k, m] = f
    return s, g


def quadrature(nodes: int = NODES) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights for ``integral of (1 - F(s)) ds`` over ``[0, HORIZON]``:
    trapezoids in ``log s`` from ``FIRST_NODE`` (where ``1 - F`` is still 1), so that a gap
    done in a fortieth of a unit and one that takes several are both measured to 0.5 %."""
    u = np.linspace(np.log(FIRST_NODE), np.log(HORIZON), nodes)
    s = np.exp(u)
    w = s * (u[1] - u[0])
    w[0] *= 0.5
    w[-1] *= 0.5
    w[0] += FIRST_NODE
    return s, w


def build_tables(nodes: int = NODES) -> dict[str, np.ndarray]:
    """The shipped data: ``log G`` at the quadrature nodes, and the weights."""
    s, g = gap_tables()
    at, w = quadrature(nodes)
    at_nodes = np.stack([[np.interp(at, s, row) for row in rows] for rows in g])
    with np.errstate(divide="ignore"):
        log_g = np.maximum(np.log(at_nodes), LOG_FLOOR)
    return {"log_g": log_g.astype(np.float32), "weights": w}


@lru_cache(maxsize=1)
def load_tables() -> tuple[np.ndarray, np.ndarray]:
    """``(log_g, weights)`` from the shipped file (read once per process)."""
    with np.load(TABLE_FILE) as data:
        return data["log_g"], data["weights"]


@lru_cache(maxsize=1)
def _model_tables() -> tuple[np.ndarray, np.ndarray]:
    """``load_tables`` as ``GapModel`` reads them (``log g`` in float64), shared read-only by
    every model of the process."""
    log_g, weights = load_tables()
    log_g = log_g.astype(np.float64)
    weights = weights.copy()
    log_g.setflags(write=False)
    weights.setflags(write=False)
    return log_g, weights


def fits(bricks: int, slots: int) -> bool:
    """Whether the shipped tables cover these options (else ``TowerModel`` plays)."""
    return slots <= MAX_GAP and bricks <= MAX_BRICKS


@cache
def _pairs(width: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(width, 1)``, once per width (every ``values`` call wants it)."""
    i_idx, j_idx = np.triu_indices(width, 1)
    i_idx.setflags(write=False)
    j_idx.setflags(write=False)
    return i_idx, j_idx


class GapModel:
    """Values towers in turns by the parallel fill of their gaps (see the module).

    ``tower_weight`` is the pool weight of a brick of the tower that a keep set does not
    keep: it leaves for the discard pile when replaced, where its owner can take it back at
    once (the open brick) and everyone later, so it still counts for the gap it belongs to.
    Same interface as ``TowerModel.values``."""

    def __init__(
        self,
        bricks: int,
        slots: int,
        temperature: float = 1.5,
        tower_weight: float = 1.0,
        margin: float = 6.0,
    ) -> None:
        if not fits(bricks, slots):
            raise ValueError(f"no gap tables for {slots} slots of {bricks} bricks")
        self.bricks = bricks
        self.slots = slots
        self.temperature = temperature
        self.tower_weight = tower_weight
        self.margin = margin
        self.log_g, self.weights = _model_tables()
        self.top = self.log_g.shape[1] - 1

    def __getstate__(self) -> dict[str, object]:
        """Without the tables (150 KB): a bot travels to a server's bot worker and back with
        every decision (``server.botpool``), and the tables are the shipped data there too."""
        state = dict(self.__dict__)
        del state["log_g"], state["weights"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self.log_g, self.weights = _model_tables()

    def values(
        self,
        towers: np.ndarray,
        pools: np.ndarray,
        total: float,
        keepable: np.ndarray | None = None,
    ) -> np.ndarray:
        """Expected turns to finish each tower (rows, slot 0 first) with the pool weights
        in the same row of ``pools`` (indexed by brick value); ``keepable`` as in
        ``TowerModel.values``. A finished tower is worth a little more than 0 here (its
        empty keep set too enters the soft minimum): only differences count."""
        c, n = towers.shape
        if c >= SAME_ROWS:
            # A batch of candidates often holds the same tower twice (a brick into the slot
            # of the brick just drawn, or into the tower before it): each is valued once.
            parts = [towers.astype(np.int64), np.asarray(pools, dtype=float).view(np.int64)]
            if keepable is not None:
                parts.append(np.asarray(keepable, dtype=np.int64))
            rows = np.ascontiguousarray(np.hstack(parts))
            key = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1])))[:, 0]
            _, one, again = np.unique(key, return_index=True, return_inverse=True)
            if len(one) < c:
                sub = None if keepable is None else keepable[one]
                out: np.ndarray = self.values(towers[one], pools[one], total, sub)[again]
                return out
        width = n + 2
        vals = np.empty((c, width), dtype=np.int64)
        vals[:, 0] = self.bricks + 1  # a virtual floor under slot 0 ...
        vals[:, 1:-1] = towers
        vals[:, -1] = 0  # ... and a roof over the top slot
        weight = pools.astype(float)
        if self.tower_weight:
            weight = weight.copy()
            weight[np.arange(c)[:, None], towers] += self.tower_weight
        mass = np.cumsum(weight, axis=1)  # mass[v]: weight of the bricks up to v
        keep = np.ones((c, width), dtype=bool)
        if keepable is not None:
            keep[:, 1:-1] = keepable
        # The gap between every pair of positions i < j that can both be kept, at once: gap
        # ``g`` is the ``g``-th allowed pair in (tower, i, j) order, so the gaps after
        # (tower, i) are a run of consecutive ids (``first``, ``count``).
        i_idx, j_idx = _pairs(width)
        hi, lo = vals[:, i_idx], vals[:, j_idx]
        ok = (hi > lo) & keep[:, i_idx] & keep[:, j_idx]
        rows, pair = np.nonzero(ok)
        gap_i, gap_j = i_idx.take(pair), j_idx.take(pair)
        k = gap_j - gap_i - 1
        span = mass.shape[1]
        flat_mass = mass.ravel()
        m = np.clip(
            flat_mass.take(rows * span + vals.ravel().take(rows * width + gap_i) - 1)
            - flat_mass.take(rows * span + vals.ravel().take(rows * width + gap_j)),
            0.0,
            self.top,
        )
        m0 = np.minimum(m.astype(np.int64), self.top - 1)
        f = (m - m0)[:, None]
        at = k * (self.top + 1) + m0  # log_g[k, m0] as a row of log_g by (k, m)
        flat = self.log_g.reshape(-1, self.log_g.shape[2])
        gaps = flat.take(at, axis=0) * (1.0 - f) + flat.take(at + 1, axis=0) * f
        count = np.bincount(rows * width + gap_i, minlength=c * width)
        first = np.cumsum(count) - count
        scale = self.weights * total  # turns from 1 - F at the nodes
        bound = self._longest_bound(c, width, rows, gap_i, gap_j, gaps, scale)
        bound += self.margin
        # Extend keep sets slot by slot: each chain is (tower, last kept position, sum of
        # log G of its gaps so far); with the gap from its last position to the roof it is a
        # whole keep set. More gaps only lengthen the wait, so a chain already slower than
        # ``bound`` (a keep set's time plus ``margin``) is dropped: its keep sets would weigh
        # next to nothing. A chain's whole keep set is valued as the chain is made, and if
        # it is within the bound, so is the chain (it waits no longer): only the chains whose
        # whole keep set is not are valued on their own.
        # The last gap after (tower, i) is the one to the roof, if any (a kept brick of value
        # 0 has none: a chain there has no whole keep set, and no gap after it).
        last = first + count - 1
        roofed = (count > 0) & (gap_j.take(np.maximum(last, 0)) == width - 1)
        roof = np.where(roofed, last, len(gaps))
        onward = count - roofed  # the gaps after (tower, i) but the one to the roof
        gaps = np.vstack([gaps, np.full((1, gaps.shape[1]), np.nan)])  # no bound admits it
        floor = np.arange(c) * width
        turns = np.subtract(1.0, np.exp(gaps.take(roof.take(floor), axis=0))) @ scale
        kept = np.flatnonzero(turns <= bound)  # the keep sets of no brick
        done_rows, done_turns = [kept], [turns.take(kept)]
        chain = np.arange(c)  # the tower of each live chain
        at = floor  # its (tower, last kept position)
        src = chain  # its row of ``acc``
        nodes = gaps.shape[1]
        held, spare, work = _Rows(nodes), _Rows(nodes), _Rows(nodes)
        acc = held.rows(c)
        acc.fill(0.0)
        while len(chain):
            # Every allowed next position but the roof of every chain, chain by chain.
            per = onward.take(at)
            grown = int(per.sum())
            start = np.cumsum(per) - per
            gap = np.arange(grown) + np.repeat(first.take(at) - start, per)
            row = np.repeat(chain, per)
            at = row * width + gap_j.take(gap)
            new_acc = spare.rows(grown)
            turns = _grow(acc, np.repeat(src, per), gaps, gap, roof.take(at), scale, new_acc, work)
            limit = bound.take(row)
            alive = turns <= limit
            whole = np.flatnonzero(alive)
            done_rows.append(row.take(whole))
            done_turns.append(turns.take(whole))
            unsure = np.flatnonzero(~alive)
            if len(unsure):
                own = np.subtract(1.0, np.exp(new_acc.take(unsure, axis=0))) @ scale
                alive[unsure] = own <= limit.take(unsure)
            go = np.flatnonzero(alive)
            chain, src, acc, at = row.take(go), go, new_acc, at.take(go)
            held, spare = spare, held
        which = np.concatenate(done_rows)
        turns = np.concatenate(done_turns)
        low = np.full(c, np.inf)
        np.minimum.at(low, which, turns)
        if self.temperature > 0:
            soft = np.bincount(
                which, np.exp(-(turns - low.take(which)) / self.temperature), minlength=c
            )
            low = low - self.temperature * np.log(soft)
        return low

    def _longest_bound(
        self,
        c: int,
        width: int,
        rows: np.ndarray,
        gap_i: np.ndarray,
        gap_j: np.ndarray,
        gaps: np.ndarray,
        scale: np.ndarray,
    ) -> np.ndarray:
        """The time of one good keep set per tower, a longest one (the longest decreasing
        subsequence of the bricks that may be kept): a bound for pruning, and close to the
        best where keep sets are most numerous, in nearly sorted towers.

        Among equally long chains into a position the one from the lowest position is
        followed, the roof's back to the floor."""
        slot_of = np.full((c, width, width), -1, dtype=np.int64)
        slot_of[rows, gap_i, gap_j] = np.arange(len(rows))
        can = slot_of >= 0
        length = np.zeros((c, width), dtype=np.int64)
        parent = np.zeros((c, width), dtype=np.int64)
        length[:, 0] = 1
        for j in range(1, width):
            score = can[:, :j, j] * length[:, :j]
            parent[:, j] = score.argmax(axis=1)
            length[:, j] = score.max(axis=1) + 1
        # Back from the roof, adding each gap of the chain, then a zero gap (id -1) once a
        # tower's chain has reached the floor.
        zero = np.vstack([gaps, np.zeros((1, gaps.shape[1]))])
        acc = np.zeros((c, gaps.shape[1]))
        here = np.full(c, width - 1)
        tower = np.arange(c)
        for _ in range(int(length[:, -1].max()) - 1):
            before = parent[tower, here]
            acc += zero.take(slot_of[tower, before, here], axis=0)
            here = before
        out: np.ndarray = (1.0 - np.exp(acc)) @ scale
        return out


class _Rows:
    """A buffer of rows of nodes reused by every step of one ``values`` call: a fresh array
    the size of a step (up to 2 MB) costs its page faults each time, as much as the
    arithmetic on it."""

    def __init__(self, nodes: int) -> None:
        self.buf = np.empty((0, nodes))

    def rows(self, n: int) -> np.ndarray:
        """The first ``n`` rows (contents undefined), grown if needed."""
        if n > len(self.buf):
            self.buf = np.empty((max(n, 2 * len(self.buf)), self.buf.shape[1]))
        return self.buf[:n]


SAME_ROWS = 16
"""Batches of this many towers or more are searched for the same tower twice."""

STEP_ROWS = 2048
"""Chains grown at a time by ``_grow``, so that its work stays in the cache: a step of a
nearly sorted tower's batch holds up to 20,000 chains (2 MB a row array), and passes over
arrays out of the cache cost more than the arithmetic (measured on the 40 heaviest calls of
30 solitaire towers: 512 / 1,024 / 2,048 / 4,096 rows, 3.8 / 3.6 / 3.5 / 3.6 ms a call)."""


def _grow(
    acc: np.ndarray,
    src: np.ndarray,
    gaps: np.ndarray,
    gap: np.ndarray,
    roof: np.ndarray,
    scale: np.ndarray,
    out: np.ndarray,
    work: _Rows,
) -> np.ndarray:
    """Each chain grown by one gap, ``out = acc[src] + gaps[gap]``, and the time in turns
    of its whole keep set, ``(1 - exp(out + gaps[roof])) @ scale``, ``STEP_ROWS`` chains
    at a time."""
    grown = len(src)
    turns = np.empty(grown)
    a = 0
    while a < grown:
        b = min(grown, a + STEP_ROWS)
        here, add = out[a:b], work.rows(b - a)
        np.take(acc, src[a:b], axis=0, out=here, mode="clip")
        np.take(gaps, gap[a:b], axis=0, out=add, mode="clip")
        here += add
        np.take(gaps, roof[a:b], axis=0, out=add, mode="clip")
        add += here
        np.exp(add, out=add)
        np.matmul(np.subtract(1.0, add, out=add), scale, out=turns[a:b])
        a = b
    return turns


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Write the gap tables shipped with the bots.")
    p.add_argument("--out", type=Path, default=TABLE_FILE)
    args = p.parse_args(argv)
    tables = build_tables()
    np.savez_compressed(args.out, log_g=tables["log_g"], weights=tables["weights"])
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
