"""``view_json`` (what state frames carry) says exactly what ``view_to_wire`` says, for every
view, whatever was encoded before it: its shared public part is reused only for an equal one."""

from __future__ import annotations

import random
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from stacko.engine.outcome import Outcome, Termination
from stacko.engine.stacko import Phase, RoundResult, Stacko, StackoOptions
from stacko.engine.stacko_view import StackoView
from stacko.protocol.games.stacko_encode import view_json, view_to_wire


def as_json(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), turn_cap=st.integers(1, 40), rounds=st.integers(1, 2))
def test_view_json_is_view_to_wire_in_any_order(seed: int, turn_cap: int, rounds: int) -> None:
    rng = random.Random(seed)
    game = Stacko(StackoOptions(turn_cap=turn_cap, rounds=rounds), rng=random.Random(seed))
    while True:
        # The receivers of one change in a random order, some twice, as a room sends them.
        seats = rng.choices([0, 1, None], k=rng.randint(1, 5))
        for seat in seats:
            view = game.view(seat)
            assert as_json(view_json(view)) == as_json(view_to_wire(view)), (seed, seat)
        if game.outcome() is not None:
            break
        if rng.random() < 0.02:
            game.end(rng.randrange(2), Termination.RESIGNATION)
        else:
            game.apply(rng.choice(game.legal_moves()))


def _changed(v: StackoView, field: str) -> StackoView:
    """``v`` with one public field different (and still JSON-visible)."""
    value = getattr(v, field)
    changes: dict[str, Any] = {
        "options": StackoOptions(v.options.bricks, v.options.tower, 3, 77),
        "phase": Phase.DRAWN if v.phase is not Phase.DRAWN else Phase.TURN,
        "to_move": 1 if v.to_move != 1 else 0,
        "seen": ((not v.seen[0][0], *v.seen[0][1:]), v.seen[1]),
        "discard": (*v.discard, 99),
        "holding": not v.holding,
        "totals": (v.totals[0] + 1, v.totals[1]),
        "results": (*v.results, RoundResult(9, None, ((1,), (2,)), (3, 4))),
        "outcome": Outcome(Termination.TIMEOUT, 0, (5, 6)),
    }
    return v._replace(**{field: changes.get(field, value + 1 if type(value) is int else value)})


def test_each_public_field_tells_two_views_apart() -> None:
    """A view that differs from the last one encoded in any single public field gets its
    own public part: nothing that reaches the wire is left out of the comparison."""
    game = Stacko(StackoOptions(turn_cap=30), rng=random.Random(4))
    for _ in range(5):
        game.apply(game.legal_moves()[0])
    view = game.view(0)
    private = {"seat", "towers", "drawn", "events"}
    for field in StackoView._fields:
        if field in private:
            continue
        other = _changed(view, field)
        assert as_json(view_to_wire(other)) != as_json(view_to_wire(view)), field
        view_json(view)  # the last public part encoded is this view's
        assert as_json(view_json(other)) == as_json(view_to_wire(other)), field
