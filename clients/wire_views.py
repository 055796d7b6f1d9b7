"""Wire -> engine: turn the ``view`` of a state frame back into the engine view a bot reads.

The server builds each frame's ``view`` with ``protocol.games.<game>.view_to_wire`` from the
receiver's engine view and nothing else; these functions are its inverse, so a bot playing
over the wire gets exactly the ``StackoView`` / ``StakkoView`` it would get in-process
(``tests/clients/test_wire_views.py`` checks the round trip on whole games, through JSON).

The wire view of Stacko does not carry the number of bricks, so ``stacko_view_from_wire``
takes the room's options (the ``options`` of the ``joined`` frame's ``info``; see
``options_from_info``). Every input is validated by the protocol's own models first: a
malformed frame raises ``pydantic.ValidationError``, a view that contradicts the options
``ValueError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.outcome import Outcome, Termination
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
from engine.stakko import Colour, Moved, StakkoMove, StakkoOptions, StakkoView
from engine.stakko import Event as StakkoEvent
from engine.stakko import GameEnded as StakkoGameEnded
from engine.stakko import Passed as StakkoPassed
from protocol.games import stacko as wire_stacko
from protocol.games import stakko as wire_stakko
from protocol.games.common import OutcomeModel

_COLOURS = {c.name.lower(): c for c in Colour}


def _outcome(o: OutcomeModel | None) -> Outcome | None:
    if o is None:
        return None
    return Outcome(Termination(o.termination), o.winner, (o.scores[0], o.scores[1]))


def _pair(x: Sequence[int]) -> tuple[int, int]:
    return (x[0], x[1])


# -- Stacko ---------------------------------------------------------------------------------


def options_from_info(game: str, info: Mapping[str, Any]) -> Any:
    """The engine options of a room from its ``info`` (``joined``, ``room``, ``rooms``)."""
    raw = dict(info["options"])
    if game == "stacko":
        return wire_stacko.options_from_wire(raw)[0]
    if game == "stakko":
        return wire_stakko.options_from_wire(raw)[0]
    raise ValueError(f"no wire view for game {game!r}")


def _result(r: wire_stacko.RoundResultModel) -> RoundResult:
    return RoundResult(
        r.round, r.finisher, (tuple(r.towers[0]), tuple(r.towers[1])), _pair(r.scores)
    )


def _stacko_event(e: Any) -> Event:
    if isinstance(e, wire_stacko.TookEvent):
        return Took(e.seat, e.slot, e.brick, e.removed)
    if isinstance(e, wire_stacko.DrewEvent):
        return Drew(e.seat, e.brick)
    if isinstance(e, wire_stacko.PlacedEvent):
        return Placed(e.seat, e.slot, e.brick, e.removed)
    if isinstance(e, wire_stacko.PassedEvent):
        return Passed(e.seat, e.brick)
    if isinstance(e, wire_stacko.ReshuffledEvent):
        return Reshuffled(e.stack)
    if isinstance(e, wire_stacko.RoundEndedEvent):
        return RoundEnded(_result(e))
    outcome = _outcome(e)
    assert outcome is not None
    return GameEnded(outcome)


def stacko_view_from_wire(data: Mapping[str, Any], options: StackoOptions) -> StackoView:
    """The engine view a state frame's ``view`` was built from (``options``: the room's)."""
    m = wire_stacko.StackoViewModel.model_validate(data)
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
        totals=_pair(m.totals),
        results=tuple(_result(r) for r in m.results),
        events=tuple(_stacko_event(e) for e in m.events),
        outcome=_outcome(m.outcome),
    )


def stacko_move_from_wire(data: Mapping[str, Any]) -> Move:
    m = wire_stacko.StackoMove.model_validate(data)
    return Move(Action(m.action), m.slot)


# -- Stakko ---------------------------------------------------------------------------------


def _stakko_event(e: Any) -> StakkoEvent:
    if isinstance(e, wire_stakko.MovedEvent):
        discs = tuple(_COLOURS[d] for d in e.discs)
        return Moved(e.seat, e.stack, e.count, e.target, discs, e.closed)
    if isinstance(e, wire_stakko.PassedEvent):
        return StakkoPassed(e.seat)
    outcome = _outcome(e)
    assert outcome is not None
    return StakkoGameEnded(outcome)


def stakko_view_from_wire(
    data: Mapping[str, Any], options: StakkoOptions | None = None
) -> StakkoView:
    """The engine view of a Stakko frame (its options are all in the view itself)."""
    m = wire_stakko.StakkoViewModel.model_validate(data)
    own = StakkoOptions(m.variant, m.ply_cap)
    if options is not None and options != own:
        raise ValueError(f"the view does not match the room's options {options}")
    return StakkoView(
        seat=m.seat,
        options=own,
        line=tuple(tuple(_COLOURS[d] for d in stack) for stack in m.line),
        to_move=m.to_move,
        ply=m.ply,
        owned=_pair(m.owned),
        heights=_pair(m.heights),
        passes=_pair(m.passes),
        events=tuple(_stakko_event(e) for e in m.events),
        outcome=_outcome(m.outcome),
    )


def stakko_move_from_wire(data: Mapping[str, Any]) -> StakkoMove:
    return wire_stakko.move_from_wire(wire_stakko.StakkoMoveModel.model_validate(data))


# -- by game ----------------------------------------------------------------------------------


def view_from_wire(game: str, data: Mapping[str, Any], options: Any) -> Any:
    """``stacko_view_from_wire`` or ``stakko_view_from_wire`` by the game's name."""
    if game == "stacko":
        return stacko_view_from_wire(data, options)
    if game == "stakko":
        return stakko_view_from_wire(data, options)
    raise ValueError(f"no wire view for game {game!r}")


def moves_from_wire(game: str, legal: Sequence[Mapping[str, Any]]) -> list[Any]:
    """A state frame's ``legal`` list as engine moves."""
    if game == "stacko":
        return [stacko_move_from_wire(m) for m in legal]
    if game == "stakko":
        return [stakko_move_from_wire(m) for m in legal]
    raise ValueError(f"no wire moves for game {game!r}")


def move_to_wire(game: str, move: Any) -> dict[str, Any]:
    """An engine move as the ``move`` of a ``move`` request."""
    if game == "stacko":
        return wire_stacko.move_to_wire(move)
    if game == "stakko":
        return wire_stakko.move_to_wire(move)
    raise ValueError(f"no wire moves for game {game!r}")
