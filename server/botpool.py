"""Built-in bots think off the event loop: in a bounded pool of worker processes.

A strong bot's decision is CPU-bound (up to ~90 ms on large options): on the loop it stalled
every other room. A room asks a ``Thinker`` for a decision and gets the answer later, on the
loop, through a callback; meanwhile the room plays on its own timer (``Room._bot_turn``): if
no answer came within the per-decision budget it plays the game's ``timeout_moves`` and
drops the late answer.

Bots keep memory between decisions (``observe``/``reset``, ``bots.base``), so the bot
object travels with each decision: the loop pickles ``(bot, view, legal)`` (about 4 KB and
50 us for the strong Stacko bot; pickled on the loop, so what is sent is the view as it was
when asked), the worker runs ``choose`` and sends back the move *and the bot*, whose memory
the room keeps. Any worker can then take any decision, which a sticky bot-per-worker design
could not (``concurrent.futures`` has no routing, and one busy worker would hold its rooms).

One pool per process (``shared_pool``), shared by every ``Server`` in it (the test suite runs
many) and shut down with the last one to stop; its workers start in a thread when a server
starts (``PoolThinker.start_soon``), and a decision asked before they are up waits for them
off the loop.

What waits is bounded too: a room has at most one decision pending, and drops it (a queued
one is cancelled, a running one answers late) before it asks for the next; a decision that
starts after its budget is over returns at once. So the queue holds at most one decision per
bot room (``--max-bot-games``) and the pool's CPU goes to decisions that can still be played.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import copyreg
import dataclasses
import importlib
import inspect
import logging
import multiprocessing
import os
import pickle
import select
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol

from stacko.server.compiled import MODULES

log = logging.getLogger("stacko.bots")

Done = Callable[[Any, Any, str | None], None]
"""``done(move, bot, error)``: the move (``None``: the bot gave up, play the fallback), the
bot with its memory after the decision, or an error text if the bot failed."""

STOP_SHARE = 0.8
"""Share of the budget after which ``should_stop`` says stop: the rest carries the answer
back before the room's own timer plays the fallback."""

_ACCEPTS: dict[type, bool] = {}


def accepts_should_stop(bot: Any) -> bool:
    """Whether ``bot.choose`` takes the keyword ``should_stop`` (the anytime interface of
    ``bots.base``); looked up once per class."""
    kind = type(bot)
    known = _ACCEPTS.get(kind)
    if known is None:
        try:
            params = inspect.signature(bot.choose).parameters
        except (TypeError, ValueError):
            params = {}  # type: ignore[assignment]
        known = "should_stop" in params or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
        )
        _ACCEPTS[kind] = known
    return known


def decide(bot: Any, view: Any, legal: Sequence[Any], stop_at: float) -> Any:
    """``bot.choose``, with ``should_stop`` (true from ``stop_at``, ``time.monotonic``) if
    the bot takes it; ``None`` if ``stop_at`` had passed before it could start."""
    if time.monotonic() >= stop_at:
        return None
    if accepts_should_stop(bot):
        return bot.choose(view, legal, should_stop=lambda: time.monotonic() >= stop_at)
    return bot.choose(view, legal)


def _rebuild(cls: type, values: dict[str, Any]) -> Any:
    return cls(**values)


def _reduce_frozen(obj: Any) -> tuple[Any, ...]:
    values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return _rebuild, (type(obj), values)


def _register_reducers() -> None:
    """Frozen dataclasses of the compiled modules (views hold them: options, events, moves)
    are pickled through their constructor: compiled by mypyc they have no ``__dict__``, and
    the default unpickling sets each field, which a frozen class refuses. Run on import, so
    in the server and in every worker alike."""
    for name in MODULES:
        if not name.startswith("stacko.engine."):  # the server's own modules import this one
            continue
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and value.__module__ == name
                and dataclasses.is_dataclass(value)
                and value.__dataclass_params__.frozen  # type: ignore[attr-defined]
                and all(f.init for f in dataclasses.fields(value))
            ):
                copyreg.pickle(value, _reduce_frozen)


