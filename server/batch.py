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
behind it; the flush is booked with ``call_soon`` at the first write of the turn (just after
that write goes out), so it runs before anything (a writer task's ``send``, a close) that the
same turn wakes up afterwards.
What websockets writes by itself in the meantime (a pong, the answer to a client's close,
the close of a protocol error) can overtake held frames: a pong harmlessly, and after a
close the held frames of that connection are dropped, as websockets drops data frames sent
after a close. One failing write never costs the other connections theirs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, cast

from websockets.protocol import Protocol, State

log = logging.getLogger("stacko.connection")


def text_frame(payload: bytes) -> bytes:
    """A server's unfragmented text frame (unmasked, no extension) around ``payload``, as
    ``Protocol.send_text`` would frame it, without its per-frame objects (here, compiled,
    rather than in ``server.wsconn``: it is on the way to every send)."""
    n = len(payload)
    if n < 126:
        return bytes((0x81, n)) + payload
    if n < 65536:
        return bytes((0x81, 126, n >> 8, n & 0xFF)) + payload
    return bytes((0x81, 127)) + n.to_bytes(8, "big") + payload


class WriteBatch:
    __slots__ = ("_held", "_loop", "_scheduled", "flushes", "held_writes", "turns")

    def __init__(self) -> None:
        self._held: list[tuple[asyncio.WriteTransport, Protocol, bytes]] = []
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.flushes = 0
        self.held_writes = 0
        self.turns = 0
        """Flushes run (held writes or not): a writer's count of what it handed over since
        the last flush starts again when this moves (``Connection`` bounds it)."""

    def write(self, transport: asyncio.WriteTransport, protocol: Protocol, data: bytes) -> None:
        """``data`` (a frame ``protocol`` serialized) for ``transport``; ``protocol``
        says whether the connection is still open when held data is flushed."""
        if not self._scheduled:
            # First write of this turn: at once, before booking the flush (at light load the
            # receiver waits for this write, not for the booking). Later ones wait.
            self._scheduled = True
            try:
                transport.write(data)
            finally:  # booked even if the write failed: later writes of the turn wait for it
                loop = self._loop
                if loop is None:
                    loop = self._loop = asyncio.get_running_loop()
                loop.call_soon(self._flush)
            return
        self._held.append((transport, protocol, data))

    def flush_now(self) -> None:
        """Send what is held now rather than at the booked flush (which then finds less, or
        nothing): order on each socket is kept, later writes start a new turn's batch."""
        if self._held:
            self._flush()

    def _flush(self) -> None:
        self._scheduled = False
        self.turns += 1
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


class Receiver:
    """What the output gate releases frames to (``Connection``): a native base class, so the
    gate calls ``deliver`` directly, without a bound method or a tuple per frame."""

    def deliver(self, frame: bytes) -> None:
        raise NotImplementedError

    def close_now(self, how: tuple[int, str]) -> None:
        raise NotImplementedError


class OutputGate:
    """The store's output gate, on the way of every frame (so compiled, here): while a
    change is uncommitted (``holding``), frames wait, in the order they were sent, in one
    list per ticket (the store's newest change when they were held); ``release(ticket)``
    sends the lists that ticket covers, in order. ``server.store.base`` says when."""

    __slots__ = (
        "_args", "_batches", "_targets", "_tickets", "batch", "committed", "held_frames",
        "holding", "ticket",
    )  # fmt: skip

    def __init__(self) -> None:
        self.holding = False
        """True while a submitted change is not yet committed: frames must wait."""
        self.ticket = 0
        """The store's newest change (``Store.appended``): what a frame held now waits for."""
        self.committed = 0
        """The store's newest change committed (``Store.committed``). Both are kept here, on
        the way of every frame, so that the journal's commit of a move (compiled:
        ``server.store.journal.EventWriter``) moves them without the store's Python."""
        self.held_frames = 0
        self.batch: WriteBatch | None = None
        """The server's write batch: what a release handed it goes out at the end of the
        release, not a loop turn later (the frames already waited a turn for the commit)."""
        self._tickets: list[int] = []
        self._batches: list[tuple[list[object], list[object]]] = []
        self._targets: list[object] = []
        self._args: list[object] = []

    def _open(self) -> None:
        """Start the list of the current ticket (the first frame held since it was taken)."""
        self._targets = []
        self._args = []
        self._tickets.append(self.ticket)
        self._batches.append((self._targets, self._args))

    def hold_frame(self, receiver: Receiver, frame: bytes) -> None:
        self.held_frames += 1
        if not self._tickets or self._tickets[-1] != self.ticket:
            self._open()
        self._targets.append(receiver)
        self._args.append(frame)

    def hold_close(self, receiver: Receiver, how: tuple[int, str]) -> None:
        if not self._tickets or self._tickets[-1] != self.ticket:
            self._open()
        self._targets.append(receiver)
        self._args.append(how)

    def hold(self, release: Callable[[Any], None], arg: Any) -> None:
        """Any call to make once everything submitted so far is committed (tests, others)."""
        self.held_frames += 1
        if not self._tickets or self._tickets[-1] != self.ticket:
            self._open()
        self._targets.append(release)
        self._args.append(arg)

    def has_held(self) -> bool:
        """Anything waiting (the journal writer, which commits at once, releases only then)."""
        return bool(self._tickets)

    def release(self, ticket: int) -> None:
        """Everything held for tickets up to ``ticket``, in the order it was held (what the
        released calls hold again meanwhile, a close say, goes out in the same pass)."""
        tickets = self._tickets
        while tickets and tickets[0] <= ticket:
            n = 1
            while n < len(tickets) and tickets[n] <= ticket:
                n += 1
            batches = self._batches[:n]
            del tickets[:n]
            del self._batches[:n]
            if not tickets:  # the next frame held starts a new list (``_open``)
                self._targets = []
                self._args = []
            for targets, args in batches:
                for i in range(len(targets)):
                    target = targets[i]
                    arg = args[i]
                    if isinstance(target, Receiver):
                        if isinstance(arg, bytes):
                            target.deliver(arg)
                        else:
                            target.close_now(cast(tuple[int, str], arg))
                    else:
                        cast(Callable[[Any], None], target)(arg)
        batch = self.batch
        if batch is not None:
            batch.flush_now()

    def drop(self) -> None:
        """The store failed: nothing held leaves, and nothing more will (fail-stop)."""
        self.holding = True
        self._tickets.clear()
        self._batches.clear()
        self._targets = []
        self._args = []
