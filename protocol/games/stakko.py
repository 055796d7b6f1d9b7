"""Stakko on the wire: its move, options and view models, and the conversions to and from
the engine. Stakko has no hidden information, so every receiver's view is the whole game;
``view_to_wire`` still takes only an engine ``StakkoView``, the same path as every game.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field

from stacko.engine.stakko import (
    Colour,
    Event,
    GameEnded,
    Moved,
    Passed,
    StakkoMove,
    StakkoOptions,
    StakkoView,
    move,
)
from stacko.protocol.games.common import (
    Names,
    OutcomeModel,
    WireModel,
    outcome_from_wire,
    outcome_text,
    outcome_to_wire,
    pair,
    who,
)

Disc = Literal["white", "black", "gray", "red"]
"""A disc's colour; a stack is a list of them, bottom first."""
StackIndex = Annotated[int, Field(ge=0, le=8)]
Count = Annotated[int, Field(ge=1, le=27)]

_COLOUR = {c: c.name.lower() for c in Colour}
_FROM_WIRE = {name: c for c, name in _COLOUR.items()}


class StakkoMoveModel(WireModel):
    """``{"stack": 2, "count": 3}``: lift 3 discs off the top of stack 2 (index into the
    current line, 0 = White's end). How far they go is not part of the move: always the
    mover's number of owned stacks."""

    stack: StackIndex
    count: Count


class StakkoOptionsModel(WireModel):
    """Rules options of a Stakko room."""

    variant: Literal["basic", "gray", "red"] = "basic"
    """``gray``: gray discs may be lifted; ``red``: gray and red discs may be lifted."""
    ply_cap: Annotated[int, Field(ge=1, le=10_000)] = 500
    """Moves (both seats together) after which the game ends as it stands."""
    clock_ms: Annotated[int, Field(ge=1_000, le=3_600_000)] | None = None
    """Time per move; ``null``: no clock (the default for rooms; quick match always has one)."""


class MovedEvent(WireModel):
    """``discs`` (bottom first) went from ``stack`` onto ``target``, both indices into the line
    as it stood before the move; ``closed``: the whole stack moved and its space is gone."""

    kind: Literal["moved"]
    seat: int
    stack: StackIndex
    count: Count
    target: StackIndex
    discs: list[Disc]
    closed: bool


class PassedEvent(WireModel):
    """``seat`` had no legal move and passed automatically; the other seat moves again."""

    kind: Literal["passed"]
    seat: int


class GameEndedEvent(OutcomeModel):
    kind: Literal["game_ended"]


StakkoEvent = Annotated[MovedEvent | PassedEvent | GameEndedEvent, Field(discriminator="kind")]


class StakkoViewModel(WireModel):
    """The whole game, the same for both seats and spectators (``seat`` null)."""

    game: Literal["stakko"]
    seat: int | None
    variant: Literal["basic", "gray", "red"]
    to_move: int | None
    ply: int
    ply_cap: int
    line: Annotated[list[list[Disc]], Field(min_length=1, max_length=9)]
    """The stacks from White's end (index 0) to Black's end, each bottom first."""
    owned: tuple[int, int]
    """Stacks each seat owns (its colour on top): how far that seat's next move goes."""
    heights: tuple[int, int]
    """What each seat would score if the game ended now."""
    passes: tuple[int, int]
    """Automatic passes so far, per seat."""
    events: list[StakkoEvent]
    outcome: OutcomeModel | None


# -- engine <-> wire ------------------------------------------------------------------------


def options_from_wire(raw: dict[str, Any]) -> tuple[StakkoOptions, int | None]:
    """Validated room options -> engine options and the move clock (ms). Raises
    ``pydantic.ValidationError`` or ``engine.InvalidOptionsError``."""
    model = StakkoOptionsModel.model_validate(raw, strict=True)
    return StakkoOptions(model.variant, model.ply_cap), model.clock_ms


