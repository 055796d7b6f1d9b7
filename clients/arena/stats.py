"""Statistics of a result: means with intervals; per pair counts, score rate, race length."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from stacko.clients.arena.play import GameRecord
from stacko.clients.arena.schedule import ArenaResult


def mean_ci(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its normal 95% interval."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    mean = sum(values) / n
    if n == 1:
        return mean, math.nan
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, 1.96 * math.sqrt(var / n)


@dataclass(frozen=True, slots=True)
class PairStats:
    a: str
    b: str
    games: int
    wins: int
    draws: int
    losses: int
    """From ``a``'s side."""
    score: float
    """``a``'s score rate: (wins + draws/2) / games."""
    score_ci: float
    rounds_a: int
    rounds_b: int
    rounds_capped: int
    seat0_wins: int
    seat1_wins: int
    seat_draws: int
    turns_per_player: float = math.nan
    """Mean turns each player had in a round that someone finished (half the round's
    turns): the length of the race, the published Rack-O figure's measure. NaN if unknown."""
    turns_ci: float = math.nan


def pair_stats(result: ArenaResult) -> list[PairStats]:
    by_pair: dict[int, list[GameRecord]] = {}
    for rec in result.records:
        by_pair.setdefault(rec.pair, []).append(rec)
    out = []
    for _pair, recs in sorted(by_pair.items()):
        first = recs[0]
        i, j = (first.seats[1], first.seats[0]) if first.swapped else first.seats
        wins = draws = losses = ra = rb = rc = s0 = s1 = sd = 0
        per_deal: dict[int, float] = {}
        race: list[float] = []
        for rec in recs:
            race.extend(
                t / 2 for t, f in zip(rec.round_turns, rec.finishers, strict=False) if f is not None
            )
            a_seat = rec.seats.index(i)
            if rec.winner is None:
                draws += 1
                sd += 1
                pts = 0.5
            elif rec.winner == a_seat:
                wins += 1
                pts = 1.0
            else:
                losses += 1
                pts = 0.0
            if rec.winner == 0:
                s0 += 1
            elif rec.winner == 1:
                s1 += 1
            per_deal[rec.deal] = per_deal.get(rec.deal, 0.0) + pts / 2
            for f in rec.finishers:
                if f is None:
                    rc += 1
                elif f == a_seat:
                    ra += 1
                else:
                    rb += 1
        n = len(recs)
        _, ci = mean_ci(list(per_deal.values()))
        turns, turns_ci = mean_ci(race)
        out.append(
            PairStats(
                result.entrants[i].label,
                result.entrants[j].label,
                n,
                wins,
                draws,
                losses,
                (wins + draws / 2) / n,
                ci,
                ra,
                rb,
                rc,
                s0,
                s1,
                sd,
                turns,
                turns_ci,
            )
        )
    return out
