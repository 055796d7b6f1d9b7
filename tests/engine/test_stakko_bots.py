"""Stakko bots: they play only legal moves from views, replay exactly, and search beats random."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from stacko.clients.bots.stakko_bots import RandomStakkoBot, SearchStakkoBot, StakkoBot, play
from stacko.engine.stakko import VARIANTS, Stakko, StakkoMove, StakkoOptions, StakkoView, move

GAMES_PER_VARIANT = 40


class Recording:
    """Wraps a bot: checks each choice is legal for the view it got, and keeps them."""

    def __init__(self, bot: StakkoBot) -> None:
        self.bot = bot
        self.name = bot.name
        self.moves: list[StakkoMove] = []

    def choose(self, view: StakkoView, legal: Sequence[StakkoMove]) -> StakkoMove:
        assert view.my_turn and legal == view.legal_moves()
        move = self.bot.choose(view, legal)
        assert move in legal
        self.moves.append(move)
        return move


@pytest.mark.parametrize("variant", VARIANTS)
def test_search_beats_random(variant: str) -> None:
    """Seats alternate; the searcher must win at least 90% of this sample (the bench script
    plays a larger one)."""
    wins = 0
    for g in range(GAMES_PER_VARIANT):
        seat = g % 2
        bots: list[StakkoBot] = [RandomStakkoBot(random.Random(10_000 + g))] * 2
        bots[seat] = SearchStakkoBot(random.Random(g))
        outcome = play(bots, StakkoOptions(variant=variant))
        wins += outcome.winner == seat
    assert wins / GAMES_PER_VARIANT >= 0.9, f"{variant}: {wins}/{GAMES_PER_VARIANT}"


def test_bots_choose_legal_moves_and_replay_exactly() -> None:
    def game(seed: int) -> tuple[list[StakkoMove], list[StakkoMove]]:
        a = Recording(SearchStakkoBot(random.Random(seed), nodes=200))
        b = Recording(RandomStakkoBot(random.Random(seed + 1)))
        play([a, b], StakkoOptions(variant="red"))
        return a.moves, b.moves

    assert game(3) == game(3)
    assert game(3) != game(4)


def test_search_finds_the_only_winning_move() -> None:
    """White owns 3 stacks; only the one on space 5 can move, onto Black's home. Every lift
    ends the game (both sides blocked): 1..3 discs lose, 4 draw (5 to 5), all 5 win."""
    g = Stakko.from_line("RWWBBB GBBBBB G G G GWWWWW GW GW RB")
    assert g.legal_moves() == tuple(move(5, k) for k in range(1, 6))
    bot = SearchStakkoBot(random.Random(0), nodes=50)
    view = g.view(0)
    choice = bot.choose(view, view.legal_moves())
    assert choice == move(5, 5)
    g.apply(choice)
    outcome = g.outcome()
    assert outcome is not None and outcome.winner == 0 and outcome.scores == (6, 5)


def test_search_respects_a_tiny_budget() -> None:
    view = Stakko(rng=random.Random(0)).view(0)
    bot = SearchStakkoBot(random.Random(0), nodes=1)
    assert bot.choose(view, view.legal_moves()) in view.legal_moves()
    with pytest.raises(ValueError):
        SearchStakkoBot(random.Random(0), nodes=0)
    with pytest.raises(ValueError):
        RandomStakkoBot(random.Random(0)).choose(view, ())
