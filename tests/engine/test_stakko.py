"""Stakko engine: the rule text's worked examples, concrete rulings, and random-play invariants.

The invariants check the engine against an independent model written here from the rules
notes: every disc has an identity, so conservation, direction of travel and the shrinking
line of the variants are checked disc by disc, not just by counting colours.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stacko.engine.errors import IllegalMoveError, IllegalReason, InvalidOptionsError
from stacko.engine.games import GAMES
from stacko.engine.outcome import Termination
from stacko.engine.stakko import (
    BLACK,
    GRAY,
    RED,
    VARIANTS,
    WHITE,
    Colour,
    GameEnded,
    Moved,
    Passed,
    Stakko,
    StakkoMove,
    StakkoOptions,
    line_str,
    move,
)

START = "RWWWWWWWWW G G G G G G G RBBBBBBBBB"


def game(variant: str = "basic", **kw: int) -> Stakko:
    return Stakko(StakkoOptions(variant=variant, **kw), rng=random.Random(0))


def play(g: Stakko, *moves: str) -> None:
    for text in moves:
        g.apply(StakkoMove.from_str(text))


def refused(g: Stakko, m: object, reason: IllegalReason, seat: int | None = None) -> None:
    """``m`` is refused for ``reason`` and leaves no trace."""
    before, events = g.key(), list(g.events)
    with pytest.raises(IllegalMoveError) as err:
        g.apply(m, seat)  # type: ignore[arg-type]
    assert err.value.reason is reason, err.value
    assert g.key() == before and g.events == events


# -- an independent model of the rules, with disc identities ---------------------------


def rule_legal(line: list[list[Colour]], mover: int, variant: str) -> set[tuple[int, int]]:
    """Rules notes §3/6/7 read directly: own top, N stacks on, nothing fixed lifted."""
    me = Colour(mover)
    n = sum(1 for s in line if s[-1] == me)
    fixed = {"basic": (GRAY, RED), "gray": (RED,), "red": ()}[variant]
    out = set()
    for i, stack in enumerate(line):
        target = i + n if mover == 0 else i - n
        if stack[-1] != me or not 0 <= target < len(line):
            continue
        for k in range(1, len(stack) + 1):
            if any(d in fixed for d in stack[-k:]):
                break
            out.add((i, k))
    return out


class Shadow:
    """The line as lists of disc ids; ``origin`` of a base id is its space in the setup."""

    def __init__(self, g: Stakko) -> None:
        self.colour: list[Colour] = []
        self.origin: dict[int, int] = {}
        self.line: list[list[int]] = []
        for space, stack in enumerate(g.line):
            ids = []
            for disc in stack:
                ids.append(len(self.colour))
                self.colour.append(disc)
            self.origin[ids[0]] = space
            self.line.append(ids)

    def colours(self) -> list[list[Colour]]:
        return [[self.colour[d] for d in s] for s in self.line]

    def positions(self) -> dict[int, int]:
        """Each disc's place along the board: the setup space of the base it stands on."""
        return {d: self.origin[s[0]] for s in self.line for d in s}

    def apply(self, mover: int, i: int, k: int) -> tuple[int, list[int]]:
        n = sum(1 for s in self.line if self.colour[s[-1]] == mover)
        target = i + n if mover == 0 else i - n
        src, dst = self.line[i], self.line[target]
        lifted = src[len(src) - k :]
        dst.extend(lifted)
        del src[len(src) - k :]
        if not src:
            del self.line[i]
        return target, lifted


def counts(g: Stakko) -> dict[Colour, int]:
    out = dict.fromkeys(Colour, 0)
    for stack in g.line:
        for disc in stack:
            out[disc] += 1
    return out


