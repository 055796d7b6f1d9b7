"""How a game ended, shared by every game (shaped like python-chess's ``Outcome``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Termination(enum.Enum):
    """Why the game is over; the value is the stable wire name."""

    COMPLETED = "completed"  # played to its natural end (all rounds, nobody can move)
    TURN_CAP = "turn_cap"  # a server cap ended it (Stakko ply cap); scored as it stands
    RESIGNATION = "resignation"  # a player resigned: rules notes §9, they lose
    ABANDONED = "abandoned"  # a player left or never came back: they lose
    TIMEOUT = "timeout"  # a player let the clock run out too often: they lose


@dataclass(frozen=True, slots=True)
class Outcome:
    """The final result: ``winner`` is a seat, or ``None`` for a draw."""

    termination: Termination
    winner: int | None
    scores: tuple[int, int]

    @property
    def is_draw(self) -> bool:
        return self.winner is None
