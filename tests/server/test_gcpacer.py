"""The paced collector frees cycles on its ticks, walks the frozen set when memory grew, and
gives the process its automatic collector back when stopped."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator

import pytest

from stacko.server.gcpacer import GcPacer
from stacko.server.metrics import Metrics


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref[Node]:
    """A two-node reference cycle nobody holds: only a collection frees it."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def frozen_then_dead(pacer: GcPacer) -> weakref.ref[Node]:
    """A cycle alive at a tick (so frozen by it), garbage once this returns: only a walk of
    the frozen set frees it."""
    keep = Node()
    keep.other = Node()
    keep.other.other = keep
    probe = weakref.ref(keep)
    pacer.tick()
    return probe


@pytest.fixture
def restore_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()


class Manual:
    """Stands in for ``loop.call_later``: records what is scheduled, runs it when told."""

    def __init__(self) -> None:
        self.pending: list[tuple[float, Callable[[], None]]] = []

    def __call__(self, delay: float, callback: Callable[[], None]) -> None:
        self.pending.append((delay, callback))

    def run_next(self) -> None:
        _, callback = self.pending.pop(0)
        callback()


def test_ticks_free_new_cycles_and_reschedule(restore_gc: None) -> None:
    schedule = Manual()
    pauses: list[tuple[float, bool]] = []
    pacer = GcPacer(0.25, schedule, lambda s, full: pauses.append((s, full)), memory=lambda: 100)
    pacer.start()
    assert not gc.isenabled()
    assert schedule.pending[0][0] == 0.25
    dead = cycle()
    assert dead() is not None  # the automatic collector is off: nothing frees it yet
    schedule.run_next()
    assert dead() is None
    assert len(pauses) == 1 and pauses[0][1] is False and pauses[0][0] >= 0
    assert len(schedule.pending) == 1  # the next tick is booked
    pacer.stop()
    assert gc.isenabled()
    schedule.run_next()  # a tick that fires after stop does nothing and books nothing
    assert len(pauses) == 1 and not schedule.pending


def test_a_frozen_cycle_is_freed_once_memory_grew_by_half(restore_gc: None) -> None:
    memory = [1000]
    pacer = GcPacer(1.0, Manual(), memory=lambda: memory[0], min_full_gap_s=0)
    frozen = cycle()
    pacer.start()  # collects first, then freezes: the cycle made before is gone
    assert frozen() is None
    frozen = cycle()
    pacer.tick()  # a cycle that is garbage when a tick comes is freed by it
    assert frozen() is None
    probe = frozen_then_dead(pacer)
    pacer.tick()
    assert probe() is not None  # frozen cycles are out of the cheap walks
    memory[0] = 1499
    pacer.tick()
    assert probe() is not None and pacer.full_walks == 0
    memory[0] = 1501
    pacer.tick()
    assert probe() is None and pacer.full_walks == 1
    assert pacer.memory_after_full == 1501
    pacer.stop()


def test_growth_with_nothing_gone_is_live_data_not_a_walk(restore_gc: None) -> None:
    """Connections being opened: memory grows by half again and again, nothing went away,
    and no walk of the frozen set is made until something does."""
    memory, gone = [1000], [0]
    pacer = GcPacer(
        1.0, Manual(), memory=lambda: memory[0], departures=lambda: gone[0], min_full_gap_s=0
    )
    pacer.start()
    probe = frozen_then_dead(pacer)
    for level in (1600, 2500, 4000):
        memory[0] = level
        pacer.tick()
        assert pacer.full_walks == 0 and pacer.memory_after_full == level
    assert pacer.skipped_walks == 3 and probe() is not None
    gone[0] = 1  # a connection closed: growth now may be its garbage
    memory[0] = 5000
    pacer.tick()
    assert pacer.full_walks == 0  # 5000 is not half again over the last level, 4000
    memory[0] = 6001
    pacer.tick()
    assert pacer.full_walks == 1 and probe() is None
    assert pacer.departures_at_full == 1 and pacer.memory_after_full == 6001
    memory[0] = 9002
    pacer.tick()  # grown by half again, nothing more gone
    assert pacer.full_walks == 1 and pacer.skipped_walks == 4
    pacer.stop()


def test_churn_buys_at_most_one_walk_a_minute(restore_gc: None) -> None:
    """One client reconnecting as fast as it may (bench/abuse.py's frame_flood): departures
    every tick and memory grown by half must not start a walk of everything on every tick,
    each a pause every other game waits behind; by default at most one a minute."""
    memory, gone = [1000], [0]
    pacer = GcPacer(0.25, Manual(), memory=lambda: memory[0], departures=lambda: gone[0])
    pacer.start()
    probe = frozen_then_dead(pacer)  # the first tick
    walks_at: list[int] = []
    for tick in range(2, 4 * 150 + 1):  # two and a half minutes of ticks of 0.25 s
        gone[0] += 4  # four connections ended
        memory[0] = 2 * pacer.memory_after_full  # and their garbage, or anything, grew
        before = pacer.full_walks
        pacer.tick()
        if pacer.full_walks != before:
            walks_at.append(tick)
    assert walks_at == [240, 480]  # 60 s after start, then 60 s after that walk
    assert probe() is None  # what the first walk was for: the frozen garbage is freed
    assert pacer.deferred_walks == 600 - 1 - 2
    pacer.stop()


def test_the_floor_between_walks_is_an_option(restore_gc: None) -> None:
    memory, gone = [1000], [0]
    pacer = GcPacer(
        1.0, Manual(), memory=lambda: memory[0], departures=lambda: gone[0], min_full_gap_s=3.0
    )
    pacer.start()
    probe = frozen_then_dead(pacer)  # the first tick, 1 s
    gone[0], memory[0] = 1, 1600
    pacer.tick()
    assert pacer.full_walks == 0 and pacer.memory_after_full == 1000  # waits, level kept
    pacer.tick()  # 3 s since start
    assert pacer.full_walks == 1 and probe() is None
    pacer.stop()


def test_the_frozen_set_is_walked_at_least_every_so_often(restore_gc: None) -> None:
    pacer = GcPacer(0.25, Manual(), memory=lambda: 100, full_every_s=1.0)
    pacer.start()
    probe = frozen_then_dead(pacer)  # the first tick
    pacer.tick()
    pacer.tick()
    assert probe() is not None and pacer.full_walks == 0
    pacer.tick()  # the fourth tick of 0.25 s: a second has passed
    assert probe() is None and pacer.full_walks == 1
    pacer.stop()


def test_by_default_it_counts_allocated_blocks(restore_gc: None) -> None:
    pacer = GcPacer(1.0, Manual())
    pacer.start()
    assert pacer.memory_after_full > 0
    pacer.stop()


def test_metrics_show_the_pauses() -> None:
    m = Metrics()
    m.gc_paused(0.002, False)
    m.gc_paused(0.010, True)
    m.gc_paused(0.001, False)
    page = m.render().decode()
    assert 'stacko_gc_pauses_total{walk="new"} 2.0' in page
    assert 'stacko_gc_pauses_total{walk="full"} 1.0' in page
    assert 'stacko_gc_pause_seconds_total{walk="new"} 0.003' in page
    assert "stacko_gc_pause_max_seconds 0.01" in page
