"""The arena: duplicate deals, determinism, bookkeeping that adds up, ratings in order."""

from __future__ import annotations

import json
import random
import socket
from pathlib import Path
from typing import Any

import pytest

from stacko.clients.arena import (
    LOCAL,
    ArenaResult,
    DuplicateRandom,
    Entrant,
    main,
    pair_stats,
    ratings,
    report,
    run_arena,
    run_live_arena,
    solitaire_turns,
)
from stacko.engine.stacko import Stacko
from stacko.server.app import Server
from stacko.server.config import ServerConfig

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


def test_cli_refuses_unknown_bots_and_bad_live_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--bots", "easy,nobody", "--no-progress"]) == 2
    assert "nobody" in capsys.readouterr().err
    assert main(["--server", "127.0.0.1:8765", "--no-progress"]) == 2
    assert "ws://" in capsys.readouterr().err
    assert main(["--server", "local", "--solitaire", "5", "--no-progress"]) == 2
    assert "solitaire" in capsys.readouterr().err


def test_help_explains_itself(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for phrase in ("Duplicate deals", "Deterministic", "progress bar", "--server local", "NOT"):
        assert phrase in text, phrase


# -- live: through a WebSocket server on 127.0.0.1 -------------------------------------------


def check_live_counts(result: ArenaResult, deals: int, pairs: int) -> None:
    assert result.complete and not result.failures
    assert len(result.records) == 2 * deals * pairs
    stats = pair_stats(result)
    assert len(stats) == pairs
    for p in stats:
        assert p.games == 2 * deals
        assert p.wins + p.draws + p.losses == p.games
        assert p.seat0_wins + p.seat1_wins + p.seat_draws == p.games
        assert p.rounds_a + p.rounds_b + p.rounds_capped == 2 * p.games
    for rec in result.records:
        assert rec.plies > 0 and len(rec.finishers) == 2
        assert (rec.winner is None) == (rec.scores[0] == rec.scores[1])


def test_live_arena_on_a_local_server_plays_the_in_process_games() -> None:
    """Every bot on its own connection to a server started in-process on 127.0.0.1; that
    server deals the arena's duplicate deals, so the games are exactly the in-process ones."""
    live = run_arena(BOTS, 2, seed=31, server=LOCAL, parallel=2)
    check_live_counts(live, deals=2, pairs=3)
    assert live.server is not None and live.server.startswith("ws://127.0.0.1:")
    assert live.duplicate
    assert live.records == run_arena(BOTS, 2, seed=31).records
    assert "live through the arena's own server" in report(live, ratings(live, bootstrap=10))


async def test_live_arena_on_a_running_server_url() -> None:
    """A server the arena did not start deals with its own RNG: the games still add up, and
    the report says the deals were not duplicated."""
    config = ServerConfig(host="127.0.0.1", port=0, rate_per_second=1000.0, burst=2000)
    async with Server(config) as srv:
        result = await run_live_arena(BOTS[1:], 3, seed=2, server=srv.url)
        assert srv.hub.rooms == {} or all(r.status != "playing" for r in srv.hub.rooms.values())
    check_live_counts(result, deals=3, pairs=1)
    assert result.server == srv.url and not result.duplicate
    assert "NOT dealt alike" in report(result, [])


def test_live_cli_writes_the_same_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "live"
    args = ["--bots", "easy,strong", "--deals", "2", "--bootstrap", "10", "--no-progress"]
    assert main([*args, "--server", "local", "--out", str(out)]) == 0
    assert "easy vs strong" in capsys.readouterr().out
    data = json.loads((out / "results.json").read_text())
    assert data["pairs"][0]["games"] == 4 and data["complete"] and data["duplicate_deals"]
    assert data["server"].startswith("ws://127.0.0.1:") and data["solitaire"] == {}
    assert (out / "ratings.png").read_bytes().startswith(b"\x89PNG")


def test_live_games_that_cannot_be_played_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing listens on the port: every deal fails, the run says so and exits 1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        args = ["--bots", "easy,medium", "--deals", "2", "--no-progress", "--out", str(tmp_path)]
        assert main([*args, "--server", f"ws://127.0.0.1:{port}/"]) == 1
    out = capsys.readouterr().out
    assert "INCOMPLETE: 2 deals failed" in out and out.count("failed: pair 0 deal") == 2


def test_solitaire_deals() -> None:
    """Both solitaire deals finish; one-tower puts the 10 other bricks in play, and bots see
    the absent tower as hidden slots only."""
    seen: list[tuple[int, tuple[int | None, ...]]] = []

    class Spy:
        name = "spy"

        def __init__(self) -> None:
            self.bot = BOTS[2].make(random.Random(3))

        def choose(self, view: Any, legal: Any) -> Any:
            seen.append((view.stack_size, view.towers[1]))
            return self.bot.choose(view, legal)

    for deal, stack in (("normal", 19), ("one-tower", 29)):
        seen.clear()
        turns = solitaire_turns(Spy(), "solo:1", deal=deal)
        assert 0 < turns < 500 and len(seen) >= turns
        assert seen[0][0] == stack and seen[0][1] == (None,) * 10
    with pytest.raises(ValueError, match="deal"):
        solitaire_turns(Spy(), "solo:1", deal="two-towers")


def test_entrant_makes_its_bot() -> None:
    bot = BOTS[2].make(random.Random(1))
    assert bot.name == "strong"


def test_missing_arena_extra_is_explained(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """After a plain ``pip install .`` the arena says what to install instead of a traceback."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "tqdm" else real(name, *a)
    )
    assert main(["--deals", "1", "--solitaire", "0"]) == 2
    err = capsys.readouterr().err
    assert "tqdm" in err and "stacko[arena]" in err
