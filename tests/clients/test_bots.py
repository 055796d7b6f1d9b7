"""Stacko bots: legal moves only, views only, deterministic, and the levels in order.

The strength thresholds sit well below the measured rates (``clients.arena`` with 2,000
deals per pair; see the report of the arena run) so that a fixed small sample is never
flaky, yet still fails if a level stops being stronger than the one below.
"""

from __future__ import annotations

import random

import pytest

from stacko.clients.arena import Entrant, pair_stats, play_game, run_arena, solitaire_turns
from stacko.clients.bots.base import Bot, checked_choice
from stacko.clients.bots.registry import UnknownBotError, levels, make_bot, parse_spec
from stacko.clients.bots.stacko_bots import (
    EasyStackoBot,
    MediumStackoBot,
    RoundMemory,
    StrongStackoBot,
    ideal_slot,
    knowledge,
)
from stacko.engine.stacko import DRAW, PASS, Phase, Reshuffled, Stacko, StackoOptions, place, take
from stacko.engine.stacko_view import StackoView, resample

LEVELS = ("easy", "medium", "strong")


def test_registry_levels_and_specs() -> None:
    assert set(LEVELS) <= set(levels("stacko"))
    bot = make_bot("stacko", "strong", random.Random(1))
    assert isinstance(bot, StrongStackoBot) and isinstance(bot, Bot)
    assert parse_spec("stacko:easy") == ("stacko", "easy")
    assert parse_spec("medium") == ("stacko", "medium")
    with pytest.raises(UnknownBotError, match="available"):
        make_bot("stacko", "grandmaster", random.Random(1))
    with pytest.raises(ValueError):
        parse_spec("stacko:")


def test_ideal_slot_bands() -> None:
    assert ideal_slot(40, 40, 10) == 0 and ideal_slot(37, 40, 10) == 0
    assert ideal_slot(36, 40, 10) == 1 and ideal_slot(1, 40, 10) == 9


@pytest.mark.parametrize("a", LEVELS)
@pytest.mark.parametrize("b", LEVELS)
def test_bots_play_whole_games_with_legal_moves(a: str, b: str) -> None:
    """``play_game`` checks every choice against the legal moves (``checked_choice``)."""
    for k in range(2):
        state, plies = play_game(
            "stacko", (Entrant("stacko", a), Entrant("stacko", b)), f"legal:{a}:{b}:{k}"
        )
        assert state.outcome() is not None and plies > 0


class ViewOnly:
    """Hands a bot copies of views, and checks what it returns against the view's moves."""

    def __init__(self, bot: object) -> None:
        self.bot = bot

    def choose(self, view: StackoView) -> object:
        copy = view._replace()  # a plain value: no way back to the game state
        return checked_choice(self.bot, copy, copy.legal_moves())


@pytest.mark.parametrize("cls", [EasyStackoBot, MediumStackoBot, StrongStackoBot])
def test_choice_depends_on_the_view_only(cls: type) -> None:
    """Two games that differ only in what the seat cannot see (the opponent's dealt
    bricks, the order of the draw stack) get the same choice from equally seeded bots."""
    rng = random.Random(5)
    game = Stacko(rng=random.Random(3))
    driver = MediumStackoBot(random.Random(9))
    for _ in range(120):
        if (seat := game.to_move) is None:
            break
        view = game.view(seat)
        a = resample(view, random.Random(rng.random()))
        b = resample(view, random.Random(rng.random()))
        assert a.view(seat) == view == b.view(seat)
        assert a.towers[1 - seat] != b.towers[1 - seat] or a.stack != b.stack
        move_a = ViewOnly(cls(random.Random(1))).choose(a.view(seat))
        move_b = ViewOnly(cls(random.Random(1))).choose(b.view(seat))
        assert move_a == move_b
        game.apply(driver.choose(view, game.legal_moves()))


def test_bots_never_see_hidden_bricks_in_their_views() -> None:
    """What the bots are given: the opponent's dealt bricks are None, the stack a size."""
    game = Stacko(rng=random.Random(11))
    view = game.view(0)
    assert all(b is None for b in view.towers[1])
    assert isinstance(view.stack_size, int) and not hasattr(view, "stack")


