"""Stacko bots: legal moves only, views only, deterministic, and the levels in order.

The strength thresholds sit well below the measured rates (``clients.arena`` with 2,000
deals per pair; see the report of the arena run) so that a fixed small sample is never
flaky, yet still fails if a level stops being stronger than the one below.
"""

from __future__ import annotations

import ast
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from stacko import bots
from stacko.bots.base import Bot, checked_choice
from stacko.bots.registry import UnknownBotError, available, levels, make_bot, parse_spec
from stacko.bots.stacko_bots import (
    EasyStackoBot,
    KyleStackoBot,
    MediumStackoBot,
    RoundMemory,
    StrongStackoBot,
    StrongV1StackoBot,
    _runs,
    ideal_slot,
    knowledge,
)
from stacko.clients.arena import Entrant, pair_stats, play_game, run_arena, solitaire_turns
from stacko.engine.stacko import (
    DRAW,
    PASS,
    Drew,
    Phase,
    Reshuffled,
    Stacko,
    StackoOptions,
    place,
    take,
)
from stacko.engine.stacko_view import StackoView, resample
from tests.test_namespace import parse_without_gc

LEVELS = ("easy", "medium", "strong")
YARDSTICKS = ("kyle", "strong-v1")


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


@pytest.mark.parametrize("level", YARDSTICKS)
def test_yardstick_levels_play_legal_games(level: str) -> None:
    """The range heuristic and the fixed reference level are arena levels like the others."""
    assert level in levels("stacko")
    for k in range(2):
        state, _ = play_game(
            "stacko", (Entrant("stacko", level), Entrant("stacko", "medium")), f"ys:{k}"
        )
        assert state.outcome() is not None


def test_kyle_takes_a_brick_into_its_range_only_over_an_out_of_range_brick() -> None:
    bot = KyleStackoBot(random.Random(1))
    # Slot 1 holds 2, out of its range 33..36; slot 9 holds 12 (no single brick finishes).
    tower = [40, 2, 30, 25, 21, 17, 13, 9, 5, 12]
    view = Stacko(rng=random.Random(2)).view(0)._replace(towers=(tuple(tower), (None,) * 10))
    assert bot.choose(view._replace(discard=(34,)), [take(s) for s in range(10)] + [DRAW]) == take(
        1
    )
    # 38 belongs to slot 0, whose 40 is already in range: it draws instead.
    assert bot.choose(view._replace(discard=(38,)), [take(s) for s in range(10)] + [DRAW]) == DRAW


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


def test_memory_knows_when_the_turn_comes_straight_back() -> None:
    """``alone`` once this seat has played and the opponent has not (the solitaire harness
    hands the turn straight back); never in a game where both seats play."""
    game = Stacko(rng=random.Random(5))
    mine, theirs = RoundMemory(), RoundMemory()
    assert not mine.alone
    for _ in range(12):  # three turns each: draw and pass
        mine.update(game.view(0))
        theirs.update(game.view(1))
        game.apply(DRAW if game.phase is Phase.TURN else PASS)
    mine.update(game.view(0))
    theirs.update(game.view(1))
    assert mine.my_turns == 3 and theirs.my_turns == 3
    assert not mine.alone and not theirs.alone
    solo = Stacko(rng=random.Random(5))
    memory = RoundMemory()
    for _ in range(3):
        solo._to_move = 0  # what ``solitaire_turns`` does: no opponent turn
        memory.update(solo.view(0))
        solo.apply(DRAW)
        solo.apply(PASS)
    solo._to_move = 0
    memory.update(solo.view(0))
    assert memory.my_turns == 3 and memory.alone


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


