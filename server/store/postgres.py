"""The PostgreSQL store (asyncpg): the same schema, statements and behaviour as SQLite.

The writer is a task on the event loop with its own connection: it waits for the first
change, takes every other change already queued, runs them in one transaction, and releases
the held frames when the commit returns. Reads use a second connection. If PostgreSQL goes
away, the next commit fails and the server stops (fail-stop, exit status 1): a supervisor
that restarts it gets the games back once the database answers again (while it does not,
the server refuses to start, with a message, exit status 2).

Fencing (nodes sharing the database, ``server.cluster.takeover``): a change may carry
``FENCE`` entries; the transaction then first reads (``FOR SHARE``: a takeover's
compare-and-set waits for this commit) the owner and epoch of those games, and a mismatch
rolls everything back (``Fenced``, fail-stop).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Sequence
from typing import Any

from stacko.server.config import redacted_url
from stacko.server.store.base import FENCE, Fenced, Op, Store, StoreError, runs
from stacko.server.store.schema import DIALECT, MIGRATIONS, VERSION_TABLE, SchemaError, plan

log = logging.getLogger("stacko.store")

_PLACEHOLDER = re.compile(r"\?")


def to_dollar(sql: str) -> str:
    """``?`` placeholders (the shared SQL) -> ``$1, $2, ...`` (PostgreSQL's)."""
    n = 0

    def number(_: re.Match[str]) -> str:
        nonlocal n
        n += 1
        return f"${n}"

    return _PLACEHOLDER.sub(number, sql)


class PostgresStore(Store):
    kind = "postgresql"

    def __init__(self, dsn: str) -> None:
        super().__init__()
        self.dsn = dsn
        self.location = redacted_url(dsn)
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._writer_conn: Any = None
        self._reader: Any = None
        self._read_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._sql: dict[str, str] = {}

    def _q(self, sql: str) -> str:
        out = self._sql.get(sql)
        if out is None:
            out = self._sql[sql] = to_dollar(sql)
        return out

    async def open(self) -> None:
        import asyncpg  # type: ignore[import-untyped]

        self._loop = asyncio.get_running_loop()
        try:
            self._writer_conn = await asyncpg.connect(self.dsn, timeout=10)
            self._reader = await asyncpg.connect(self.dsn, timeout=10)
            await self._migrate(self._writer_conn)
        except SchemaError as exc:
            await self._close_conns()
            raise StoreError(f"{self.location}: {exc}") from None
        except (
            OSError,
            asyncpg.PostgresError,
            asyncpg.InterfaceError,
            TimeoutError,
            ValueError,
        ) as exc:  # ValueError: a malformed URL (a bad port, an open "[")
            await self._close_conns()
            raise StoreError(f"cannot use PostgreSQL at {self.location}: {exc}") from None
        self._task = asyncio.create_task(self._write_loop(), name="stacko-store-writer")
        log.info("store: PostgreSQL %s", self.location)

    async def _migrate(self, conn: Any) -> None:
        async with conn.transaction():
            # One server migrates at a time (several may start together against one database).
            await conn.execute("SELECT pg_advisory_xact_lock(7362015)")
            await conn.execute(VERSION_TABLE)
            found = await conn.fetchval("SELECT version FROM schema_version")
            steps = plan(None if found is None else int(found))
            for version in steps:
                for sql in MIGRATIONS[version]:
                    for shared, own in DIALECT[self.kind].items():
                        sql = sql.replace(shared, own)
                    await conn.execute(sql)
            if steps:
                await conn.execute("DELETE FROM schema_version")
                await conn.execute("INSERT INTO schema_version (version) VALUES ($1)", steps[-1])

    def _enqueue(self, ticket: int, ops: list[Op]) -> None:
        self._queue.put_nowait((ticket, ops))

    def drop_log_op(self, after: int, upto: int, keep: Sequence[str]) -> Op:
        return (
            "DELETE FROM event_log WHERE id > ? AND id <= ? AND NOT (game_id = ANY(?::text[]))",
            (after, upto, list(keep)),
        )

    async def _write_loop(self) -> None:
        conn = self._writer_conn
        q = self._queue
        while True:
            item = await q.get()
            if item is None:
                return
            batch = [item]
            stopping = False
            while not q.empty():
                more = q.get_nowait()
                if more is None:
                    stopping = True
                    break
                batch.append(more)
            started = time.perf_counter()
            statements = 0
            try:
                async with conn.transaction():
                    await self._check_fences(conn, batch)
                    for sql, rows in runs(batch):
                        if len(rows) == 1:
                            await conn.execute(self._q(sql), *rows[0])
                        else:
                            await conn.executemany(self._q(sql), rows)
                        statements += len(rows)
            except Exception as exc:
                log.critical("PostgreSQL commit failed at %s: %s", self.location, exc)
                self._failed(exc)
                return
            self._committed(batch[-1][0], len(batch), statements, time.perf_counter() - started)
            if stopping:
                return

    @staticmethod
    async def _check_fences(conn: Any, batch: list[tuple[int, list[Op]]]) -> None:
        fences: dict[str, tuple[str, int]] = {}
        for _, ops in batch:
            for sql, params in ops:
                if sql is FENCE:
                    fences[params[0]] = (params[1], params[2])
        if not fences:
            return
        rows = await conn.fetch(
            "SELECT id, owner, epoch FROM games WHERE id = ANY($1::text[]) FOR SHARE",
            list(fences),
        )
        lost = [r[0] for r in rows if (r[1], r[2]) != fences[r[0]]]
        if lost:
            raise Fenced(lost)

    async def close(self) -> None:
        if self._task is not None:
            if not self._task.done():
                self._queue.put_nowait(None)
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        # A read in flight ends first: asyncpg's close under a query (or right after one
        # cancelled) fails with "got result for unknown protocol state".
        try:
            await asyncio.wait_for(self._read_lock.acquire(), 5)
        except TimeoutError:  # a read that hangs: the connection is closed under it
            log.warning("PostgreSQL store closed under a read still in flight")
            await self._close_conns()
            return
        try:
            await self._close_conns()
        finally:
            self._read_lock.release()

    async def _close_conns(self) -> None:
        for conn in (self._writer_conn, self._reader):
            if conn is not None:
                try:
                    await asyncio.wait_for(conn.close(), 5)
                except Exception:
                    conn.terminate()
        self._writer_conn = self._reader = None

    def _held_reader(self) -> Any:
        """The reader, with ``_read_lock`` held by the caller."""
        if self._reader is None:
            raise StoreError(f"{self.location}: the store is not open")
        return self._reader

    async def fetch(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        async with self._read_lock:
            rows = await self._held_reader().fetch(self._q(sql), *params)
        return [tuple(r) for r in rows]

    async def execute(self, ops: Any) -> None:
        async with self._read_lock:
            reader = self._held_reader()
            async with reader.transaction():
                for sql, params in ops:
                    await reader.execute(self._q(sql), *params)