def check_views(g: Stakko) -> None:
    """Perfect information: every view is the whole state, the same for everyone."""
    spectator = g.view(None)
    for seat in (0, 1):
        v = g.view(seat)
        assert dataclasses.replace(v, seat=None) == spectator
        assert Stakko.from_view(v) == g
        assert v.legal_moves() == (g.legal_moves() if seat == g.to_move else ())
    assert spectator.legal_moves() == ()
    assert spectator.line == tuple(tuple(s) for s in g.line)
    assert (spectator.to_move, spectator.ply, spectator.outcome) == (g.to_move, g.ply, g.outcome())
    assert spectator.owned == (g.owned(0), g.owned(1))
    assert spectator.heights == g.heights()
    assert spectator.passes == tuple(g.passes)
    assert spectator.events == tuple(g.events)
    assert Stakko.from_view(spectator).key() == g.key()


@settings(max_examples=90, deadline=None)
@given(data=st.data(), variant=st.sampled_from(VARIANTS))
def test_random_games_keep_every_rule(data: st.DataObject, variant: str) -> None:
    g = game(variant)
    shadow = Shadow(g)
    while g.outcome() is None:
        mover = g.to_move
        assert mover is not None
        legal = g.legal_moves()
        expected = rule_legal(shadow.colours(), mover, variant)
        assert {(m.stack, m.count) for m in legal} == expected
        for i in {i for i, _ in expected}:
            assert g.liftable(i) == max(k for j, k in expected if j == i)
        assert len(set(legal)) == len(legal)
        assert g.owned(mover) == sum(1 for s in g.line if s[-1] == mover)
        check_views(g)
        m = legal[data.draw(st.integers(0, len(legal) - 1), label="move")]
        before = shadow.positions()
        ply, size = g.ply, len(g.line)
        g.apply(m, mover)
        target, lifted = shadow.apply(mover, m.stack, m.count)
        assert g.ply == ply + 1
        # the same discs, where the model put them (27 discs: 9 W, 9 B, 7 G, 2 R)
        assert counts(g) == {WHITE: 9, BLACK: 9, GRAY: 7, RED: 2}
        assert [list(s) for s in g.line] == shadow.colours()
        closed = len(g.line) == size - 1
        assert closed or len(g.line) == size
        discs = tuple(shadow.colour[d] for d in lifted)
        assert g.events[0] == Moved(mover, m.stack, m.count, target, discs, closed)
        if variant == "basic":
            assert len(g.line) == 9 and not closed
        # rule 3: the mover's move carries discs toward the opponent only, the rest stay
        after = shadow.positions()
        sign = 1 if mover == 0 else -1
        for disc, pos in after.items():
            if disc in lifted:
                assert (pos - before[disc]) * sign > 0
            else:
                assert pos == before[disc]
        # rule 4: the next seat can move; if it is the mover again, the other was blocked
        line = shadow.colours()
        if g.to_move is not None:
            assert rule_legal(line, g.to_move, variant)
            if g.to_move == mover:
                assert not rule_legal(line, 1 - mover, variant)
                assert Passed(1 - mover) in g.events
            else:
                assert not any(isinstance(e, Passed) for e in g.events)
    outcome = g.outcome()
    assert outcome is not None and isinstance(g.events[-1], GameEnded)
    line = shadow.colours()
    if outcome.termination is Termination.COMPLETED:
        assert not rule_legal(line, 0, variant) and not rule_legal(line, 1, variant)
    else:
        assert outcome.termination is Termination.TURN_CAP and g.ply == g.options.ply_cap
    # rule 5: height on the far end stack above its bottom disc, only under your top disc
    white = len(line[-1]) - 1 if line[-1][-1] == WHITE else 0
    black = len(line[0]) - 1 if line[0][-1] == BLACK else 0
    assert outcome.scores == (white, black)
    assert outcome.winner == (None if white == black else int(black > white))
    assert g.to_move is None and g.legal_moves() == () and g.timeout_moves() == ()
    check_views(g)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), variant=st.sampled_from(VARIANTS))
