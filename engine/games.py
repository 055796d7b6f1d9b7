"""The registry of games the server can host. Adding a game: a module and a line here."""

from __future__ import annotations

from stacko.engine.game import GameSpec
from stacko.engine.stacko import Stacko, StackoOptions
from stacko.engine.stakko import Stakko, StakkoOptions

GAMES: dict[str, GameSpec] = {
    spec.name: spec
    for spec in (
        GameSpec("stacko", "Stacko", StackoOptions, lambda o, rng: Stacko(o, rng=rng)),
        GameSpec("stakko", "Stakko", StakkoOptions, lambda o, rng: Stakko(o, rng=rng)),
    )
}
