"""WriteBatch: the first write of a loop turn goes at once, the rest at the next turn, in
order; held frames of a connection closed meanwhile are dropped, and one failing write does
not cost the others theirs."""

from __future__ import annotations

import asyncio
from typing import Any

from websockets.protocol import State

from stacko.server.batch import OutputGate, WriteBatch


class FakeTransport:
    def __init__(self, log: list[tuple[str, bytes]], name: str) -> None:
        self.log, self.name, self.closing, self.broken = log, name, False, False

    def write(self, data: bytes) -> None:
        if self.broken:
            raise RuntimeError("Cannot call write() after write_eof()")
        self.log.append((self.name, data))

    def is_closing(self) -> bool:
        return self.closing


class FakeProtocol:
    state = State.OPEN


def pair(log: list[tuple[str, bytes]], name: str) -> tuple[Any, Any]:
    return FakeTransport(log, name), FakeProtocol()


async def test_first_write_at_once_the_rest_next_turn_in_order() -> None:
    log: list[tuple[str, bytes]] = []
    a, b = pair(log, "a"), pair(log, "b")
    batch = WriteBatch()
    batch.write(*a, b"1")
    assert log == [("a", b"1")]
    batch.write(*b, b"2")
    batch.write(*a, b"3")
    assert log == [("a", b"1")]
    await asyncio.sleep(0)
    assert log == [("a", b"1"), ("b", b"2"), ("a", b"3")]
    assert (batch.flushes, batch.held_writes) == (1, 2)
    batch.write(*b, b"4")  # a new turn: at once again
    assert log[-1] == ("b", b"4")
    await asyncio.sleep(0)
    assert batch.flushes == 1  # nothing was held that turn


async def test_held_writes_of_a_closed_connection_are_dropped_the_rest_go() -> None:
    log: list[tuple[str, bytes]] = []
    a, b, c, d = (pair(log, name) for name in "abcd")
    batch = WriteBatch()
    batch.write(*a, b"1")
    batch.write(*b, b"2")
    batch.write(*c, b"3")
    batch.write(*d, b"4")
    batch.write(*a, b"5")
    b[0].closing = True  # the transport is closing
    c[1].state = State.CLOSING  # websockets answered a close (and half-closed the socket)
    d[0].broken = True  # a write that raises
    await asyncio.sleep(0)
    assert log == [("a", b"1"), ("a", b"5")]


async def test_a_first_write_that_raises_still_books_the_flush() -> None:
    log: list[tuple[str, bytes]] = []
    a, b = pair(log, "a"), pair(log, "b")
    a[0].broken = True
    batch = WriteBatch()
    try:
        batch.write(*a, b"1")
    except RuntimeError:
        pass  # the caller (Connection._write_now) catches it
    else:
        raise AssertionError("the broken transport's write did not raise")
    batch.write(*b, b"2")  # held behind the failed one: the flush must still come
    assert log == []
    await asyncio.sleep(0)
    assert log == [("b", b"2")]


async def test_a_gate_release_sends_what_it_handed_the_batch_in_the_same_pass() -> None:
    """Frames released by the store's gate already waited a turn for the commit: the gate
    flushes the batch after a release instead of leaving them for the next turn."""
    log: list[tuple[str, bytes]] = []
    a, b = pair(log, "a"), pair(log, "b")
    batch = WriteBatch()
    gate = OutputGate()
    gate.batch = batch
    gate.ticket = 1
    for conn, data in ((a, b"1"), (b, b"2"), (a, b"3")):
        gate.hold(lambda d, conn=conn: batch.write(*conn, d), data)
    gate.release(1)
    assert log == [("a", b"1"), ("b", b"2"), ("a", b"3")]
    batch.write(*b, b"4")  # after the early flush: at once, as the first write of a turn
    batch.write(*a, b"5")
    assert log[-1] == ("b", b"4")
    await asyncio.sleep(0)
    assert log[-2:] == [("b", b"4"), ("a", b"5")]
