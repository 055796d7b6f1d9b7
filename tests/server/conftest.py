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


# -- stores: the same tests on a SQLite file and on a throwaway PostgreSQL cluster ----------


@pytest.fixture(scope="session")
def pg_cluster():
    from pgcluster import Cluster

    cluster = Cluster()
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(params=["sqlite", "sqlite-thread", "postgresql"])
def store_kind(request):
    """SQLite with the journal writer (the default) and the thread's (for --sync full), and
    PostgreSQL (the loop writer, kept for benchmarks, has tests of its own)."""
    return request.param


@pytest.fixture
def store_spec(store_kind, tmp_path, request):
    """``(database, data_dir)`` for ``server.store.make_store``: a fresh database each test."""
    if store_kind == "sqlite":
        return "sqlite", str(tmp_path / "data")
    if store_kind == "sqlite-thread":
        return "sqlite", str(tmp_path / "data"), "normal", "thread"
    cluster = request.getfixturevalue("pg_cluster")
    return cluster.fresh_db(), ""


@pytest.fixture
async def open_store(store_spec):
    from stacko.server.store import make_store

    opened = []

    async def make(spec=None):
        store = make_store(*(spec or store_spec))
        await store.open()
        opened.append(store)
        return store

    yield make
    for s in opened:
        await s.close()


# -- Redis: a throwaway redis-server for the cluster tests --------------------------------


@pytest.fixture
def redis_server():
    """A fresh redis-server per test (it starts in milliseconds; tests may kill it)."""
    from redisserver import RedisServer

    server = RedisServer()
    server.start()
    yield server
    server.stop()