_register_reducers()


WORKER_NICENESS = 10
"""How much lower the workers' CPU priority is than the server's. On a machine with more
work than cores (2 cores: the server, one worker, anything else) a worker at the same
priority took CPU time from the event loop every room waits on; a decision has a budget and
a fallback move, the loop has neither (``bench/abuse.py`` ``bot_rooms``)."""


def quiet_worker(server_pid: int = 0) -> None:
    """A Ctrl-C reaches the whole process group: the server stops its workers itself
    (``PoolThinker.shutdown``, ``RecordWorker.shutdown``), so they ignore it instead of each
    printing a traceback. And the loop comes first (``WORKER_NICENESS``). And the worker ends
    with the server (``_exit_with``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)
    if server_pid:
        _exit_with(server_pid)


PRELOAD = [
    "stacko.bots.registry", "stacko.bots.stacko_bots", "stacko.bots.stakko_bots",
    "stacko.server.records",
]  # fmt: skip
"""What the fork server imports once, for every worker it forks: the bots, and what builds
record answers (``server.recordworker``)."""


def worker_context() -> multiprocessing.context.ForkServerContext:
    """The context of every worker process (bots, records): ``forkserver``, as forking the
    server itself (threads, sockets, an event loop) is unsafe, and spawning would import
    everything per worker; the fork server imports ``PRELOAD`` once and forks from that."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def _exit_with(pid: int) -> None:
    """A server killed with SIGKILL (``kill -9``, the OOM killer) cannot stop its workers,
    and they do not notice: each waits on a queue whose write end it holds itself, and keeps
    the fork server alive (it lives while a worker does), both holding what they inherited,
    the server's stdout among it (a supervisor reading it never sees its end). So a thread
    of each worker waits for the server's end (a pidfd; polling once a second where there
    is none) and ends the worker."""

    def watch() -> None:
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            fd = -1
        if fd >= 0:
            select.select([fd], [], [])
        else:
            while True:
                time.sleep(1.0)
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                except PermissionError:
                    continue
        os._exit(0)

    threading.Thread(target=watch, name="stacko-server-watch", daemon=True).start()


def _work(payload: bytes) -> tuple[Any, Any]:
    """In a worker: one decision; the bot goes back with its memory."""
    bot, view, legal, stop_at = pickle.loads(payload)
    return decide(bot, view, legal, stop_at), bot


class InlineThinker:
    """Decisions on the event loop, in a ``call_soon`` callback: ``bot_workers=0``, for tests
    and debugging only (a slow bot stalls every room)."""

    def __init__(self, schedule_soon: Callable[[Callable[[], None]], None]) -> None:
        self.schedule_soon = schedule_soon

    def think(
        self, bot: Any, view: Any, legal: Sequence[Any], budget_s: float, done: Done
    ) -> Callable[[], None]:
        cancelled = False
        stop_at = time.monotonic() + budget_s * STOP_SHARE

        def run() -> None:
            if cancelled:
                return
            try:
                move = decide(bot, view, legal, stop_at)
            except Exception as exc:  # a broken bot loses its game, the server goes on
                log.exception("bot %s failed", getattr(bot, "name", bot))
                done(None, None, repr(exc))
                return
            done(move, bot, None)

        def cancel() -> None:
            nonlocal cancelled
            cancelled = True

        self.schedule_soon(run)
        return cancel


def _warm_up() -> None:
    """In a worker: nothing. ``PoolThinker.start_soon`` submits one per worker, so that
    every worker is forked before the first decision."""
    time.sleep(WARM_UP_S)


WARM_UP_S = 0.05
"""How long each warm-up task holds its worker: long enough that the next warm-up finds no
idle worker and forks another (``ProcessPoolExecutor`` forks only when none is idle)."""


