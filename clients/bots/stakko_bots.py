"""Stakko bots: a random player and an alpha-beta searcher, both working from a view only.

Stakko has perfect information, so a ``StakkoView`` is the whole state:
``Stakko.from_view`` rebuilds it exactly and the searcher plays the real rules on copies.
Everything is deterministic given the bot's ``rng`` and budget (no wall clock), so games
replay exactly and tests can count on them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol

from stacko.engine.outcome import Outcome
from stacko.engine.stakko import Stakko, StakkoMove, StakkoOptions, StakkoView

WIN = 10_000.0
"""Above any heuristic value: a won game beats every unfinished one."""


class StakkoBot(Protocol):
    """What the bot runner needs: a name and a pure choice from a view."""

    name: str

    def choose(self, view: StakkoView, legal: Sequence[StakkoMove]) -> StakkoMove: ...


def play(bots: Sequence[StakkoBot], options: StakkoOptions | None = None) -> Outcome:
    """One game, ``bots[seat]`` for each seat, each seeing only its own view."""
    game = Stakko(options, rng=random.Random(0))
    while (seat := game.to_move) is not None:
        view = game.view(seat)
        game.apply(bots[seat].choose(view, view.legal_moves()), seat)
    outcome = game.outcome()
    assert outcome is not None  # to_move is None only once the game is over
    return outcome


class RandomStakkoBot:
    """Picks a legal move uniformly at random: the baseline every other bot must beat."""

    name = "random"

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def choose(self, view: StakkoView, legal: Sequence[StakkoMove]) -> StakkoMove:
        if not legal:
            raise ValueError("no legal move to choose from")
        return self.rng.choice(legal)

    def reset(self) -> None:
        """Nothing to forget: every choice depends on the view alone."""


class _OutOfBudget(Exception):
    """The node budget ran out mid-iteration; the last finished iteration's move stands."""


def evaluate(state: Stakko, me: int) -> float:
    """How good ``state`` is for seat ``me``; a finished game is worth more than ``WIN``.

    Unfinished: the height difference counts most, since a height never shrinks (only its
    owner can land on the opponent's end, and cannot lift from it). Then *control*: the
    liftable discs under each side's top discs, opponent discs included, as they are what
    can still reach the goal; weighted up the nearer they stand to it. Then owned stacks,
    since they set the move length (rule 3).
    """
    outcome = state.outcome()
    white, black = state.heights()
    diff = float(white - black if me == 0 else black - white)
    if outcome is not None:
        if outcome.winner is None:
            return diff
        return (WIN if outcome.winner == me else -WIN) + diff
    line = state.line
    last = len(line) - 1
    control = 0.0
    for i, stack in enumerate(line):
        top = stack[-1]
        if top == 0 and i < last:  # White's stacks short of Black's end
            control += state.liftable(i) * (1.0 + 0.5 * i / last)
        elif top == 1 and i > 0:  # Black's stacks short of White's end
            control -= state.liftable(i) * (1.0 + 0.5 * (last - i) / last)
    if me == 1:
        control = -control
    owned = state.owned(me) - state.owned(1 - me)
    return 4.0 * diff + control + 0.25 * owned


_EXACT, _LOWER, _UPPER = 0, 1, 2
"""Transposition-table bounds: the stored value is exact, at least it, or at most it."""

_Entry = tuple[int, float, int, StakkoMove]
"""(depth searched, value, bound, best move) for one position."""


class SearchStakkoBot:
    """Alpha-beta minimax with iterative deepening and a transposition table, under a node
    budget.

    A pass (rule 4) means the same seat may move twice in a row, so each node maximises or
    minimises by who is to move, not by depth parity. Moves commute often (two stacks moved
    in either order), so the table saves much of the budget, and its best move from the
    previous iteration is searched first. An iteration cut off by the budget is thrown away.
    """

    name = "search"

    def __init__(self, rng: random.Random, *, nodes: int = 1_000, max_depth: int = 30) -> None:
        if nodes < 1 or max_depth < 1:
            raise ValueError("nodes and max_depth must be positive")
        self.rng = rng
        self.nodes = nodes
        self.max_depth = max_depth
        self._left = 0
        self._me = 0
        self._table: dict[tuple[object, ...], _Entry] = {}

    def reset(self) -> None:
        """Nothing to forget: the view is the whole game, so each search starts afresh."""

    def choose(self, view: StakkoView, legal: Sequence[StakkoMove]) -> StakkoMove:
        if not legal:
            raise ValueError("no legal move to choose from")
        if len(legal) == 1 or view.seat is None:
            return legal[0]
        root = Stakko.from_view(view, self.rng)
        self._me = view.seat
        self._left = self.nodes
        self._table = {}
        order = list(legal)
        self.rng.shuffle(order)  # ties go to a random move, not always the first stack
        best = order[0]
        for depth in range(1, self.max_depth + 1):
            try:
                value, best = self._root(root, order, depth)
            except _OutOfBudget:
                break
            order.remove(best)
            order.insert(0, best)
            if abs(value) >= WIN:
                break  # a forced result is proven: deeper search cannot change it
        self._table = {}
        return best

    def _root(self, root: Stakko, order: list[StakkoMove], depth: int) -> tuple[float, StakkoMove]:
        alpha, beta = -float("inf"), float("inf")
        best = order[0]
        for move in order:
            child = root.copy()
            child.apply(move)
            value = self._search(child, depth - 1, alpha, beta)
            if value > alpha:
                alpha, best = value, move
        return alpha, best

    def _search(self, state: Stakko, depth: int, alpha: float, beta: float) -> float:
        self._left -= 1
        if self._left < 0:
            raise _OutOfBudget
        if depth == 0 or state.outcome() is not None:
            return evaluate(state, self._me)
        key = (tuple(map(tuple, state.line)), state.to_move, state.ply)
        moves = state.legal_moves()
        entry = self._table.get(key)
        if entry is not None:
            seen, value, bound, first = entry
            if seen >= depth and (
                bound == _EXACT
                or (bound == _LOWER and value >= beta)
                or (bound == _UPPER and value <= alpha)
            ):
                return value
            moves = (first, *(m for m in moves if m != first))
        low, high = alpha, beta
        maximise = state.to_move == self._me
        best_value = -float("inf") if maximise else float("inf")
        best_move = moves[0]
        for move in moves:
            child = state.copy()
            child.apply(move)
            value = self._search(child, depth - 1, alpha, beta)
            if maximise:
                if value > best_value:
                    best_value, best_move = value, move
                    alpha = max(alpha, value)
            elif value < best_value:
                best_value, best_move = value, move
                beta = min(beta, value)
            if alpha >= beta:
                break
        bound = _UPPER if best_value <= low else _LOWER if best_value >= high else _EXACT
        self._table[key] = (depth, best_value, bound, best_move)
        return best_value
