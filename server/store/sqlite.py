"""The embedded store: one SQLite file, written by one thread with group commit.

Pragmas, set explicitly (Python's defaults, a rollback journal with FULL sync, are 50-100 x
slower here): ``journal_mode=WAL`` and ``synchronous=NORMAL`` by default (a commit survives a
crash of the process, kill -9 included; ``--sync full`` adds power loss and OS crashes, at a
cost). ``wal_autocheckpoint=0`` on the writer: checkpoints run from another connection in
another thread every second (``PASSIVE``: they never block the writer), off the commit path.
WAL needs a local file system (not NFS or SMB): the data directory must be local.

Group commit, two ways (``writer``):

- ``loop`` (the default with ``synchronous=NORMAL``): the changes of one event-loop turn are
  committed together in one transaction by a callback booked at the first of them
  (``call_soon``), on the loop, then their frames go out. In WAL mode with NORMAL a commit
  is a ``write()`` into the WAL, no fsync: about 45 us here. Measured against the thread
  (compiled server, ``bench/loadgen.py``, alternating runs): server CPU per move at
  saturation 42-46 us against 59-74 us (31 us without a store), batches of 18-24 changes
  against 5-8, light-load p50 to the opponent 0.37 ms against 0.42-0.45 ms (0.27-0.28 ms
  without a store): handing each change to a thread and back costs more than the commit.
- ``thread`` (the default with ``--sync full``, where each commit waits for an fsync of
  0.3-3 ms that must not stall the loop): a writer thread owns the connection; it blocks for
  the first change, takes every other change already queued, runs them in one transaction,
  commits, and hands the newest ticket back to the loop (``call_soon_threadsafe``), which
  releases the held frames.

``STACKO_STORE_WRITER=loop|thread`` overrides the choice (for benchmarks).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from stacko.server.store.base import Op, Store, StoreError, runs
from stacko.server.store.schema import MIGRATIONS, VERSION_TABLE, SchemaError, plan

log = logging.getLogger("stacko.store")

FILE_NAME = "stacko.sqlite3"
CHECKPOINT_INTERVAL_S = 1.0

_STOP = object()


PAGE_SIZE = int(os.environ.get("STACKO_SQLITE_PAGE_SIZE", "1024"))
"""Page size of a new file. Every commit writes each page it changed whole into the WAL (and
the checkpoint copies it again), and the moves of one batch land in as many leaf pages as
there are games: 1 KiB pages write a quarter of what SQLite's default 4 KiB do. Measured on
a table of 100,000 events, 50 games, 20 changes per commit: 6.5 us per change against 8.8
(WAL 2.1 MB against 5.4 MB for 40,000 changes)."""


def _connect(path: str, sync: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute(f"PRAGMA page_size={PAGE_SIZE}")  # only takes effect on a new, empty file
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        conn.close()
        raise StoreError(f"{path}: SQLite could not switch to WAL mode (got {mode!r})")
    conn.execute(f"PRAGMA synchronous={'FULL' if sync == 'full' else 'NORMAL'}")
    conn.execute("PRAGMA foreign_keys=OFF")
    return conn


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the file's schema to ``SCHEMA_VERSION`` (in one transaction); its old version."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(VERSION_TABLE)
        row = conn.execute("SELECT version FROM schema_version").fetchone()
        found = None if row is None else int(row[0])
        steps = plan(found)
        for version in steps:
            for sql in MIGRATIONS[version]:
                conn.execute(sql)
        if steps:
            conn.execute("DELETE FROM schema_version")
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (steps[-1],))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return found or 0


def _transaction(conn: sqlite3.Connection, batch: Any) -> int:
    """The whole batch in one transaction (on the loop or the writer thread); returns the
    statements it ran. Raises as SQLite does: the caller stops the store."""
    statements = 0
    conn.execute("BEGIN")
    for sql, rows in runs(batch):
        conn.executemany(sql, rows)
        statements += len(rows)
    conn.execute("COMMIT")
    return statements


class SQLiteStore(Store):
    kind = "sqlite"

    def __init__(
        self, data_dir: str | os.PathLike[str], sync: str = "normal", writer: str = ""
    ) -> None:
        super().__init__()
        writer = writer or os.environ.get("STACKO_STORE_WRITER", "")
        if writer not in ("loop", "thread"):  # auto: an fsync per commit must not stall the loop
            writer = "thread" if sync == "full" else "loop"
        self.writer = writer
        self._conn: sqlite3.Connection | None = None
        self._pending: list[tuple[int, list[Op]]] = []
        self._scheduled = False
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / FILE_NAME
        self.location = str(self.path)
        self.sync = sync
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._checkpointer: threading.Thread | None = None
        self._stop = threading.Event()
        self._reader: sqlite3.Connection | None = None
        self._read_lock = threading.Lock()

    async def open(self) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            writer = _connect(str(self.path), self.sync)
            migrate(writer)
            writer.execute("PRAGMA wal_autocheckpoint=0")
            self._reader = _connect(str(self.path), self.sync)
            self._reader.execute("SELECT count(*) FROM games").fetchone()
        except SchemaError as exc:
            raise StoreError(f"{self.path}: {exc}") from None
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(
                f"cannot use the data file {self.path}: {exc} (is the directory writable, "
                "the disk not full, and the file an intact Stacko database?)"
            ) from None
        if self.writer == "loop":
            self._conn = writer
        else:
            self._writer = threading.Thread(
                target=self._write_loop, args=(writer,), name="stacko-store-writer", daemon=True
            )
            self._writer.start()
        self._checkpointer = threading.Thread(
            target=self._checkpoint_loop, name="stacko-store-checkpoint", daemon=True
        )
        self._checkpointer.start()
        log.info("store: SQLite %s (WAL, synchronous=%s)", self.path, self.sync.upper())

    def _enqueue(self, ticket: int, ops: list[Op]) -> None:
        if self._conn is None:
            self._queue.put((ticket, ops))
            return
        self._pending.append((ticket, ops))
        if not self._scheduled:
            self._scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._commit_pending)

    def _commit_pending(self) -> None:
        """The loop writer: every change of this loop turn in one transaction, at its end."""
        self._scheduled = False
        batch, self._pending = self._pending, []
        conn = self._conn
        if not batch or conn is None or self.failed is not None:
            return
        started = time.perf_counter()
        try:
            statements = _transaction(conn, batch)
        except Exception as exc:
            log.critical("SQLite commit failed on %s: %s", self.path, exc)
            self._failed(exc)
            return
        self._committed(batch[-1][0], len(batch), statements, time.perf_counter() - started)

    def _write_loop(self, conn: sqlite3.Connection) -> None:
        loop = self._loop
        assert loop is not None
        q = self._queue
        stopping = False
        try:
            while not stopping:
                item = q.get()
                if item is _STOP:
                    break
                batch = [item]
                while True:
                    try:
                        more = q.get_nowait()
                    except queue.Empty:
                        break
                    if more is _STOP:
                        stopping = True
                        break
                    batch.append(more)
                started = time.perf_counter()
                try:
                    statements = _transaction(conn, batch)
                except BaseException as exc:
                    log.critical("SQLite commit failed on %s: %s", self.path, exc)
                    loop.call_soon_threadsafe(self._failed, exc)
                    return
                seconds = time.perf_counter() - started
                loop.call_soon_threadsafe(
                    self._committed, batch[-1][0], len(batch), statements, seconds
                )
        finally:
            conn.close()

    def _checkpoint_loop(self) -> None:
        try:
            conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        except sqlite3.Error:
            return
        try:
            while not self._stop.wait(CHECKPOINT_INTERVAL_S):
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                except sqlite3.Error as exc:  # busy or the like: the next one catches up
                    log.debug("checkpoint skipped: %s", exc)
        finally:
            conn.close()

    async def close(self) -> None:
        """Commit what is queued, then stop the threads (a final checkpoint truncates the WAL)."""
        if self._conn is not None:
            self._commit_pending()
            self._conn.close()
            self._conn = None
        if self._writer is not None:
            self._queue.put(_STOP)
            await asyncio.to_thread(self._writer.join)
            self._writer = None
        self._stop.set()
        if self._checkpointer is not None:
            await asyncio.to_thread(self._checkpointer.join)
            self._checkpointer = None
        await asyncio.to_thread(self._close_reader)

    def _close_reader(self) -> None:
        """Under the reader's lock: a ``fetch`` whose caller was cancelled (or timed out)
        still runs in its thread, and closing the connection under it crashed the process
        (a segmentation fault in sqlite3)."""
        with self._read_lock:
            reader, self._reader = self._reader, None
            if reader is None:
                return
            if self.failed is None:
                with contextlib.suppress(sqlite3.Error):
                    reader.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            reader.close()

    def _held_reader(self) -> sqlite3.Connection:
        """The reader, with ``_read_lock`` held by the caller."""
        if self._reader is None:
            raise StoreError(f"{self.path}: the store is not open")
        return self._reader

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._read_lock:
            return list(self._held_reader().execute(sql, params).fetchall())

    async def fetch(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return await asyncio.to_thread(self._read, sql, params)

    def _run(self, ops: list[Op]) -> None:
        with self._read_lock:
            conn = self._held_reader()
            conn.execute("BEGIN IMMEDIATE")
            try:
                for sql, params in ops:
                    conn.execute(sql, params)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    async def execute(self, ops: Any) -> None:
        await asyncio.to_thread(self._run, list(ops))

    def file_bytes(self) -> int:
        """The database file and its WAL, in bytes (for the benchmarks)."""
        total = 0
        for suffix in ("", "-wal"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                total += p.stat().st_size
        return total
