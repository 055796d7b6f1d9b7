"""Answers of ``/api/games/{id}`` built in a worker process, not beside the event loop.

A replay of a long game is up to megabytes of JSON made from thousands of views. Built in a
thread of the server, it held the GIL in slices between the loop's turns and left its garbage
to the server's collector, and the moves of every room waited behind both: with one address
asking for replays at its ``/api/*`` rate limit, the other players' p95 went from 0.6-0.7 ms
to 1.0-1.5 ms (``bench/abuse.py`` ``replays``). In a process of its own, at the bot
workers' lower priority (``botpool.WORKER_NICENESS``), the server only hands over the
stored record (a few KB, packed) and copies the answer back, and that p95 stays as it is
without the abuser.

One worker per server process, shared by every ``Server`` in it (as the bot pool is):
started in a thread at the first request (a server nobody asks for records never forks it),
and stopped with the last server that holds it (``botpool.acquire`` / ``release``). A worker
that dies (``kill``, out of memory) is replaced, and the request it failed is tried once
more.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from stacko.server import botpool

log = logging.getLogger("stacko.records")

T = TypeVar("T")


def _ready() -> int:
    """In the worker: its pid, once it is up (the start waits for it)."""
    return os.getpid()


class RecordWorker:
    """The process that builds record answers, made when first needed."""

    def __init__(self) -> None:
        self._executor: ProcessPoolExecutor | None = None
        self._lifecycle = threading.Lock()
        """Held while the worker starts or stops (both block: in a thread, never on a loop)."""
        self._state = threading.Lock()
        """Guards ``_executor`` and ``pid`` (held for microseconds: a loop may take it)."""
        self.users = 0
        self.pid: int | None = None
        """The worker's pid while it runs."""

    def _start(self) -> ProcessPoolExecutor:
        """In a thread: the executor and its one worker, forked through the fork server."""
        with self._lifecycle:
            executor = self._executor
            if executor is not None:  # another request started it meanwhile
                return executor
            executor = ProcessPoolExecutor(
                max_workers=1, mp_context=botpool.worker_context(),
                initializer=botpool.quiet_worker, initargs=(os.getpid(),),
            )  # fmt: skip
            try:
                pid = executor.submit(_ready).result(timeout=botpool.START_TIMEOUT_S)
            except BaseException:
                executor.shutdown(wait=False, cancel_futures=True)
                raise
            with self._state:
                self._executor, self.pid = executor, pid
            return executor

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the worker (both picklable), awaited on the caller's loop."""
        retried = False
        while True:
            executor = self._executor
            if executor is None:
                executor = await asyncio.to_thread(self._start)
            try:
                return await asyncio.wrap_future(executor.submit(fn, *args))
            except BrokenProcessPool:
                self._discard(executor)
                if retried:
                    raise
                retried = True

    def _discard(self, executor: ProcessPoolExecutor) -> None:
        """Drop a broken executor (on the loop: only the state lock, never the lifecycle's,
        which a start holds while it forks)."""
        with self._state:
            if self._executor is executor:
                self._executor = None
                self.pid = None
                log.error("the record worker died; starting another")
        executor.shutdown(wait=False, cancel_futures=True)

    def shutdown(self) -> None:
        """Stop the worker and wait for it (blocking: call it off the loop)."""
        with self._lifecycle:
            with self._state:
                executor, self._executor = self._executor, None
                self.pid = None
            if executor is None:
                return
            # No public way to reach the worker before Python 3.14 (``terminate_workers``).
            workers = list((getattr(executor, "_processes", None) or {}).values())
            executor.shutdown(wait=False, cancel_futures=True)
            for worker in workers:  # a long build is cut short: the server is going away
                worker.terminate()
            executor.shutdown(wait=True)


WORKER = RecordWorker()
"""The process's record worker (held by each server: ``botpool.acquire`` / ``release``)."""


@atexit.register
def _stop() -> None:
    """A process that exits with the worker running stops it while the interpreter is whole."""
    WORKER.shutdown()
