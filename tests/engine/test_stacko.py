"""The Stacko rules engine: the worked example of the rules, properties over random games,
and the one that matters most, that no view tells a seat more than the rules allow.

Random games are played by ``play`` with a seeded RNG: a mix of uniformly random legal moves
and a simple band strategy (every brick has a home slot by size), so rounds both finish and
hit the turn cap. Small turn caps keep each game short.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Callable, Collection, Iterator, Sequence
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stacko.engine.stacko as stacko_engine
import stacko.engine.stacko_view as stacko_view
from stacko.engine.errors import IllegalMoveError, IllegalReason, InvalidOptionsError
from stacko.engine.outcome import Outcome, Termination
from stacko.engine.stacko import (
    DRAW,
    FINISH_SCORE,
    PASS,
    Action,
    Drew,
    Event,
    GameEnded,
    Move,
    Passed,
    Phase,
    Placed,
    Reshuffled,
    RoundEnded,
    RoundResult,
    Stacko,
    StackoOptions,
    Took,
    is_finished,
    new_game,
    place,
    round_scores,
    run_length,
    take,
)
from stacko.engine.stacko_view import StackoView, resample, unseen_bricks

SEEDS = st.integers(min_value=0, max_value=2**32 - 1)

SMALL_OPTIONS = (
    StackoOptions(turn_cap=40),
    StackoOptions(turn_cap=60),
    StackoOptions(bricks=10, tower=4, rounds=3, turn_cap=30),
    StackoOptions(bricks=6, tower=2, rounds=4, turn_cap=30),  # the smallest legal game
    StackoOptions(bricks=13, tower=3, rounds=2, turn_cap=None),
    StackoOptions(bricks=30, tower=5, rounds=1, turn_cap=50),
)
"""Options for the many short games: small caps, small towers, tiny stacks (many reshuffles)."""

DEFAULT = StackoOptions()
MAX_ACTIONS = 3000
"""Safety bound for games without a turn cap (the band strategy finishes long before)."""


# -- playing random games ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Resign:
    """The driver's stand-in for ``end(loser, termination)`` in a step."""

    loser: int
    termination: Termination


@dataclasses.dataclass(frozen=True)
class Step:
    before: Stacko
    """A copy of the state before the action."""
    action: Move | Resign
    after: Stacko
    """The live game (changes once the driver goes on)."""