def test_every_other_move_is_refused_without_trace(seed: int, variant: str) -> None:
    rng = random.Random(seed)
    g = game(variant)
    while g.outcome() is None:
        mover = g.to_move
        assert mover is not None
        legal = g.legal_moves()
        line = [list(s) for s in g.line]
        n = g.owned(mover)
        for m in legal:  # out of turn: refused whatever the move
            refused(g, m, IllegalReason.NOT_YOUR_TURN, seat=1 - mover)
        for i in range(-1, len(line) + 1):
            for k in range(-1, 29):
                m = StakkoMove(i, k)
                if m in legal:
                    continue
                if not 0 <= i < len(line) or line[i][-1] != mover:
                    reason = IllegalReason.NO_SUCH_STACK
                elif not 0 <= (i + n if mover == 0 else i - n) < len(line):
                    reason = IllegalReason.OVERSHOOT
                else:
                    reason = IllegalReason.BAD_COUNT
                refused(g, m, reason, seat=rng.choice((None, mover)))
        mine = legal[0].stack
        for junk, reason in [
            ("0x1", IllegalReason.UNKNOWN_MOVE),
            ((mine, 1), IllegalReason.UNKNOWN_MOVE),
            (None, IllegalReason.UNKNOWN_MOVE),
            (StakkoMove(True, 1), IllegalReason.NO_SUCH_STACK),  # bool is no stack index
            (StakkoMove(mine, 1.0), IllegalReason.BAD_COUNT),  # type: ignore[arg-type]
        ]:
            refused(g, junk, reason)
        before, copy = g.view(None), g.copy()
        assert copy == g and copy.legal_moves() == legal
        g.apply(rng.choice(legal))
        assert copy.view(None) == before  # a copy does not follow the original
    refused(g, move(0, 1), IllegalReason.GAME_OVER)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), variant=st.sampled_from(VARIANTS), cap=st.integers(1, 40))
def test_the_ply_cap_always_ends_the_game(seed: int, variant: str, cap: int) -> None:
    rng = random.Random(seed)
    g = game(variant, ply_cap=cap)
    while g.outcome() is None:
        g.apply(rng.choice(g.legal_moves()))
    outcome = g.outcome()
    assert outcome is not None and g.ply <= cap
    assert (outcome.termination is Termination.TURN_CAP) == (g.ply == cap and bool(
        rule_legal([list(s) for s in g.line], 0, variant)
        or rule_legal([list(s) for s in g.line], 1, variant)
    ))  # fmt: skip
    assert outcome.scores == g.heights()


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), variant=st.sampled_from(VARIANTS))
def test_default_games_end_well_before_the_cap(seed: int, variant: str) -> None:
    rng = random.Random(seed)
    g = game(variant)
    while g.outcome() is None:
        g.apply(rng.choice(g.legal_moves()))
    outcome = g.outcome()
    assert outcome is not None and outcome.termination is Termination.COMPLETED
    assert g.ply < 500


# -- setup and the basic rules ----------------------------------------------------------


def test_setup() -> None:
    g = game()
    assert line_str(g.line) == START
    assert g.to_move == 0 and g.ply == 0 and g.outcome() is None
    assert g.legal_moves() == tuple(move(0, k) for k in range(1, 10))
    assert g.owned(0) == g.owned(1) == 1 and g.heights() == (0, 0)
    assert Stakko.from_line(START) == g
    assert Colour(0) is WHITE and Colour(1) is BLACK


def test_registered_in_games() -> None:
    spec = GAMES["stakko"]
    g = spec.new_game(StakkoOptions(variant="red"), random.Random(1))
    assert (
        isinstance(g, Stakko) and g.options.variant == "red" and spec.options_type is StakkoOptions
    )


@pytest.mark.parametrize(
    "kw",
    [{"variant": "grey"}, {"variant": ""}, {"ply_cap": 0}, {"ply_cap": 10_001}, {"ply_cap": True}],
)
def test_bad_options(kw: dict[str, object]) -> None:
    with pytest.raises(InvalidOptionsError):
        StakkoOptions(**kw)  # type: ignore[arg-type]


def test_move_notation() -> None:
    assert str(move(2, 3)) == "2x3" and StakkoMove.from_str(" 2 X 3 ") == StakkoMove(2, 3)
    assert StakkoMove.from_str("12x30") == StakkoMove(12, 30)
    for bad in ("", "2x", "x3", "2-3", "-1x2", "2x3x4", "take 3"):
        with pytest.raises(ValueError):
            StakkoMove.from_str(bad)


