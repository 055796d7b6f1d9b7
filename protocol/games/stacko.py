"""Stacko on the wire: its move, options and view models, and the conversions to and from
the engine. The only input to ``view_to_wire`` is an engine ``StackoView``: a frame for a
seat can hold nothing that seat's view does not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

import orjson
from pydantic import Field, model_validator

from engine.stacko import (
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
from engine.stacko_view import StackoView
from protocol.games.common import (
    OutcomeModel,
    WireModel,
    outcome_from_wire,
    outcome_text,
    outcome_to_wire,
    pair,
    score_text,
    who,
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


def move_to_wire(move: Move) -> dict[str, Any]:
    if move.slot is None:
        return {"action": move.action.value}
    return {"action": move.action.value, "slot": move.slot}


def _result(r: RoundResult) -> dict[str, Any]:
    return {"round": r.round, "finisher": r.finisher, "towers": r.towers, "scores": r.scores}


def _event(e: Event) -> dict[str, Any]:
    if isinstance(e, Took | Placed):
        return {
            "kind": "took" if type(e) is Took else "placed",
            "seat": e.seat,
            "slot": e.slot,
            "brick": e.brick,
            "removed": e.removed,
        }
    if isinstance(e, Drew):
        return {"kind": "drew", "seat": e.seat, "brick": e.brick}
    if isinstance(e, Passed):
        return {"kind": "passed", "seat": e.seat, "brick": e.brick}
    if isinstance(e, Reshuffled):
        return {"kind": "reshuffled", "stack": e.stack_size}
    if isinstance(e, RoundEnded):
        return {"kind": "round_ended", **_result(e.result)}
    return {"kind": "game_ended", **outcome_to_wire(e.outcome)}


def view_to_wire(v: StackoView) -> dict[str, Any]:
    """The ``view`` object of a state frame: built from the seat's engine view and nothing else.
    Tuples stay tuples (orjson writes them as arrays): no copies on the per-move path."""
    o = v.options
    outcome = v.outcome
    return {
        "game": "stacko",
        "seat": v.seat,
        "phase": v.phase.value,
        "to_move": v.to_move,
        "ply": v.ply,
        "round": v.round,
        "rounds": o.rounds,
        "turns": v.turns,
        "turn_cap": o.turn_cap,
        "towers": v.towers,
        "seen": v.seen,
        "discard": v.discard,
        "stack": v.stack_size,
        "drawn": v.drawn,
        "holding": v.holding,
        "totals": v.totals,
        "results": [_result(r) for r in v.results],
        "events": [_event(e) for e in v.events],
        "outcome": outcome_to_wire(outcome) if outcome is not None else None,
    }


_LEGAL_WIRE: dict[int, tuple[tuple[Move, ...], list[dict[str, Any]], orjson.Fragment]] = {}
"""The wire form of each legal-move table, as dicts and as ready JSON, keyed by the table's
identity: the engine's legal moves are one shared tuple per (tower size, phase), so this holds
at most 38 entries, and a your-turn frame embeds the ready JSON instead of hashing and
re-encoding a dozen moves."""


def _legal_wire(
    moves: tuple[Move, ...],
) -> tuple[tuple[Move, ...], list[dict[str, Any]], orjson.Fragment]:
    cached = _LEGAL_WIRE.get(id(moves))
    if cached is None or cached[0] is not moves:
        wire = [move_to_wire(m) for m in moves]
        cached = _LEGAL_WIRE[id(moves)] = (moves, wire, orjson.Fragment(orjson.dumps(wire)))
    return cached


def legal_to_wire(v: StackoView) -> list[dict[str, Any]] | None:
    """The receiver's legal moves, or ``None`` when it is not its turn."""
    return list(_legal_wire(v.legal_moves())[1]) if v.my_turn else None


def legal_json(v: StackoView) -> orjson.Fragment | None:
    """``legal_to_wire`` as ready JSON, for a state frame."""
    return _legal_wire(v.legal_moves())[2] if v.my_turn else None


def _drew_text(e: Drew, viewer: int | None) -> str:
    name = who(e.seat, viewer)
    return f"{name} drew {e.brick}" if e.brick is not None else f"{name} drew"


def _took_text(e: Took, viewer: int | None) -> str:
    return (
        f"{who(e.seat, viewer)} took the open {e.brick} into slot {e.slot}, discarding {e.removed}"
    )


def _placed_text(e: Placed, viewer: int | None) -> str:
    return (
        f"{who(e.seat, viewer)} drew and placed {e.brick} in slot {e.slot}, discarding {e.removed}"
    )


def _passed_text(e: Passed, viewer: int | None) -> str:
    return f"{who(e.seat, viewer)} drew and passed {e.brick}"


def _reshuffled_text(e: Reshuffled, viewer: int | None) -> str:
    return f"the discard pile was shuffled into a new draw stack of {e.stack_size}"


def _round_ended_text(e: RoundEnded, viewer: int | None) -> str:
    r = e.result
    how = (
        f"{who(r.finisher, viewer)} finished the tower"
        if r.finisher is not None
        else "the turn cap was reached"
    )
    return f"round {r.round} over: {how}; scores {score_text(r.scores, viewer)}"


def _game_ended_text(e: GameEnded, viewer: int | None) -> str:
    return outcome_text(e.outcome, viewer)


_TEXTS: dict[type, Callable[[Any, int | None], str]] = {
    Drew: _drew_text,
    Took: _took_text,
    Placed: _placed_text,
    Passed: _passed_text,
    Reshuffled: _reshuffled_text,
    RoundEnded: _round_ended_text,
    GameEnded: _game_ended_text,
}


def describe(v: StackoView) -> str:
    """The last action in words, from the receiver's point of view ("opponent drew and passed
    17"); built from the filtered events, so it cannot name a hidden brick."""
    return "; ".join([_TEXTS[type(e)](e, v.seat) for e in v.events])


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