@pytest.mark.parametrize("cls", [EasyStackoBot, MediumStackoBot, StrongStackoBot])
def test_same_seed_same_game(cls: type) -> None:
    def moves(seed: int) -> list[str]:
        game = Stacko(rng=random.Random(seed))
        bots = [cls(random.Random(1)), cls(random.Random(2))]
        out = []
        while (seat := game.to_move) is not None:
            move = bots[seat].choose(game.view(seat), game.legal_moves())
            out.append(str(move))
            game.apply(move)
        return out

    assert moves(4) == moves(4)


def _one_short(finisher_on_top: bool) -> Stacko:
    """Seat 0 one brick short of finished (24 goes into slot 4); 24 is the open brick, or
    the top of the draw stack with 3 open."""
    game = Stacko(StackoOptions(rounds=1), rng=random.Random(2))
    game.towers[0] = [40, 36, 32, 28, 2, 20, 16, 12, 8, 1]
    rest = [b for b in range(1, 41) if b not in game.towers[0] and b not in (3, 24)]
    game.towers[1] = rest[:10]
    if finisher_on_top:
        game.stack, game.discard = [*rest[10:], 24], [3]
    else:
        game.stack, game.discard = [*rest[10:], 3], [24]
    return game


@pytest.mark.parametrize("cls", [EasyStackoBot, MediumStackoBot, StrongStackoBot])
def test_finishing_move_is_always_made(cls: type) -> None:
    """Rules §6: finishing scores 50; every level takes or places a finishing brick."""
    for k in range(10):
        game = _one_short(finisher_on_top=False)
        assert cls(random.Random(k)).choose(game.view(0), game.legal_moves()) == take(4)
        game = _one_short(finisher_on_top=True)
        game.apply(DRAW)
        assert cls(random.Random(k)).choose(game.view(0), game.legal_moves()) == place(4)
        game.apply(place(4))
        outcome = game.outcome()
        assert outcome is not None and outcome.winner == 0


def test_memory_knows_what_went_into_the_stack() -> None:
    """After a reshuffle, bricks seen in the discard pile and not visible now are in the
    stack: the strong bot gives them a higher chance of being drawn than never-seen ones."""
    game = Stacko(rng=random.Random(21))
    memory = RoundMemory()
    while not any(isinstance(e, Reshuffled) for e in game.events):
        memory.update(game.view(0))
        game.apply(DRAW if game.phase is Phase.TURN else PASS)  # both seats draw and pass
    view = game.view(0)
    memory.update(view)
    assert memory.reshuffles == 1
    visible = set(view.discard) | {b for t in view.towers for b in t if b is not None}
    in_stack = [b for b in memory.seen if b not in visible]
    never = [b for b in range(1, 41) if b not in visible and b not in memory.seen]
    assert in_stack and never
    know = knowledge(view, memory, 0.5, 0.1)
    assert all(know.draw_prob[b] > know.draw_prob[n] for b in in_stack for n in never)
    assert abs(sum(know.draw_prob) - 1.0) < 1e-9


def test_strong_finishes_solitaire_faster_than_medium() -> None:
    seeds = [f"t:{k}" for k in range(12)]
    strong = [solitaire_turns(StrongStackoBot(random.Random(k)), s) for k, s in enumerate(seeds)]
    medium = [solitaire_turns(MediumStackoBot(random.Random(k)), s) for k, s in enumerate(seeds)]
    assert max(strong) < 40 and sum(strong) < sum(medium)


def test_strong_beats_medium() -> None:
    """30 duplicate deals (60 games); measured about 0.85 on 2,000 deals."""
    result = run_arena([Entrant("stacko", "medium"), Entrant("stacko", "strong")], 30, seed=3)
    (p,) = pair_stats(result)
    assert p.games == 60
    assert 1 - p.score >= 0.6, p


def test_easy_against_medium_in_range() -> None:
    """Measured about 0.3 on 2,000 deals; a loose band on 60 deals (120 games)."""
    result = run_arena([Entrant("stacko", "easy"), Entrant("stacko", "medium")], 60, seed=5)
    (p,) = pair_stats(result)
    assert 0.12 <= p.score <= 0.5, p
