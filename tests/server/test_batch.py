"""WriteBatch: the first write of a loop turn goes at once, the rest at the next turn, in
order, and nothing goes to a transport that is closing."""

from __future__ import annotations

import asyncio

from server.batch import WriteBatch


class FakeTransport:
    def __init__(self, log: list[tuple[str, bytes]], name: str) -> None:
        self.log, self.name, self.closing = log, name, False

    def write(self, data: bytes) -> None:
        self.log.append((self.name, data))

    def is_closing(self) -> bool:
        return self.closing


async def test_first_write_at_once_the_rest_next_turn_in_order() -> None:
    log: list[tuple[str, bytes]] = []
    a, b = FakeTransport(log, "a"), FakeTransport(log, "b")
    batch = WriteBatch()
    batch.write(a, b"1")  # type: ignore[arg-type]
    assert log == [("a", b"1")]
    batch.write(b, b"2")  # type: ignore[arg-type]
    batch.write(a, b"3")  # type: ignore[arg-type]
    assert log == [("a", b"1")]
    await asyncio.sleep(0)
    assert log == [("a", b"1"), ("b", b"2"), ("a", b"3")]
    assert (batch.flushes, batch.held_writes) == (1, 2)
    batch.write(b, b"4")  # type: ignore[arg-type]  # a new turn: at once again
    assert log[-1] == ("b", b"4")
    await asyncio.sleep(0)
    assert batch.flushes == 1  # nothing was held that turn


async def test_held_writes_to_a_closing_transport_are_dropped() -> None:
    log: list[tuple[str, bytes]] = []
    a, b = FakeTransport(log, "a"), FakeTransport(log, "b")
    batch = WriteBatch()
    batch.write(a, b"1")  # type: ignore[arg-type]
    batch.write(b, b"2")  # type: ignore[arg-type]
    b.closing = True
    await asyncio.sleep(0)
    assert log == [("a", b"1")]
