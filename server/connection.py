"""One WebSocket connection: the thin asyncio shell between the socket and the hub.

It reads frames, enforces the per-connection limits (hello timeout, frame size, frame type,
rate, control frames included), parses each frame through ``protocol.parse_client``, hands it
to the hub, and writes through an outbox bounded in bytes (``max_outbox_bytes``, counting the
socket's write buffer too, pongs included) so a slow reader can never stall a room or grow
memory forever.
Nothing here knows a game.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import time

from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from stacko.protocol import frames, messages
from stacko.protocol.errors import ErrorCode, ProtocolError
from stacko.server.batch import OutputGate, Receiver, WriteBatch, text_frame
from stacko.server.clock import Clock
from stacko.server.config import ServerConfig
from stacko.server.hub import Hub, Session
from stacko.server.metrics import Metrics
from stacko.server.wsconn import DirectServerConnection

log = logging.getLogger("stacko.connection")

CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_POLICY = 1008
CLOSE_INTERNAL = 1011

LATE_FRAMES = 64
"""Frames a client may send after the server closed before it stops reading them."""


class Connection(Receiver):
    """A ``Peer`` for the hub and rooms: ``send`` never blocks and never raises."""

    def __init__(
        self,
        ws: DirectServerConnection,
        hub: Hub,
        config: ServerConfig,
        clock: Clock,
        metrics: Metrics | None = None,
        batch: WriteBatch | None = None,
        gate: OutputGate | None = None,
    ) -> None:
        self.ws = ws
        self.gate = gate
        """The store's output gate: while a change is uncommitted, frames wait there."""
        self._close_held = False
        self.batch = batch if batch is not None else WriteBatch()
        self.hub = hub
        self.config = config
        self.clock = clock
        self.metrics = metrics
        interval = getattr(ws, "ping_interval", None)
        if interval:
            # Connections opened together (after a restart, say) would ping in lockstep
            # forever, a burst of pings every interval: 0-10 % less spreads them out.
            ws.ping_interval = interval * random.uniform(0.9, 1.0)
        self.session: Session | None = None
        address = getattr(ws, "remote_address", None)
        self.ip = ws.ip or (str(address[0]) if address else "")
        """The client's IP address (the hub's per-address limits): the socket's peer, or
        the client a trusted proxy named (``server.forwarded``); empty if unknown."""
        self.outbox: collections.deque[bytes] = collections.deque()
        self._held = 0
        """Bytes in ``outbox``."""
        self._max_held = config.max_outbox_bytes
        # Fixed once the handshake is done (this object is made after it): looked up once
        # here, not on each of the two frames every move sends.
        self._protocol = ws.protocol
        self._transport: asyncio.WriteTransport | None = getattr(ws, "transport", None)
        self._compressed = bool(ws.protocol.extensions)
        transport = self._transport
        self._high_water = transport.get_write_buffer_limits()[1] if transport else 0
        self._batched = 0
        """Bytes handed to the batch in its current turn (``_turn``): held there until the
        flush, not yet in the socket's buffer, so counted here (a burst of requests answered
        in one turn would otherwise pass every check)."""
        self._turn = -1
        self._wake = asyncio.Event()
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._closing: tuple[int, str] | None = None
        self._late = 0
        self._now = clock.monotonic  # a wall-clock step must not empty (or fill) a bucket
        self._rate = float(config.rate_per_second)
        self._burst = float(config.burst)
        self._tokens = self._burst
        self._refilled = self._now()

    # -- the Peer interface -------------------------------------------------------------

    def send(self, frame: bytes) -> None:
        if self._closing is not None or self._close_held:
            return
        gate = self.gate
        if gate is not None and gate.holding:  # output commit: after the change is stored
            gate.hold_frame(self, frame)
            return
        self.deliver(frame)

    def deliver(self, frame: bytes) -> None:
        """Send now (the gate releases held frames through this)."""
        if self._closing is not None:
            return
        if self.metrics is not None:
            self.metrics.sent(frame)
        if not self.outbox and self._write_now(frame):
            return
        if self._holding() + len(frame) > self._max_held:
            self._drop_slow()
            return
        self.outbox.append(frame)
        self._held += len(frame)
        self._wake.set()

    def _holding(self) -> int:
        """Bytes this connection holds: its outbox and its socket's write buffer (where
        websockets' own frames, pongs above all, wait too)."""
        transport = self._transport
        held = self._held + (self._batched if self._turn == self.batch.turns else 0)
        return held + (transport.get_write_buffer_size() if transport is not None else 0)

    def _drop_slow(self) -> None:
        log.warning("dropping a connection that does not read its frames")
        self.outbox.clear()  # it would not read them: free them now
        self._held = 0
        self.close(CLOSE_POLICY, "slow_consumer")
        # A reader this far behind cannot take the close frame either (nor a keepalive
        # ping: both wait for the socket to drain): cut the TCP connection if it has not
        # closed within the close timeout.
        self._abort_later()

    def _abort_later(self) -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(self.ws.close_timeout or 0.0, self._abort)

    def _on_paused(self) -> None:
        if self._closing is None and self._holding() > self._max_held:
            self._drop_slow()

    def _on_control(self) -> bool:
        """A ping or pong from the client: it counts toward the rate limit like any frame,
        and its pong toward what the connection holds. ``False``: not answered."""
        if self._closing is not None:
            self._stop_reading()
            return False
        if self.metrics is not None:
            self.metrics.frames_in += 1
        if not self._take_token():
            self.fail(ErrorCode.RATE_LIMITED, "too many frames; slow down")
            if self.ws.paused:  # not reading either: it would not take the close frame
                self._abort_later()
            return False
        if self._holding() > self._max_held:
            self._drop_slow()
            return False
        return True

    def _write_now(self, frame: bytes) -> bool:
        """The fast path: with nothing queued and the socket keeping up (its write buffer under
        the high-water mark), write the frame without a task switch, as
        ``websockets.broadcast`` does, through the server's ``WriteBatch``. Otherwise the
        writer task sends it from the outbox, waiting for the socket to drain."""
        transport = self._transport
        protocol = self._protocol
        batch = self.batch
        if self._turn != batch.turns:
            self._turn = batch.turns
            self._batched = 0
        if (
            transport is None
            or protocol.state is not State.OPEN
            or transport.get_write_buffer_size() + self._batched > self._high_water
        ):
            return False
        self._batched += len(frame)
        try:
            if self._compressed:  # websockets frames it
                protocol.send_text(frame)
                for data in protocol.data_to_send():
                    batch.write(transport, protocol, data)
            else:
                batch.write(transport, protocol, text_frame(frame))
        except Exception:  # the connection is going away; its reader will see it
            log.debug("direct write failed", exc_info=True)
        return True

    def close(self, code: int, reason: str) -> None:
        """Flush what is queued, then close with ``code`` and ``reason`` (after the frames
        the gate holds for this connection)."""
        self.ws.discarding = True  # nothing the client sends from now on is handled
        gate = self.gate
        if gate is not None and gate.holding and self._closing is None:
            if not self._close_held:
                self._close_held = True
                gate.hold_close(self, (code, reason))
            return
        self.close_now((code, reason))

    def close_now(self, how: tuple[int, str]) -> None:
        """Close without waiting for the gate: what the gate releases, and what the server
        does when the store failed (a failed store never releases anything)."""
        code, reason = how
        self.ws.discarding = True
        if self._closing is None:
            self._closing = (code, reason)
            self._wake.set()
            if not self._closed.done():
                self._closed.set_result(None)

    def _stop_reading(self) -> None:
        """A frame after a fatal error or a close. A few are in flight from any client; a
        flooder does not stop when told to, and reading (framing, unmasking) what it sends
        is work for nothing: past ``LATE_FRAMES`` the connection reads nothing more (nor the
        client's answer to the close), and the TCP connection is cut a second later, time
        for the close frame to go out."""
        self._late += 1
        if self._late > LATE_FRAMES and not self.ws.deaf:
            self.ws.stop_reading()
            asyncio.get_running_loop().call_later(1.0, self._abort)

    def _abort(self) -> None:
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.abort()

    def fail(self, code: ErrorCode, message: str, request_id: frames.RequestId = None) -> None:
        """A fatal error frame, then a policy close whose reason is the code."""
        self.send(frames.error(code, message, id=request_id, fatal=True))
        self.close(CLOSE_POLICY, code.value)

    def replace(self) -> None:
        """Another connection resumed this session: this one goes."""
        self.session = None
        self.fail(ErrorCode.SESSION_REPLACED, "this session was resumed on another connection")

    # -- the loops --------------------------------------------------------------------------

    async def run(self) -> None:
        writer = asyncio.create_task(self._write())
        try:
            await self._read()
        except ConnectionClosed:
            pass
        finally:
            self.hub.disconnected(self, self.session)
            if self._closing is not None and not writer.done():
                try:
                    async with asyncio.timeout(5):
                        await asyncio.shield(writer)
                except TimeoutError:
                    pass
            writer.cancel()

    async def _write(self) -> None:
        ws = self.ws
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self.outbox:
                    frame = self.outbox.popleft()
                    self._held -= len(frame)
                    await ws.send(frame, text=True)
                if self._closing is not None:
                    await ws.close(*self._closing)
                    return
        except ConnectionClosed:
            return

    async def _read(self) -> None:
        """Frames arrive through ``on_message`` (``DirectServerConnection``); this task waits
        for the rare message that takes websockets' queue, for the connection's end, or for
        ``close``, whichever comes first."""
        ws = self.ws
        loop = asyncio.get_running_loop()
        hello = loop.call_later(self.config.hello_timeout_s, self._hello_overdue)
        ws.on_message = self._on_frame
        ws.on_control = self._on_control
        ws.on_paused = self._on_paused
        ws.on_discarded = self._stop_reading
        try:
            while self._closing is None:
                recv = asyncio.ensure_future(ws.recv())
                await asyncio.wait((recv, self._closed), return_when=asyncio.FIRST_COMPLETED)
                if not recv.done():
                    recv.cancel()  # safe: websockets' recv() loses nothing when cancelled
                    return
                message = recv.result()
                try:
                    self._on_frame(message)
                finally:
                    ws.handled()  # only now may later messages overtake the queue
        finally:
            hello.cancel()
            ws.on_message = None  # on_control stays: once closing, it answers no more pings

    def _hello_overdue(self) -> None:
        if self.session is None and self._closing is None:
            self.fail(ErrorCode.IDLE_TIMEOUT, f"no hello within {self.config.hello_timeout_s} s")

    def _on_frame(self, data: str | bytes) -> None:
        if self._closing is not None or self._close_held:
            self._stop_reading()  # after a fatal error or a close, nothing more is handled
            return
        started = time.perf_counter()
        if self.metrics is not None:
            self.metrics.frames_in += 1
        if not self._take_token():
            self.fail(ErrorCode.RATE_LIMITED, "too many frames; slow down")
            return
        if isinstance(data, bytes):
            self._refuse(ErrorCode.BINARY_FRAME, "send text frames with JSON")
            return
        limit = self.config.max_frame_bytes
        if len(data) > limit or (4 * len(data) > limit and len(data.encode()) > limit):
            self._refuse(ErrorCode.TOO_BIG, f"frames are limited to {limit} bytes")
            return
        msg: messages.ClientMessage | None = None
        try:
            msg = messages.parse_client(data)
            if self.session is None:
                if not isinstance(msg, messages.Hello):
                    self.fail(ErrorCode.HELLO_REQUIRED, "the first frame must be hello", msg.id)
                    return
                self.session = self.hub.hello(self, msg, self.ip)
            elif self.metrics is not None and type(msg) is messages.MoveMessage:
                self._handle_move(msg, started)
            else:
                self.hub.handle(self, self.session, msg)
        except ProtocolError as exc:
            if exc.fatal or self.session is None:
                self.fail(exc.code, exc.message, exc.request_id)
            else:
                room = getattr(msg, "room", None)
                self.send(frames.from_exception(exc, room=room))
        except Exception:
            log.exception("internal error while handling a frame")
            self.send(frames.error(ErrorCode.INTERNAL_ERROR, "internal error", fatal=True))
            self.close(CLOSE_INTERNAL, "internal_error")

    def _refuse(self, code: ErrorCode, message: str) -> None:
        """A frame dropped unread: an error, fatal before ``welcome`` (the first frame must be
        a valid ``hello``)."""
        if self.session is None:
            self.fail(code, message)
        else:
            self.send(frames.error(code, message))

    def _handle_move(self, msg: messages.MoveMessage, started: float) -> None:
        """A move, timed: applied iff the room's state version moved (a stale ply does not)."""
        assert self.session is not None and self.metrics is not None
        room = self.hub.rooms.get(msg.room)
        seq = room.seq if room is not None else -1
        self.hub.handle(self, self.session, msg)
        if room is not None and room.seq != seq:
            self.metrics.move_applied(time.perf_counter() - started)

    def _take_token(self) -> bool:
        """Token bucket: ``rate_per_second`` on average, ``burst`` at once."""
        now = self._now()
        tokens = self._tokens + (now - self._refilled) * self._rate
        if tokens > self._burst:
            tokens = self._burst
        self._refilled = now
        if tokens < 1.0:
            self._tokens = tokens
            return False
        self._tokens = tokens - 1.0
        return True
