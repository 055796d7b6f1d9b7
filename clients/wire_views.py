"""Wire -> engine for clients and bots: turn a state frame back into the engine view a bot
reads, by the game's name, through the game's codec (``protocol.games.CODECS``); nothing
here names a game.

The server builds each frame's ``view`` with the codec's ``view_to_wire`` from the
receiver's engine view and nothing else; the codec's ``view_from_wire`` is its inverse, so a
bot playing over the wire gets exactly the view it would get in-process
(``tests/clients/test_wire_views.py`` checks the round trip on whole games, through JSON).

Some games' wire views do not carry every option (a Stacko view has no brick count), so
``view_from_wire`` takes the room's engine options: ``options_from_info`` reads them from
the ``options`` of a ``joined`` frame's ``info``. Every input is validated by the protocol's
own models first: a malformed frame raises ``pydantic.ValidationError``, a view that
contradicts the options ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stacko.protocol.games import CODECS, GameCodec


def _codec(game: str) -> GameCodec:
    codec = CODECS.get(game)
    if codec is None:
        raise ValueError(f"no wire view for game {game!r}")
    return codec


def options_from_info(game: str, info: Mapping[str, Any]) -> Any:
    """The engine options of a room from its ``info`` (``joined``, ``room``, ``rooms``)."""
    return _codec(game).options_from_wire(dict(info["options"]))[0]


def view_from_wire(game: str, data: Mapping[str, Any], options: Any) -> Any:
    """The engine view a state frame's ``view`` was built from (``options``: the room's)."""
    return _codec(game).view_from_wire(data, options)


def moves_from_wire(game: str, legal: Sequence[Mapping[str, Any]]) -> list[Any]:
    """A state frame's ``legal`` list as engine moves."""
    codec = _codec(game)
    return [codec.move_from_wire(codec.move_model.model_validate(m)) for m in legal]


def move_to_wire(game: str, move: Any) -> dict[str, Any]:
    """An engine move as the ``move`` of a ``move`` request."""
    return _codec(game).move_to_wire(move)
