"""Stacko, engine -> wire: the ``view`` and ``legal`` of a state frame and its ``text``.

Kept apart from the pydantic models in ``protocol.games.stacko`` so that mypyc can compile it
(``setup.py``): it runs twice per move. The only input to each function is an engine
``StackoView`` (or a move): a frame for a seat can hold nothing that seat's view does not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from stacko.engine.outcome import Outcome
from stacko.engine.stacko import (
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
    Took,
)
from stacko.engine.stacko_view import StackoView
from stacko.protocol.games.common import Names, outcome_text, outcome_to_wire, score_text, who


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


def _public_key(v: StackoView) -> tuple[Any, ...]:
    """Everything in the part of a view that every receiver of one change sees alike, as the
    arguments of ``_public`` (``ply`` first: it tells two changes apart at once)."""
    o = v.options
    return (
        v.ply, v.phase, v.to_move, v.round, o.rounds, v.turns, o.turn_cap, v.seen, v.discard,
        v.stack_size, v.holding, v.totals, v.results, v.outcome,
    )  # fmt: skip


def _public(
    ply: int, phase: Phase, to_move: int | None, round: int, rounds: int, turns: int,
    turn_cap: int | None, seen: Any, discard: Any, stack: int, holding: bool, totals: Any,
    results: tuple[RoundResult, ...], outcome: Outcome | None,
) -> dict[str, Any]:  # fmt: skip
    return {
        "phase": phase.value,
        "to_move": to_move,
        "ply": ply,
        "round": round,
        "rounds": rounds,
        "turns": turns,
        "turn_cap": turn_cap,
        "seen": seen,
        "discard": discard,
        "stack": stack,
        "holding": holding,
        "totals": totals,
        "results": [_result(r) for r in results],
        "outcome": outcome_to_wire(outcome) if outcome is not None else None,
    }


def _private(v: StackoView) -> dict[str, Any]:
    """The part of a view that is the receiver's own: its seat, the towers as it sees them,
    its drawn brick, the events as it may know them."""
    return {
        "game": "stacko",
        "seat": v.seat,
        "towers": v.towers,
        "drawn": v.drawn,
        "events": [_event(e) for e in v.events],
    }


def view_to_wire(v: StackoView) -> dict[str, Any]:
    """The ``view`` object of a state frame: built from the seat's engine view and nothing else.
    Tuples stay tuples (orjson writes them as arrays): no copies on the per-move path."""
    return {**_private(v), **_public(*_public_key(v))}


_last_public: tuple[tuple[Any, ...], bytes] = ((), b"{}")
"""The last public part encoded, with its key: the receivers of one change (two players,
spectators) have equal public parts, and it is encoded once for all of them."""


def view_json(v: StackoView) -> orjson.Fragment:
    """``view_to_wire`` as ready JSON, for a state frame. The public part is reused only when
    this view's own public fields equal the last one's (compared by value, so nothing but
    this view decides what its frame says)."""
    global _last_public
    key = _public_key(v)
    last_key, public = _last_public
    if key != last_key:
        public = orjson.dumps(_public(*key))
        _last_public = (key, public)
    return orjson.Fragment(orjson.dumps(_private(v))[:-1] + b"," + public[1:])


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


def _drew_text(e: Drew, viewer: int | None, names: Names) -> str:
    name = who(e.seat, viewer, names)
    return f"{name} drew {e.brick}" if e.brick is not None else f"{name} drew"


def _took_text(e: Took, viewer: int | None, names: Names) -> str:
    name = who(e.seat, viewer, names)
    return f"{name} took the open {e.brick} into slot {e.slot}, discarding {e.removed}"


def _placed_text(e: Placed, viewer: int | None, names: Names) -> str:
    name = who(e.seat, viewer, names)
    return f"{name} drew and placed {e.brick} in slot {e.slot}, discarding {e.removed}"


def _passed_text(e: Passed, viewer: int | None, names: Names) -> str:
    return f"{who(e.seat, viewer, names)} drew and passed {e.brick}"


def _reshuffled_text(e: Reshuffled, viewer: int | None, names: Names) -> str:
    return f"the discard pile was shuffled into a new draw stack of {e.stack_size}"


def _round_ended_text(e: RoundEnded, viewer: int | None, names: Names) -> str:
    r = e.result
    how = (
        f"{who(r.finisher, viewer, names)} finished the tower"
        if r.finisher is not None
        else "the turn cap was reached"
    )
    return f"round {r.round} over: {how}; scores {score_text(r.scores, viewer)}"


def _game_ended_text(e: GameEnded, viewer: int | None, names: Names) -> str:
    return outcome_text(e.outcome, viewer, names)


_TEXTS: dict[type, Callable[[Any, int | None, Names], str]] = {
    Drew: _drew_text,
    Took: _took_text,
    Placed: _placed_text,
    Passed: _passed_text,
    Reshuffled: _reshuffled_text,
    RoundEnded: _round_ended_text,
    GameEnded: _game_ended_text,
}


def describe(v: StackoView, names: Names = ()) -> str:
    """The last action in words, from the receiver's point of view, with the players' names
    (``names`` by seat: "Bob drew and passed 17", "you took ..."); built from the filtered
    events, so it cannot name a hidden brick."""
    return "; ".join([_TEXTS[type(e)](e, v.seat, names) for e in v.events])