def home_slot(brick: int, options: StackoOptions) -> int:
    """The band strategy: big bricks belong low. A tower with every brick home is finished."""
    return min(options.tower - 1, (options.bricks - brick) * options.tower // options.bricks)


def choose_move(state: Stacko, rng: random.Random, eps: float) -> Move:
    moves = state.legal_moves()
    if rng.random() < eps:
        return rng.choice(moves)
    seat = state.to_move
    assert seat is not None
    tower, options = state.towers[seat], state.options

    def wanted(brick: int) -> int | None:
        slot = home_slot(brick, options)
        return None if home_slot(tower[slot], options) == slot else slot

    if state.phase is Phase.TURN:
        slot = wanted(state.open_brick)
        return DRAW if slot is None else take(slot)
    assert state.drawn is not None
    slot = wanted(state.drawn)
    return PASS if slot is None else place(slot)


def play(
    seed: int,
    options: StackoOptions,
    *,
    resign: bool = False,
    eps: float | None = None,
) -> Iterator[Step]:
    """Play one game from ``seed``; yield every step. With ``resign``, a random seat may
    resign (or abandon, or time out) at a random point."""
    rng = random.Random(seed)
    state = Stacko(options, rng=random.Random(rng.getrandbits(64)))
    if eps is None:
        eps = rng.choice((0.1, 0.3, 1.0))
    resign_at = rng.randrange(400) if resign else -1
    for i in range(MAX_ACTIONS):
        if state.outcome() is not None:
            return
        before = state.copy()
        if i == resign_at:
            loser = rng.randrange(2)
            termination = rng.choice(
                (Termination.RESIGNATION, Termination.ABANDONED, Termination.TIMEOUT)
            )
            state.end(loser, termination)
            yield Step(before, Resign(loser, termination), state)
            return
        move = choose_move(state, rng, eps)
        state.apply(move, rng.choice((None, state.to_move)))
        yield Step(before, move, state)


def bottom_run(tower: Sequence[int]) -> int:
    """The rules' run, counted here independently of the engine's ``run_length``."""
    n = 1
    while n < len(tower) and tower[n] < tower[n - 1]:
        n += 1
    return n


def finished_tower(tower: Sequence[int]) -> bool:
    return all(below > above for below, above in itertools.pairwise(tower))


def all_bricks(state: Stacko) -> list[int]:
    bricks = [*state.towers[0], *state.towers[1], *state.stack, *state.discard]
    if state.drawn is not None:
        bricks.append(state.drawn)
    return sorted(bricks)


def check_invariants(state: Stacko) -> None:
    """What holds in every reachable position."""
    options = state.options
    assert all_bricks(state) == list(range(1, options.bricks + 1)), "bricks not conserved"
    for s in (0, 1):
        assert len(state.towers[s]) == len(state.seen[s]) == options.tower
    assert state.discard, "there is always an open brick"
    assert state.totals == [
        sum(r.scores[0] for r in state.results),
        sum(r.scores[1] for r in state.results),
    ]
    assert [r.round for r in state.results] == list(range(1, len(state.results) + 1))
    outcome = state.outcome()
    if outcome is None:
        assert state.phase in (Phase.TURN, Phase.DRAWN)
        assert (state.drawn is not None) == (state.phase is Phase.DRAWN)
        if state.phase is Phase.TURN:
            assert state.stack, "a draw is always possible at the start of a turn"
        assert len(state.results) == state.round - 1
        assert state.to_move == (state.starter + state.turns) % 2
        assert state.starter == (state.round - 1) % 2
        assert not any(map(finished_tower, state.towers)), "a finished tower ends the round"
        if options.turn_cap is not None:
            assert state.turns < options.turn_cap
    else:
        assert state.phase is Phase.OVER
        assert state.to_move is None
        assert state.legal_moves() == ()
        assert state.timeout_moves() == ()
        assert outcome.scores == (state.totals[0], state.totals[1])


def expected_discard_after(before: Stacko, move: Move) -> list[int]:
    """The discard pile right after ``move`` (before any reshuffle or new deal)."""
    mover = before.to_move
    assert mover is not None
    if move.action is Action.TAKE:
        assert move.slot is not None
        return [*before.discard[:-1], before.towers[mover][move.slot]]
    if move.action is Action.PLACE:
        assert move.slot is not None
        return [*before.discard, before.towers[mover][move.slot]]
    if move.action is Action.PASS:
        assert before.drawn is not None
        return [*before.discard, before.drawn]
    return before.discard[:]


def check_transition(step: Step) -> None:
    """One applied action against the rules, computed from the position before it."""
    before, action, after = step.before, step.action, step.after
    check_invariants(after)
    if isinstance(action, Resign):
        outcome = after.outcome()
        totals = (before.totals[0], before.totals[1])
        assert outcome == Outcome(action.termination, 1 - action.loser, totals)
        assert after.events == [GameEnded(outcome)]
        assert (after.towers, after.stack, after.discard, after.drawn, after.ply) == (
            before.towers, before.stack, before.discard, before.drawn, before.ply,
        )  # fmt: skip
        return
    mover = before.to_move
    assert mover is not None
    options = before.options
    assert after.ply == before.ply + 1, "ply counts every action, a draw too"
    kinds = [type(e) for e in after.events]
    if action.action is Action.DRAW:
        assert after.events == [Drew(mover, before.stack[-1])]
        assert after.drawn == before.stack[-1]
        assert after.stack == before.stack[:-1]
        assert after.phase is Phase.DRAWN and after.to_move == mover
        assert (after.towers, after.discard, after.turns) == (
            before.towers, before.discard, before.turns,
        )  # fmt: skip
        return

    # the action ends a turn: work out what it must have done
    tower = before.towers[mover][:]
    slot = action.slot
    if action.action is Action.TAKE:
        assert slot is not None
        first: Event = Took(mover, slot, before.discard[-1], tower[slot])
        tower[slot] = before.discard[-1]
    elif action.action is Action.PLACE:
        assert slot is not None and before.drawn is not None
        first = Placed(mover, slot, before.drawn, tower[slot])
        tower[slot] = before.drawn
    else:
        assert before.drawn is not None
        first = Passed(mover, before.drawn)
    assert after.events[0] == first
    finished = finished_tower(tower)
    capped = options.turn_cap is not None and before.turns + 1 >= options.turn_cap
    round_over = finished or capped
    assert (RoundEnded in kinds) == round_over, "a round ends iff a tower is finished or capped"
    discard = expected_discard_after(before, action)

    if not round_over:
        assert after.round == before.round and after.turns == before.turns + 1
        assert after.to_move == 1 - mover and after.phase is Phase.TURN
        assert after.towers[mover] == tower and after.towers[1 - mover] == before.towers[1 - mover]
        seen = [before.seen[0][:], before.seen[1][:]]
        if slot is not None:
            seen[mover][slot] = True
        assert after.seen == seen, "a brick that enters a tower is seen, nothing else changes"
        assert after.results == before.results
        reshuffled = not before.stack  # the draw of this turn took the last brick
        assert (Reshuffled in kinds) == reshuffled
        if reshuffled:
            assert after.events == [first, Reshuffled(len(after.stack))]
            assert len(after.discard) == 1, "the new discard pile is one open brick"
            assert sorted(after.stack + after.discard) == sorted(discard)
        else:
            assert after.events == [first]
            assert after.discard == discard
            assert after.stack == before.stack
        return

    # the round is over
    towers = [before.towers[0][:], before.towers[1][:]]
    towers[mover] = tower
    finisher = mover if finished else None
    scores = (
        FINISH_SCORE if finisher == 0 else 5 * bottom_run(towers[0]),
        FINISH_SCORE if finisher == 1 else 5 * bottom_run(towers[1]),
    )
    result = RoundResult(before.round, finisher, (tuple(towers[0]), tuple(towers[1])), scores)
    assert after.results == [*before.results, result]
    assert after.totals == [before.totals[0] + scores[0], before.totals[1] + scores[1]]
    if before.round < options.rounds:
        assert after.events == [first, RoundEnded(result)]
        assert after.round == before.round + 1
        assert after.to_move == (0 if after.round % 2 == 1 else 1), "starters alternate"
        assert after.turns == 0 and after.phase is Phase.TURN
        assert after.seen == [[False] * options.tower] * 2, "a new deal: nothing seen yet"
        assert len(after.discard) == 1
        assert len(after.stack) == options.bricks - 2 * options.tower - 1
    else:
        a, b = after.totals
        outcome = Outcome(Termination.COMPLETED, None if a == b else (0 if a > b else 1), (a, b))
        assert after.outcome() == outcome
        assert after.events == [first, RoundEnded(result), GameEnded(outcome)]
        assert after.towers == towers, "the last round's towers stay for the reveal"


# -- refusals ----------------------------------------------------------------------------


def ill_typed(action: Action, slot: int | None = None) -> list[object]:
    """A ``Move`` with fields of the wrong type, if it can be made. Compiled (mypyc), the
    engine refuses one when it is made (``TypeError``), or stores a ``bool`` slot as the int
    it equals (then it is that int's move); as Python, ``apply`` refuses each."""
    try:
        move = Move(action, slot)
    except TypeError:
        return []
    return [move] if type(move.slot) is type(slot) else []


def candidate_moves(tower: int) -> list[object]:
    """Legal and illegal moves of every kind, plus things that are not moves at all."""
    moves: list[object] = []
    for slot in range(-1, tower + 1):
        moves += [take(slot), place(slot)]
    moves += [
        DRAW,
        PASS,
        Move(Action.TAKE),
        Move(Action.PLACE),
        Move(Action.DRAW, 0),
        Move(Action.PASS, 0),
        *ill_typed(Action.TAKE, cast(int, True)),
        *ill_typed(Action.PLACE, cast(int, 1.0)),
        *ill_typed(Action.TAKE, cast(int, "0")),
        *ill_typed(cast(Action, "draw")),
        *ill_typed(cast(Action, None), 0),
        None,
        "draw",
        "take 0",
        0,
        (Action.DRAW,),
        object(),
        SimpleNamespace(action=Action.TAKE),
        SimpleNamespace(action=Action.TAKE, slot=0),
        SimpleNamespace(action=Action.DRAW, slot=None),
        SimpleNamespace(action=Action.PASS, slot=None),
    ]
    return moves


def expected_refusal(state: Stacko, move: object) -> IllegalReason | None:
    """Why the rules refuse ``move`` now, or ``None`` if they allow it."""
    if state.phase is Phase.OVER:
        return IllegalReason.GAME_OVER
    if type(move) is not Move or not isinstance(move.action, Action):
        return IllegalReason.UNKNOWN_MOVE
    allowed = (
        (Action.TAKE, Action.DRAW) if state.phase is Phase.TURN else (Action.PLACE, Action.PASS)
    )
    if move.action not in allowed:
        return IllegalReason.WRONG_PHASE
    if move.action in (Action.TAKE, Action.PLACE):
        good = type(move.slot) is int and 0 <= move.slot < state.options.tower
    else:
        good = move.slot is None
    return None if good else IllegalReason.BAD_SLOT


def unchanged(state: Stacko, snapshot: Stacko, rng_state: object) -> bool:
    return (
        state == snapshot and state.events == snapshot.events and state.rng.getstate() == rng_state
    )


def check_refusals(state: Stacko, candidates: Sequence[object]) -> None:
    """Every legal move applies (on a copy); everything else is refused, state untouched."""
    snapshot = state.copy()
    rng_state = state.rng.getstate()
    tower = state.options.tower
    if state.phase is Phase.TURN:
        legal = [take(i) for i in range(tower)] + [DRAW]
    elif state.phase is Phase.DRAWN:
        legal = [place(i) for i in range(tower)] + [PASS]
    else:
        legal = []
    assert list(state.legal_moves()) == legal
    for move in candidates:
        reason = expected_refusal(state, move)
        assert state.is_legal(cast(Move, move)) == (reason is None), move
        if reason is None:
            assert move in legal
            for seat in (None, state.to_move):
                trial = state.copy(rng=random.Random(0))
                trial.apply(move, seat)
                assert trial.ply == state.ply + 1
            continue
        with pytest.raises(IllegalMoveError) as refused:
            state.apply(cast(Move, move))
        assert refused.value.reason is reason, (move, refused.value)
        assert unchanged(state, snapshot, rng_state), move
    # the wrong seat is refused first, whatever the move
    mover = state.to_move
    if mover is not None:
        for move in (*legal[:2], legal[-1], None, take(-1)):
            for seat in (1 - mover, 2, -1):
                with pytest.raises(IllegalMoveError) as refused:
                    state.apply(cast(Move, move), seat)
                assert refused.value.reason is IllegalReason.NOT_YOUR_TURN
                assert unchanged(state, snapshot, rng_state)


# -- what a viewer may know --------------------------------------------------------------


def allowed_bricks(state: Stacko, seat: int | None) -> set[int]:
    """The bricks ``seat`` may know the place of now, from the true state alone (rules §5):
    the own tower, every slot marked seen, the discard pile, the own drawn brick; all of
    both towers once the game has been played to its end."""
    outcome = state.outcome()
    reveal_all = outcome is not None and outcome.termination is Termination.COMPLETED
    allowed = set(state.discard)
    for s in (0, 1):
        for brick, seen in zip(state.towers[s], state.seen[s], strict=True):
            if seen or s == seat or reveal_all:
                allowed.add(brick)
    if seat is not None and state.drawn is not None and state._to_move == seat:
        allowed.add(state.drawn)
    return allowed


def revealed_by(before: Stacko, action: Move | Resign) -> set[int]:
    """Bricks an action shows everyone: the brick that goes in and the one that comes out."""
    if isinstance(action, Resign):
        return set()
    mover = before.to_move
    assert mover is not None
    if action.action is Action.TAKE:
        assert action.slot is not None
        return {before.discard[-1], before.towers[mover][action.slot]}
    if action.action is Action.PLACE:
        assert action.slot is not None and before.drawn is not None
        return {before.drawn, before.towers[mover][action.slot]}
    if action.action is Action.PASS:
        assert before.drawn is not None
        return {before.drawn}
    return set()


VIEW_FIELDS = {
    "seat", "options", "phase", "to_move", "ply", "round", "turns", "towers", "seen",
    "discard", "stack_size", "drawn", "holding", "totals", "results", "events", "outcome",
}  # fmt: skip


def event_bricks(event: object) -> list[int | None]:
    """The brick numbers an event carries (seats, slots and sizes are not bricks)."""
    if isinstance(event, Took | Placed):
        return [event.brick, event.removed]
    if isinstance(event, Drew | Passed):
        return [event.brick]
    if isinstance(event, RoundEnded):
        return [*event.result.towers[0], *event.result.towers[1]]
    if isinstance(event, Reshuffled | GameEnded):
        return []
    raise AssertionError(f"unknown event {event!r}")


def find_leaks(
    state: Stacko, v: object, seat: int | None, revealed: Collection[int] = ()
) -> list[str]:
    """Everything in ``v`` (the view of ``seat``) that the rules do not let ``seat`` know.

    ``revealed``: the bricks the last action showed everyone (``revealed_by``); the towers of
    a round that the last action ended are public too. Empty list: no leak.
    """
    if not isinstance(v, StackoView):
        return [f"not a StackoView: {type(v).__name__}"]
    problems: list[str] = []
    names = set(v._fields)
    if names != VIEW_FIELDS:
        problems.append(f"unexpected view fields {sorted(names ^ VIEW_FIELDS)}")
    if v.seat != seat:
        problems.append(f"view of seat {v.seat} for seat {seat}")
    allowed = allowed_bricks(state, seat)
    outcome = state.outcome()
    reveal_all = outcome is not None and outcome.termination is Termination.COMPLETED
    for s in (0, 1):
        for i, brick in enumerate(v.towers[s]):
            visible = s == seat or reveal_all or state.seen[s][i]
            if brick is not None and not visible:
                problems.append(f"hidden slot {i} of seat {s} shows {brick}")
            elif brick is not None and brick not in allowed:
                problems.append(f"tower {s} slot {i}: brick {brick}")
    for brick in v.discard:
        if brick not in allowed:
            problems.append(f"discard pile: brick {brick}")
    if v.drawn is not None and v.drawn not in allowed:
        problems.append(f"drawn brick {v.drawn} of the other seat")
    if v.stack_size != len(state.stack):
        problems.append(f"stack size {v.stack_size}, not {len(state.stack)}")
    in_events = allowed | set(revealed)
    for event in state.events:
        if isinstance(event, RoundEnded):  # the round that just ended is shown whole
            in_events.update(event.result.towers[0], event.result.towers[1])
    for event in v.events:
        if isinstance(event, Drew) and event.seat != seat and event.brick is not None:
            problems.append(f"the other seat's draw shows brick {event.brick}")
        for brick in event_bricks(event):
            if brick is not None and brick not in in_events:
                problems.append(f"event {event!r}: brick {brick}")
    return problems


def check_view_complete(state: Stacko, v: StackoView, seat: int | None) -> None:
    """The view also says everything the viewer may know (not a leak test: a usefulness one)."""
    outcome = state.outcome()
    reveal_all = outcome is not None and outcome.termination is Termination.COMPLETED
    for s in (0, 1):
        expected = tuple(
            b if (s == seat or reveal_all or seen) else None
            for b, seen in zip(state.towers[s], state.seen[s], strict=True)
        )
        assert v.towers[s] == expected
    assert v.seen == (tuple(state.seen[0]), tuple(state.seen[1]))
    assert v.discard == tuple(state.discard) and v.open_brick == state.open_brick
    assert v.stack_size == len(state.stack)
    assert v.holding == (state.phase is Phase.DRAWN)
    mine = seat is not None and seat == state.to_move and state.phase is Phase.DRAWN
    assert v.drawn == (state.drawn if mine else None)
    assert (v.phase, v.to_move, v.ply, v.round, v.turns) == (
        state.phase, state.to_move, state.ply, state.round, state.turns,
    )  # fmt: skip
    assert v.totals == tuple(state.totals) and v.results == tuple(state.results)
    assert v.outcome == outcome
    assert [type(e) for e in v.events] == [type(e) for e in state.events]
    assert v.legal_moves() == (state.legal_moves() if v.my_turn else ())


# -- the worked example and other fixed positions -----------------------------------------


def position(
    towers: tuple[Sequence[int], Sequence[int]],
    *,
    discard: Sequence[int],
    stack_top: Sequence[int] = (),
    round: int = 1,
    to_move: int | None = None,
    totals: tuple[int, int] = (0, 0),
    results: Sequence[RoundResult] = (),
    options: StackoOptions = DEFAULT,
    seed: int = 0,
) -> Stacko:
    """A game at a chosen position: the given towers and discard pile (top last); the draw
    stack holds every other brick, ``stack_top`` on top (last = next draw)."""
    state = Stacko(options, rng=random.Random(seed))
    placed = {*towers[0], *towers[1], *discard, *stack_top}
    rest = [b for b in range(1, options.bricks + 1) if b not in placed]
    state.towers = [list(towers[0]), list(towers[1])]
    state.seen = [[False] * options.tower, [False] * options.tower]
    state.discard = list(discard)
    state.stack = rest + list(stack_top)
    state.drawn = None
    state.phase = Phase.TURN
    state.round = round
    starter = (round - 1) % 2
    state._to_move = starter if to_move is None else to_move
    state.turns = 0 if state._to_move == starter else 1
    state.totals = list(totals)
    state.results = list(results)
    state.events = []
    check_invariants(state)
    return state


RIGHT_TOWER_ROUND_2 = (32, 23, 21, 35, 14, 2, 17, 11, 6, 5)
"""The right player's tower at the end of round 2: 32, 23, 21, then a brick wider than 21."""
LEFT_TOWER_ROUND_2 = (40, 39, 37, 34, 30, 28, 26, 19, 12, 13)
"""One brick short of finished: anything narrower than 12 in slot 9 finishes it."""
ROUND_1 = RoundResult(
    1,
    0,
    ((40, 38, 36, 30, 25, 20, 15, 10, 5, 1), (33, 31, 39, 2, 3, 4, 6, 7, 8, 9)),
    (50, 10),
)
"""Round 1 of the example: the right player (here seat ``right``) finished, the left scored 10."""


def worked_example(right: int, via_draw: bool) -> tuple[Stacko, list[Move]]:
    """Round 2 of the German text's example, one move before its end: the left player
    (seat ``1 - right``) is to move and finishes with brick 10 in slot 9."""
    left = 1 - right
    towers: list[Sequence[int]] = [(), ()]
    towers[right], towers[left] = RIGHT_TOWER_ROUND_2, LEFT_TOWER_ROUND_2
    result_towers = (ROUND_1.towers[0], ROUND_1.towers[1])
    scores = ROUND_1.scores
    if right == 1:
        result_towers, scores = result_towers[::-1], scores[::-1]
    round_1 = RoundResult(1, right, result_towers, scores)
    totals = (scores[0], scores[1])
    if via_draw:
        state = position(
            (towers[0], towers[1]), discard=[18], stack_top=[10], round=2, to_move=left,
            totals=totals, results=[round_1],
        )  # fmt: skip
        return state, [DRAW, place(9)]
    state = position(
        (towers[0], towers[1]), discard=[18, 10], round=2, to_move=left,
        totals=totals, results=[round_1],
    )  # fmt: skip
    return state, [take(9)]


@pytest.mark.parametrize("right", [0, 1])
@pytest.mark.parametrize("via_draw", [False, True])
def test_worked_example_ends_65_to_60(right: int, via_draw: bool) -> None:
    left = 1 - right
    state, moves = worked_example(right, via_draw)
    assert round_scores(ROUND_1.towers, 0) == (50, 10)
    assert state.to_move == left and state.starter == 1
    for move in moves:
        before = state.copy()
        state.apply(move, left)
        check_transition(Step(before, move, state))
    result = state.results[-1]
    assert result.round == 2 and result.finisher == left
    assert result.scores[right] == 15, "32, 23, 21 and a wider brick: 3 x 5"
    assert result.scores[left] == 50
    outcome = state.outcome()
    assert outcome is not None
    assert outcome.termination is Termination.COMPLETED
    assert outcome.winner == right
    assert outcome.scores[right] == 65 and outcome.scores[left] == 60
    assert isinstance(state.events[-1], GameEnded) and state.events[-1].outcome == outcome
    for seat in (0, 1, None):  # the end of the game shows both towers to everyone
        v = state.view(seat)
        assert v.towers[right] == RIGHT_TOWER_ROUND_2
        assert v.towers[left] == (*LEFT_TOWER_ROUND_2[:9], 10)
        assert find_leaks(state, v, seat) == []


def test_worked_example_pass_does_not_end_the_round() -> None:
    state, _ = worked_example(0, via_draw=True)
    state.apply(DRAW, 1)
    state.apply(PASS, 1)
    assert state.outcome() is None and state.results == [state.results[0]]
    assert state.events == [Passed(1, 10)] and state.open_brick == 10
    assert state.to_move == 0 and state.round == 2


def test_worked_example_hides_the_right_players_dealt_bricks_before_the_end() -> None:
    state, _ = worked_example(0, via_draw=False)
    v = state.view(1)
    assert v.towers[0] == (None,) * 10, "dealt bricks of the opponent stay hidden"
    assert v.towers[1] == LEFT_TOWER_ROUND_2
    assert v.results == (state.results[0],), "finished rounds are public"


@pytest.mark.parametrize(
    ("tower", "run"),
    [
        (RIGHT_TOWER_ROUND_2, 3),
        ((5,), 1),
        ((1, 2), 1),
        ((2, 1), 2),
        ((5, 5, 4), 1),
        ((9, 3, 3), 2),
        ((1, 10, 9, 8), 1),
        (tuple(range(10, 0, -1)), 10),
        ((10, 9, 8, 7, 6, 5, 4, 3, 2, 11), 9),
    ],
)
def test_run_length(tower: tuple[int, ...], run: int) -> None:
    assert run_length(tower) == run
    assert bottom_run(tower) == run
    assert is_finished(tower) == (run == len(tower))


def test_round_scores() -> None:
    finished = tuple(range(40, 30, -1))
    towers = (RIGHT_TOWER_ROUND_2, finished)
    assert round_scores(towers, 1) == (15, 50)
    assert round_scores(towers, 0) == (50, 50), "the finisher gets 50 whatever its tower"
    assert round_scores(towers, None) == (15, 50), "at the cap a finished run is 10 x 5"
    assert round_scores((LEFT_TOWER_ROUND_2, RIGHT_TOWER_ROUND_2), None) == (45, 15)
    assert round_scores(((1, 2, 3), (3, 2, 4)), None) == (5, 10)


# -- options, notation, small API facts ---------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tower": 1},
        {"tower": 21, "bricks": 200},
        {"tower": 10, "bricks": 21},
        {"tower": 2, "bricks": 5},
        {"bricks": 201},
        {"rounds": 0},
        {"rounds": 11},
        {"turn_cap": 0},
        {"turn_cap": 10_001},
    ],
)
def test_invalid_options_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidOptionsError):
        StackoOptions(**kwargs)
    with pytest.raises(ValueError):  # InvalidOptionsError is a ValueError too
        StackoOptions(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"tower": 2, "bricks": 6},
        {"tower": 10, "bricks": 22},
        {"tower": 20, "bricks": 200},
        {"rounds": 1},
        {"rounds": 10},
        {"turn_cap": None},
        {"turn_cap": 1},
        {"turn_cap": 10_000},
    ],
)
def test_valid_options_make_a_game(kwargs: dict[str, Any]) -> None:
    options = StackoOptions(**kwargs)
    state = new_game(options, rng=random.Random(1))
    check_invariants(state)
    assert len(state.stack) == options.bricks - 2 * options.tower - 1 >= 1