def options_to_wire(options: StakkoOptions, clock_ms: int | None) -> dict[str, Any]:
    return {"variant": options.variant, "ply_cap": options.ply_cap, "clock_ms": clock_ms}


def move_from_wire(m: StakkoMoveModel) -> StakkoMove:
    return move(m.stack, m.count)


def move_to_wire(m: StakkoMove) -> dict[str, Any]:
    return {"stack": m.stack, "count": m.count}


def _discs(stack: tuple[Colour, ...]) -> list[str]:
    return [_COLOUR[d] for d in stack]


def _event(e: Event) -> dict[str, Any]:
    if isinstance(e, Moved):
        return {
            "kind": "moved",
            "seat": e.seat,
            "stack": e.stack,
            "count": e.count,
            "target": e.target,
            "discs": _discs(e.discs),
            "closed": e.closed,
        }
    if isinstance(e, Passed):
        return {"kind": "passed", "seat": e.seat}
    return {"kind": "game_ended", **outcome_to_wire(e.outcome)}


def view_to_wire(v: StakkoView) -> dict[str, Any]:
    """The ``view`` object of a state frame, built from the receiver's engine view."""
    return {
        "game": "stakko",
        "seat": v.seat,
        "variant": v.options.variant,
        "to_move": v.to_move,
        "ply": v.ply,
        "ply_cap": v.options.ply_cap,
        "line": [_discs(s) for s in v.line],
        "owned": list(v.owned),
        "heights": list(v.heights),
        "passes": list(v.passes),
        "events": [_event(e) for e in v.events],
        "outcome": outcome_to_wire(v.outcome) if v.outcome is not None else None,
    }


def legal_to_wire(v: StakkoView) -> list[dict[str, Any]] | None:
    """The receiver's legal moves, or ``None`` when it is not its turn."""
    return [move_to_wire(m) for m in v.legal_moves()] if v.my_turn else None


def describe(v: StakkoView, names: Names = ()) -> str:
    """The last move in words, from the receiver's point of view, with the players' names
    (``names`` by seat: "Bob moved 2 discs ...", "you moved ...")."""
    parts: list[str] = []
    for e in v.events:
        if isinstance(e, Moved):
            gone = "; its space left the line" if e.closed else ""
            parts.append(
                f"{who(e.seat, v.seat, names)} moved {e.count} disc{'s' if e.count > 1 else ''}"
                f" from stack {e.stack} onto stack {e.target}{gone}"
            )
        elif isinstance(e, Passed):
            parts.append(f"{who(e.seat, v.seat, names)} cannot move and passes")
        elif isinstance(e, GameEnded):
            parts.append(outcome_text(e.outcome, v.seat, names))
    return "; ".join(parts)


# -- wire -> engine: what a client or bot rebuilds from a frame ----------------------------


def _event_from_wire(e: Any) -> Event:
    if isinstance(e, MovedEvent):
        discs = tuple(_FROM_WIRE[d] for d in e.discs)
        return Moved(e.seat, e.stack, e.count, e.target, discs, e.closed)
    if isinstance(e, PassedEvent):
        return Passed(e.seat)
    return GameEnded(outcome_from_wire(e))


def view_from_wire(data: Mapping[str, Any], options: StakkoOptions | None = None) -> StakkoView:
    """The engine view of a Stakko frame (its options are all in the view itself)."""
    m = StakkoViewModel.model_validate(data)
    own = StakkoOptions(m.variant, m.ply_cap)
    if options is not None and options != own:
        raise ValueError(f"the view does not match the room's options {options}")
    return StakkoView(
        seat=m.seat,
        options=own,
        line=tuple(tuple(_FROM_WIRE[d] for d in stack) for stack in m.line),
        to_move=m.to_move,
        ply=m.ply,
        owned=pair(m.owned),
        heights=pair(m.heights),
        passes=pair(m.passes),
        events=tuple(_event_from_wire(e) for e in m.events),
        outcome=outcome_from_wire(m.outcome) if m.outcome is not None else None,
    )
