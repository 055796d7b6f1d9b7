"""A ``websockets`` server connection that hands complete messages to a callback at once.

``websockets`` queues each received message and wakes the task waiting in ``recv()``: a
future, a queue and a task switch per frame, and one more event-loop turn before the move is
even parsed. At light load that turn is most of the time between a move's arrival and the
parse (58 us median from ``data_received`` to the handler on this VM, cold caches).

``DirectServerConnection`` calls ``on_message`` from ``data_received`` for every complete,
unfragmented data frame instead. Everything unusual takes websockets' own path through
``recv()``, unchanged: fragmented messages, text that is not valid UTF-8 (``recv()`` closes
with 1007), and anything that arrives before ``on_message`` is set (a frame pipelined with
the upgrade request). Order is kept: from the moment a message takes that path until its
reader says it has handled it (``handled``), later messages take the path too.

It also holds the transport-level limits a client must not get around (issue 14): every
control frame (ping, pong) goes through ``on_control`` (the connection's rate limit) before
websockets answers it, reading stops while the socket's writes are paused (a peer that does
not read cannot make the server write more pongs than one read's worth), and the sockets of
one server are counted per remote address in a ``SocketCount`` (``max_connections``,
``max_connections_per_ip``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.frames import CloseCode, Frame, Opcode
from websockets.protocol import Event, State
from websockets.speedups import apply_mask

from stacko.server.forwarded import TrustedProxies

log = logging.getLogger("stacko.connection")

_DATA = (Opcode.TEXT, Opcode.BINARY, Opcode.CONT)
_CONTROL = (Opcode.PING, Opcode.PONG)
_OPCODES = frozenset(op.value for op in Opcode)


ADMIT, REFUSE, CUT = 0, 1, 2
"""What ``SocketCount.opened`` says of a new socket: let its request through, answer it with
HTTP 429, or close it at once."""


def _take(buckets: dict[str, tuple[float, float]], ip: str, now: float, rate: float,
          burst: float) -> bool:  # fmt: skip
    """A token from ``ip``'s bucket (full at first), if it has one."""
    tokens, last = buckets.get(ip, (burst, now))
    tokens = min(burst, tokens + (now - last) * rate)
    ok = tokens >= 1.0
    buckets[ip] = (tokens - 1.0 if ok else tokens, now)
    return ok


