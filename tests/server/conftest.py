"""Fixtures of the server tests: ``harness`` (default limits) and ``make_harness`` (custom
``ServerConfig`` fields). Both run the final leak, schema and token checks on teardown."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from stacko_wire import Harness


@pytest.fixture
async def make_harness():
    made: list[Harness] = []

    async def make(seed: int = 1, **config):
        h = await Harness.start(seed, **config)
        made.append(h)
        return h

    yield make
    for h in made:
        await h.stop()


@pytest.fixture
async def harness(make_harness):
    return await make_harness()
