"""Stakko (Laurent Escoffier), the rules engine. Pure: no I/O, no clock, no randomness.

A different game from Stacko despite the name: perfect information, a line of stacks of
discs. ``docs/rules-stakko.md`` says the rules for players; rules notes "Stakko" §1-7.

Rule 1  A line of 9 spaces, index 0..8: a red disc on 0 (White's home) and on 8 (Black's
        home), a gray disc on each of 1..7. White's 9 discs stand on 0, Black's 9 on 8.
        White (seat 0) moves toward the end of the line, Black (seat 1) toward index 0.
        White moves first.
Rule 2  A stack belongs to the player whose colour is its top disc; gray or red on top:
        nobody's.
Rule 3  A turn: N = the stacks you own. Lift k >= 1 discs off the top of one of them and put
        them on the stack exactly N stacks further toward the opponent. Never past the last
        stack of the line (``OVERSHOOT``); in the basic game never lift a gray or red disc
        (``BAD_COUNT``).
Rule 4  A player with no legal move passes automatically (a ``Passed`` event) and the other
        moves again; when neither can move the game is over (``COMPLETED``). Option
        ``ply_cap`` (default 500 moves) ends an endless game (``TURN_CAP``), scored as it stands.
Rule 5  Height: the discs on the stack at the opponent's end of the line, its bottom disc
        (the base) not counted, if your colour is on top of it; otherwise 0. Higher height
        wins, equal heights draw.
Rule 6  Variant "gray": gray discs may be lifted with the discs above them, and count toward
        height. Spaces are the stacks of the line: a stack lifted whole (base and all) leaves
        no space behind, the line gets shorter, and every index is into the current line.
Rule 7  Variant "red": as "gray", and red discs may be lifted too; the opponent's side is
        whichever stack stands last at the opponent's end, and its bottom disc is its base.
Rule 8  Resigning, abandoning or timing out loses the game (``end``; server policy).

Perfect information: ``view(seat)`` is the whole state for every seat and for spectators.
``ply`` counts applied moves only (an automatic pass is not a move).
"""

from __future__ import annotations

import enum
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stacko.engine.errors import IllegalMoveError, IllegalReason, InvalidOptionsError
from stacko.engine.outcome import Outcome, Termination

if TYPE_CHECKING:
    from stacko.engine.game import Shuffler

VARIANTS = ("basic", "gray", "red")
SPACES = 9
DISCS_PER_PLAYER = 9


@dataclass(frozen=True, slots=True)
class StakkoOptions:
    """Rules options; the defaults are the basic published game."""

    variant: str = "basic"
    """``"basic"``, ``"gray"`` (gray discs may be lifted) or ``"red"`` (gray and red too)."""
    ply_cap: int = 500
    """Moves (both players together) after which the game ends as it stands (rule 4)."""

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise InvalidOptionsError(
                f"variant must be one of {', '.join(VARIANTS)}, not {self.variant!r}"
            )
        if type(self.ply_cap) is not int or not 1 <= self.ply_cap <= 10_000:
            raise InvalidOptionsError(f"ply_cap must be 1..10000, not {self.ply_cap!r}")


class Colour(enum.IntEnum):
    """A disc. WHITE and BLACK equal their owner's seat, so ``Colour(seat)`` is its colour."""

    WHITE = 0
    BLACK = 1
    GRAY = 2
    RED = 3

    @property
    def letter(self) -> str:
        """One letter for compact lines: ``W``, ``B``, ``G``, ``R``."""
        return self.name[0]


WHITE, BLACK, GRAY, RED = Colour.WHITE, Colour.BLACK, Colour.GRAY, Colour.RED
_BY_LETTER = {c.letter: c for c in Colour}
DISC_COUNTS = {WHITE: 9, BLACK: 9, GRAY: 7, RED: 2}
"""The 27 discs of the box; every position holds exactly these."""

Stack = tuple[Colour, ...]
"""A stack bottom first: ``stack[0]`` is its base, ``stack[-1]`` its top (the owner)."""

