"""Stacko on the wire: its move, options and view models, options both ways, and what a
client or bot rebuilds from a frame. What a frame says (engine -> wire) is in
``protocol.games.stacko_encode``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from stacko.engine.stacko import (
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
    StackoOptions,
    Took,
)
from stacko.engine.stacko_view import StackoView
from stacko.protocol.games.common import (
    OutcomeModel,
    WireModel,
    outcome_from_wire,
    pair,
)

Brick = Annotated[int, Field(ge=1, le=200)]
Slot = Annotated[int, Field(ge=0, le=19)]


class StackoMove(WireModel):
    """``{"action": "take", "slot": 3}``; ``slot`` only with ``take`` and ``place``."""

    action: Literal["take", "draw", "place", "pass"]
    slot: Slot | None = None

    @model_validator(mode="after")
    def _slot_matches_action(self) -> StackoMove:
        needs_slot = self.action in ("take", "place")
        if needs_slot and self.slot is None:
            raise ValueError(f"{self.action} needs a slot")
        if not needs_slot and self.slot is not None:
            raise ValueError(f"{self.action} takes no slot")
        return self


class StackoOptionsModel(WireModel):
    """Rules options of a Stacko room (the engine checks how they fit together)."""

    bricks: Annotated[int, Field(ge=6, le=200)] = 40
    tower: Annotated[int, Field(ge=2, le=20)] = 10
    rounds: Annotated[int, Field(ge=1, le=10)] = 2
    turn_cap: Annotated[int, Field(ge=1, le=10_000)] | None = 200
    clock_ms: Annotated[int, Field(ge=1_000, le=3_600_000)] | None = None
    """Time per move; ``null``: no clock (the default for rooms; quick match always has one)."""


class RoundResultModel(WireModel):
    round: int
    finisher: int | None
    towers: tuple[list[Brick], list[Brick]]
    scores: tuple[int, int]


class TookEvent(WireModel):
    kind: Literal["took"]
    seat: int
    slot: Slot
    brick: Brick
    removed: Brick


class DrewEvent(WireModel):
    kind: Literal["drew"]
    seat: int
    brick: Brick | None


class PlacedEvent(WireModel):
    kind: Literal["placed"]
    seat: int
    slot: Slot
    brick: Brick
    removed: Brick


class PassedEvent(WireModel):
    kind: Literal["passed"]
    seat: int
    brick: Brick


class ReshuffledEvent(WireModel):
    kind: Literal["reshuffled"]
    stack: int


class RoundEndedEvent(RoundResultModel):
    kind: Literal["round_ended"]


class GameEndedEvent(OutcomeModel):
    kind: Literal["game_ended"]


StackoEvent = Annotated[
    TookEvent | DrewEvent | PlacedEvent | PassedEvent | ReshuffledEvent | RoundEndedEvent
    | GameEndedEvent,
    Field(discriminator="kind"),
]  # fmt: skip


class StackoViewModel(WireModel):
    """What one seat (or a spectator, ``seat`` null) may know. ``towers[s][i]`` is seat ``s``'s
    slot ``i`` (0 = bottom), null where this receiver cannot see the brick."""

    game: Literal["stacko"]
    seat: int | None
    phase: Literal["turn", "drawn", "over"]
    to_move: int | None
    ply: int
    round: int
    rounds: int
    turns: int
    turn_cap: int | None
    towers: tuple[list[Brick | None], list[Brick | None]]
    seen: tuple[list[bool], list[bool]]
    discard: list[Brick]
    stack: int
    drawn: Brick | None
    holding: bool
    totals: tuple[int, int]
    results: list[RoundResultModel]
    events: list[StackoEvent]
    outcome: OutcomeModel | None


# -- engine <-> wire ------------------------------------------------------------------------


def options_from_wire(raw: dict[str, Any]) -> tuple[StackoOptions, int | None]:
    """Validated room options -> engine options and the move clock (ms). Raises
    ``pydantic.ValidationError`` or ``engine.InvalidOptionsError``."""
    model = StackoOptionsModel.model_validate(raw, strict=True)
    engine = StackoOptions(model.bricks, model.tower, model.rounds, model.turn_cap)
    return engine, model.clock_ms


def options_to_wire(options: StackoOptions, clock_ms: int | None) -> dict[str, Any]:
    return {
        "bricks": options.bricks,
        "tower": options.tower,
        "rounds": options.rounds,
        "turn_cap": options.turn_cap,
        "clock_ms": clock_ms,
    }


_MOVES: dict[tuple[str, int | None], Move] = {}
"""Every move a ``StackoMove`` can say (4 actions x 20 slots at most), built once: the
per-move path looks its engine move up instead of building one."""


def move_from_wire(move: StackoMove) -> Move:
    key = (move.action, move.slot)
    found = _MOVES.get(key)
    if found is None:
        found = _MOVES[key] = Move(Action(move.action), move.slot)
    return found


# -- wire -> engine: what a client or bot rebuilds from a frame ----------------------------


def _result_from_wire(r: RoundResultModel) -> RoundResult:
    return RoundResult(
        r.round, r.finisher, (tuple(r.towers[0]), tuple(r.towers[1])), pair(r.scores)
    )


def _event_from_wire(e: Any) -> Event:
    if isinstance(e, TookEvent):
        return Took(e.seat, e.slot, e.brick, e.removed)
    if isinstance(e, DrewEvent):
        return Drew(e.seat, e.brick)
    if isinstance(e, PlacedEvent):
        return Placed(e.seat, e.slot, e.brick, e.removed)
    if isinstance(e, PassedEvent):
        return Passed(e.seat, e.brick)
    if isinstance(e, ReshuffledEvent):
        return Reshuffled(e.stack)
    if isinstance(e, RoundEndedEvent):
        return RoundEnded(_result_from_wire(e))
    return GameEnded(outcome_from_wire(e))


def view_from_wire(data: Mapping[str, Any], options: StackoOptions) -> StackoView:
    """The engine view a state frame's ``view`` was built from (``options``: the room's)."""
    m = StackoViewModel.model_validate(data)
    if (m.rounds, m.turn_cap) != (options.rounds, options.turn_cap) or any(
        len(t) != options.tower for t in (*m.towers, *m.seen)
    ):
        raise ValueError(f"the view does not match the room's options {options}")
    return StackoView(
        seat=m.seat,
        options=options,
        phase=Phase(m.phase),
        to_move=m.to_move,
        ply=m.ply,
        round=m.round,
        turns=m.turns,
        towers=(tuple(m.towers[0]), tuple(m.towers[1])),
        seen=(tuple(m.seen[0]), tuple(m.seen[1])),
        discard=tuple(m.discard),
        stack_size=m.stack,
        drawn=m.drawn,
        holding=m.holding,
        totals=pair(m.totals),
        results=tuple(_result_from_wire(r) for r in m.results),
        events=tuple(_event_from_wire(e) for e in m.events),
        outcome=outcome_from_wire(m.outcome) if m.outcome is not None else None,
    )