class StopAfter:
    """A ``should_stop`` that turns True on its ``n``-th call, counting the calls."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.calls = 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.calls >= self.n


@pytest.mark.parametrize("n", [1, 2, 4])
def test_strong_answers_when_asked_to_stop_on_large_options(n: int) -> None:
    """20 slots and 200 bricks: drawing is valued in several steps; the n-th
    ``should_stop`` call ends it, and the move is legal; with no budget, every step runs."""
    game = Stacko(StackoOptions(bricks=200, tower=20), rng=random.Random(1))
    view = game.view(game.to_move)
    legal = view.legal_moves()
    stop = StopAfter(n)
    move = StrongStackoBot(random.Random(1)).choose(view, legal, should_stop=stop)
    assert move in legal and stop.calls == n
    full = StopAfter(10**9)
    assert StrongStackoBot(random.Random(1)).choose(view, legal, should_stop=full) in legal
    assert full.calls > 4  # the draw value took more steps than any stop above allowed


def test_every_level_accepts_should_stop() -> None:
    game = Stacko(rng=random.Random(2))
    view = game.view(game.to_move)
    for level in levels("stacko"):
        bot = make_bot("stacko", level, random.Random(3))
        assert checked_choice(bot, view, view.legal_moves(), lambda: True) in view.legal_moves()


def test_yardsticks_are_for_the_arena_not_offered_to_players() -> None:
    offered = available()["stacko"]
    assert offered == ["easy", "medium", "strong"]
    assert {"kyle", "strong-v1"} <= set(levels("stacko"))


def test_the_bots_package_depends_on_the_engine_only() -> None:
    """Bots are players of views: the server, the SDK and the arena import them, never the
    other way round (no ``clients``, ``server`` or ``protocol`` import, even a lazy one)."""
    root = Path(bots.__file__).parent
    allowed = {"stacko.bots", "stacko.engine", "numpy"} | set(sys.stdlib_module_names)
    for path in sorted(root.glob("*.py")):
        tree = parse_without_gc(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top in allowed or ".".join(name.split(".")[:2]) in allowed, (
                    f"{path.name} imports {name}"
                )


def _midgame_view(opp: tuple[int | None, ...], totals: tuple[int, int], rnd: int) -> StackoView:
    game = Stacko(rng=random.Random(4))
    view = game.view(0)
    return view._replace(towers=(view.towers[0], opp), totals=totals, round=rnd)


def test_strong_charges_for_the_bricks_the_opponents_tower_wants() -> None:
    """The opponent shows 40 . 30 . 20 . 10 . 5 . (hidden slots between): a brick for one of
    its gaps is a gift, the more so the fewer bricks could fill that gap; a brick it holds is
    none, and with nothing shown no brick is singled out."""
    bot = StrongStackoBot(random.Random(1))
    opp = (40, None, 30, None, 20, None, 10, None, 5, None)
    view = _midgame_view(opp, (0, 0), 1)
    bot._make_model(40, 10)
    gifts = bot._gifts(view)
    assert gifts is not None
    assert gifts[35] > 0 and gifts[25] > 0 and gifts[15] > 0
    assert gifts[30] == 0 and gifts[40] == 0  # bricks it holds never come to it
    # 2..4 are the only bricks for its top slot, 31..39 nine for slot 1: 2 is scarcer.
    assert gifts[2] > gifts[35]
    assert bot._gifts(_midgame_view((None,) * 10, (0, 0), 1)) is None
    assert StrongV1StackoBot.gift_weight == 0


def test_strong_weighs_the_run_as_the_scores_demand() -> None:
    bot = StrongStackoBot(random.Random(1))
    hidden = (None,) * 10
    bot._plan(_midgame_view(hidden, (0, 0), 1))  # round 1 of 2: the plain run bonus
    assert bot._need == 0 and bot._bonus == pytest.approx(bot.run_bonus)
    bot._plan(_midgame_view(hidden, (50, 20), 2))  # ahead by 30: a run of 5 wins anyway
    assert bot._need == 5
    bot._plan(_midgame_view(hidden, (20, 50), 2))  # behind by 30: no run is enough
    assert bot._need == 0 and bot._bonus == 0
    bot._plan(_midgame_view(hidden, (95, 20), 2))  # ahead by 75: won whatever happens
    assert bot._need == 0


def _choice_and_run(
    mine: tuple[int, ...], open_brick: int, totals: tuple[int, int], rnd: int
) -> tuple[str, int]:
    """What strong does with ``open_brick`` offered to ``mine`` (seat 0, its turn, nothing
    of the opponent's tower shown, the opponent's draw the last move: a turn within the
    round, not its first), and the run from the bottom its tower then has."""
    view = Stacko(rng=random.Random(4)).view(0)
    view = view._replace(
        towers=(mine, (None,) * 10), discard=(open_brick,), totals=totals, round=rnd,
        events=(Drew(seat=1, brick=None),),
    )  # fmt: skip
    move = StrongStackoBot(random.Random(1)).choose(view, view.legal_moves())
    tower = list(mine)
    if move.slot is not None:  # a take: the turn starts with the open brick
        tower[move.slot] = open_brick
    return str(move), int(_runs(np.array([tower]))[0])


def test_strong_secures_the_run_that_wins_the_game_before_racing() -> None:
    """Round 2, ahead 50 : 10: a run of 3 wins the game whoever finishes. Offered 36, the
    race (round 1) draws; ahead, it takes 36 into slot 0, where 36 > 33 > 27 is that run
    (the bonus of the score plan before drew here too)."""
    mine = (21, 33, 27, 39, 38, 9, 5, 16, 26, 2)
    assert _choice_and_run(mine, 36, (0, 0), 1) == ("draw", 1)
    assert _choice_and_run(mine, 36, (50, 10), 2) == ("take 0", 3)


@pytest.mark.parametrize("brick", [30, 31, 33, 34, 36])
def test_strong_never_breaks_the_run_that_wins_the_game(brick: int) -> None:
    """With that run (24 > 15 > 5) in hand, a brick the race would put into it (round 1:
    slot 1 or 2) is left alone: the summed bonus the score plan had before took 30 and 31
    into slot 2 and threw the won game away."""
    mine = (24, 15, 5, 20, 39, 21, 35, 32, 22, 10)
    assert _choice_and_run(mine, brick, (0, 0), 1)[1] < 3
    assert _choice_and_run(mine, brick, (50, 10), 2) == ("draw", 3)