@given(st.integers(0, 10_000), st.integers(0, 10_000))
def test_move_string_round_trip(stack: int, count: int) -> None:
    m = StakkoMove(stack, count)
    assert StakkoMove.from_str(str(m)) == m


def test_lifting_gray_or_red_is_refused_in_the_basic_game() -> None:
    g = game()
    refused(g, move(0, 10), IllegalReason.BAD_COUNT)  # the red base
    refused(g, move(0, 0), IllegalReason.BAD_COUNT)
    refused(g, move(1, 1), IllegalReason.NO_SUCH_STACK)  # a bare gray disc is nobody's
    refused(g, move(8, 1), IllegalReason.NO_SUCH_STACK)  # Black's stack
    refused(g, move(9, 1), IllegalReason.NO_SUCH_STACK)
    refused(g, move(8, 1), IllegalReason.NOT_YOUR_TURN, seat=1)
    refused(g, "0x1", IllegalReason.UNKNOWN_MOVE)
    play(g, "0x4", "8x2")  # White onto space 1; Black onto space 7
    assert line_str(g.line) == "RWWWWW GWWWW G G G G G GBB RBBBBBBB"
    refused(g, move(1, 5), IllegalReason.BAD_COUNT)  # would take the gray disc of space 1
    g.apply(move(1, 4))
    assert line_str(g.line) == "RWWWWW G G GWWWW G G G GBB RBBBBBBB"


# -- the rule text's worked examples ---------------------------------------------------


def test_example_max_moves_his_second_tower_two_spaces() -> None:
    """Max (Black) owns 2 towers, so each moves 2 spaces; he moves the one nearer White."""
    g = game()
    play(g, "0x2", "8x3", "1x1")  # White: 2 discs out, then 1 of them 2 spaces on
    assert line_str(g.line) == "RWWWWWWW GW G GW G G G GBBB RBBBBBB"
    assert g.to_move == 1 and g.owned(1) == 2
    assert {(m.stack, m.stack - 2) for m in g.legal_moves()} == {(7, 5), (8, 6)}
    refused(g, move(7, 1), IllegalReason.NOT_YOUR_TURN, seat=0)
    g.apply(move(7, 3), seat=1)
    assert line_str(g.line) == "RWWWWWWW GW G GW G GBBB G G RBBBBBB"
    assert g.events == [Moved(1, 7, 3, 5, (BLACK,) * 3, closed=False)]
    assert g.owned(1) == 2 and g.to_move == 0


CLAIRE = "RWWW G G GWWW GBB G G GWWW RBBBBBBB"


def test_example_claire_cannot_overshoot_so_she_splits_her_second_tower() -> None:
    """Claire (White) owns 3 towers; the third would pass Max's red disc, so she moves the
    second, leaving 1 white disc behind."""
    g = Stakko.from_line(CLAIRE)
    assert g.to_move == 0 and g.owned(0) == 3
    assert {m.stack for m in g.legal_moves()} == {0, 3}
    refused(g, move(7, 1), IllegalReason.OVERSHOOT)
    refused(g, move(7, 3), IllegalReason.OVERSHOOT)
    g.apply(move(3, 2))
    assert line_str(g.line) == "RWWW G G GW GBB G GWW GWWW RBBBBBBB"
    assert g.line[3] == [GRAY, WHITE]  # the one white disc that stayed
    assert g.owned(0) == 4 and g.to_move == 1