def test_defaults_are_the_published_game() -> None:
    assert StackoOptions() == StackoOptions(bricks=40, tower=10, rounds=2, turn_cap=200)
    state = Stacko(rng=random.Random(3))
    assert (len(state.stack), len(state.discard), state.round, state.ply) == (19, 1, 1, 0)
    assert state.to_move == 0 and state.phase is Phase.TURN
    assert state.timeout_moves() == (DRAW, PASS)
    state.apply(DRAW)
    assert state.timeout_moves() == (PASS,)


def test_move_notation() -> None:
    for text, move in [("take 3", take(3)), ("draw", DRAW), ("place 0", place(0)), ("pass", PASS)]:
        assert str(move) == text
        assert Move.from_str(text) == move
        assert Move.from_str(f"  {text} ") == move
    for tower in (2, 10, 20):
        for move in (take(tower - 1), place(tower - 1)):
            assert Move.from_str(str(move)) == move
    for bad in ("", "take", "take x", "draw 1", "pass now", "jump 2", "TAKE 1"):
        with pytest.raises(ValueError):
            Move.from_str(bad)


def test_game_over_refuses_everything() -> None:
    state = Stacko(StackoOptions(turn_cap=1, rounds=1), rng=random.Random(5))
    state.apply(DRAW)
    state.apply(PASS)
    outcome = state.outcome()
    assert outcome is not None and outcome.termination is Termination.COMPLETED
    check_refusals(state, candidate_moves(10))
    with pytest.raises(IllegalMoveError) as refused:
        state.end(0, Termination.RESIGNATION)
    assert refused.value.reason is IllegalReason.GAME_OVER
    assert state.outcome() is outcome


