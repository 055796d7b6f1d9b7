"""The arena: duplicate deals, determinism, bookkeeping that adds up, ratings in order."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from clients.arena import (
    ArenaResult,
    DuplicateRandom,
    Entrant,
    main,
    pair_stats,
    ratings,
    report,
    run_arena,
)
from engine.stacko import Stacko

BOTS = [Entrant("stacko", level) for level in ("easy", "medium", "strong")]


@pytest.fixture(scope="module")
def round_robin() -> ArenaResult:
    """The sample every ordering test shares: 16 duplicate deals per pair (96 games)."""
    return run_arena(BOTS, 16, seed=2024, solitaire=3)


def test_duplicate_random_deals_alike_whatever_happened_before() -> None:
    a, b = DuplicateRandom("s", 40), DuplicateRandom("s", 40)
    b.shuffle(list(range(20)))  # a reshuffle in one game only
    b.random()
    assert Stacko(rng=a).towers == Stacko(rng=b).towers
    x, y = list(range(40)), list(range(40))
    a.shuffle(x)
    b.shuffle(y)
    assert x == y  # the next round's deal too


class RecordingRandom(DuplicateRandom):
    def __init__(self, seed: str) -> None:
        super().__init__(seed, 40)
        self.dealt: list[list[int]] = []
        self.reshuffles = 0

    def shuffle(self, x: Any) -> None:
        super().shuffle(x)
        if len(x) == 40:
            self.dealt.append(list(x))
        else:
            self.reshuffles += 1


def test_both_games_of_a_deal_are_dealt_alike_in_every_round() -> None:
    """Round 2 is dealt after rounds of different lengths (and reshuffles), yet alike."""
    logs = []
    for bots in ((BOTS[0], BOTS[2]), (BOTS[2], BOTS[0])):
        rng = RecordingRandom("1:7")
        game = Stacko(rng=rng)
        players = [e.make(random.Random(s)) for s, e in enumerate(bots)]
        while (seat := game.to_move) is not None:
            game.apply(players[seat].choose(game.view(seat), game.legal_moves()))
        assert len(game.results) == 2
        logs.append(rng)
    assert len(logs[0].dealt) >= 2 and logs[0].dealt == logs[1].dealt


def test_arena_is_deterministic_for_a_seed() -> None:
    pair = [BOTS[0], BOTS[1]]
    one = run_arena(pair, 6, seed=9, solitaire=2)
    two = run_arena(pair, 6, seed=9, solitaire=2)
    assert one.records == two.records and one.solitaire == two.solitaire
    other = run_arena(pair, 6, seed=10)
    assert other.records != one.records


def test_two_workers_give_the_same_results() -> None:
    pair = [BOTS[0], BOTS[1]]
    assert run_arena(pair, 8, seed=4, workers=2).records == run_arena(pair, 8, seed=4).records


def test_counts_add_up(round_robin: ArenaResult) -> None:
    stats = pair_stats(round_robin)
    assert len(stats) == 3
    for p in stats:
        assert p.games == 32
        assert p.wins + p.draws + p.losses == p.games
        assert p.seat0_wins + p.seat1_wins + p.seat_draws == p.games
        assert p.rounds_a + p.rounds_b + p.rounds_capped == 2 * p.games  # 2 rounds a game
        assert 0.0 <= p.score <= 1.0
    deals = {(r.pair, r.deal) for r in round_robin.records}
    assert len(deals) == 3 * 16
    for pair, deal in deals:
        games = [r for r in round_robin.records if (r.pair, r.deal) == (pair, deal)]
        assert sorted(g.swapped for g in games) == [False, True]
        assert games[0].seats == games[1].seats[::-1]


def test_ratings_in_order(round_robin: ArenaResult) -> None:
    rated = ratings(round_robin, bootstrap=50)
    assert [r.label for r in rated] == ["strong", "medium", "easy"]
    assert abs(sum(r.elo for r in rated)) < 1e-6
    for r in rated:
        assert r.low <= r.elo <= r.high
    text = report(round_robin, rated)
    assert "solitaire" in text and "first mover" in text


def test_cli_writes_report_json_and_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "arena"
    code = main(
        [
            "--bots",
            "easy,medium",
            "--deals",
            "3",
            "--solitaire",
            "2",
            "--seed",
            "5",
            "--bootstrap",
            "20",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    assert "easy vs medium" in capsys.readouterr().out
    data = json.loads((out / "results.json").read_text())
    assert data["pairs"][0]["games"] == 6 and data["complete"]
    png = (out / "ratings.png").read_bytes()
    assert png.startswith(b"\x89PNG")


def test_cli_refuses_unknown_bots_and_live_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--bots", "easy,nobody", "--no-progress"]) == 2
    assert "nobody" in capsys.readouterr().err
    assert main(["--server", "ws://127.0.0.1:8765", "--no-progress"]) == 2


def test_entrant_makes_its_bot() -> None:
    bot = BOTS[2].make(random.Random(1))
    assert bot.name == "strong"
