"""Bots for the bot-pool tests. They run in the server's worker processes, which import them
by name (this directory is on ``sys.path`` there too), so they live in a module of their own
and talk to the test through files: ``started`` when a decision begins, ``release`` to end it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

MAX_WAIT_S = 8.0
"""A decision never waits longer than this for ``release``, so no test can hang on a bot."""


class SlowBot:
    """Thinks until the test creates ``release``; ignores ``should_stop`` (a stuck bot)."""

    name = "slow"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.decisions = 0

    def choose(self, view: Any, legal: Sequence[Any]) -> Any:
        self.decisions += 1
        (self.folder / f"started{self.decisions}").touch()
        end = time.monotonic() + MAX_WAIT_S
        while not (self.folder / "release").exists() and time.monotonic() < end:
            time.sleep(0.005)
        return legal[0]


class AnytimeBot:
    """Searches until ``should_stop`` says stop, then plays; refuses to run without it."""

    name = "anytime"

    def __init__(self) -> None:
        self.plies: list[int] = []
        """The plies it decided at: its memory, which must survive the trip to a worker."""

    def choose(
        self, view: Any, legal: Sequence[Any], *, should_stop: Callable[[], bool] | None = None
    ) -> Any:
        if should_stop is None:
            raise ValueError("the server did not pass should_stop")
        end = time.monotonic() + MAX_WAIT_S
        while not should_stop() and time.monotonic() < end:
            time.sleep(0.001)
        self.plies.append(view.ply)
        return legal[0]
