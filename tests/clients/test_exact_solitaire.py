"""The exact solitaire optimum on small towers (``bench/exact_solitaire.py``): the
yardstick that a tower's value is measured against reproduces the figures of issue 19."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bench.exact_solitaire import (
    Towers,
    backed_up,
    evaluate_values,
    mirrors,
    solve,
    strong_value,
)


def test_four_slots_sixteen_bricks_optimum() -> None:
    sol = solve(4, 16)
    assert round(sol.mean_all, 3) == 3.138
    assert round(sol.mean_unsorted, 3) == 3.274  # the same without the deals that come sorted


def test_five_slots_twenty_bricks_optimum() -> None:
    """1.86 million towers (half of them solved, the other half are their mirrors); a loose
    tolerance keeps it to a few sweeps (the values approach the optimum from above, so the
    third decimal is already settled): about 10 s."""
    sol = solve(5, 20, tol=2e-3)
    assert round(sol.mean_all, 3) == 4.597
    assert round(sol.mean_unsorted, 3) == 4.636


def test_values_obey_the_bellman_equation_on_tiny_towers() -> None:
    """3 slots / 8 bricks, checked state by state with plain Python: each value is the best
    of waiting for the k best bricks, and nothing is better than the optimum. Every state is
    checked, the mirrors that ``solve`` does not sweep included, so the symmetry it relies
    on is checked too."""
    sol = solve(3, 8)
    t = Towers.build(3, 8)
    index = {tuple(int(b) for b in row): k for k, row in enumerate(t.towers)}
    for k, tower in enumerate(index):
        if sol.values[k] == 0:
            assert list(tower) == sorted(tower, reverse=True)
            continue
        w = sorted(
            min(sol.values[index[(*tower[:s], b, *tower[s + 1 :])]] for s in range(3))
            for b in range(1, 9)
            if b not in tower
        )
        best = min((1 + sum(w[:j]) / 5) / (j / 5) for j in range(1, 6))
        assert sol.values[k] == pytest.approx(best, abs=1e-7)


def test_a_greedy_rule_is_never_better_than_the_optimum() -> None:
    opt = solve(4, 16).mean_all
    strong = evaluate_values(4, 16, strong_value(4, 16))
    assert opt < strong < 1.05 * opt
    # A value that prefers nothing (every tower alike) never places: it never finishes.
    assert evaluate_values(3, 8, lambda towers: np.zeros(len(towers))) == np.inf
    # The optimum's own values, used greedily, give the optimum back.
    sol = solve(3, 8)
    lookup = {
        tuple(int(b) for b in row): sol.values[k] for k, row in enumerate(Towers.build(3, 8).towers)
    }
    own = evaluate_values(
        3, 8, lambda towers: np.array([lookup[tuple(map(int, r))] for r in towers])
    )
    assert own == pytest.approx(sol.mean_all, abs=1e-6)
    assert len(list(itertools.permutations(range(8), 3))) == len(sol.values)


def test_mirror_pairs_are_an_involution_that_keeps_sorted_towers_sorted() -> None:
    t = Towers.build(4, 9)
    m = mirrors(t)
    assert np.array_equal(m[m], np.arange(len(t.towers)))
    assert np.array_equal(t.finished[m], t.finished)
    assert list(t.towers[m[0]]) == [10 - b for b in reversed(t.towers[0].tolist())]


def test_a_backup_is_one_bellman_step_and_leaves_the_optimum_unchanged() -> None:
    """``backed_up`` (the value strong places by when alone, in this model): checked tower
    by tower with plain Python on 3 slots / 8 bricks for a rough value (the summed gap
    costs), only the bricks outside the tower drawn; the optimal values come out
    unchanged."""
    sol = solve(3, 8)
    t = Towers.build(3, 8)
    index = {tuple(int(b) for b in row): k for k, row in enumerate(t.towers)}

    def optimum(towers: np.ndarray) -> np.ndarray:
        return np.array([sol.values[index[tuple(map(int, r))]] for r in towers])

    once = backed_up(3, 8, optimum)(t.towers.astype(np.int64))
    assert np.allclose(once, sol.values, atol=1e-7)
    rough = strong_value(3, 8, run_bonus=0.0)
    v = rough(t.towers.astype(np.int64))
    looked = backed_up(3, 8, rough)(t.towers.astype(np.int64))
    for k, tower in enumerate(index):
        if list(tower) == sorted(tower, reverse=True):
            assert looked[k] == 0.0
            continue
        w = sorted(
            min(
                0.0 if list(after) == sorted(after, reverse=True) else v[index[after]]
                for s in range(3)
                if (after := (*tower[:s], b, *tower[s + 1 :]))
            )
            for b in range(1, 9)
            if b not in tower
        )
        best = min((1 + sum(w[:j]) / 5) / (j / 5) for j in range(1, 6))
        assert looked[k] == pytest.approx(best, rel=1e-9)
