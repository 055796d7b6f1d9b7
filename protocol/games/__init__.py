"""Wire codecs per game: the server looks a room's game up here and never names a game.

Adding a game: an engine module, a codec module here, and one line in ``CODECS`` (plus its
move and view models in the unions of ``protocol.messages``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from stacko.protocol.games import stacko, stacko_encode, stakko


@dataclass(frozen=True, slots=True)
class GameCodec:
    """How one game's options, moves and views cross the wire."""

    name: str
    options_model: type[BaseModel]
    move_model: type[BaseModel]
    options_from_wire: Callable[[dict[str, Any]], tuple[Any, int | None]]
    options_to_wire: Callable[[Any, int | None], dict[str, Any]]
    move_from_wire: Callable[[Any], Any]
    move_to_wire: Callable[[Any], dict[str, Any]]
    view_to_wire: Callable[[Any], dict[str, Any]]
    """The ``view`` object of a state frame, in any form ``orjson`` encodes to it (tuples for
    arrays: the per-move path does not copy them into lists)."""
    legal_to_wire: Callable[[Any], list[dict[str, Any]] | None]
    describe: Callable[[Any, tuple[str, ...]], str]
    """A view's events in words for its receiver, with the players' names by seat."""
    view_from_wire: Callable[[Any, Any], Any]
    """A frame's ``view`` (and the room's engine options) -> the engine view it was built
    from: what a client or bot that reasons with the engine rebuilds."""
    legal_json: Callable[[Any], Any] | None = None
    """``legal_to_wire`` in any form ``orjson`` encodes to the same JSON (a cached
    ``orjson.Fragment``, say); the state frame uses it when a game has one."""
    view_json: Callable[[Any], Any] | None = None
    """``view_to_wire`` in any form ``orjson`` encodes to the same JSON; the state frame uses
    it when a game has one (Stacko's encodes the part every receiver sees alike once)."""


CODECS: dict[str, GameCodec] = {
    "stacko": GameCodec(
        "stacko", stacko.StackoOptionsModel, stacko.StackoMove, stacko.options_from_wire,
        stacko.options_to_wire, stacko.move_from_wire, stacko_encode.move_to_wire,
        stacko_encode.view_to_wire, stacko_encode.legal_to_wire, stacko_encode.describe,
        stacko.view_from_wire, stacko_encode.legal_json, stacko_encode.view_json,
    ),
    "stakko": GameCodec(
        "stakko", stakko.StakkoOptionsModel, stakko.StakkoMoveModel, stakko.options_from_wire,
        stakko.options_to_wire, stakko.move_from_wire, stakko.move_to_wire,
        stakko.view_to_wire, stakko.legal_to_wire, stakko.describe, stakko.view_from_wire,
    ),
}  # fmt: skip
