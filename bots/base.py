"""The one interface every bot offers, whatever the game.

A bot is a pure decision function over a seat's *view* (exactly what a remote client is
sent, never the game state), plus a little memory it keeps itself:

- ``choose(view, legal, *, should_stop=None)`` is called when it is the bot's turn and
  returns one of ``legal``. ``should_stop``, if given, is the caller's time budget: a bot
  that searches checks it now and then and, once it returns True, answers at once with the
  best move found so far (the server's bot workers pass it; every built-in bot accepts it);
- ``observe(view)`` may be called with every other view the seat receives (the SDK feeds it
  every state frame, the arena every position); a bot that remembers updates its memory
  there and in ``choose``. It is optional: ``observe_view`` calls it only if present;
- ``reset()`` forgets everything before a new game (optional too: see ``reset_bot``).

**Anytime bots.** ``choose`` may take a keyword ``should_stop``::

    def choose(self, view, legal, *, should_stop: Callable[[], bool] | None = None): ...

The server (``server.botpool``) passes it to every bot whose ``choose`` accepts it (a
parameter of that name, or ``**kwargs``): a function that returns True once the decision's
time budget is nearly used (80 % of ``--bot-budget-s``). A search should call it now and
then (every few hundred nodes: it reads a clock) and, once it is True, return the best move
it has found so far. ``None`` (the SDK, the arena, tests) means no limit but the bot's own.
A bot that ignores it is still safe: when the budget runs out the server plays the game's
timeout moves for it and drops its late answer. On the server a bot decides in a worker
process: it is pickled there with the view and back with the move, so its memory must pickle
(plain attributes do) and stay small.

Bots are built with an injected ``random.Random`` and never touch the global generator or
a clock, so a seeded game replays exactly.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

ShouldStop = Callable[[], bool]
"""The anytime budget of a decision: True once the bot must answer with what it has."""


def never_stop() -> bool:
    """The ``should_stop`` of a caller without a budget."""
    return False


@runtime_checkable
class Bot(Protocol):
    """A player that sees only views. ``name`` is its level (``"strong"``, ``"random"``...)."""

    name: str

    def choose(
        self, view: Any, legal: Sequence[Any], *, should_stop: ShouldStop | None = None
    ) -> Any:
        """One of ``legal`` (never empty when called): the move to play from ``view``;
        promptly once ``should_stop()`` is True."""
        ...

    def reset(self) -> None:
        """Forget everything remembered: a new game starts."""
        ...


class BaseBot:
    """Convenience base: stores the rng, no memory. Subclasses implement ``choose``."""

    name = "base"

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def choose(
        self, view: Any, legal: Sequence[Any], *, should_stop: ShouldStop | None = None
    ) -> Any:
        raise NotImplementedError

    def observe(self, view: Any) -> None:
        """A view that needs no decision (the opponent moved, a round ended); default: ignore."""

    def reset(self) -> None:
        """A new game; default: nothing to forget."""


BotFactory = Callable[[random.Random], Any]
"""Builds a bot from its injected rng (``registry.make_bot`` keeps these by name)."""


def observe_view(bot: Any, view: Any) -> None:
    """Feed ``view`` to ``bot.observe`` if the bot has one (it is optional in the protocol)."""
    observe = getattr(bot, "observe", None)
    if observe is not None:
        observe(view)


def reset_bot(bot: Any) -> None:
    """Call ``bot.reset()`` if the bot has one (bots without memory may leave it out)."""
    reset = getattr(bot, "reset", None)
    if reset is not None:
        reset()


def checked_choice(
    bot: Any, view: Any, legal: Sequence[Any], should_stop: ShouldStop | None = None
) -> Any:
    """``bot.choose(view, legal)``, refusing a move outside ``legal`` (a bot bug, not a rule
    question: the engine would refuse it too, but later and with less context). A
    ``should_stop`` is passed on when given (a third-party bot without it still works)."""
    if should_stop is None:
        move = bot.choose(view, legal)
    else:
        move = bot.choose(view, legal, should_stop=should_stop)
    if move not in legal:
        raise ValueError(f"bot {getattr(bot, 'name', bot)!r} chose {move!r}, not a legal move")
    return move
