"""Bots by name: ``make_bot("stacko", "strong", rng)``.

Each game has its levels; a spec string ``"game:level"`` names one (``parse_spec``). The
Stakko bots live in ``clients.bots.stakko_bots`` and are looked up only when asked for, so
this module works whether or not that module (or its engine) is present.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable
from typing import Any

from stacko.clients.bots.base import BotFactory

_FACTORIES: dict[str, dict[str, BotFactory]] = {}

_LAZY: dict[str, tuple[str, dict[str, str]]] = {
    "stacko": (
        "stacko.clients.bots.stacko_bots",
        {
            "easy": "EasyStackoBot",
            "medium": "MediumStackoBot",
            "strong": "StrongStackoBot",
        },
    ),
    "stakko": (
        "stacko.clients.bots.stakko_bots",
        {"random": "RandomStakkoBot", "search": "SearchStakkoBot"},
    ),
}
"""Game -> (module, level -> class name); imported on first use."""


class UnknownBotError(KeyError):
    """No bot of that game and level (the message lists what there is)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown bot"


def register(game: str, level: str, factory: BotFactory) -> None:
    """Add (or replace) a bot: ``factory(rng)`` must return a ``Bot``."""
    _FACTORIES.setdefault(game, {})[level] = factory


def _load(game: str) -> dict[str, BotFactory]:
    found = dict(_FACTORIES.get(game, {}))
    lazy = _LAZY.get(game)
    if lazy is not None:
        module_name, classes = lazy
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            module = None
        if module is not None:
            for level, cls_name in classes.items():
                cls = getattr(module, cls_name, None)
                if cls is not None and level not in found:
                    found[level] = _factory(cls)
    return found


def _factory(cls: Callable[..., Any]) -> BotFactory:
    def make(rng: random.Random) -> Any:
        return cls(rng)

    make.__name__ = getattr(cls, "__name__", "make")
    return make


def games() -> list[str]:
    """Games that have at least one bot available now."""
    return sorted(g for g in {*_LAZY, *_FACTORIES} if _load(g))


def levels(game: str) -> list[str]:
    """The levels available for ``game`` (empty if none)."""
    return sorted(_load(game))


def available() -> dict[str, list[str]]:
    """Every game with bots -> its levels: what a server offers in ``list_games``."""
    return {game: levels(game) for game in games()}


def make_bot(game: str, level: str, rng: random.Random) -> Any:
    """A new bot of ``game`` at ``level``, drawing its randomness from ``rng`` only."""
    factories = _load(game)
    factory = factories.get(level)
    if factory is None:
        have = ", ".join(sorted(factories)) or "none"
        raise UnknownBotError(f"no {game!r} bot {level!r} (available: {have})")
    return factory(rng)


def parse_spec(spec: str, default_game: str = "stacko") -> tuple[str, str]:
    """``"stacko:strong"`` -> ``("stacko", "strong")``; a bare level uses ``default_game``."""
    game, sep, level = spec.strip().partition(":")
    if not sep:
        game, level = default_game, game
    if not game or not level:
        raise ValueError(f"bad bot spec {spec!r}: expected GAME:LEVEL or LEVEL")
    return game, level