class SocketCount:
    """Open sockets of one server, in all and per remote address: from the TCP accept to
    the end, handshake done or not, WebSocket or plain HTTP (each holds a descriptor).

    An address may open ``per_ip_per_s`` new sockets a second (in bursts of ``per_ip``) and
    hold ``per_ip`` upgraded connections (0: neither limit). Over either, it gets its coded
    refusal (HTTP 429, from ``Server``) for at most ``REFUSALS_PER_S`` sockets a second and
    the others are closed at accept, before any request: a client opening sockets in a loop
    must not buy a handshake (a few hundred microseconds of the loop) for each.

    A socket from a trusted proxy (``proxies``) is counted in ``total`` only: its client is
    known from its request, where ``Server`` applies the same limits to that client
    (``request_allowed``, ``admitted``)."""

    REFUSALS_PER_S = 10.0
    MAX_BUCKETS = 10_000
    """Addresses remembered for the new-socket rate; beyond, the full buckets are forgotten."""

    __slots__ = (
        "_opens", "_refusals", "admitted", "by_ip", "per_ip", "per_ip_per_s", "proxies", "total"
    )  # fmt: skip

    def __init__(
        self, per_ip: int = 0, per_ip_per_s: float = 0.0, proxies: TrustedProxies | None = None
    ) -> None:
        self.total = 0
        self.by_ip: dict[str, int] = {}
        self.admitted: dict[str, int] = {}
        """WebSocket upgrades let through per address (``Server`` caps these: a socket's
        request must not be refused for sockets opened after it)."""
        self.per_ip = per_ip
        self.per_ip_per_s = per_ip_per_s
        self._opens: dict[str, tuple[float, float]] = {}
        """Per address: new sockets, a token bucket (tokens, when last counted); kept after
        its sockets close, so that connecting one at a time does not refill it."""
        self._refusals: dict[str, tuple[float, float]] = {}
        """Per address over a limit: its HTTP 429 answers, a token bucket."""
        self.proxies = proxies if proxies else None

    def opened(self, ip: str, now: float) -> int:
        """Count a new socket: ``ADMIT``, ``REFUSE`` or ``CUT``."""
        self.total += 1
        if self.proxies is not None and self.proxies.trusts(ip):
            return ADMIT
        n = self.by_ip[ip] = self.by_ip.get(ip, 0) + 1
        if not self.per_ip:
            return ADMIT
        over = n > self.per_ip or not self.request_allowed(ip, now)
        if not over:
            return ADMIT
        limit = self.REFUSALS_PER_S
        return REFUSE if _take(self._refusals, ip, now, limit, limit) else CUT

    def request_allowed(self, ip: str, now: float) -> bool:
        """A token from ``ip``'s new-socket bucket (``per_ip_per_s``), if it has one: at
        accept for a socket's own address, at its request for a proxy's client."""
        rate = self.per_ip_per_s
        if not self.per_ip or rate <= 0:
            return True
        opens = self._opens
        if len(opens) > self.MAX_BUCKETS:
            full = self.per_ip / rate
            self._opens = opens = {k: v for k, v in opens.items() if now - v[1] < full}
        return _take(opens, ip, now, rate, float(self.per_ip))

    def admit(self, ip: str) -> None:
        self.admitted[ip] = self.admitted.get(ip, 0) + 1

    def closed(self, ip: str, admitted: str | None) -> None:
        """``ip``: the socket's peer; ``admitted``: the address its upgrade was counted
        under (the client's, behind a proxy), ``None`` if it was not."""
        if admitted is not None:
            left = self.admitted.get(admitted, 0) - 1
            if left > 0:
                self.admitted[admitted] = left
            else:
                self.admitted.pop(admitted, None)
        self.total -= 1
        if ip not in self.by_ip:
            return  # a trusted proxy's socket: in the total only
        left = self.by_ip.get(ip, 0) - 1
        if left > 0:
            self.by_ip[ip] = left
        else:
            self.by_ip.pop(ip, None)
            self._refusals.pop(ip, None)


def read_header(buf: bytes | bytearray, pos: int) -> tuple[int, int] | None:
    """The frame at ``pos``: (header size before any masking key, payload length), or
    ``None`` while ``buf`` does not hold its whole header yet (RFC 6455, 5.2)."""
    n = len(buf) - pos
    if n < 2:
        return None
    length = buf[pos + 1] & 0x7F
    if length < 126:
        return 2, length
    if length == 126:
        return (4, int.from_bytes(buf[pos + 2 : pos + 4], "big")) if n >= 4 else None
    return (10, int.from_bytes(buf[pos + 2 : pos + 10], "big")) if n >= 10 else None