def test_example_gray_variant_takes_the_gray_disc_along_and_shortens_the_line() -> None:
    """Max moves his tower with the gray disc under it: 8 spaces are left."""
    g = game("gray")
    play(g, "0x3", "8x2", "0x1")
    assert line_str(g.line) == "RWWWWW GWWW GW G G G G GBB RBBBBBBB"
    assert g.to_move == 1 and g.owned(1) == 2
    assert move(7, 3) in g.legal_moves()  # the gray base of space 7 comes along
    refused(g, move(8, 8), IllegalReason.BAD_COUNT)  # a red disc never moves in this variant
    g.apply(move(7, 3))
    assert len(g.line) == 8
    assert line_str(g.line) == "RWWWWW GWWW GW G G GGBB G RBBBBBBB"
    assert g.events == [Moved(1, 7, 3, 5, (GRAY, BLACK, BLACK), closed=True)]
    # distances now count the stacks of the shorter line: from space 8, two stacks on is
    # space 5 (space 7 is gone), not space 6
    play(g, "0x1")
    assert line_str(g.line) == "RWWWW GWWW GW GW G GGBB G RBBBBBBB" and g.owned(1) == 2
    g.apply(move(7, 1))
    assert g.events == [Moved(1, 7, 1, 5, (BLACK,), closed=False)]
    assert line_str(g.line) == "RWWWW GWWW GW GW G GGBBB G RBBBBBB"
    # in the basic game the lift with the gray disc is refused
    b = Stakko.from_line("RWWWWW GWWW GW G G G G GBB RBBBBBBB", to_move=1)
    refused(b, move(7, 3), IllegalReason.BAD_COUNT)


def test_red_variant_the_line_end_moves_with_its_stack() -> None:
    g = game("red")
    play(g, "0x1")
    g.apply(move(8, 10))  # Black lifts its whole home, red disc and all
    assert len(g.line) == 8 and g.events[0] == Moved(1, 8, 10, 7, (RED,) + (BLACK,) * 9, True)
    assert line_str(g.line) == "RWWWWWWWW GW G G G G G GRBBBBBBBBB"
    assert g.to_move == 0 and g.owned(0) == 2
    # White's goal is now the last stack: its 10 discs above the bottom gray, if White tops it
    assert move(1, 1) in g.legal_moves()  # 1 + 2 = 3 <= 7
    refused(g, move(7, 1), IllegalReason.NO_SUCH_STACK)


# -- passing, the end, scoring ---------------------------------------------------------

BLOCKED_BLACK = "RBBBB GBB GWWW GBW G G G G RBBWWWWW"


def test_blocked_player_passes_until_it_can_move_again() -> None:
    g = Stakko.from_line(BLOCKED_BLACK, to_move=1)
    assert g.owned(1) == 2 and g.to_move == 0  # Black's stacks 0 and 1 would pass the end
    g.apply(move(2, 1))
    assert g.events == [Moved(0, 2, 1, 5, (WHITE,), False), Passed(1)]
    assert g.to_move == 0 and g.passes == [0, 1] and g.view(None).passes == (0, 1)
    refused(g, move(1, 1), IllegalReason.NOT_YOUR_TURN, seat=1)
    g.apply(move(3, 1))  # 4 stacks: onto space 7, uncovering a black disc on space 3
    assert g.events == [Moved(0, 3, 1, 7, (WHITE,), False)]
    assert g.to_move == 1 and g.owned(1) == 3
    assert g.legal_moves() == (move(3, 1),)


def test_game_ends_when_nobody_can_move_and_the_taller_tower_wins() -> None:
    """The rule text's final picture: Max's black tower of 7 beats Claire's white 5."""
    g = Stakko.from_line("RWWBBBBB GWBB G G G G G GBWW RBWWWW")
    outcome = g.outcome()
    assert outcome is not None and outcome.termination is Termination.COMPLETED
    assert outcome.winner == 1 and outcome.scores == (5, 7)
    assert g.to_move is None and g.legal_moves() == () and g.timeout_move() is None
    refused(g, move(7, 1), IllegalReason.GAME_OVER)


def test_equal_heights_draw() -> None:
    g = Stakko.from_line("RWWBBBBB GWBBB G G G G G G RBWWWWWW")
    outcome = g.outcome()
    assert outcome is not None and outcome.winner is None and outcome.scores == (7, 7)


def test_height_needs_your_colour_on_top() -> None:
    g = Stakko.from_line("RWWBBBBBW GBB G G G G G G RWWWWWWBB", to_move=0)
    assert g.heights() == (0, 0)


