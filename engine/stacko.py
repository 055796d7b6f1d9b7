"""Stacko, the rules engine. Pure: no I/O, no clock, randomness only from the injected RNG.

The rules it keeps (``docs/rules-stacko.md`` says them for players; rules notes §1-9):

Rule 1  Bricks 1..N, all different; a tower has T slots, slot 0 at the bottom. A tower is
        *finished* when it strictly decreases from bottom to top.
Rule 2  Deal: shuffle, T bricks to each tower, the rest is the draw stack; its top is turned
        face up as the discard pile. Deal again while a dealt tower is already finished.
Rule 3  A turn is TAKE (swap the open brick into a slot; the old brick goes face up on the
        discard pile) or DRAW, then PLACE (same swap with the drawn brick) or PASS (the drawn
        brick goes face up). After drawing, the open brick can no longer be taken.
Rule 4  A turn that leaves the draw stack empty shuffles the whole discard pile into a new
        stack and turns its top face up.
Rule 5  Who sees what: ``StackoView`` (``engine.stacko_view``).
Rule 6  The round ends at once when the mover's tower is finished: 50 for the finisher, 5 x the
        strictly decreasing run from the bottom for the other.
Rule 7  ``rounds`` rounds (default 2); seat 0 starts odd rounds, seat 1 even ones.
        Higher total wins, equal totals draw.
Rule 8  Optional cap on turns per round: at the cap both score their runs, nobody gets 50.
Rule 9  Resigning or abandoning loses the game (``end``).

A *turn* is TAKE, or DRAW plus PLACE/PASS; ``ply`` counts every applied action (a draw is
one), so a client's expected ``ply`` identifies exactly one decision.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stacko.engine.errors import IllegalMoveError, IllegalReason, InvalidOptionsError
from stacko.engine.outcome import Outcome, Termination

if TYPE_CHECKING:
    from collections.abc import Callable

    from stacko.engine.game import Shuffler
    from stacko.engine.stacko_view import StackoView

_view: Callable[[Stacko, int | None], StackoView] | None = None
"""``engine.stacko_view.view``, once ``Stacko.view`` first ran (an import per call cost ~0.4 us
on every state frame)."""

FINISH_SCORE = 50
RUN_SCORE = 5


@dataclass(frozen=True, slots=True)
class StackoOptions:
    """Rules options; the defaults are the published game."""

    bricks: int = 40
    tower: int = 10
    rounds: int = 2
    turn_cap: int | None = 200
    """Turns (both players together) after which a round ends unfinished; ``None``: no cap."""

    def __post_init__(self) -> None:
        if not 2 <= self.tower <= 20:
            raise InvalidOptionsError(f"tower must be 2..20 slots, not {self.tower}")
        if not 2 * self.tower + 2 <= self.bricks <= 200:
            raise InvalidOptionsError(
                f"bricks must be {2 * self.tower + 2}..200 for towers of {self.tower}"
                f" (two towers, one hidden and one open brick), not {self.bricks}"
            )
        if not 1 <= self.rounds <= 10:
            raise InvalidOptionsError(f"rounds must be 1..10, not {self.rounds}")
        if self.turn_cap is not None and not 1 <= self.turn_cap <= 10_000:
            raise InvalidOptionsError(f"turn_cap must be 1..10000 or null, not {self.turn_cap}")


class Phase(enum.Enum):
    """Where the game stands."""

    TURN = "turn"
    """The seat to move may TAKE the open brick or DRAW."""
    DRAWN = "drawn"
    """The seat to move holds a drawn brick and must PLACE or PASS it."""
    OVER = "over"
    """The game has ended; ``outcome()`` says how."""


class Action(enum.Enum):
    TAKE = "take"
    DRAW = "draw"
    PLACE = "place"
    PASS = "pass"


@dataclass(frozen=True, slots=True)
class Move:
    """One action. ``slot`` is set for TAKE and PLACE only. String form: ``"take 3"``."""

    action: Action
    slot: int | None = None

    def __str__(self) -> str:
        return self.action.value if self.slot is None else f"{self.action.value} {self.slot}"

    @classmethod
    def from_str(cls, text: str) -> Move:
        """Parse ``"take 3"``, ``"draw"``, ``"place 0"``, ``"pass"``; ValueError otherwise."""
        word, _, rest = text.strip().partition(" ")
        action = Action(word)
        if action in (Action.TAKE, Action.PLACE):
            return cls(action, int(rest))
        if rest:
            raise ValueError(f"{word} takes no slot")
        return cls(action)


DRAW = Move(Action.DRAW)
PASS = Move(Action.PASS)


def take(slot: int) -> Move:
    return Move(Action.TAKE, slot)


def place(slot: int) -> Move:
    return Move(Action.PLACE, slot)


_MOVE_TABLES: dict[int, tuple[tuple[Move, ...], tuple[Move, ...]]] = {}


def _move_tables(tower: int) -> tuple[tuple[Move, ...], tuple[Move, ...]]:
    """Legal-move tuples per phase; every slot is always legal, so they never change."""
    tables = _MOVE_TABLES.get(tower)
    if tables is None:
        turn = (*(take(i) for i in range(tower)), DRAW)
        drawn = (*(place(i) for i in range(tower)), PASS)
        tables = _MOVE_TABLES[tower] = (turn, drawn)
    return tables


# -- events: what the last action did, before any filtering for a seat --------------------


@dataclass(frozen=True, slots=True)
class Took:
    seat: int
    slot: int
    brick: int
    removed: int


@dataclass(frozen=True, slots=True)
class Drew:
    seat: int
    brick: int | None
    """``None`` in every view but the drawer's (rules §5: the drawn brick stays hidden)."""


