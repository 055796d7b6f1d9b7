"""Garbage collection on the server's own schedule, so no move waits behind a long pause.

With CPython's automatic collector, a full collection walks every tracked object. With
10,000 connections in one process that is a few hundred thousand objects, 50-150 ms, and the
next one comes as soon as a quarter as many objects again have been promoted (every game's
state is). Under the scale benchmark (``bench/loadgen.py --matches 5000 --pace 2``) that put
the move-to-opponent p99 at 77-110 ms; with collection switched off it was 3.7 ms.

So the automatic collector is off, and ``GcPacer.tick`` runs every ``interval`` seconds:

- ``gc.collect()`` walks only the objects that are not frozen, which is what survived since
  the last tick (the rest was frozen then), and frees the cycles among them;
- ``gc.freeze()`` then moves the survivors out of every later walk.

A frozen object that later dies in a reference cycle (a closed connection's transport, say)
is only freed by a walk of the frozen set too: ``tick`` does one (unfreeze, collect, freeze)
whenever the count of allocated memory blocks (``sys.getallocatedblocks``, which falls when
objects are freed, unlike the process's RSS) has grown by half since the last such walk,
and at least every ``full_every_s`` (10 minutes) in case the garbage holds large buffers
that the block count does not see. Objects that die by reference count (almost all) are
freed at once, frozen or not. (Counting the frozen set with ``gc.get_freeze_count`` walks
it: 30 ms at 4,000 connections, so it is not used.)

Growth alone does not say there is garbage: while connections are being opened, memory grows
by half again and again, and each walk of the frozen set is longer than the last and frees
nothing (at 10,000 connections one took 0.5-0.6 s, and when it fell inside the scale
benchmark's window it made the move-to-opponent p99 40 ms). So with ``departures`` (a count
of what has gone away since start: ended connections, plain HTTP ones and failed handshakes
included, closed rooms, expired sessions; the ``Server`` counts them) growth only starts a
walk if something went away since the last one; growth with nothing gone is live data, and
becomes the new level to grow by half from. (A departure is counted when it happens, and
what it leaves may stay reachable a little longer, through a grace timer, say: the next
departure, or the 10-minute walk, gets it.)

Departures are cheap to make, though: one client opening and closing connections (a frame
flooder reconnecting after each ``rate_limited``, a thousand connections in 15 s) counted
hundreds of them, and once blocks had also grown by half every tick could start a walk of
everything, the server's imported modules and models included: 54 ms on an idle server,
0.5 s at 10,000 connections, which every other game waits behind (``bench/abuse.py``
``frame_flood``: the pair's p99 25 ms with the pacer, 5 ms with Python's own collector). So
a walk started by growth comes at most once every ``min_full_gap_s`` (``MIN_FULL_GAP_S``,
60 s, counted from ``start`` too): whatever the churn, walks of the frozen set take at most
a walk's pause per minute (0.1 % of the time idle, ~1 % at 10,000 connections), and the
garbage that waits for one is at most a minute of churn (cycles of connections that lived
past a tick; most of a connection dies by reference count at once).

Only the ``stacko-server`` process does this (``server.__main__``); it is process-wide, so a
``Server`` embedded in another program leaves the collector alone.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable

MIN_FULL_GAP_S = 60.0
"""Fewest seconds between two walks of the frozen set started by growth (see above)."""

Schedule = Callable[[float, Callable[[], None]], object]
"""``loop.call_later``: run the callback after that many seconds."""


class GcPacer:
    def __init__(
        self,
        interval: float,
        schedule: Schedule,
        on_pause: Callable[[float, bool], None] | None = None,
        *,
        growth: float = 1.5,
        full_every_s: float = 600.0,
        min_full_gap_s: float = MIN_FULL_GAP_S,
        memory: Callable[[], int] = sys.getallocatedblocks,
        departures: Callable[[], int] | None = None,
    ) -> None:
        self.interval = interval
        self.schedule = schedule
        self.on_pause = on_pause
        """Called with each tick's pause (seconds) and whether it walked the frozen set too."""
        self.growth = growth
        self.full_every_ticks = max(1, round(full_every_s / interval))
        self.min_full_gap_ticks = round(min_full_gap_s / interval)
        """Ticks (counted from the last walk of the frozen set, or ``start``) before growth
        may start another: departures come as fast as a client can reconnect."""
        self.memory = memory
        """What a walk of everything should bring down (allocated blocks by default)."""
        self.departures = departures
        """How many things that can leave garbage behind have gone away (``None``: unknown,
        growth alone starts a walk)."""
        self.departures_at_full = 0
        self.skipped_walks = 0
        """Ticks where memory had grown by half but nothing had gone away: no walk."""
        self.deferred_walks = 0
        """Ticks where memory had grown by half and something had gone away, but the last
        walk was less than ``min_full_gap_s`` ago: the walk waits."""
        self.memory_after_full = 0
        self.ticks_since_full = 0
        self.full_walks = 0
        self.running = False

    def start(self) -> None:
        """Collect everything once, freeze it, switch the automatic collector off."""
        gc.disable()
        gc.collect()
        gc.freeze()
        self.memory_after_full = self.memory()
        self.departures_at_full = self._departed()
        self.running = True
        self.schedule(self.interval, self._tick_and_reschedule)

    def stop(self) -> None:
        """Back to CPython's own collector."""
        self.running = False
        gc.unfreeze()
        gc.enable()

    def tick(self) -> None:
        started = time.perf_counter()
        self.ticks_since_full += 1
        full = self.ticks_since_full >= self.full_every_ticks
        memory = self.memory()
        if not full and memory > self.growth * self.memory_after_full:
            if self.departures is None or self._departed() != self.departures_at_full:
                if self.ticks_since_full >= self.min_full_gap_ticks:
                    full = True
                else:  # too soon after the last walk: it waits, the level stays
                    self.deferred_walks += 1
            else:  # grown, but nothing went away: live data, the new level to grow from
                self.memory_after_full = memory
                self.skipped_walks += 1
        if full:
            gc.unfreeze()
        gc.collect()
        gc.freeze()
        if full:
            self.memory_after_full = self.memory()
            self.departures_at_full = self._departed()
            self.ticks_since_full = 0
            self.full_walks += 1
        if self.on_pause is not None:
            self.on_pause(time.perf_counter() - started, full)

    def _departed(self) -> int:
        return self.departures() if self.departures is not None else 0

    def _tick_and_reschedule(self) -> None:
        if not self.running:
            return
        self.tick()
        self.schedule(self.interval, self._tick_and_reschedule)
