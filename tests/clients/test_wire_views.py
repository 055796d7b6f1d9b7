"""Wire -> engine views: the inverse of ``view_to_wire``, checked on whole games through JSON."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from stacko.clients.bots.registry import make_bot
from stacko.clients.wire_views import (
    move_to_wire,
    moves_from_wire,
    options_from_info,
    view_from_wire,
)
from stacko.engine.outcome import Termination
from stacko.engine.stacko import Stacko, StackoOptions
from stacko.engine.stakko import Stakko, StakkoOptions
from stacko.protocol.games import stacko as wire_stacko
from stacko.protocol.games import stacko_encode
from stacko.protocol.games import stakko as wire_stakko


def through_json(data: Any) -> Any:
    return orjson.loads(orjson.dumps(data))


def check_stacko(game: Stacko) -> int:
    checked = 0
    for seat in (0, 1, None):
        view = game.view(seat)
        wire = through_json(stacko_encode.view_to_wire(view))
        back = wire_stacko.view_from_wire(wire, game.options)
        assert back == view
        assert through_json(stacko_encode.view_to_wire(back)) == wire
        legal = stacko_encode.legal_to_wire(view)
        if legal is not None:
            assert moves_from_wire("stacko", through_json(legal)) == list(view.legal_moves())
        checked += 1
    return checked


@pytest.mark.parametrize(
    "options",
    [StackoOptions(), StackoOptions(bricks=8, tower=3, rounds=3, turn_cap=12)],
    ids=["default", "small-capped"],
)
def test_stacko_views_round_trip_through_the_wire(options: StackoOptions) -> None:
    """Every position of whole games, for both seats and a spectator: every event kind
    (took, drew with and without the brick, placed, passed, reshuffled, round_ended,
    game_ended) and finished rounds come back equal."""
    kinds: set[str] = set()
    rng = random.Random(7)
    for seed in range(6):
        game = Stacko(options, rng=random.Random(seed))
        bots = [make_bot("stacko", lvl, random.Random(seed)) for lvl in ("easy", "strong")]
        check_stacko(game)
        while (seat := game.to_move) is not None:
            move = bots[seat].choose(game.view(seat), game.legal_moves())
            if rng.random() < 0.5:  # some loose moves too, so that every kind of event occurs
                move = rng.choice(game.legal_moves())
            wire_move = through_json(move_to_wire("stacko", move))
            assert moves_from_wire("stacko", [wire_move]) == [move]
            game.apply(move)
            kinds.update(type(e).__name__ for e in game.events)
            check_stacko(game)
        assert game.outcome() is not None
    assert kinds >= {"Took", "Drew", "Placed", "Passed", "Reshuffled", "RoundEnded", "GameEnded"}


def test_stacko_resigned_game_round_trips() -> None:
    game = Stacko(rng=random.Random(4))
    game.apply(game.legal_moves()[-1])  # draw: a brick is held when the game ends
    game.end(0, Termination.RESIGNATION)
    assert check_stacko(game) == 3


def test_stacko_view_must_match_the_room_options() -> None:
    game = Stacko(rng=random.Random(1))
    wire = stacko_encode.view_to_wire(game.view(0))
    with pytest.raises(ValueError, match="options"):
        wire_stacko.view_from_wire(wire, StackoOptions(rounds=3))
    with pytest.raises(ValueError, match="options"):
        wire_stacko.view_from_wire(wire, StackoOptions(bricks=30, tower=8))
    with pytest.raises(ValidationError):
        wire_stacko.view_from_wire({**wire, "phase": "sleeping"}, game.options)


def test_options_from_a_joined_frame() -> None:
    info = {"options": {"bricks": 8, "tower": 3, "rounds": 1, "turn_cap": 200, "clock_ms": None}}
    assert options_from_info("stacko", info) == StackoOptions(8, 3, 1, 200)
    info = {"options": {"variant": "red", "ply_cap": 90, "clock_ms": 5000}}
    assert options_from_info("stakko", info) == StakkoOptions("red", 90)
    with pytest.raises(ValueError):
        options_from_info("chess", info)


@pytest.mark.parametrize("variant", ["basic", "gray", "red"])
def test_stakko_views_round_trip_through_the_wire(variant: str) -> None:
    options = StakkoOptions(variant, ply_cap=60)
    game = Stakko(options, rng=random.Random(0))
    rng = random.Random(variant)
    while True:
        for seat in (0, 1, None):
            view = game.view(seat)
            wire = through_json(wire_stakko.view_to_wire(view))
            assert wire_stakko.view_from_wire(wire) == view
            assert view_from_wire("stakko", wire, options) == view
            legal = wire_stakko.legal_to_wire(view)
            if legal is not None:
                assert moves_from_wire("stakko", through_json(legal)) == list(view.legal_moves())
        if game.to_move is None:
            break
        game.apply(rng.choice(game.legal_moves()))
    assert game.outcome() is not None
    with pytest.raises(ValueError, match="options"):
        wire_stakko.view_from_wire(wire, StakkoOptions(variant, ply_cap=61))
