"""One redis-py connection held by one task of a node: the inbox reader's, or the writer's.

The per-move path of a cross-node move is two stream hops, each an ``XADD`` on one node and
an ``XREAD`` on another. Through ``Redis.pipeline()`` or ``Redis.xread()`` each of those
costs the pool's lock, a task per write (``socket_timeout`` is enforced with ``wait_for``),
a timeout context per read and the reply callbacks, about twice the connection's own work
(``bench/README.md``, issue 16). A link keeps its connection for good, packs with
redis-py's encoder, reads the raw replies (hiredis parses them when installed) and bounds a
whole exchange with one deadline. On any failure the connection is dropped: the next
exchange connects again, so a Redis restart needs nothing more.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError
from redis.typing import EncodableT


class Link:
    __slots__ = ("conn", "timeout_s")

    def __init__(self, url: str, timeout_s: float) -> None:
        # No socket timeout on the connection itself: ``exchange`` bounds the whole of it.
        # RESP2: the raw replies' shapes are the ones the callers read (lists, not maps).
        pool = aioredis.ConnectionPool.from_url(
            url, socket_timeout=None, socket_connect_timeout=min(1.0, timeout_s), protocol=2
        )
        self.conn: Any = pool.make_connection()  # type: ignore[no-untyped-call]
        self.timeout_s = timeout_s

    async def exchange(
        self, commands: Sequence[Sequence[EncodableT]], wait_s: float = 0.0
    ) -> list[Any]:
        """Send ``commands`` in one write and read their replies, in order (a pipeline
        without the pool). ``wait_s``: how long the server may hold a reply (``BLOCK``)."""
        kept = self.conn.is_connected
        try:
            return await self._exchange(commands, wait_s)
        except ConnectionError:
            if not kept:
                raise
        # The kept connection had been closed (Redis restarted): once more on a new one, as
        # redis-py's pool would (it checks a connection before handing it out). A command
        # that did reach Redis before its connection died comes twice: the inbox's
        # messages are idempotent (frames carry their room and ply).
        return await self._exchange(commands, wait_s)

    async def _exchange(self, commands: Sequence[Sequence[EncodableT]], wait_s: float) -> list[Any]:
        conn = self.conn
        try:
            async with asyncio.timeout(self.timeout_s + wait_s):
                await conn.send_packed_command(conn.pack_commands(commands), check_health=False)
                return [await conn.read_response() for _ in commands]
        except BaseException:
            # A reply left unread (an error reply, a timeout, a cancel) would be taken for
            # the next command's: start again on a new connection.
            await conn.disconnect(nowait=True)
            raise

    async def close(self) -> None:
        await self.conn.disconnect()
