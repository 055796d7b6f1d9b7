"""Time, injected: the server reads it and schedules with it, so tests can move it by hand.

Game clocks, grace periods and the per-connection rate limit all go through a ``Clock``;
the transport's per-address counters (``server.wsconn.SocketCount``) read the event loop's
own clock, monotonic too, and nothing else in the server reads the time. Two scales:
``monotonic`` for everything the server measures or schedules (rate-limit buckets, move
clocks, grace periods, session expiry), so that a step of the wall clock (NTP, a resumed
VM) changes none of them; ``time`` (the epoch) only where the wire shows a moment
(``deadline_ms``). ``FakeClock.advance`` fires due callbacks synchronously, so a test of
clock expiry or forfeit never sleeps, and ``FakeClock.step_wall`` moves the wall clock alone.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def time(self) -> float:
        """Seconds since the epoch: only for deadlines shown on the wire."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never steps: durations, deadlines, timers."""
        ...

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` (synchronously, on the loop) once ``monotonic()`` reaches ``when``."""
        ...


class SystemClock:
    monotonic = staticmethod(time.monotonic)
    """``time.monotonic`` itself: read on every frame (the rate limit), so no Python call
    around it."""
    time = staticmethod(time.time)

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_later(max(0.0, when - time.monotonic()), callback)


class _FakeTimer:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that only moves when told to. ``now`` is its monotonic time; the wall clock
    reads the same unless ``step_wall`` moved it."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start
        self.wall_offset = 0.0
        self._heap: list[tuple[float, int, _FakeTimer, Callable[[], None]]] = []
        self._order = itertools.count()

    def time(self) -> float:
        return self.now + self.wall_offset

    def monotonic(self) -> float:
        return self.now

    def step_wall(self, seconds: float) -> None:
        """The wall clock jumps (back, if negative), as NTP or a resumed VM makes it."""
        self.wall_offset += seconds

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        timer = _FakeTimer()
        heapq.heappush(self._heap, (when, next(self._order), timer, callback))
        return timer

    def advance(self, seconds: float) -> None:
        """Move time forward, firing every due callback in order (including ones they add)."""
        target = self.now + seconds
        while self._heap and self._heap[0][0] <= target:
            when, _, timer, callback = heapq.heappop(self._heap)
            self.now = max(self.now, when)
            if not timer.cancelled:
                callback()
        self.now = target

    @property
    def pending(self) -> int:
        return sum(1 for *_, t, _cb in self._heap if not t.cancelled)
