"""Wire pieces every game shares: the strict base model and the outcome of a game."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from engine.outcome import Outcome, Termination


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


def who(seat: int, viewer: int | None) -> str:
    """A seat as the receiver reads it: "you", "opponent", or "seat N" for spectators."""
    if viewer is None:
        return f"seat {seat}"
    return "you" if seat == viewer else "opponent"


def score_text(scores: Sequence[int], viewer: int | None) -> str:
    """``"15:10"``: the receiver's own score first (seat order for spectators), as a
    player reads "you won 15:10"."""
    if viewer is None:
        return f"{scores[0]}:{scores[1]}"
    return f"{scores[viewer]}:{scores[1 - viewer]}"


def outcome_text(o: Outcome, viewer: int | None) -> str:
    won = "draw" if o.winner is None else f"{who(o.winner, viewer)} won"
    return f"game over ({o.termination.value}): {won} {score_text(o.scores, viewer)}"