class PoolThinker:
    """Decisions in worker processes; answers come back on the loop that asked.

    Starting the pool blocks: the fork server imports the bots (~100 ms, more on a busy
    machine), and each worker is forked through it. So it starts in a thread when the server
    starts (``start_soon``), and a decision asked before it is up waits in a list, not on the
    loop, and is handed over once it is (by ``call_soon_threadsafe``: the pool is shared
    by every server of the process, each on its own loop)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._executor: concurrent.futures.ProcessPoolExecutor | None = None
        self.users = 0
        self.generation = 0
        """Counts shutdowns: answers from the workers of an earlier one are dropped."""
        self.broken = -1
        """The generation whose pool broke (its failed decisions get the fallback move)."""
        self.stops = 0
        """Counts shutdowns only: a decision waiting for the workers since before one is
        dropped."""
        self._lifecycle = threading.Lock()
        """Held while the workers start or stop (both block: in a thread, never on a loop)."""
        self._state = threading.Lock()
        """Guards ``ready``, ``starting`` and ``_waiting`` (held for microseconds)."""
        self.ready = False
        """The workers are up: a decision goes to them at once."""
        self.starting = False
        """A thread is starting them (``start_soon``)."""
        self._waiting: list[tuple[asyncio.AbstractEventLoop, Callable[[], None]]] = []
        """Decisions asked while the pool was not ready: (their loop, what hands them over)."""

    def executor(self) -> concurrent.futures.ProcessPoolExecutor:
        """The executor, made if there is none (it forks no worker yet: its first ``submit``
        does, blocking; ``start_soon`` does that in a thread), in ``worker_context``."""
        if self._executor is None:
            self._executor = concurrent.futures.ProcessPoolExecutor(
                max_workers=self.workers, mp_context=worker_context(), initializer=quiet_worker,
                initargs=(os.getpid(),),
            )  # fmt: skip
        return self._executor

    def start_soon(self) -> None:
        """Start the workers in a thread, if they are not up or starting already."""
        with self._state:
            if self.ready or self.starting:
                return
            self.starting = True
        threading.Thread(target=self._start, name="stacko-bot-pool", daemon=True).start()

    def _start(self) -> None:
        """In a thread: the fork server and every worker, then the decisions that waited."""
        ok = False
        with self._lifecycle:
            try:
                executor = self.executor()
                for future in [executor.submit(_warm_up) for _ in range(self.workers)]:
                    future.result(timeout=START_TIMEOUT_S)
                ok = True
            except Exception as exc:  # the decisions that waited get their fallback moves
                if isinstance(exc, RuntimeError) and "shutdown" in str(exc):
                    log.debug("the bot workers did not start: the process is exiting")
                else:
                    log.exception("the bot workers did not start")
                with self._state:
                    failed, self._executor = self._executor, None
                if failed is not None:
                    failed.shutdown(wait=False, cancel_futures=True)
        with self._state:
            self.ready = ok
            self.starting = False
            waiting, self._waiting = self._waiting, []
        for loop, hand_over in waiting:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits
                loop.call_soon_threadsafe(hand_over)

    def think(
        self, bot: Any, view: Any, legal: Sequence[Any], budget_s: float, done: Done
    ) -> Callable[[], None]:
        loop = asyncio.get_running_loop()
        stop_at = time.monotonic() + budget_s * STOP_SHARE
        payload = pickle.dumps((bot, view, list(legal), stop_at))
        stops = self.stops
        sent: list[concurrent.futures.Future[tuple[Any, Any]]] = []
        cancelled = False

        def deliver(future: concurrent.futures.Future[tuple[Any, Any]], generation: int) -> None:
            # On the loop; the room drops an answer it no longer awaits. ``generation``: the
            # pool's when it was sent (not the executor: a room may outlive the pool).
            if future.cancelled():
                return
            exc = future.exception()
            if isinstance(exc, BrokenProcessPool) and generation in (self.generation, self.broken):
                # Not the bot's fault (a worker was killed: out of memory, an operator):
                # the room plays the fallback move, and the next decision gets a new pool.
                if generation == self.generation:
                    self._discard()
                done(None, None, None)
                return
            if self.generation != generation:
                return  # the pool was stopped, its workers cut short: nobody waits
            if exc is not None:
                log.error("bot %s failed: %r", getattr(bot, "name", bot), exc)
                done(None, None, repr(exc))
                return
            move, new_bot = future.result()
            done(move, new_bot, None)

        def hand_over() -> None:  # on the loop, with the workers up (or failed to start)
            if cancelled or self.stops != stops:
                return  # the room moved on, or the pool was stopped: nobody waits
            executor = self._executor
            if not self.ready or executor is None:
                done(None, None, None)  # they did not start: the fallback move
                return
            try:
                future = executor.submit(_work, payload)
            except BrokenProcessPool:  # a worker died since the last answer came
                self._discard()
                self._wait_for_start(loop, hand_over)
                return
            sent.append(future)
            generation = self.generation

            def finished(future: concurrent.futures.Future[tuple[Any, Any]]) -> None:
                # In the pool's thread. A closed loop: the server is gone, nobody waits.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(deliver, future, generation)

            future.add_done_callback(finished)

        def cancel() -> None:  # a decision still queued never runs; a running one answers late
            nonlocal cancelled
            cancelled = True
            for future in sent:
                future.cancel()

        if self.ready:
            hand_over()
        else:
            self._wait_for_start(loop, hand_over)
        return cancel

    def _wait_for_start(
        self, loop: asyncio.AbstractEventLoop, hand_over: Callable[[], None]
    ) -> None:
        with self._state:
            if self.ready:
                loop.call_soon(hand_over)
                return
            self._waiting.append((loop, hand_over))
        self.start_soon()

    def _discard(self) -> None:
        """Drop a broken executor (no new work is possible on it); the next decision
        starts another (in a thread)."""
        with self._state:
            executor, self._executor = self._executor, None
            self.ready = False
        if executor is not None:
            log.error("a bot worker died; starting new ones")
            self.broken = self.generation
            self.generation += 1
            executor.shutdown(wait=False, cancel_futures=True)

    def shutdown(self) -> None:
        """Stop the workers and wait for them (blocking: call it off the loop; a start in
        progress is waited for). A decision in progress is cut short: the server is going
        away, and a bot that ignores ``should_stop`` could otherwise hold the exit."""
        with self._lifecycle:
            with self._state:
                executor, self._executor = self._executor, None
                self.ready = False
                self._waiting = []  # their rooms are going away: nobody waits
            self.stops += 1
            if executor is None:
                return
            self.generation += 1
            # No public way to reach the workers before Python 3.14 (``terminate_workers``).
            workers = list((getattr(executor, "_processes", None) or {}).values())
            executor.shutdown(wait=False, cancel_futures=True)
            for worker in workers:
                worker.terminate()
            executor.shutdown(wait=True)


START_TIMEOUT_S = 120.0
"""How long the workers may take to start before the pool counts as failed (its decisions
then get the fallback move, and the next one tries again)."""


def default_workers(option: int) -> int:
    """``bot_workers`` -1: one fewer than the CPUs (the loop keeps one), at least 1."""
    if option >= 0:
        return option
    return max(1, (os.cpu_count() or 2) - 1)


_POOLS: dict[int, PoolThinker] = {}


def shared_pool(workers: int) -> PoolThinker:
    """The process's pool of ``workers`` processes. A server ``acquire``s it when it starts
    and ``release``s it when it stops (one made but never started holds nothing)."""
    pool = _POOLS.get(workers)
    if pool is None:
        pool = _POOLS[workers] = PoolThinker(workers)
    return pool


class Shared(Protocol):
    """Workers shared by the servers of a process (``PoolThinker``, and the record worker:
    ``server.recordworker``), held by each from its start to its stop."""

    users: int

    def shutdown(self) -> None: ...


def acquire(pool: Shared) -> None:
    pool.users += 1


async def release(pool: Shared) -> None:
    """The last user's release stops the workers (in a thread: joining them blocks)."""
    pool.users -= 1
    if pool.users <= 0:
        pool.users = 0
        await asyncio.to_thread(pool.shutdown)


@atexit.register
def _stop_all() -> None:
    """A process that exits with a pool still running (a server never shut down) stops its
    workers here, while the interpreter is whole."""
    for pool in list(_POOLS.values()):
        pool.shutdown()