_MOVE_RE = re.compile(r"\s*(\d+)\s*x\s*(\d+)\s*\Z", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class StakkoMove:
    """Lift ``count`` discs off the top of stack ``stack`` (an index into the current line).

    The distance is not part of the move: it is always the mover's stack count (rule 3).
    String form ``"<stack>x<count>"``: ``"2x3"`` lifts 3 discs off stack 2.
    """

    stack: int
    count: int

    def __str__(self) -> str:
        return f"{self.stack}x{self.count}"

    @classmethod
    def from_str(cls, text: str) -> StakkoMove:
        """Parse ``"2x3"`` (spaces around the parts allowed); ValueError otherwise."""
        m = _MOVE_RE.match(text)
        if m is None:
            raise ValueError(f"not a Stakko move (want e.g. '2x3'): {text!r}")
        return move(int(m.group(1)), int(m.group(2)))


_MAX_STACKS = SPACES
_MAX_COUNT = sum(DISC_COUNTS.values())
_MOVES = [[StakkoMove(i, k) for k in range(_MAX_COUNT + 1)] for i in range(_MAX_STACKS)]
"""Interned moves: legal-move generation allocates nothing per move."""


def move(stack: int, count: int) -> StakkoMove:
    """The move lifting ``count`` discs off stack ``stack`` (shared instance when in range)."""
    if 0 <= stack < _MAX_STACKS and 0 <= count <= _MAX_COUNT:
        return _MOVES[stack][count]
    return StakkoMove(stack, count)


# -- events: what the last applied move did -----------------------------------------------


@dataclass(frozen=True, slots=True)
class Moved:
    """``count`` discs (``discs``, bottom first) went from ``stack`` onto ``target``.

    Both indices are into the line as it stood before the move. ``closed``: the whole stack
    moved, base included, so its space left the line (variants only); stacks behind it are
    one index lower now.
    """

    seat: int
    stack: int
    count: int
    target: int
    discs: Stack
    closed: bool


@dataclass(frozen=True, slots=True)
class Passed:
    """Rule 4: ``seat`` had no legal move, so the other seat moves again."""

    seat: int


@dataclass(frozen=True, slots=True)
class GameEnded:
    outcome: Outcome


Event = Moved | Passed | GameEnded

_FIXED = {
    # rule 3/6/7: is a disc of this colour at the bottom of a stack left behind when lifting?
    "basic": (False, False, True, True),
    "gray": (False, False, False, True),
    "red": (False, False, False, False),
}


def _legal(
    line: Sequence[Sequence[Colour]], mover: int, n: int, fixed: tuple[bool, ...]
) -> tuple[StakkoMove, ...]:
    """Rule 3: every (stack, count) of ``mover`` that owns ``n`` stacks, stacks in line order.

    Below a player's top disc there can be gray discs only in the variants, and red ones only
    as a base, so the liftable discs are the whole stack minus a fixed base.
    """
    if n == 0:
        return ()
    size = len(line)
    step = n if mover == 0 else -n
    out: list[StakkoMove] = []
    for i, stack in enumerate(line):
        if stack[-1] == mover and 0 <= i + step < size:
            out.extend(_MOVES[i][1 : len(stack) - fixed[stack[0]] + 1])
    return tuple(out)


def _heights(line: Sequence[Sequence[Colour]]) -> tuple[int, int]:
    """Rule 5: White scores on the last stack, Black on the first, base not counted."""
    first, last = line[0], line[-1]
    white = len(last) - 1 if last[-1] == WHITE else 0
    black = len(first) - 1 if first[-1] == BLACK else 0
    return white, black


def line_str(line: Iterable[Iterable[Colour]]) -> str:
    """``"RWWW G GBB R"``: one word per stack, bottom first (the inverse of ``parse_line``)."""
    return " ".join("".join(c.letter for c in stack) for stack in line)


def parse_line(text: str) -> list[list[Colour]]:
    """Read ``line_str`` notation; ValueError on an unknown letter."""
    try:
        return [[_BY_LETTER[ch] for ch in word.upper()] for word in text.split()]
    except KeyError as e:
        raise ValueError(f"unknown disc {e.args[0]!r} (use W, B, G, R)") from None


def _check_line(line: Sequence[Sequence[Colour]], variant: str) -> None:
    """A position the rules can reach in ``variant``: the 27 discs, a base under every stack."""
    if not line or any(len(stack) == 0 for stack in line):
        raise ValueError("a line holds at least one stack and no empty stack")
    counts = dict.fromkeys(Colour, 0)
    for stack in line:
        for disc in stack:
            counts[Colour(disc)] += 1
    if counts != DISC_COUNTS:
        raise ValueError(f"the line must hold the 27 discs {DISC_COUNTS}, not {counts}")
    if any(stack[0] not in (GRAY, RED) for stack in line):
        raise ValueError("every stack stands on its space's gray or red base")
    if variant == "red":
        return
    if line[0][0] != RED or line[-1][0] != RED or any(s[0] == RED for s in line[1:-1]):
        raise ValueError(f"in the {variant} game the red discs stay at the ends")
    if any(d == RED for s in line for d in s[1:]):
        raise ValueError(f"in the {variant} game no red disc is ever lifted")
    if variant == "basic" and (len(line) != SPACES or any(d == GRAY for s in line for d in s[1:])):
        raise ValueError("in the basic game there are 9 spaces and gray discs never move")


@dataclass(frozen=True, slots=True)
class StakkoView:
    """The whole state (perfect information): every seat and spectators see the same."""

    seat: int | None
    options: StakkoOptions
    line: tuple[Stack, ...]
    """The stacks from White's end (index 0) to Black's end, each bottom first."""
    to_move: int | None
    ply: int
    owned: tuple[int, int]
    """Stacks each seat owns: how far its next move goes (rule 3)."""
    heights: tuple[int, int]
    """What each seat would score if the game ended now (rule 5)."""
    passes: tuple[int, int]
    """Automatic passes so far, per seat (rule 4)."""
    events: tuple[Event, ...]
    """What the last move did."""
    outcome: Outcome | None

    @property
    def my_turn(self) -> bool:
        return self.seat is not None and self.seat == self.to_move

    def legal_moves(self) -> tuple[StakkoMove, ...]:
        """The moves this seat may make now (empty unless it is this seat's turn)."""
        if not self.my_turn or self.to_move is None:
            return ()
        fixed = _FIXED[self.options.variant]
        return _legal(self.line, self.to_move, self.owned[self.to_move], fixed)


class Stakko:
    """A Stakko game in progress (mutable; ``copy()`` before searching)."""

    __slots__ = (
        "_fixed", "_legal", "_outcome", "_to_move", "_tops",
        "events", "line", "options", "passes", "ply", "rng",
    )  # fmt: skip

    options: StakkoOptions
    rng: Shuffler
    """Unused by the rules (no chance in Stakko); kept for the common interface."""
    line: list[list[Colour]]
    """The stacks, White's end first, each bottom first. Read freely, change only by ``apply``."""
    ply: int
    passes: list[int]
    events: list[Event]
    """What the last applied move did."""
    _tops: list[int]
    """Stacks per top colour, indexed by ``Colour``: ``_tops[seat]`` is N of rule 3."""
    _legal: tuple[StakkoMove, ...] | None

    def __init__(self, options: StakkoOptions | None = None, *, rng: Shuffler) -> None:
        self.options = options if options is not None else StakkoOptions()
        self.rng = rng
        line = [[RED] + [WHITE] * DISCS_PER_PLAYER]
        line += [[GRAY] for _ in range(SPACES - 2)]
        line.append([RED] + [BLACK] * DISCS_PER_PLAYER)
        self._setup(line, to_move=0, ply=0, passes=(0, 0), events=(), outcome=None)

    @classmethod
    def from_line(
        cls,
        line: str | Iterable[Iterable[Colour]],
        *,
        options: StakkoOptions | None = None,
        to_move: int = 0,
        ply: int = 0,
        rng: random.Random | None = None,
    ) -> Stakko:
        """A game from a position, e.g. ``from_line("RWWW G G GWW ...", to_move=1)``.

        For tests, puzzles and docs. The position must hold the 27 discs and be possible in
        the variant (ValueError otherwise). If ``to_move`` cannot move, the other seat moves;
        if neither can, the game is already over.
        """
        options = options if options is not None else StakkoOptions()
        stacks = parse_line(line) if isinstance(line, str) else [list(s) for s in line]
        _check_line(stacks, options.variant)
        if to_move not in (0, 1):
            raise ValueError(f"no seat {to_move}")
        if not 0 <= ply < options.ply_cap:
            raise ValueError(f"ply must be 0..{options.ply_cap - 1}, not {ply}")
        game = cls.__new__(cls)
        game.options = options
        game.rng = rng if rng is not None else random.Random(0)
        game._setup(stacks, to_move=to_move, ply=ply, passes=(0, 0), events=(), outcome=None)
        events: list[Event] = []
        game._settle(1 - to_move, events, count_pass=False)
        game.events = events
        return game

    @classmethod
    def from_view(cls, view: StakkoView, rng: random.Random | None = None) -> Stakko:
        """The state a view shows: it is the whole state, so this is exact (bots search it).

        ValueError if the view's line is no possible position (a view not made by ``view``).
        """
        stacks = [list(s) for s in view.line]
        _check_line(stacks, view.options.variant)
        game = cls.__new__(cls)
        game.options = view.options
        game.rng = rng if rng is not None else random.Random(0)
        mover = view.to_move if view.to_move is not None else 0
        game._setup(
            stacks, to_move=mover, ply=view.ply, passes=view.passes,
            events=view.events, outcome=view.outcome,
        )  # fmt: skip
        return game

    def _setup(
        self,
        line: list[list[Colour]],
        *,
        to_move: int,
        ply: int,
        passes: Sequence[int],
        events: Iterable[Event],
        outcome: Outcome | None,
    ) -> None:
        self.line = line
        self.ply = ply
        self.passes = list(passes)
        self.events = list(events)
        self._to_move = to_move
        self._outcome = outcome
        self._fixed = _FIXED[self.options.variant]
        tops = [0, 0, 0, 0]
        for stack in line:
            tops[stack[-1]] += 1
        self._tops = tops
        self._legal = None

    # -- the public API ---------------------------------------------------------------

    @property
    def to_move(self) -> int | None:
        return None if self._outcome is not None else self._to_move

    def owned(self, seat: int) -> int:
        """Rule 2/3: the stacks ``seat`` owns, which is how far it moves."""
        return self._tops[seat]

    def liftable(self, stack: int) -> int:
        """Rules 3/6/7: how many discs may come off stack ``stack`` (all but a fixed base)."""
        discs = self.line[stack]
        return len(discs) - self._fixed[discs[0]]

    def legal_moves(self) -> tuple[StakkoMove, ...]:
        if self._outcome is not None:
            return ()
        legal = self._legal
        if legal is None:
            mover = self._to_move
            legal = self._legal = _legal(self.line, mover, self._tops[mover], self._fixed)
        return legal

    def is_legal(self, move: StakkoMove) -> bool:
        return move in self.legal_moves()

    def apply(self, move: StakkoMove, seat: int | None = None) -> None:
        """Apply ``move`` for ``seat`` (default: the seat to move); see ``GameState.apply``.

        Checks everything before changing anything, so a refused move leaves no trace.
        """
        if self._outcome is not None:
            raise IllegalMoveError(IllegalReason.GAME_OVER, "the game is over")
        mover = self._to_move
        if seat is not None and seat != mover:
            raise IllegalMoveError(IllegalReason.NOT_YOUR_TURN, f"it is seat {mover}'s turn")
        if type(move) is not StakkoMove:
            raise IllegalMoveError(IllegalReason.UNKNOWN_MOVE, f"not a Stakko move: {move!r}")
        line = self.line
        size = len(line)
        i = move.stack
        if type(i) is not int or not 0 <= i < size:
            raise IllegalMoveError(
                IllegalReason.NO_SUCH_STACK, f"stack must be 0..{size - 1}, not {i!r}"
            )
        src = line[i]
        if src[-1] != mover:  # rule 2: only your own stacks
            raise IllegalMoveError(
                IllegalReason.NO_SUCH_STACK,
                f"stack {i} is not yours: its top disc is {src[-1].name.lower()}",
            )
        tops = self._tops
        n = tops[mover]
        t = i + n if mover == 0 else i - n
        if not 0 <= t < size:  # rule 3: land on the last stack or before it
            raise IllegalMoveError(
                IllegalReason.OVERSHOOT, f"stack {i} moved {n} would pass the end of the line"
            )
        k = move.count
        h = len(src)
        if type(k) is not int or not 1 <= k <= h - self._fixed[src[0]]:
            raise IllegalMoveError(
                IllegalReason.BAD_COUNT,
                f"stack {i} can lift 1..{h - self._fixed[src[0]]} discs, not {k!r}",
            )
        dst = line[t]
        tops[mover] -= 1
        tops[dst[-1]] -= 1
        cut = h - k
        lifted = src[cut:]
        dst += lifted
        tops[mover] += 1
        if cut:
            del src[cut:]
            tops[src[-1]] += 1
        else:  # rule 6: the space goes with its base
            del line[i]
        self.ply += 1
        self._legal = None
        events: list[Event] = [Moved(mover, i, k, t, tuple(lifted), not cut)]
        self._settle(mover, events, count_pass=True)
        self.events = events

    def view(self, seat: int | None) -> StakkoView:
        """Everything, for anyone (perfect information); ``seat`` only decides ``my_turn``."""
        if seat is not None and seat not in (0, 1):
            raise ValueError(f"no seat {seat}")
        tops = self._tops
        return StakkoView(
            seat=seat,
            options=self.options,
            line=tuple(tuple(s) for s in self.line),
            to_move=self.to_move,
            ply=self.ply,
            owned=(tops[0], tops[1]),
            heights=_heights(self.line),
            passes=(self.passes[0], self.passes[1]),
            events=tuple(self.events),
            outcome=self._outcome,
        )

    def heights(self) -> tuple[int, int]:
        """Rule 5: what each seat scores if the game ended now."""
        return _heights(self.line)

    def outcome(self) -> Outcome | None:
        return self._outcome

    def end(self, loser: int, termination: Termination) -> Outcome:
        """Rule 8: resignation, abandonment or timeout loses, whatever the heights say."""
        if self._outcome is not None:
            raise IllegalMoveError(IllegalReason.GAME_OVER, "the game is over")
        if loser not in (0, 1):
            raise ValueError(f"no seat {loser}")
        outcome = Outcome(termination, 1 - loser, self.heights())
        self._outcome = outcome
        self.events = [GameEnded(outcome)]
        return outcome

    def timeout_move(self) -> StakkoMove | None:
        """The move played for a seat whose clock ran out: one disc off its rearmost stack
        (the first legal move), the smallest change to its position. ``None``: game over."""
        legal = self.legal_moves()
        if not legal:
            return None
        return legal[0] if self._to_move == 0 else _rearmost_black(legal)

    def timeout_moves(self) -> tuple[StakkoMove, ...]:
        """``GameState.timeout_moves``: the one ``timeout_move`` (a Stakko turn is one move)."""
        m = self.timeout_move()
        return () if m is None else (m,)

    def copy(self, rng: Shuffler | None = None) -> Stakko:
        new = Stakko.__new__(Stakko)
        new.options = self.options
        new.rng = self.rng if rng is None else rng
        new.line = [s[:] for s in self.line]
        new.ply = self.ply
        new.passes = self.passes[:]
        new.events = self.events[:]
        new._to_move = self._to_move
        new._outcome = self._outcome
        new._tops = self._tops[:]
        new._fixed = self._fixed
        new._legal = self._legal
        return new

    def key(self) -> tuple[object, ...]:
        """Everything that makes the position, for equality, tests and transposition tables."""
        return (
            self.options, tuple(tuple(s) for s in self.line), self.to_move, self.ply,
            tuple(self.passes), self._outcome,
        )  # fmt: skip

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stakko) and self.key() == other.key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"<Stakko {self.options.variant} ply {self.ply} to_move={self.to_move}"
            f" line={line_str(self.line)!r}>"
        )

    # -- internals --------------------------------------------------------------------

    def _can_move(self, seat: int) -> bool:
        """Rule 4: does ``seat`` own a stack it can move its N spaces without overshooting?"""
        n = self._tops[seat]
        if n == 0:
            return False
        line = self.line
        stacks = range(len(line) - n) if seat == 0 else range(n, len(line))
        return any(line[i][-1] == seat for i in stacks)

    def _settle(self, mover: int, events: list[Event], *, count_pass: bool) -> None:
        """After ``mover``'s move: the other seat moves, or passes (rule 4), or the game ends."""
        other = 1 - mover
        other_can = self._can_move(other)
        if not other_can and not self._can_move(mover):
            self._finish(Termination.COMPLETED, events)
        elif self.ply >= self.options.ply_cap:
            self._finish(Termination.TURN_CAP, events)
        elif other_can:
            self._to_move = other
        else:
            self._to_move = mover
            if count_pass:
                self.passes[other] += 1
                events.append(Passed(other))

    def _finish(self, termination: Termination, events: list[Event]) -> None:
        white, black = _heights(self.line)
        winner = None if white == black else (0 if white > black else 1)
        self._outcome = outcome = Outcome(termination, winner, (white, black))
        events.append(GameEnded(outcome))


def _rearmost_black(legal: tuple[StakkoMove, ...]) -> StakkoMove:
    """Black's rearmost stack is the highest index: its one-disc move."""
    top = max(m.stack for m in legal)
    return _MOVES[top][1]


def new_game(options: StakkoOptions | None = None, *, rng: Shuffler) -> Stakko:
    """A new game in the starting position (``rng`` is unused: Stakko has no chance)."""
    return Stakko(options, rng=rng)