def test_end_needs_a_seat() -> None:
    state = Stacko(rng=random.Random(5))
    with pytest.raises(ValueError):
        state.end(2, Termination.RESIGNATION)
    assert state.outcome() is None


@pytest.mark.parametrize("loser", [0, 1])
@pytest.mark.parametrize("holding", [False, True])
def test_resign_loses(loser: int, holding: bool) -> None:
    state = Stacko(rng=random.Random(11))
    state.apply(take(0))
    if holding:
        state.apply(DRAW)
    before = state.copy()
    outcome = state.end(loser, Termination.RESIGNATION)
    assert outcome == Outcome(Termination.RESIGNATION, 1 - loser, (0, 0))
    check_transition(Step(before, Resign(loser, Termination.RESIGNATION), state))
    with pytest.raises(IllegalMoveError) as refused:
        state.apply(PASS)
    assert refused.value.reason is IllegalReason.GAME_OVER
    for seat in (0, 1, None):
        v = state.view(seat)
        assert find_leaks(state, v, seat) == [], "resigning reveals nothing"
        assert v.outcome == outcome


def test_starter_alternates_per_round() -> None:
    state = Stacko(StackoOptions(turn_cap=2, rounds=5), rng=random.Random(2))
    starters = []
    while state.outcome() is None:
        if state.turns == 0 and state.phase is Phase.TURN:
            starters.append(state.to_move)
        state.apply(DRAW)
        state.apply(PASS)
    assert starters == [0, 1, 0, 1, 0]
    assert [r.round for r in state.results] == [1, 2, 3, 4, 5]
    assert all(r.finisher is None for r in state.results)


