"""The embedded store: one SQLite file, with a journal as the commit point by default.

Pragmas, set explicitly (Python's defaults, a rollback journal with FULL sync, are 50-100 x
slower here): ``journal_mode=WAL`` and ``synchronous=NORMAL`` by default (a commit survives a
crash of the process, kill -9 included; ``--sync full`` adds power loss and OS crashes, at a
cost). With the ``loop`` and ``thread`` writers, ``wal_autocheckpoint=0``: checkpoints
run from another connection in another thread every second (``PASSIVE``: they never block
the writer), off the commit path; the journal's applier checkpoints as SQLite does by
itself (it is off every frame's path already). WAL needs a local file system (not NFS or
SMB): the data directory must be local.

Three writers (``writer``):

- ``journal`` (the default with ``synchronous=NORMAL``): a change is committed by copying its
  record into a journal file (mapped), on the loop, and its frames go out at once;
  an applier process puts the journal into SQLite moments later (``server.store.journal``
  says how, and how a restart recovers). Reads (the records API, the log's compaction,
  retention) first wait until the applier has everything submitted before them, so each
  sees every change committed before it. Why: at the scale step (5,000 games on one
  process, a move per game every 2 s) the ``loop`` writer below kept every frame of a loop
  turn waiting for the turn's transaction, and did SQLite's work on the loop: p50 0.79-0.84
  ms against 0.57-0.59 without a store, server CPU 129-131 us a move against 85-87; the
  journal, 0.74-0.76 ms and 112-115 us (alternating runs, ``bench/README.md``, "The
  journal"); a move's record made as its line and copied into the mapped file (seventh
  session), 0.74-0.75 against 0.79 for the journal before, and 112-114 us against 117-119.
  A move costs the server about 10 us of its own in the store there (measured inside the
  server: making its line 4, submitting it 6, of which the copy 1.4); the rest of the
  store's cost is the games' starts and ends. The data directory holds ``stacko.lock`` (a
  ``flock`` held by the server and its applier: a second server on the same directory is
  refused, and a restart waits for the old applier) and the ``journal-*.log`` files beside
  the database.
  Cluster nodes (``--redis-url``) use ``loop`` (``make_store``'s ``shared``): nodes on one
  machine may share the file, and a node reads what another committed (ratings, rated
  pairs) as soon as that other's frames showed it, which a journal not yet applied would
  not give. A node keeps its own journal only if ``STACKO_STORE_WRITER=journal`` says so
  (``--node-id`` names it). A start with any writer first applies every journal in the
  directory that no live server holds.
- ``loop``: the changes of one event-loop turn are
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

``STACKO_STORE_WRITER=journal|loop|thread`` overrides the choice,
``STACKO_JOURNAL_NOTE_S`` the applier's ``NOTE_DELAY_S`` (for benchmarks), and
``STACKO_JOURNAL_APPLIER_IDLE=0`` keeps the applier at normal priority
(``journal.lower_priority``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import queue
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from stacko.server.store import journal
from stacko.server.store.base import (
    COMMIT_BUCKETS,
    Op,
    Store,
    StoreError,
    StoreStats,
    Waiters,
    fail_all,
    runs,
    wake,
)
from stacko.server.store.schema import MIGRATIONS, VERSION_TABLE, SchemaError, plan

log = logging.getLogger("stacko.store")

FILE_NAME = "stacko.sqlite3"
CHECKPOINT_INTERVAL_S = 1.0
LOCK_WAIT_S = 30.0
"""How long a start waits for the data directory's lock: a server killed a moment ago
leaves its applier finishing the journal (a second or two; longer only with a backlog)."""
APPLIER_EXIT_S = 120.0
"""How long a clean stop waits for the applier to finish the journal."""
NOTE_RETRY_S = 0.005
APPLIER_SCRIPT = str(Path(journal.__file__).with_name("journal.py"))
"""The applier runs this file as a script (``-I``: nothing from the environment's Python
settings or the user's site; the standard library only), even if the module was compiled."""
NOTE_DELAY_S = float(os.environ.get("STACKO_JOURNAL_NOTE_S", "0.1"))
"""How long after a change the applier is told of it (0: at the end of the loop turn): it
then applies what came meanwhile in one transaction. Nothing waits for it but reads, which
tell it at once. Measured at the scale step's load (5,000 games on one server), a note
every loop turn and an answer to each cost the server 20 us of CPU a move, a note every
20 ms about 2.5 us more than one every 100 ms (each wakes the applier's process)."""

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
        self,
        data_dir: str | os.PathLike[str],
        sync: str = "normal",
        writer: str = "",
        node_id: str = "",
    ) -> None:
        super().__init__()
        self.key = journal.key_of(node_id)
        """This server's journal (``--node-id``: nodes on one machine may share a file)."""
        writer = writer or os.environ.get("STACKO_STORE_WRITER", "")
        if writer not in ("journal", "loop", "thread"):
            # auto: with FULL each commit waits for an fsync, which must not stall the loop
            writer = "thread" if sync == "full" else "journal"
        if writer == "journal" and sync == "full":
            raise ValueError("the journal writer commits without fsync: use --sync normal")
        self.writer = writer
        self.takes_lines = self.packs_records = self.cleans_log = writer == "journal"
        self._events = journal.EventWriter(
            self.gate, COMMIT_BUCKETS, self._book_note, self._rotate, self._write_failed
        )
        """The journal's commit of a move, compiled (``journal.EventWriter``): its file is
        the journal's while there is one. It books the applier's note for every write."""
        if writer == "journal":
            self.event_writer = self._events
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
        # the journal writer (``journal``): its file, the applier, how far it is
        self._lock_fd: int | None = None
        self._jfile: journal.JournalFile | None = None
        self._jgen = 0
        self._notes: int | None = None
        self._replies: int | None = None
        self._reply_buf = b""
        self._note_timer: asyncio.TimerHandle | None = None
        self._applier: subprocess.Popen[bytes] | None = None
        self._stopping = False
        self.applied = 0
        """The newest ticket the applier has in SQLite (``journal``)."""
        self._apply_waiters: Waiters = []
        self.recovered = 0
        """Changes the journal held at the start that SQLite did not (``journal``)."""

    async def open(self) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            if self.writer == "journal":
                await self._take_lock()
            writer = _connect(str(self.path), self.sync)
            migrate(writer)
            if self.writer == "journal":
                self.recovered, self._jgen = journal.recover(writer, str(self.data_dir), self.key)
                self.recovered += self._recover_others(writer)
                writer.close()
            else:  # a journal left by a server that used one: applied first
                self.recovered = self._recover_others(writer)
                writer.execute("PRAGMA wal_autocheckpoint=0")
            self._reader = _connect(str(self.path), self.sync)
            self._reader.execute("SELECT count(*) FROM games").fetchone()
            if self.writer == "journal":
                self._start_journal()
        except SchemaError as exc:
            self._release_lock()
            raise StoreError(f"{self.path}: {exc}") from None
        except journal.JournalError as exc:
            self._release_lock()
            raise StoreError(f"cannot recover the journal: {exc}") from None
        except (sqlite3.Error, OSError) as exc:
            self._release_lock()
            raise StoreError(
                f"cannot use the data file {self.path}: {exc} (is the directory writable, "
                "the disk not full, and the file an intact Stacko database?)"
            ) from None
        if self.writer == "journal":
            log.info(
                "store: SQLite %s (WAL, synchronous=%s), journal %s%s",
                self.path, self.sync.upper(), journal.file_name(self._jgen, self.key),
                f" ({self.recovered} changes recovered from it)" if self.recovered else "",
            )  # fmt: skip
            return
        if self.writer == "loop":
            self._conn = writer
        else:
            self._writer = threading.Thread(
                target=self._write_loop, args=(writer,), name="stacko-store-writer", daemon=True
            )
            self._writer.start()
        self._checkpointer = threading.Thread(  # (the journal's applier checkpoints itself)
            target=self._checkpoint_loop, name="stacko-store-checkpoint", daemon=True
        )
        self._checkpointer.start()
        log.info("store: SQLite %s (WAL, synchronous=%s)", self.path, self.sync.upper())

    # -- the journal writer ------------------------------------------------------------

    def _try_lock(self, key: str) -> int | None:
        """The lock of journal ``key`` (an fd holding it), or None if another holds it."""
        import fcntl

        fd = os.open(
            self.data_dir / journal.lock_name(key), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd

    async def _take_lock(self) -> None:
        deadline = time.monotonic() + LOCK_WAIT_S
        while (fd := self._try_lock(self.key)) is None:
            if time.monotonic() > deadline:
                lock_path = self.data_dir / journal.lock_name(self.key)
                raise StoreError(
                    f"{self.data_dir} is in use by another server (or the journal applier "
                    f"of one that stopped): {lock_path} stayed locked for {LOCK_WAIT_S:.0f} "
                    "s. Nodes that share a data directory need each its own --node-id"
                )
            await asyncio.sleep(0.05)
        self._lock_fd = fd

    def _recover_others(self, conn: sqlite3.Connection) -> int:
        """Other journals in the directory that no server holds (one started under another
        ``--node-id`` before): applied now, so that nothing waits for a name that may never
        come back. Those a live server holds are its own business."""
        applied = 0
        own = {self.key} if self.writer == "journal" else set()
        for key in sorted(journal.keys(str(self.data_dir)) - own):
            fd = self._try_lock(key)
            if fd is None:
                continue
            try:
                applied += journal.recover(conn, str(self.data_dir), key)[0]
            finally:
                os.close(fd)
        return applied

    def _release_lock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)

    def _start_journal(self) -> None:
        """A new journal file, and the applier process that follows it."""
        assert self._lock_fd is not None and self._loop is not None
        self._jfile = journal.JournalFile(
            str(self.data_dir / journal.file_name(self._jgen, self.key))
        )
        self._events.file = self._jfile
        notes_r, notes_w = os.pipe()
        replies_r, replies_w = os.pipe()
        try:
            self._applier = subprocess.Popen(  # our own script, no shell
                [
                    sys.executable, "-I", APPLIER_SCRIPT, "--db", str(self.path),
                    "--dir", str(self.data_dir), "--gen", str(self._jgen), "--key", self.key,
                    "--sync", self.sync,
                    "--notes", str(notes_r), "--reply", str(replies_w),
                ],
                pass_fds=(notes_r, replies_w, self._lock_fd),
                stdin=subprocess.DEVNULL,
                # It says nothing on stdout; holding the server's open would keep a reader
                # of it (a supervisor, a test) from its end after a kill -9 of the server.
                stdout=subprocess.DEVNULL,
                process_group=0,  # the terminal's Ctrl-C is the server's to handle
            )  # fmt: skip
        finally:
            os.close(notes_r)
            os.close(replies_w)
        os.set_blocking(notes_w, False)
        os.set_blocking(replies_r, False)
        self._notes = notes_w
        self._replies = replies_r
        self._loop.add_reader(replies_r, self._on_replies)

    @property
    def stats(self) -> StoreStats:
        """The base's, with the moves ``journal.EventWriter`` committed since last read."""
        s = super().stats
        commits, seconds, buckets = self._events.take()
        if commits:
            s.commits += commits
            s.changes += commits
            s.statements += commits
            s.batch_max = max(s.batch_max, 1)
            s.commit_seconds += seconds
            for i, n in enumerate(buckets):
                s.commit_buckets[i] += n
        return s

    def submit_line(self, game_id: str, line: bytes) -> None:
        """A move, the commonest change, committed at once (``journal.EventWriter``, which
        the recorder calls itself: this is for other callers), or the base's way when it
        refuses (no journal file: closed, or another writer)."""
        prefix, crc = journal.event_prefix(game_id)
        if not self._events.write(prefix, crc, line):
            super().submit_line(game_id, line)

    def _append(self, ticket: int, ops: list[Op]) -> None:
        """The journal writer's commit: the change's record, written whole."""
        started = time.perf_counter()
        try:
            record = journal.encode(ticket, ops)
        except ValueError as exc:  # a value marshal cannot hold
            self._write_failed(exc)
            return
        self._write(ticket, record, len(ops), started)

    def _write_failed(self, exc: Exception) -> None:
        log.critical(
            "journal write failed in %s: %s%s", self.data_dir, exc,
            " (is the disk full, or the file at its size limit?)"
            if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
            else "",
        )  # fmt: skip
        self._failed(exc)

    def _write(self, ticket: int, record: bytes, statements: int, started: float) -> None:
        jfile = self._jfile
        assert jfile is not None
        try:
            jfile.write(record)
        except OSError as exc:
            self._write_failed(exc)
            return
        seconds = time.perf_counter() - started
        gate = self.gate
        if self._waiters or gate.has_held():  # something waits for this commit
            self._committed(ticket, 1, statements, seconds)
        else:  # nothing does: no release to make (it would flush the turn's write batch)
            self._count_commit(1, statements, seconds)
            self.committed = ticket
            gate.holding = ticket < self.appended
        events = self._events
        if not events.note_booked:
            events.note_booked = True
            self._book_note()
        if jfile.offset >= journal.ROTATE_BYTES:
            self._rotate()

    def _book_note(self) -> None:
        """The applier's note, ``NOTE_DELAY_S`` after the first change since the last."""
        assert self._loop is not None
        if NOTE_DELAY_S > 0:
            self._note_timer = self._loop.call_later(NOTE_DELAY_S, self._send_note)
        else:
            self._loop.call_soon(self._send_note)

    def _rotate(self) -> None:
        """Start the next journal file (the applier deletes this one once it has it)."""
        assert self._jfile is not None
        self._jfile.close()
        self._jfile = self._events.file = None
        self._jgen += 1
        try:
            path = self.data_dir / journal.file_name(self._jgen, self.key)
            self._jfile = self._events.file = journal.JournalFile(str(path))
        except OSError as exc:
            log.critical("cannot start a new journal file in %s: %s", self.data_dir, exc)
            self._failed(exc)

    def _send_note(self, want: bool = False) -> None:
        """Tell the applier how far to go (``NOTE_DELAY_S`` after a change, or at once
        for a read that waits: ``want``, the applier answers)."""
        self._events.note_booked = False
        if self._note_timer is not None:
            self._note_timer.cancel()
            self._note_timer = None
        notes = self._notes
        if notes is None:
            return
        try:
            offset = 0 if self._jfile is None else self._jfile.offset
            os.write(notes, journal.NOTE.pack(self._jgen, offset, self.appended, want))
        except BlockingIOError:  # the applier is behind by a full pipe: say it again soon
            self._events.note_booked = True
            assert self._loop is not None
            self._note_timer = self._loop.call_later(NOTE_RETRY_S, self._send_note, want)
        except OSError:
            pass  # the applier is gone: its pipe's end says so (``_on_replies``)

    def _on_replies(self) -> None:
        """The applier's answers (``journal.DONE``), or its end."""
        replies = self._replies
        assert replies is not None
        try:
            data = os.read(replies, journal.DONE.size * 1024)
        except BlockingIOError:
            return
        if not data:
            self._applier_ended()
            return
        buf = self._reply_buf + data
        whole = len(buf) - len(buf) % journal.DONE.size
        self._reply_buf = buf[whole:]
        s = self._stats
        for i in range(0, whole, journal.DONE.size):
            ticket, seconds, changes, transactions = journal.DONE.unpack_from(buf, i)
            self.applied = max(self.applied, ticket)
            s.applies += transactions
            s.applied_changes += changes
            s.apply_seconds += seconds
        if self._apply_waiters:
            self._apply_waiters = wake(self._apply_waiters, self.applied)

    def _applier_ended(self) -> None:
        assert self._loop is not None and self._replies is not None
        self._loop.remove_reader(self._replies)
        os.close(self._replies)
        self._replies = None
        if self._stopping:
            return
        proc = self._applier
        code = None if proc is None else proc.poll()
        exc = StoreError(
            f"the journal's applier (pid {proc.pid if proc else '?'}) stopped"
            + (f" with status {code}" if code is not None else "")
            + ": SQLite no longer gets the games' changes (its message is above)"
        )
        log.critical("%s", exc)
        self._failed(exc)
        fail_all(self._apply_waiters, exc)
        self._apply_waiters = []

    async def caught_up(self) -> None:
        """Wait until SQLite holds every change submitted so far (``journal``; reads)."""
        want = self.appended
        if self.writer != "journal" or self._stopping or self.applied >= want:
            return
        if self.failed is not None:
            raise StoreError(f"the store failed: {self.failed}")
        assert self._loop is not None
        self._send_note(want=True)  # now, and asking for an answer
        fut: asyncio.Future[None] = self._loop.create_future()
        self._apply_waiters.append((want, fut))
        await fut

    async def flush(self) -> None:
        await super().flush()
        await self.caught_up()

    async def _close_journal(self) -> None:
        self._stopping = True
        if self._events.note_booked:
            self._send_note()
        self._events.file = None
        if self._jfile is not None:
            self._jfile.close()
            self._jfile = None
        if self._notes is not None:
            os.close(self._notes)  # the applier applies the rest, then exits
            self._notes = None
        proc, self._applier = self._applier, None
        if proc is not None:
            try:
                code = await asyncio.to_thread(proc.wait, APPLIER_EXIT_S)
            except subprocess.TimeoutExpired:
                log.error(
                    "the journal's applier (pid %d) is still at work after %.0f s: it "
                    "finishes alone, and a restart waits for it", proc.pid, APPLIER_EXIT_S
                )  # fmt: skip
            else:
                if code != 0:
                    log.error("the journal's applier ended with status %d", code)
        if self._replies is not None:
            assert self._loop is not None
            self._loop.remove_reader(self._replies)
            os.close(self._replies)
            self._replies = None
        fail_all(self._apply_waiters, StoreError("the store closed"))
        self._apply_waiters = []

    def hold(self, release: Any, arg: Any) -> None:
        if self.writer == "journal" and not self.gate.holding:
            release(arg)  # everything submitted is committed already (journaled)
            return
        super().hold(release, arg)

    def _enqueue(self, ticket: int, ops: list[Op]) -> None:
        if self._jfile is not None:
            self._append(ticket, ops)
            return
        if self.writer == "journal":  # closed (a clock that fired while the server stops)
            log.warning("a change after the store closed is not kept (ticket %d)", ticket)
            return
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
        if self.writer == "journal":
            await self._close_journal()
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
        self._release_lock()

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
        if self.applied < self.appended and self.writer == "journal":
            await self.caught_up()
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
        if self.applied < self.appended and self.writer == "journal":
            await self.caught_up()
        await asyncio.to_thread(self._run, list(ops))

    def file_bytes(self) -> int:
        """The database file and its WAL, in bytes (for the benchmarks)."""
        total = 0
        for suffix in ("", "-wal"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                total += p.stat().st_size
        for gen in journal.generations(str(self.data_dir), self.key):
            with contextlib.suppress(OSError):
                total += (self.data_dir / journal.file_name(gen, self.key)).stat().st_size
        return total