@dataclass(frozen=True, slots=True)
class Placed:
    seat: int
    slot: int
    brick: int
    removed: int


@dataclass(frozen=True, slots=True)
class Passed:
    seat: int
    brick: int


@dataclass(frozen=True, slots=True)
class Reshuffled:
    stack_size: int


@dataclass(frozen=True, slots=True)
class RoundResult:
    """A finished round; its towers are revealed to everyone (rules §5)."""

    round: int
    finisher: int | None
    """The seat that finished its tower, or ``None`` if the turn cap ended the round."""
    towers: tuple[tuple[int, ...], tuple[int, ...]]
    scores: tuple[int, int]


@dataclass(frozen=True, slots=True)
class RoundEnded:
    result: RoundResult


@dataclass(frozen=True, slots=True)
class GameEnded:
    outcome: Outcome


Event = Took | Drew | Placed | Passed | Reshuffled | RoundEnded | GameEnded


def run_length(tower: Sequence[int]) -> int:
    """Length of the strictly decreasing run from the bottom (slot 0 always counts)."""
    n = 1
    for i in range(1, len(tower)):
        if tower[i] >= tower[i - 1]:
            break
        n += 1
    return n


def is_finished(tower: Sequence[int]) -> bool:
    return run_length(tower) == len(tower)


def round_scores(towers: Sequence[Sequence[int]], finisher: int | None) -> tuple[int, int]:
    """Rules §6/§8: the finisher scores 50, everyone else 5 x their bottom run."""
    a, b = (
        FINISH_SCORE if s == finisher else RUN_SCORE * run_length(t) for s, t in enumerate(towers)
    )
    return a, b


