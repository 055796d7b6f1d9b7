"""The text report and the files a run writes (report.txt, results.json, ratings.png)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from stacko.clients.arena.plot import plot
from stacko.clients.arena.ratings import Rating
from stacko.clients.arena.schedule import ArenaResult
from stacko.clients.arena.stats import mean_ci, pair_stats

# -- reports ----------------------------------------------------------------------------------


def report(result: ArenaResult, rated: Sequence[Rating]) -> str:
    if result.server is None:
        where = "in-process"
    elif result.duplicate:
        where = f"live through the arena's own server {result.server}"
    else:
        where = (
            f"live through {result.server}: the server dealt every game itself, so the two"
            " games of a deal were NOT dealt alike and a rerun differs"
        )
    deals = "duplicate deals" if result.duplicate else "deals"
    why = "time limit" if not result.failures else f"{len(result.failures)} deals failed"
    lines = [
        f"arena: {result.game}, seed {result.seed}, {result.deals_asked} {deals} per"
        f" pair (2 games each, seats swapped), {len(result.records)} games in"
        f" {result.seconds:.0f} s" + ("" if result.complete else f"  ** INCOMPLETE: {why} **"),
        f"games played {where}",
        *(f"failed: {f}" for f in result.failures),
        "",
    ]
    stats = pair_stats(result)
    if stats:
        lines.append(
            f"{'pair':<22}{'games':>6}{'W':>6}{'D':>5}{'L':>6}{'score':>8}{'±95%':>7}"
            f"{'rounds A:B:cap':>17}{'seat0:seat1:draw':>19}{'race turns':>12}"
        )
        for p in stats:
            lines.append(
                f"{p.a + ' vs ' + p.b:<22}{p.games:>6}{p.wins:>6}{p.draws:>5}{p.losses:>6}"
                f"{p.score:>8.3f}{p.score_ci:>7.3f}"
                f"{f'{p.rounds_a}:{p.rounds_b}:{p.rounds_capped}':>17}"
                f"{f'{p.seat0_wins}:{p.seat1_wins}:{p.seat_draws}':>19}"
                f"{p.turns_per_player:>12.2f}"
            )
        s0 = sum(p.seat0_wins for p in stats)
        s1 = sum(p.seat1_wins for p in stats)
        sd = sum(p.seat_draws for p in stats)
        total = s0 + s1 + sd
        if total:
            lines.append(
                f"first mover (seat 0 starts round 1): seat 0 won {s0}, seat 1 won {s1},"
                f" draws {sd}; seat 0 score rate {(s0 + sd / 2) / total:.3f}"
            )
        lines.append(
            "(race turns: turns per player in a finished round, the measure of the published"
            " Rack-O player's 8.88)"
        )
        lines.append("")
    if rated:
        lines.append(f"{'bot':<12}{'rating':>8}{'95% interval':>20}{'games':>8}")
        for r in rated:
            lines.append(
                f"{r.label:<12}{r.elo:>8.0f}{f'[{r.low:.0f}, {r.high:.0f}]':>20}{r.games:>8}"
            )
        lines.append("(Bradley-Terry via choix, Elo scale, mean 0; bootstrap over deals)")
        lines.append("")
    if result.solitaire:
        lines.append(f"{'solitaire':<12}{'towers':>7}{'mean turns':>12}{'±95%':>7}{'capped':>8}")
        for label, turns in result.solitaire.items():
            m, ci = mean_ci(turns)
            capped = sum(t >= result.solitaire_cap for t in turns)
            lines.append(f"{label:<12}{len(turns):>7}{m:>12.2f}{ci:>7.2f}{capped:>8}")
        lines.append("(turns to finish one tower alone: see clients.arena.solitaire_turns)")
    return "\n".join(lines)


def write_outputs(result: ArenaResult, rated: Sequence[Rating], text: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.txt").write_text(text + "\n")
    data = {
        "game": result.game,
        "seed": result.seed,
        "deals_per_pair": result.deals_asked,
        "complete": result.complete,
        "seconds": result.seconds,
        "server": result.server,
        "duplicate_deals": result.duplicate,
        "failures": result.failures,
        "pairs": [asdict(p) for p in pair_stats(result)],
        "ratings": [asdict(r) for r in rated],
        "solitaire": {
            k: {"towers": len(v), "mean": mean_ci(v)[0], "ci95": mean_ci(v)[1]}
            for k, v in result.solitaire.items()
        },
    }
    (out / "results.json").write_text(json.dumps(data, indent=2) + "\n")
    if rated:
        plot(result, rated, out / "ratings.png")