def test_turn_cap_scores_both_runs_and_nobody_gets_50() -> None:
    state = position(
        (RIGHT_TOWER_ROUND_2, LEFT_TOWER_ROUND_2), discard=[18],
        options=StackoOptions(turn_cap=3, rounds=1),
    )  # fmt: skip
    for move in (DRAW, PASS, DRAW, PASS, DRAW):
        state.apply(move)
    assert state.outcome() is None and state.turns == 2
    state.apply(PASS)
    assert state.results[-1].finisher is None
    assert state.results[-1].scores == (15, 45)
    assert state.outcome() == Outcome(Termination.COMPLETED, 1, (15, 45))


def test_finishing_on_the_capped_turn_scores_50() -> None:
    state, moves = worked_example(0, via_draw=False)
    state.options = StackoOptions(turn_cap=1)
    state.apply(moves[0])
    assert state.results[-1].finisher == 1 and state.results[-1].scores == (15, 50)


class _FinishedFirst(random.Random):
    """Deals finished towers on the first shuffle: sorts descending, then shuffles honestly."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.shuffles = 0

    def shuffle(self, x: list[Any]) -> None:  # type: ignore[override]
        self.shuffles += 1
        if self.shuffles == 1:
            x.sort(reverse=True)
        else:
            super().shuffle(x)


def test_a_finished_deal_is_dealt_again() -> None:
    rng = _FinishedFirst(4)
    state = Stacko(StackoOptions(bricks=6, tower=2), rng=rng)
    assert rng.shuffles >= 2
    assert not any(map(finished_tower, state.towers))
    check_invariants(state)


@settings(max_examples=300, deadline=None)
@given(SEEDS, st.sampled_from([(6, 2), (8, 3), (10, 4), (40, 10)]))
def test_deal_never_gives_a_finished_tower(seed: int, size: tuple[int, int]) -> None:
    bricks, tower = size
    options = StackoOptions(bricks=bricks, tower=tower, rounds=3, turn_cap=1)
    state = Stacko(options, rng=random.Random(seed))
    while state.outcome() is None:  # three deals
        assert not any(map(finished_tower, state.towers))
        assert state.seen == [[False] * tower] * 2
        state.apply(DRAW)
        state.apply(PASS)


def test_reshuffle_at_the_smallest_size() -> None:
    """With 6 bricks and towers of 2 the stack holds one brick: every draw empties it."""
    state = Stacko(StackoOptions(bricks=6, tower=2, turn_cap=None), rng=random.Random(8))
    for _ in range(20):
        state.apply(DRAW)
        assert state.stack == []
        before = state.copy()
        state.apply(PASS)
        check_transition(Step(before, PASS, state))
        assert isinstance(state.events[-1], Reshuffled) and len(state.discard) == 1


def test_copy_is_independent() -> None:
    state = Stacko(rng=random.Random(9))
    twin = state.copy()
    assert twin == state and twin is not state
    twin.apply(take(3))
    assert twin != state and state.ply == 0 and state.events == []
    assert state.view(0) != twin.view(0)


def test_view_refuses_unknown_seats() -> None:
    state = Stacko(rng=random.Random(9))
    for seat in (2, -1):
        with pytest.raises(ValueError):
            state.view(seat)


# -- properties over random games ----------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(SEEDS, st.sampled_from(SMALL_OPTIONS), st.booleans())
def test_random_games_follow_the_rules(seed: int, options: StackoOptions, resign: bool) -> None:
    check_invariants(Stacko(options, rng=random.Random(seed)))
    last = None
    for step in play(seed, options, resign=resign):
        check_transition(step)
        last = step.after
    assert last is not None and last.outcome() is not None, "every game ends"


@settings(max_examples=15, deadline=None)
@given(SEEDS)
def test_default_games_follow_the_rules(seed: int) -> None:
    last = None
    for step in play(seed, DEFAULT):
        check_transition(step)
        last = step.after
    assert last is not None and last.outcome() is not None
    assert len(last.results) == 2


@settings(max_examples=40, deadline=None)
@given(SEEDS, st.sampled_from(SMALL_OPTIONS), st.booleans())
def test_every_legal_move_applies_and_nothing_else(
    seed: int, options: StackoOptions, resign: bool
) -> None:
    candidates = candidate_moves(options.tower)
    state = None
    for step in play(seed, options, resign=resign):
        state = step.after
        check_refusals(state, candidates)
    assert state is not None and state.outcome() is not None


@settings(max_examples=150, deadline=None)
@given(SEEDS, st.sampled_from(SMALL_OPTIONS), st.booleans())
def test_no_view_tells_more_than_the_rules_allow(
    seed: int, options: StackoOptions, resign: bool
) -> None:
    first = Stacko(options, rng=random.Random(seed))
    for seat in (0, 1, None):
        assert find_leaks(first, first.view(seat), seat) == []
    for step in play(seed, options, resign=resign):
        revealed = revealed_by(step.before, step.action)
        for seat in (0, 1, None):
            v = step.after.view(seat)
            assert find_leaks(step.after, v, seat, revealed) == [], (seat, step.action)
            check_view_complete(step.after, v, seat)


@settings(max_examples=8, deadline=None)
@given(SEEDS)
def test_no_leak_in_default_games(seed: int) -> None:
    for step in play(seed, DEFAULT, resign=True):
        revealed = revealed_by(step.before, step.action)
        for seat in (0, 1, None):
            assert find_leaks(step.after, step.after.view(seat), seat, revealed) == []


# -- the leak test can fail -------------------------------------------------------------------


_honest_view = stacko_view.view


def _full_towers(state: Stacko, seat: int | None) -> StackoView:
    v = _honest_view(state, seat)
    return v._replace(towers=(tuple(state.towers[0]), tuple(state.towers[1])))


def _drawn_for_all(state: Stacko, seat: int | None) -> StackoView:
    return _honest_view(state, seat)._replace(drawn=state.drawn)


def _raw_events(state: Stacko, seat: int | None) -> StackoView:
    return _honest_view(state, seat)._replace(events=tuple(state.events))


def _stack_top_shown(state: Stacko, seat: int | None) -> StackoView:
    v = _honest_view(state, seat)
    return v._replace(discard=(*v.discard, *state.stack[-1:]))


def _spectator_as_seat_0(state: Stacko, seat: int | None) -> StackoView:
    v = _honest_view(state, 0 if seat is None else seat)
    return v._replace(seat=seat)


def _one_hidden_slot(state: Stacko, seat: int | None) -> StackoView:
    """Subtle: shows only the bottom brick of the other tower, and only when it is hidden."""
    v = _honest_view(state, seat)
    other = 1 if seat == 0 else 0
    towers = list(v.towers)
    towers[other] = (state.towers[other][0], *v.towers[other][1:])
    return v._replace(towers=(towers[0], towers[1]))


LEAKY_VIEWS: dict[
    str, tuple[Callable[[Stacko, int | None], StackoView], tuple[int | None, ...]]
] = {
    "full towers": (_full_towers, (0, 1, None)),
    "drawn brick for all": (_drawn_for_all, (0, 1, None)),
    "raw events": (_raw_events, (0, 1, None)),
    "stack top shown": (_stack_top_shown, (0, 1, None)),
    "spectator sees seat 0": (_spectator_as_seat_0, (None,)),
    "one hidden slot": (_one_hidden_slot, (0, 1, None)),
}


@pytest.mark.parametrize("name", list(LEAKY_VIEWS))
def test_the_leak_checker_catches_a_leaky_view(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    leaky, seats = LEAKY_VIEWS[name]
    options = StackoOptions(turn_cap=30)
    honest_problems: list[str] = []
    for step in play(1234, options, eps=0.3):
        revealed = revealed_by(step.before, step.action)
        for seat in (0, 1, None):
            honest_problems += find_leaks(step.after, step.after.view(seat), seat, revealed)
    assert honest_problems == []

    monkeypatch.setattr(stacko_view, "view", leaky)
    monkeypatch.setattr(stacko_engine, "_view", leaky)  # what Stacko.view calls
    caught: dict[int | None, int] = dict.fromkeys(seats, 0)
    for step in play(1234, options, eps=0.3):
        revealed = revealed_by(step.before, step.action)
        for seat in seats:
            v = step.after.view(seat)  # the engine's own entry point, now leaky
            if find_leaks(step.after, v, seat, revealed):
                caught[seat] += 1
    assert all(caught.values()), caught


def test_the_leak_checker_catches_a_foreign_object() -> None:
    state = Stacko(rng=random.Random(1))
    leaked = SimpleNamespace(
        **state.view(0)._asdict(),
        stack=tuple(state.stack),
    )
    assert find_leaks(state, leaked, 0) != []


# -- determinism ---------------------------------------------------------------------------


@settings(max_examples=20, deadline=None)
@given(SEEDS, st.sampled_from(SMALL_OPTIONS))
def test_same_seed_same_game(seed: int, options: StackoOptions) -> None:
    def record(run: Iterator[Step]) -> list[tuple[object, ...]]:
        return [(*s.after.copy().key(), tuple(s.after.events)) for s in run]

    first = record(play(seed, options, resign=True))
    assert first == record(play(seed, options, resign=True))
    a = Stacko(options, rng=random.Random(seed))
    b = Stacko(options, rng=random.Random(seed))
    assert a == b and a.view(0) == b.view(0)


def test_different_seeds_deal_differently() -> None:
    deals = {tuple(map(tuple, Stacko(rng=random.Random(seed)).towers)) for seed in range(50)}
    assert len(deals) == 50


# -- resample -------------------------------------------------------------------------------


def hidden_part(state: Stacko) -> tuple[object, ...]:
    return (tuple(map(tuple, state.towers)), tuple(state.stack), state.drawn)


def check_resample(state: Stacko, seat: int | None, seed: int) -> list[Stacko]:
    v = state.view(seat)
    samples = [resample(v, random.Random(seed + k)) for k in range(6)]
    for sample in samples:
        check_invariants(sample)
        assert sample.view(seat) == v, "the sample looks exactly like the view"
        for s in (0, 1):  # and agrees with the truth wherever the viewer can see
            truth = v.towers[s]
            assert all(b is None or b == sb for b, sb in zip(truth, sample.towers[s], strict=True))
        assert sample.discard == state.discard
        assert len(sample.stack) == len(state.stack)
        assert (sample.drawn is None) == (state.drawn is None)
    if len(unseen_bricks(v)) >= 4:
        assert len({hidden_part(s) for s in samples}) > 1, "different seeds, different deals"
    return samples


def play_out(state: Stacko, rng: random.Random) -> None:
    for _ in range(MAX_ACTIONS):
        if state.outcome() is not None:
            break
        before = state.copy()
        move = choose_move(state, rng, 0.3)
        state.apply(move)
        check_transition(Step(before, move, state))
    assert state.outcome() is not None


@settings(max_examples=60, deadline=None)
@given(SEEDS, st.sampled_from(SMALL_OPTIONS), st.booleans())
def test_resample_is_consistent_with_the_view(
    seed: int, options: StackoOptions, resign: bool
) -> None:
    rng = random.Random(seed)
    every = rng.randrange(3, 9)
    for i, step in enumerate(play(seed, options, resign=resign)):
        if i % every and step.after.outcome() is None:
            continue
        for seat in (0, 1, None):
            samples = check_resample(step.after, seat, rng.getrandbits(32))
            if step.after.outcome() is None and rng.random() < 0.1:
                play_out(samples[0], rng)


def test_resample_varies_the_hidden_slots() -> None:
    state = Stacko(rng=random.Random(21))
    v = state.view(0)
    opponent_slots = [resample(v, random.Random(k)).towers[1] for k in range(30)]
    assert all(resample(v, random.Random(k)).towers[0] == state.towers[0] for k in range(5))
    for slot in range(10):
        assert len({t[slot] for t in opponent_slots}) > 3
    spectator = [hidden_part(resample(state.view(None), random.Random(k))) for k in range(10)]
    assert len(set(spectator)) == 10


def test_a_game_continues_from_a_sample() -> None:
    state = Stacko(StackoOptions(turn_cap=60), rng=random.Random(77))
    rng = random.Random(78)
    for _ in range(25):
        state.apply(choose_move(state, rng, 0.5))
    for seat in (0, 1, None):
        sample = resample(state.view(seat), random.Random(seat or 5))
        play_out(sample, rng)
        assert sample.results[0].round == 1 and len(sample.results) == 2


def test_resample_refuses_an_impossible_view() -> None:
    state = Stacko(rng=random.Random(31))
    v = state.view(0)
    finished = tuple(sorted(state.towers[1], reverse=True))
    impossible = v._replace(towers=(v.towers[0], finished))
    with pytest.raises(ValueError, match="finishes a tower"):
        resample(impossible, random.Random(1))
    with pytest.raises(ValueError, match="unseen bricks"):
        resample(v._replace(stack_size=v.stack_size + 1), random.Random(1))


def test_resample_never_deals_a_finished_tower_mid_round() -> None:
    """Seat 1 shows a 4 on top of a hidden brick; seat 0 cannot see the 3 under it nor the 6
    on the stack. A 6 under the 4 would be a finished tower, which would have ended the
    round: every sample must put the 3 there."""
    options = StackoOptions(bricks=6, tower=2)
    state = position(((2, 5), (3, 4)), discard=[1], stack_top=[6], options=options)
    state.seen[1][1] = True
    v = state.view(0)
    assert v.towers[1] == (None, 4) and sorted(unseen_bricks(v)) == [3, 6]
    for k in range(20):
        sample = resample(v, random.Random(k))
        assert sample.towers[1] == [3, 4] and sample.stack == [6]
    for k in range(20):
        sample = resample(state.view(None), random.Random(k))
        assert not any(map(finished_tower, sample.towers))
