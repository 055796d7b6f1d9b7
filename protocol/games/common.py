"""Wire pieces every game shares: the strict base model and the outcome of a game."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from stacko.engine.outcome import Outcome, Termination


class WireModel(BaseModel):
    """Unknown fields are an error, and a parsed value cannot be changed behind our back."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class OutcomeModel(WireModel):
    termination: Literal["completed", "turn_cap", "resignation", "abandoned", "timeout"]
    winner: int | None
    scores: tuple[int, int]


def outcome_to_wire(o: Outcome) -> dict[str, Any]:
    return {"termination": o.termination.value, "winner": o.winner, "scores": list(o.scores)}


def outcome_from_wire(o: OutcomeModel) -> Outcome:
    """The inverse of ``outcome_to_wire`` (``game_ended`` events carry the same fields)."""
    return Outcome(Termination(o.termination), o.winner, pair(o.scores))


def pair(x: Sequence[int]) -> tuple[int, int]:
    return (x[0], x[1])


Names = Sequence[str]
"""The players' names by seat, as the room knows them (empty: unknown)."""


def who(seat: int, viewer: int | None, names: Names = ()) -> str:
    """A seat as the receiver reads it: "you", else the player's name ("Bob"); with the same
    name in both seats, "Bob (seat 1)"; without names, "opponent" or "seat N"."""
    if seat == viewer:
        return "you"
    if len(names) == 2 and names[seat]:
        name = names[seat]
        return f"{name} (seat {seat})" if names[0] == names[1] else name
    return f"seat {seat}" if viewer is None else "opponent"


def score_text(scores: Sequence[int], viewer: int | None) -> str:
    """``"15:10"``: the receiver's own score first (seat order for spectators), as a
    player reads "you won 15:10"."""
    if viewer is None:
        return f"{scores[0]}:{scores[1]}"
    return f"{scores[viewer]}:{scores[1 - viewer]}"


def outcome_text(o: Outcome, viewer: int | None, names: Names = ()) -> str:
    won = "draw" if o.winner is None else f"{who(o.winner, viewer, names)} won"
    return f"game over ({o.termination.value}): {won} {score_text(o.scores, viewer)}"
