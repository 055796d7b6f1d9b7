"""The one interface every game offers, so the server never special-cases a game by name.

A game is a module in ``engine/`` that defines a state class with the methods of
``GameState`` and registers a ``GameSpec`` in ``engine.games``. The server only ever calls
these methods; the only way state leaves a game is ``view(seat)``.
"""

from __future__ import annotations

from collections.abc import Callable, MutableSequence, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from stacko.engine.outcome import Outcome, Termination

SPECTATOR = None
"""The seat value for someone who watches: ``view(SPECTATOR)`` is public information only."""


class Shuffler(Protocol):
    """Where a game's chance comes from: the engines draw it only through ``shuffle``. A
    ``random.Random`` is one; so is the server's recorder of permutations, which need not
    carry a Mersenne Twister's 2.5 KB of state for every game in progress."""

    def shuffle(self, x: MutableSequence[Any]) -> None: ...


class GameState(Protocol):
    """A game in progress. Mutable; ``copy()`` before searching."""

    @property
    def ply(self) -> int:
        """Actions applied so far in the whole game; the wire's expected-turn number."""
        ...

    @property
    def to_move(self) -> int | None:
        """The seat that acts next, or ``None`` once the game is over."""
        ...

    def legal_moves(self) -> Sequence[Any]:
        """Every move the seat to move may make now (empty when the game is over)."""
        ...

    def apply(self, move: Any, seat: int | None = None) -> None:
        """Apply ``move`` for ``seat`` (default: the seat to move).

        Raises ``IllegalMoveError`` and leaves the state unchanged if the rules refuse it.
        """
        ...

    def view(self, seat: int | None) -> Any:
        """Exactly what ``seat`` may know now (``None``: a spectator, public facts only)."""
        ...

    def outcome(self) -> Outcome | None:
        """``None`` while the game goes on."""
        ...

    def end(self, loser: int, termination: Termination) -> Outcome:
        """End the game at once against ``loser`` (resignation, abandonment, timeout)."""
        ...

    def timeout_moves(self) -> Sequence[Any]:
        """The least harmful way to finish the current turn, played for a seat whose clock
        ran out (Stacko: draw, then pass)."""
        ...

    def copy(self, rng: Shuffler | None = None) -> Any:
        """An independent copy (sharing ``rng`` unless another is given)."""
        ...


@dataclass(frozen=True, slots=True)
class GameSpec:
    """How the server creates a game it knows only by name."""

    name: str
    title: str
    options_type: type[Any]
    new_game: Callable[[Any, Shuffler], GameState]
    seats: int = 2
