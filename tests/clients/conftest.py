"""A fresh in-process server per call, shut down after the test (the client tests' own)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from stacko.server.app import Server, ServerConfig

FAST = {"rate_per_second": 1000.0, "burst": 2000}
"""Limits out of the way of clients that move as fast as the server answers."""
MakeServer = Callable[..., Awaitable[Server]]


@pytest.fixture
async def make_server() -> AsyncIterator[MakeServer]:
    servers: list[Server] = []

    async def make(**config: object) -> Server:
        srv = Server(ServerConfig(host="127.0.0.1", port=0, **{**FAST, **config}))  # type: ignore[arg-type]
        await srv.start()
        servers.append(srv)
        return srv

    yield make
    for srv in servers:
        await srv.shutdown()
