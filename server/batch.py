"""Socket writes of one event-loop turn, sent together.

A move makes two state frames for two sockets, and at saturation one loop turn handles many
moves. Sent one by one, each ``send`` syscall runs between stretches of Python that push the
kernel's socket and TCP code out of the CPU caches; sent back to back at the start of the
next turn, they run hot, and the Python work of consecutive moves stays hot too. Under
``bench/loadgen.py --matches 50 --pace 0`` that took server CPU from ~90 to ~69 us per move
(10,500-11,300 -> 13,400-13,700 moves/s).

Latency: the first write of a turn goes out at once (at light load that is the opponent's
state frame, which ``Room`` sends first), so only the later ones (the mover's own frame, or
every frame of a busy turn) wait for the end of the turn.

Order on one socket is kept: once something is held, every later write of the turn is held
behind it; the flush is queued with ``call_soon`` when the first write is held, so it runs
before anything (a writer task's ``send``, a close) that the same turn wakes up afterwards.
What websockets writes by itself in the meantime (a pong, the answer to a client's close,
the close of a protocol error) can overtake held frames: a pong harmlessly, and after a
close the held frames of that connection are dropped, as websockets drops data frames sent
after a close. One failing write never costs the other connections theirs.
"""

from __future__ import annotations

import asyncio
import logging

from websockets.protocol import Protocol, State

log = logging.getLogger("stacko.connection")


class WriteBatch:
    __slots__ = ("_held", "_loop", "_scheduled", "flushes", "held_writes")

    def __init__(self) -> None:
        self._held: list[tuple[asyncio.WriteTransport, Protocol, bytes]] = []
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.flushes = 0
        self.held_writes = 0

    def write(self, transport: asyncio.WriteTransport, protocol: Protocol, data: bytes) -> None:
        """``data`` (a frame ``protocol`` serialized) for ``transport``; ``protocol``
        says whether the connection is still open when held data is flushed."""
        if not self._scheduled:
            # First write of this turn: at once. Later ones wait for the flush.
            self._scheduled = True
            if self._loop is None:
                self._loop = asyncio.get_running_loop()
            self._loop.call_soon(self._flush)
            transport.write(data)
            return
        self._held.append((transport, protocol, data))

    def _flush(self) -> None:
        self._scheduled = False
        held = self._held
        if not held:
            return
        self._held = []
        self.flushes += 1
        self.held_writes += len(held)
        for transport, protocol, data in held:
            if protocol.state is not State.OPEN or transport.is_closing():
                continue  # closed meanwhile (by websockets itself, or the peer): dropped
            try:
                transport.write(data)
            except Exception:  # one connection's failure is not the others'
                log.debug("held write failed", exc_info=True)