def test_gray_variant_height_counts_gray_discs() -> None:
    g = Stakko.from_line("RWBBBBBBBB G G G G G G RGBWWWWWWWW", options=StakkoOptions("gray"))
    outcome = g.outcome()
    assert outcome is not None and outcome.scores == (10, 9) and outcome.winner == 0


def test_red_variant_height_is_the_end_stack_above_its_bottom_disc() -> None:
    g = Stakko.from_line("GRWWWWBBBBB GGG G GGRBBBBWWWWW", options=StakkoOptions("red"))
    outcome = g.outcome()
    assert outcome is not None and outcome.termination is Termination.COMPLETED
    assert outcome.scores == (11, 10) and outcome.winner == 0


def test_end_resignation_loses_whatever_the_heights() -> None:
    g = Stakko.from_line(CLAIRE)
    outcome = g.end(0, Termination.RESIGNATION)
    assert outcome.winner == 1 and outcome.termination is Termination.RESIGNATION
    assert g.outcome() == outcome and g.to_move is None and g.events == [GameEnded(outcome)]
    refused(g, move(0, 1), IllegalReason.GAME_OVER)
    with pytest.raises(IllegalMoveError):
        g.end(1, Termination.TIMEOUT)
    with pytest.raises(ValueError):
        game().end(2, Termination.TIMEOUT)


def test_timeout_move_is_legal_and_moves_one_disc_from_the_rearmost_stack() -> None:
    g = Stakko.from_line(CLAIRE)
    assert g.timeout_moves() == (move(0, 1),)
    play(g, "3x2")
    assert g.to_move == 1 and g.owned(1) == 2
    assert g.timeout_moves() == (move(8, 1),) and move(8, 1) in g.legal_moves()


def test_views_hide_nothing() -> None:
    g = Stakko.from_line(BLOCKED_BLACK, to_move=1)
    g.apply(move(2, 1))
    check_views(g)
    v = g.view(1)
    assert v.line[8] == (RED, BLACK, BLACK, WHITE, WHITE, WHITE, WHITE, WHITE)
    assert not v.my_turn and v.legal_moves() == () and g.view(0).my_turn
    with pytest.raises(ValueError):
        g.view(2)
    with pytest.raises(ValueError):  # a doctored view rebuilds no state
        Stakko.from_view(dataclasses.replace(v, line=v.line[1:]))


@pytest.mark.parametrize(
    ("line", "variant"),
    [
        ("RWWWWWWWWW G G G G G G G RBBBBBBBB", "basic"),  # a black disc missing
        ("RWWWWWWWWW G G G G G G RBBBBBBBBBG", "basic"),  # 8 spaces, a gray disc lifted
        ("RWWWWWWWWW G G G G G GG RBBBBBBBBB", "basic"),  # a gray disc moved
        ("WRWWWWWWWW G G G G G G G RBBBBBBBBB", "red"),  # a stack without its base
        ("RWWWWWWWWW G G G G G G G RBBBBBBBBX", "red"),  # not a disc
        ("RWWWWWWWWW G G G G G G GRBBBBBBBBB", "gray"),  # a red disc lifted
        ("RWWWWWWWWW G G G G G G G  ", "red"),  # Black's discs and red gone
    ],
)
def test_from_line_refuses_impossible_positions(line: str, variant: str) -> None:
    with pytest.raises(ValueError):
        Stakko.from_line(line, options=StakkoOptions(variant))


def test_from_line_accepts_what_the_variant_allows() -> None:
    gray = Stakko.from_line("RWWWWWWWWW G G G G G GG RBBBBBBBBB", options=StakkoOptions("gray"))
    assert len(gray.line) == 8 and gray.to_move == 0
    red = Stakko.from_line("RWWWWWWWWW G G G G G G GRBBBBBBBBB", options=StakkoOptions("red"))
    assert red.legal_moves() == tuple(move(0, k) for k in range(1, 11))  # red base too
    with pytest.raises(ValueError):
        Stakko.from_line(START, to_move=2)
    with pytest.raises(ValueError):
        Stakko.from_line(START, ply=500)