class Stacko:
    """A Stacko game in progress (mutable; ``copy()`` before searching)."""

    __slots__ = (
        "_outcome",
        "_to_move",
        "discard",
        "drawn",
        "events",
        "options",
        "phase",
        "ply",
        "results",
        "rng",
        "round",
        "seen",
        "stack",
        "totals",
        "towers",
        "turns",
    )  # fmt: skip

    options: StackoOptions
    rng: Shuffler
    towers: list[list[int]]
    seen: list[list[bool]]
    """``seen[s][i]``: the brick in seat ``s``'s slot ``i`` entered it this round; both see it."""
    stack: list[int]
    """The draw stack, top last. Only its size is public."""
    discard: list[int]
    """The discard pile, top (the open brick) last. Public."""
    drawn: int | None
    phase: Phase
    ply: int
    round: int
    turns: int
    """Turns completed in this round (both players), for the turn cap."""
    totals: list[int]
    results: list[RoundResult]
    events: list[Event]
    """What the last applied action did (unfiltered: never send it, use ``view``)."""

    def __init__(
        self, options: StackoOptions | None = None, *, rng: Shuffler, deal: bool = True
    ) -> None:
        """``deal=False``: no bricks yet, for ``copy`` and ``resample``, which set every field
        themselves (compiled, a class cannot be made without its ``__init__``)."""
        self.options = options if options is not None else StackoOptions()
        self.rng = rng
        self.ply = 0
        self.round = 1
        self.totals = [0, 0]
        self.results = []
        self.events = []
        self._outcome: Outcome | None = None
        if deal:
            self._deal()

    # -- the public API ---------------------------------------------------------------

    @property
    def to_move(self) -> int | None:
        return None if self.phase is Phase.OVER else self._to_move

    def legal_moves(self) -> tuple[Move, ...]:
        if self.phase is Phase.OVER:
            return ()
        turn, drawn = _move_tables(self.options.tower)
        return turn if self.phase is Phase.TURN else drawn

    def is_legal(self, move: object) -> bool:
        """Whether ``apply(move)`` accepts it now (``take(1.0)`` equals ``take(1)`` but is not)."""
        if not isinstance(move, Move):
            return False
        slot: object = move.slot  # as ``object``: compiled, ``type()`` of an ``int`` is folded
        return (slot is None or type(slot) is int) and move in self.legal_moves()

    def apply(self, move: object, seat: int | None = None) -> None:
        """Apply ``move`` for ``seat`` (default: the seat to move); see ``GameState.apply``.
        ``move`` is typed ``object``: anything that is not a ``Move`` is refused with
        ``IllegalMoveError``, compiled or not (mypyc would raise ``TypeError`` for it)."""
        phase = self.phase
        if phase is Phase.OVER:
            raise IllegalMoveError(IllegalReason.GAME_OVER, "the game is over")
        mover = self._to_move
        if seat is not None and seat != mover:
            raise IllegalMoveError(IllegalReason.NOT_YOUR_TURN, f"it is seat {mover}'s turn")
        if not isinstance(move, Move):
            raise IllegalMoveError(IllegalReason.UNKNOWN_MOVE, f"not a Stacko move: {move!r}")
        action = move.action
        events: list[Event]
        if phase is Phase.TURN:
            if action is Action.DRAW:
                if move.slot is not None:
                    raise IllegalMoveError(IllegalReason.BAD_SLOT, "draw takes no slot")
                self.drawn = brick = self.stack.pop()
                self.phase = Phase.DRAWN
                self.ply += 1
                self.events = [Drew(mover, brick)]
                return
            if action is not Action.TAKE:
                raise self._wrong_phase(action, "take the open brick or draw")
            slot = self._check_slot(move.slot)
            brick = self.discard.pop()
            removed = self._swap(mover, slot, brick)
            events = [Took(mover, slot, brick, removed)]
        else:
            drawn = self.drawn
            assert drawn is not None  # Phase.DRAWN always holds a brick
            if action is Action.PLACE:
                slot = self._check_slot(move.slot)
                removed = self._swap(mover, slot, drawn)
                events = [Placed(mover, slot, drawn, removed)]
            elif action is Action.PASS:
                if move.slot is not None:
                    raise IllegalMoveError(IllegalReason.BAD_SLOT, "pass takes no slot")
                self.discard.append(drawn)
                slot = None
                events = [Passed(mover, drawn)]
            else:
                raise self._wrong_phase(action, "place the drawn brick or pass")
            self.drawn = None
        self.ply += 1
        self.events = events
        self._end_turn(mover, slot, events)

    def view(self, seat: int | None) -> StackoView:
        """Exactly what ``seat`` may know (``None``: spectator). The only way state leaves."""
        global _view
        view = _view
        if view is None:  # engine.stacko_view imports this module: bound on first use
            from stacko.engine.stacko_view import view as first

            view = _view = first
        return view(self, seat)

    def outcome(self) -> Outcome | None:
        return self._outcome

    def end(self, loser: int, termination: Termination) -> Outcome:
        """Rules §9: resignation, abandonment or timeout loses the whole game."""
        if self._outcome is not None:
            raise IllegalMoveError(IllegalReason.GAME_OVER, "the game is over")
        if loser not in (0, 1):
            raise ValueError(f"no seat {loser}")
        outcome = Outcome(termination, 1 - loser, (self.totals[0], self.totals[1]))
        self._finish(outcome)
        self.events = [GameEnded(outcome)]
        return outcome

    def timeout_moves(self) -> tuple[Move, ...]:
        """Draw, then pass: changes nothing in the tower and reveals no tower brick."""
        if self.phase is Phase.OVER:
            return ()
        return (DRAW, PASS) if self.phase is Phase.TURN else (PASS,)

    def copy(self, rng: Shuffler | None = None) -> Stacko:
        new = Stacko(self.options, rng=self.rng if rng is None else rng, deal=False)
        new.towers = [self.towers[0][:], self.towers[1][:]]
        new.seen = [self.seen[0][:], self.seen[1][:]]
        new.stack = self.stack[:]
        new.discard = self.discard[:]
        new.drawn = self.drawn
        new.phase = self.phase
        new._to_move = self._to_move
        new.ply = self.ply
        new.round = self.round
        new.turns = self.turns
        new.totals = self.totals[:]
        new.results = self.results[:]
        new.events = self.events[:]
        new._outcome = self._outcome
        return new

    def key(self) -> tuple[object, ...]:
        """Everything that makes the position (not the RNG), for equality and tests."""
        return (
            self.options, self.towers, self.seen, self.stack, self.discard, self.drawn,
            self.phase, self._to_move, self.ply, self.round, self.turns, self.totals,
            self.results, self._outcome,
        )  # fmt: skip

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stacko) and self.key() == other.key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"<Stacko round {self.round} ply {self.ply} {self.phase.value}"
            f" to_move={self.to_move} towers={self.towers} open={self.open_brick}>"
        )

    @property
    def open_brick(self) -> int:
        return self.discard[-1]

    @property
    def starter(self) -> int:
        """Rules §7: seat 0 starts odd rounds, seat 1 even rounds."""
        return (self.round - 1) % 2

    # -- internals --------------------------------------------------------------------

    def _deal(self) -> None:
        """Rules §2; deal again while a dealt tower is already finished."""
        n, t = self.options.bricks, self.options.tower
        bricks = list(range(1, n + 1))
        while True:
            self.rng.shuffle(bricks)
            towers = [bricks[:t], bricks[t : 2 * t]]
            if not (is_finished(towers[0]) or is_finished(towers[1])):
                break
        self.towers = towers
        self.seen = [[False] * t, [False] * t]
        self.stack = bricks[2 * t :]
        self.discard = [self.stack.pop()]
        self.drawn = None
        self.phase = Phase.TURN
        self._to_move = self.starter
        self.turns = 0

    def _check_slot(self, slot: object) -> int:
        if type(slot) is not int or not 0 <= slot < self.options.tower:
            raise IllegalMoveError(
                IllegalReason.BAD_SLOT, f"slot must be 0..{self.options.tower - 1}, not {slot!r}"
            )
        return slot

    def _wrong_phase(self, action: object, expected: str) -> IllegalMoveError:
        if not isinstance(action, Action):
            return IllegalMoveError(IllegalReason.UNKNOWN_MOVE, f"not a Stacko move: {action!r}")
        return IllegalMoveError(IllegalReason.WRONG_PHASE, f"cannot {action.value} now: {expected}")

    def _swap(self, seat: int, slot: int, brick: int) -> int:
        tower = self.towers[seat]
        removed = tower[slot]
        tower[slot] = brick
        self.seen[seat][slot] = True  # rules §5: bricks placed this round are public
        self.discard.append(removed)
        return removed

    def _end_turn(self, mover: int, slot: int | None, events: list[Event]) -> None:
        self.turns += 1
        cap = self.options.turn_cap
        if slot is not None and is_finished(self.towers[mover]):
            self._end_round(mover, events)
        elif cap is not None and self.turns >= cap:
            self._end_round(None, events)
        else:
            if not self.stack:  # rules §4
                stack = self.discard
                self.rng.shuffle(stack)
                self.stack = stack
                self.discard = [stack.pop()]
                events.append(Reshuffled(len(stack)))
            self._to_move = 1 - mover
            self.phase = Phase.TURN

    def _end_round(self, finisher: int | None, events: list[Event]) -> None:
        towers = (tuple(self.towers[0]), tuple(self.towers[1]))
        scores = round_scores(towers, finisher)
        result = RoundResult(self.round, finisher, towers, scores)
        self.results.append(result)
        self.totals[0] += scores[0]
        self.totals[1] += scores[1]
        events.append(RoundEnded(result))
        if self.round >= self.options.rounds:
            a, b = self.totals
            winner = None if a == b else (0 if a > b else 1)
            outcome = Outcome(Termination.COMPLETED, winner, (a, b))
            self._finish(outcome)
            events.append(GameEnded(outcome))
        else:
            self.round += 1
            self._deal()

    def _finish(self, outcome: Outcome) -> None:
        # A brick drawn before a resignation stays in ``drawn``: bricks are conserved.
        self._outcome = outcome
        self.phase = Phase.OVER


def new_game(options: StackoOptions | None = None, *, rng: Shuffler) -> Stacko:
    """Deal a new game. Production passes the OS's source (a ``random.SystemRandom``), tests
    a seeded Random."""
    return Stacko(options, rng=rng)