class DirectServerConnection(ServerConnection):
    lost = 0
    """Connections of this process that ended (WebSocket or plain HTTP, handshake done or
    not): ``Server.departures`` reads it for the paced collector, which is process-wide too."""

    def __init__(self, *args: Any, sockets: SocketCount | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.on_message: Callable[[str | bytes], None] | None = None
        self.on_control: Callable[[], bool] | None = None
        """Called for every ping and pong the client sends; ``False``: drop it unanswered
        (the connection is over its limits and closing)."""
        self.on_paused: Callable[[], None] | None = None
        """Called when the socket's writes pause (its buffer passed the high-water mark)."""
        self.deaf = False
        """Reading stopped for good (``stop_reading``)."""
        self.discarding = False
        """The server closed (or is closing) the connection: from now on frames are cut
        and dropped here, each counted by ``on_discarded``, and only a close frame goes on
        to websockets (``_discard``)."""
        self.on_discarded: Callable[[], None] | None = None
        """Called for each frame dropped while ``discarding`` (it may ``stop_reading``)."""
        self.sockets = sockets
        self.admitted = False
        """Counted in ``sockets.admitted``."""
        self.refuse = False
        """Over its address's new-socket rate: its upgrade gets HTTP 429."""
        self.peer_ip = ""
        """The socket's remote address, as counted in ``sockets``."""
        self.ip = ""
        """The client's address, which every per-address limit counts: ``peer_ip``, or
        behind a trusted proxy the one its request names (``Server.client_ip``)."""
        self.proxied = False
        """The peer is a trusted proxy (``--forwarded-allow-ips``)."""
        self.queued = 0
        """Messages put on websockets' queue whose reader has not called ``handled`` yet
        (a fragmented message counts from its first fragment)."""
        self._framer = True
        """Whether ``data_received`` may cut frames itself (see there); once off, off."""
        self._request_done = False
        self._tail = b""
        self._buf = bytearray()
        """The start of a frame not yet whole (appended to, never rebuilt: a frame trickled
        in byte by byte costs linear time, not quadratic)."""

    def data_received(self, data: bytes) -> None:
        """The common frame, whole, unfragmented, masked text, is cut, unmasked and decoded
        here and handed to ``on_message``: websockets' generator-based parser costs about
        7 us a frame under load and 30 us cold. Every other frame is handed to websockets
        whole, so its parser is always at a frame boundary, and it answers pings, closes,
        fails bad frames (1002, 1007, 1009) exactly as it would have. Before the connection
        is open everything goes to websockets; a client that sends frames before the
        handshake's answer (pipelining) never gets this path, since websockets' parser may
        then stop inside a frame."""
        if not self._framer:
            super().data_received(data)
            return
        protocol = self.protocol
        if self.discarding and protocol.state is not State.CONNECTING:
            self._discard(data)
            return
        if protocol.state is not State.OPEN:
            if protocol.state is State.CONNECTING:
                self._watch_handshake(data)
                super().data_received(data)
            else:  # closing: websockets takes over, with the start of a frame held here
                self._buf += data
                self._hand_over(self._buf, 0)
            return
        buf: bytes | bytearray = data
        if self._buf:
            self._buf += data
            buf = self._buf
        deliver = self.on_message
        limit = protocol.max_message_size
        if deliver is None or protocol.extensions or limit is None:
            self._hand_over(buf, 0)
            return
        pos, n = 0, len(buf)
        while (header := read_header(buf, pos)) is not None:
            head, length = header
            if length > limit:  # websockets fails it with 1009 from the header alone
                self._hand_over(buf, pos)
                return
            b0, b1 = buf[pos], buf[pos + 1]
            if not b1 & 0x80 or b0 & 0x70 or (b0 & 0x0F) not in _OPCODES:
                # Wrong from its header alone (unmasked, RSV bits without an extension, a
                # reserved opcode): websockets fails it now, not after the payload.
                self._hand_over(buf, pos)
                return
            end = pos + head + 4 + length
            if end > n:
                break
            if b0 & 0x0F in (0x9, 0xA) and not self._control_allowed():
                pass  # over the limits: not answered (a close still reaches websockets)
            elif b0 == 0x81 and not self.queued and protocol.state is State.OPEN:
                mask = buf[pos + head : pos + head + 4]
                try:
                    text = apply_mask(buf[pos + head + 4 : end], mask).decode()
                except UnicodeDecodeError:
                    super().data_received(bytes(buf[pos:end]))  # websockets closes with 1007
                else:
                    self._deliver(deliver, text)
                    if self.deaf:  # told to read no more: the rest of this read too
                        self._buf = bytearray()
                        return
            else:
                super().data_received(bytes(buf[pos:end]))
            pos = end
        if buf is self._buf:
            del self._buf[:pos]
        elif pos < n:
            self._buf = bytearray(buf[pos:])

    def _discard(self, data: bytes) -> None:
        """Frames the server will not handle (it closed): skipped by their headers, not
        parsed by websockets, whose parser costs ~10 us a frame (``bench/abuse.py``
        ``frame_flood``: a flooder's 256 KB read of small frames after its close held the
        loop for ~100 ms). The client's close frame, or a frame websockets must fail, and
        everything after it, go to websockets."""
        self._buf += data
        buf = self._buf
        limit = self.protocol.max_message_size or 0
        pos = 0
        while not self.deaf and (header := read_header(buf, pos)) is not None:
            head, length = header
            if buf[pos] & 0x0F == 0x8 or not buf[pos + 1] & 0x80 or length > limit:
                self._hand_over(buf, pos)
                return
            end = pos + head + 4 + length
            if end > len(buf):
                break
            pos = end
            if self.on_discarded is not None:
                self.on_discarded()
        if self.deaf:  # told to read no more: nor to keep what it sent
            self._buf = bytearray()
        else:
            del buf[:pos]

    def _hand_over(self, buf: bytes | bytearray, pos: int) -> None:
        """websockets parses everything from ``pos`` on, and from now on."""
        self._framer = False
        rest = bytes(buf[pos:])
        self._buf = bytearray()
        super().data_received(rest)

    def _watch_handshake(self, data: bytes) -> None:
        """Bytes after the upgrade request, before the connection is open, are pipelined
        frames: websockets' parser takes them, so this connection keeps websockets' path."""
        if self._request_done:
            self._framer = False
            return
        seen = self._tail + data
        end = seen.find(b"\r\n\r\n")
        if end < 0:
            self._tail = seen[-3:]
            return
        self._request_done = True
        self._tail = b""
        if end + 4 < len(seen):
            self._framer = False

    def _control_allowed(self) -> bool:
        hook = self.on_control
        return hook is None or hook()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.recv_messages.resume = self._queue_drained  # reading has two reasons to pause
        if self.sockets is not None:
            peer = transport.get_extra_info("peername")
            self.ip = self.peer_ip = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
            proxies = self.sockets.proxies
            self.proxied = proxies is not None and proxies.trusts(self.peer_ip)
            verdict = self.sockets.opened(self.peer_ip, self.loop.time())
            if verdict == CUT:
                self.transport.abort()  # opening sockets in a loop: no answer at all
            self.refuse = verdict == REFUSE

    def connection_lost(self, exc: Exception | None) -> None:
        DirectServerConnection.lost += 1
        if self.sockets is not None:
            self.sockets.closed(self.peer_ip, self.ip if self.admitted else None)
            self.sockets = None
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        """The socket's write buffer is over its high-water mark: the peer is not reading.
        Stop reading it too, so that what it sends (pings above all, each answered with a
        pong) cannot grow that buffer further; reading resumes once it has drained."""
        super().pause_writing()
        self.transport.pause_reading()
        if self.on_paused is not None:
            self.on_paused()  # the last check of what it holds until it reads again

    def resume_writing(self) -> None:
        super().resume_writing()
        if not self.recv_messages.paused and not self.deaf and not self.transport.is_closing():
            self.transport.resume_reading()

    def _queue_drained(self) -> None:
        """websockets' message queue has room again: read, unless writes are paused."""
        if not self.paused and not self.deaf and not self.transport.is_closing():
            self.transport.resume_reading()

    def stop_reading(self) -> None:
        """Read nothing more from this client, whatever drains."""
        self.deaf = True
        if not self.transport.is_closing():
            self.transport.pause_reading()

    def handled(self) -> None:
        """The reader has handled a message it took with ``recv()``."""
        self.queued -= 1
        assert self.queued >= 0, "handled() without a queued message"

    def process_event(self, event: Event) -> None:
        if self.request is None or not isinstance(event, Frame) or event.opcode not in _DATA:
            if not self._framer and isinstance(event, Frame) and event.opcode in _CONTROL:
                # websockets parsed it (the framer counts its own before handing them over);
                # its pong is already written: counted after the fact, still counted.
                self._control_allowed()
            super().process_event(event)  # the handshake, control frames: websockets' own
            return
        deliver = self.on_message
        if deliver is None or self.queued or not event.fin or event.opcode is Opcode.CONT:
            self._queue(event)
            return
        data: str | bytes
        if event.opcode is Opcode.TEXT:
            try:
                data = str(event.data, "utf-8")
            except UnicodeDecodeError:
                self._queue(event)  # recv() raises it and closes with 1007
                return
        else:
            data = bytes(event.data)
        self._deliver(deliver, data)

    def _deliver(self, deliver: Callable[[str | bytes], None], data: str | bytes) -> None:
        try:
            deliver(data)
        except Exception:  # never out of data_received: that would abort the transport
            log.exception("internal error while handling a frame")
            self.protocol.fail(CloseCode.INTERNAL_ERROR, "internal_error")
            self.send_data()

    def _queue(self, event: Frame) -> None:
        # A message is counted at its first frame (a continuation belongs to one counted).
        if event.opcode is not Opcode.CONT:
            self.queued += 1
        super().process_event(event)
