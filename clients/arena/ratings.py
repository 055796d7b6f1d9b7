"""Bradley-Terry ratings (via choix) on the Elo scale, with bootstrap intervals over deals."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stacko.clients.arena.play import GameRecord
from stacko.clients.arena.schedule import ArenaResult

ELO_PER_NAT = 400.0 / math.log(10.0)
"""Bradley-Terry log-strengths to the Elo scale (a 400-point gap is 10:1 odds)."""


@dataclass(frozen=True, slots=True)
class Rating:
    label: str
    elo: float
    low: float
    high: float
    games: int


def _comparisons(result: ArenaResult, recs: Sequence[GameRecord]) -> Any:
    import numpy as np

    n = len(result.entrants)
    comp = np.zeros((n, n))
    for rec in recs:
        x, y = rec.seats
        if rec.winner is None:
            comp[x, y] += 0.5
            comp[y, x] += 0.5
        elif rec.winner == 0:
            comp[x, y] += 1
        else:
            comp[y, x] += 1
    return comp


def _fit_bt(comp: Any, alpha: float) -> Any:
    import choix  # Bradley-Terry by iterative Luce spectral ranking
    import numpy as np

    params = choix.ilsr_pairwise_dense(comp, alpha=alpha, max_iter=1000)
    params = np.asarray(params, dtype=float)
    return (params - params.mean()) * ELO_PER_NAT


def ratings(result: ArenaResult, bootstrap: int = 200, alpha: float = 0.01) -> list[Rating]:
    """Bradley-Terry ratings on the Elo scale (mean 0), with 95% bootstrap intervals.

    A draw counts as half a win each way; ``alpha`` is choix's light regularisation, which
    keeps a perfect record finite. The bootstrap resamples whole duplicate deals within each
    pair (both games of a deal together), with its own fixed seed.
    """
    import numpy as np

    if len(result.entrants) < 2 or not result.records:
        return []
    point = _fit_bt(_comparisons(result, result.records), alpha)
    groups: dict[tuple[int, int], list[GameRecord]] = {}
    for rec in result.records:
        groups.setdefault((rec.pair, rec.deal), []).append(rec)
    by_pair: dict[int, list[list[GameRecord]]] = {}
    for (pair, _deal), recs in sorted(groups.items()):
        by_pair.setdefault(pair, []).append(recs)
    rng = np.random.default_rng(result.seed)
    samples = []
    for _ in range(bootstrap):
        picked: list[GameRecord] = []
        for deals in by_pair.values():
            for k in rng.integers(0, len(deals), size=len(deals)):
                picked.extend(deals[k])
        samples.append(_fit_bt(_comparisons(result, picked), alpha))
    n_games = [0] * len(result.entrants)
    for rec in result.records:
        for s in rec.seats:
            n_games[s] += 1
    out = []
    for k, e in enumerate(result.entrants):
        if samples:
            col = np.array([s[k] for s in samples])
            low, high = float(np.percentile(col, 2.5)), float(np.percentile(col, 97.5))
        else:
            low = high = math.nan
        out.append(Rating(e.label, float(point[k]), low, high, n_games[k]))
    return sorted(out, key=lambda r: -r.elo)
