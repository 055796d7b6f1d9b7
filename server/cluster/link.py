"""One redis-py connection held by one task of a node: the inbox reader's, or the writer's.

The per-move path of a cross-node move is two stream hops, each an ``XADD`` on one node and
an ``XREAD`` on another. Through ``Redis.pipeline()`` or ``Redis.xread()`` each of those
costs the pool's lock, a task per write (``socket_timeout`` is enforced with ``wait_for``),
a timeout context per read, redis-py's generic command packer and the reply callbacks:
together about twice the connection's own work, and most of what a cross-node move cost
beyond a same-node one (``bench/README.md``, issue 16). A link keeps its connection for good,
packs its few kinds of command itself (bulk strings of bytes, str or int: nothing to
guess), reads the raw replies through redis-py's parser (hiredis when installed) and bounds
each exchange with a watchdog that looks twice a period instead of a timer per exchange.
On any failure the connection is dropped: the next exchange connects again, so a Redis
restart needs nothing more.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError, TimeoutError

Arg = bytes | str | int


def pack(commands: Sequence[Sequence[Arg]]) -> bytes:
    """``commands`` in RESP (arrays of bulk strings), ready to send in one write."""
    out: list[bytes] = []
    for args in commands:
        out.append(b"*%d\r\n" % len(args))
        for arg in args:
            data = arg if isinstance(arg, bytes) else str(arg).encode()
            out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(out)


class Link:
    __slots__ = ("_closing", "_watch", "conn", "deadline", "expired", "timeout_s")

    def __init__(self, url: str, timeout_s: float) -> None:
        # No socket timeout on the connection itself: the watchdog bounds an exchange.
        # RESP2: the raw replies' shapes are the ones the callers read (lists, not maps).
        pool = aioredis.ConnectionPool.from_url(
            url, socket_timeout=None, socket_connect_timeout=min(1.0, timeout_s), protocol=2
        )
        self.conn: Any = pool.make_connection()  # type: ignore[no-untyped-call]
        self.timeout_s = timeout_s
        self.deadline = 0.0
        """When the exchange under way is overdue (0: none under way)."""
        self.expired = False
        self._watch: asyncio.TimerHandle | None = None
        self._closing: asyncio.Future[None] | None = None

    async def exchange(self, commands: Sequence[Sequence[Arg]], wait_s: float = 0.0) -> list[Any]:
        """Send ``commands`` in one write and read their replies, in order (a pipeline
        without the pool). ``wait_s``: how long the server may hold a reply (``BLOCK``).
        Raises redis-py's errors (``TimeoutError`` when overdue); an error reply raises
        ``ResponseError`` after the connection is dropped."""
        kept = self.conn.is_connected
        try:
            return await self._exchange(commands, wait_s)
        except ConnectionError:
            if not kept or self.expired:
                raise
        # The kept connection had been closed (Redis restarted): once more on a new one, as
        # redis-py's pool would (it checks a connection before handing it out). A command
        # that did reach Redis before its connection died comes twice: the inbox's
        # messages are idempotent (frames carry their room and ply).
        return await self._exchange(commands, wait_s)

    async def _exchange(self, commands: Sequence[Sequence[Arg]], wait_s: float) -> list[Any]:
        conn = self.conn
        if self._watch is None:
            self._watch = asyncio.get_running_loop().call_later(self.timeout_s / 2, self._check)
        self.expired = False
        self.deadline = time.monotonic() + self.timeout_s + wait_s
        try:
            await conn.send_packed_command(pack(commands), check_health=False)
            return [await conn.read_response() for _ in commands]
        except BaseException as exc:
            # A reply left unread (an error reply, a cancel) would be taken for the next
            # command's: start again on a new connection.
            await conn.disconnect(nowait=True)
            if self.expired and isinstance(exc, ConnectionError):
                raise TimeoutError("Redis did not answer in time") from None
            raise
        finally:
            self.deadline = 0.0

    def _check(self) -> None:
        """The watchdog: an overdue exchange loses its connection (its read fails at once)."""
        self._watch = asyncio.get_running_loop().call_later(self.timeout_s / 2, self._check)
        if self.deadline and time.monotonic() > self.deadline and not self.expired:
            self.expired = True
            self._closing = asyncio.ensure_future(self.conn.disconnect(nowait=True))

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        await self.conn.disconnect()
