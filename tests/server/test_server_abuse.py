"""One client must not hurt anyone else (issue 14, the transport's part): what a connection
may hold is bounded in bytes (pongs included), control frames count toward the rate limit,
a peer that does not read is not read either, descriptors are capped in all and per address,
asyncio's "out of descriptors" line is throttled, and a step of the wall clock changes no
bucket, deadline or timer. Each test reproduces a finding of the issue."""

from __future__ import annotations

import asyncio
import logging
import random
import socket

import orjson
import pytest
from stacko_wire import SMALL, Client, Harness, read_frame, text_frame
from websockets.exceptions import InvalidStatus

from stacko.server.app import ACCEPT_ERROR, Server, ThrottleAcceptErrors
from stacko.server.clock import FakeClock
from stacko.server.config import ServerConfig, derived_max_connections
from stacko.server.connection import Connection

PING_PAYLOAD = b"p" * 125  # the largest control frame: 131 bytes in, a 127-byte pong out


def ping_frame() -> bytes:
    return bytes([0x89, 0x80 | len(PING_PAYLOAD)]) + b"\0\0\0\0" + PING_PAYLOAD


async def raw_client(
    port: int, rcvbuf: int = 4096
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A bare WebSocket connection with a small receive buffer (it fills at once once the
    client stops reading), upgraded and welcomed."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(
        (f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
         "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
         "Sec-WebSocket-Version: 13\r\n\r\n").encode()
    )  # fmt: skip
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), head
    writer.write(text_frame({"type": "hello", "protocol": 1, "name": "abuser"}))
    opcode, welcome = await asyncio.wait_for(read_frame(reader), 5)
    assert opcode == 1 and orjson.loads(welcome)["type"] == "welcome"
    return reader, writer


async def read_to_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Take everything the server still sends, up to its close frame, then go: the server,
    its buffer drained, reads again and sees the end at once (without this, a dropped
    client is cut by the server's close timeout, 10 s later)."""
    while (await asyncio.wait_for(read_frame(reader), 10))[0] != 8:
        pass
    writer.close()


def server_side(server: Server, name: str) -> Connection:
    return next(c for c in server.connections if c.session and c.session.name == name)


async def watch_buffer(conn: Connection, seconds: float) -> int:
    """The largest the connection's socket write buffer got while the time passed."""
    transport = conn.ws.transport
    peak = 0
    for _ in range(int(seconds / 0.01)):
        peak = max(peak, transport.get_write_buffer_size())
        if conn._closing is not None:
            break  # dropped: nothing more is written
        await asyncio.sleep(0.01)
    return peak


async def test_pings_count_toward_the_rate_limit(make_harness) -> None:
    """A client writing pings (no data frame after hello) and never reading: before, every
    ping was answered with no limit. Now the burst's worth are answered, then the fatal
    rate_limited, and no pong after it."""
    h = await make_harness(burst=40)
    reader, writer = await raw_client(h.server.port)
    writer.write(ping_frame() * 2000)
    await asyncio.sleep(0.3)
    pongs, error = 0, None
    while True:
        opcode, payload = await asyncio.wait_for(read_frame(reader), 5)
        if opcode == 10:
            assert error is None, "a pong after the fatal error"
            pongs += 1
        elif opcode == 1:
            error = orjson.loads(payload)
        elif opcode == 8:
            assert int.from_bytes(payload[:2], "big") == 1008
            break
    assert error is not None and error["code"] == "rate_limited" and error["fatal"] is True
    assert pongs == 39  # hello took the first token of the burst
    writer.close()


async def test_a_flood_after_the_fatal_error_is_not_read(make_harness) -> None:
    """Frames keep coming after rate_limited: the server stops reading them (before, it
    framed, unmasked and dropped every one of them until the close timeout)."""
    h = await make_harness(burst=40)
    _reader, writer = await raw_client(h.server.port)
    conn = server_side(h.server, "abuser")
    writer.write(text_frame({"type": "ping"}) * 5000)
    for _ in range(300):
        if conn.ws.deaf:
            break
        await asyncio.sleep(0.01)
    assert conn._closing == (1008, "rate_limited")
    assert conn.ws.deaf and not conn.ws.transport.is_reading()
    writer.transport.abort()


async def test_frames_after_the_close_are_skipped_by_their_headers(make_harness) -> None:
    """A flooder's frames that come after the server closed the connection, when nothing
    reads them any more: before, each read of them went whole through websockets' parser
    (~10 us a frame: a 256 KB read of small frames held the loop ~100 ms, bench/abuse.py
    frame_flood's p99) and into its message queue. Now they are skipped by their headers,
    counted as late frames, and past LATE_FRAMES nothing more is read."""
    h = await make_harness(burst=40)
    reader, writer = await raw_client(h.server.port)
    conn = server_side(h.server, "abuser")
    writer.write(text_frame({"type": "ping"}) * 41)  # hello took a token: the last is over
    codes = []
    while (frame := await asyncio.wait_for(read_frame(reader), 5))[0] != 8:
        codes.append(orjson.loads(frame[1]).get("code"))
    assert codes[-1] == "rate_limited" and conn.ws.discarding
    writer.write(text_frame({"type": "ping"}) * 3000)
    for _ in range(300):
        if conn.ws.deaf or conn.ws.queued:
            break
        await asyncio.sleep(0.01)
    assert conn.ws.deaf and conn.ws.queued == 0
    writer.transport.abort()


async def test_pongs_are_bounded_in_bytes_and_a_non_reader_is_not_read(make_harness) -> None:
    """Within the rate limit (burst out of the way), 4 MB of pings from a client that never
    reads: before, the server answered every one and held ~the same in pongs. Now it stops
    reading once its writes are paused, and drops the client as slow_consumer once it holds
    more than max_outbox_bytes."""
    bound = 16_384
    h = await make_harness(max_outbox_bytes=bound)
    reader, writer = await raw_client(h.server.port)
    conn = server_side(h.server, "abuser")
    writer.write(ping_frame() * 32_000)
    peak = await watch_buffer(conn, 3.0)
    # the high-water mark (32 KiB) plus at most one read's worth (256 KiB) of pongs
    assert peak <= 32_768 + 262_144, peak
    assert conn._closing == (1008, "slow_consumer")
    await read_to_close(reader, writer)


async def test_a_slow_consumer_of_large_answers_is_dropped_by_bytes(make_harness) -> None:
    """list_rooms answers of a few KB each, asked for again and again by a client that never
    reads: before, the bound was 512 frames whatever their size. Now the client is dropped
    once it holds more than max_outbox_bytes; a game in another room goes on untouched."""
    bound = 65_536
    h = await make_harness(max_outbox_bytes=bound)
    game = await h.game(SMALL)
    for i in range(20):  # public waiting rooms, each from its own client
        await h.create(await h.client(f"host{i:02d}-{'x' * 20}"), {}, public=True)
    reader, writer = await raw_client(h.server.port)
    conn = server_side(h.server, "abuser")
    # loopback's send buffer can grow to megabytes: kept small, as over a slow link
    conn.ws.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)
    # 400 requests in one read (once its writes are paused, the server reads no more, so
    # a client that asks in small bursts only gets stuck, holding at most the high-water
    # mark and the answers to one read); 400 answers of ~3 KB would be 1.2 MB
    writer.write(b"".join(text_frame({"type": "list_rooms", "id": i}) for i in range(400)))
    for _ in range(300):
        if conn._closing is not None:
            break
        await asyncio.sleep(0.01)
    assert conn._closing == (1008, "slow_consumer")
    assert conn._held == 0 and not conn.outbox  # freed at once
    assert conn.ws.transport.get_write_buffer_size() <= bound + 4096
    for _ in range(3):
        await game.move()
    for c in game.seats:
        assert not [f for f in c.frames if f["type"] == "error"]
    await read_to_close(reader, writer)


async def test_max_connections_refuses_upgrades_with_503(make_harness) -> None:
    h = await make_harness(max_connections=3, max_connections_per_ip=0)
    clients = [await h.client(f"c{i}") for i in range(3)]
    with pytest.raises(InvalidStatus) as refused:
        await Client.open(h.url, "fourth")
    assert refused.value.response.status_code == 503
    assert h.server.refused["max_connections"] == 1
    await clients[0].close()
    for _ in range(100):  # the server sees the socket end a little later
        if h.server.sockets.total < 3:
            break
        await asyncio.sleep(0.01)
    await h.client("fourth")  # room again


async def test_max_connections_per_ip_refuses_with_429_and_cuts_idle_sockets(
    make_harness,
) -> None:
    h = await make_harness(max_connections_per_ip=2)
    for i in range(2):
        await h.client(f"c{i}")
    with pytest.raises(InvalidStatus) as refused:
        await Client.open(h.url, "third")
    assert refused.value.response.status_code == 429
    assert h.server.refused["max_connections_per_ip"] == 1
    # Over the cap, ten refusals a second (one used above); the sockets beyond are closed at
    # accept, unanswered (those let through wait for a request until the handshake timeout).
    idle = [await asyncio.open_connection("127.0.0.1", h.server.port) for _ in range(30)]
    reads = [asyncio.ensure_future(reader.read()) for reader, _ in idle]
    done, pending = await asyncio.wait(reads, timeout=2)
    assert done and all(r.result() == b"" for r in done)  # closed unanswered
    # the refusals left (9, and 10 more a second while they were opened) wait for a request
    assert len(pending) < len(idle)
    for r in pending:
        r.cancel()
    for _, writer in idle:
        writer.close()


async def test_an_address_opening_connections_in_a_loop_is_refused(make_harness) -> None:
    """Each connection closed at once (a reconnect loop: rate_limited, reconnect, flood):
    before, every one cost a handshake, whatever the rate. Now an address gets its burst
    (max_connections_per_ip), then new_connections_per_ip_per_s, then 429."""
    h = await make_harness(max_connections_per_ip=4, new_connections_per_ip_per_s=0.1)
    for i in range(4):
        await (await h.client(f"c{i}")).close()
    for _ in range(100):
        if not h.server.sockets.by_ip:
            break
        await asyncio.sleep(0.01)
    assert not h.server.sockets.admitted  # nobody holds a connection any more
    with pytest.raises(InvalidStatus) as refused:
        await Client.open(h.url, "fifth")
    assert refused.value.response.status_code == 429


def test_the_default_max_connections_stays_below_the_open_files_limit() -> None:
    assert derived_max_connections(20_000) == 18_000
    assert derived_max_connections(1024) == 922
    assert ServerConfig().max_connections == 0  # derived at start
    assert 0 < derived_max_connections(100) < 100


async def test_accept_out_of_descriptors_is_logged_once_per_interval(harness, caplog) -> None:
    """asyncio's own path (the loop's default exception handler), 1,000 times in a burst:
    one line, with its traceback; after the interval one more that counts the rest."""
    loop = asyncio.get_running_loop()
    now = [0.0]
    throttle = next(f for f in logging.getLogger("asyncio").filters
                    if isinstance(f, ThrottleAcceptErrors))  # fmt: skip
    throttle._now = lambda: now[0]
    throttle._last = None
    try:
        err = OSError(24, "Too many open files")
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            for _ in range(1000):
                loop.call_exception_handler({"message": ACCEPT_ERROR, "exception": err})
            now[0] = 11.0
            for _ in range(10):
                loop.call_exception_handler({"message": ACCEPT_ERROR, "exception": err})
        lines = [r for r in caplog.records if r.name == "asyncio"]
        assert len(lines) == 2
        assert lines[0].exc_info is not None
        assert "999 more in the last 11 s" in lines[1].getMessage() and not lines[1].exc_info
    finally:
        throttle._now = __import__("time").monotonic
        throttle._last = None


class SteppedClock(FakeClock):
    """A FakeClock whose wall clock can jump: ``time()`` moves with ``offset``, timers and
    ``now`` do not (a server that reads ``time()`` for durations sees the step)."""

    def __init__(self) -> None:
        super().__init__()
        self.offset = 0.0

    def time(self) -> float:
        return self.now + self.offset


async def stepped_harness() -> Harness:
    clock = SteppedClock()
    deals = random.Random(5)
    server = Server(
        ServerConfig(port=0, rate_per_second=2.0, burst=10), clock=clock,
        rng_factory=lambda: random.Random(deals.getrandbits(64)), bots=({}, None),
    )  # fmt: skip
    await server.start()
    return Harness(server, clock, 5)


async def test_a_wall_clock_step_back_changes_no_bucket_and_no_timer() -> None:
    """The wall clock steps back an hour mid-game. Before, the next frame of every client
    was the fatal rate_limited (the bucket read time.time()), the move timer booked after
    the step fired at once, and so did the grace period of a player who dropped."""
    h = await stepped_harness()
    clock = h.clock
    assert isinstance(clock, SteppedClock)
    try:
        game = await h.game({**SMALL, "clock_ms": 5000})
        clock.offset = -3600.0
        clock.advance(1.0)
        reply = await game.move()  # no rate_limited
        assert reply["deadline_ms"] == int((clock.time() + 5) * 1000)  # the wall, as shown
        assert reply["clock_ms"] == 5000
        seq = game.room.seq
        h.advance(4.9, game.code)
        assert game.room.seq == seq  # the move clock did not fire early
        h.advance(0.2, game.code)
        assert game.room.seq == seq + 1  # and fired on time
        await game.settle(seq + 1)
        for c in game.everyone:
            await c.barrier()  # and pings (frames) still pass the rate limit
        resigned = await game.seats[0].call("resign", room=game.code)  # its clock stops
        h.snap(game.code)
        await game.settle(resigned["seq"], skip=game.seats[0])
        other = await h.game(SMALL, names=("carol", "dave"))
        clock.offset -= 3600.0
        await other.seats[1].close()
        update = await other.seats[0].expect("room", room=other.code)
        assert update["forfeit_ms"] == {"1": 60_000}
        clock.advance(59.0)
        assert other.room.players[1] is not None  # the grace period did not end early
        clock.advance(2.0)
        h.snap(other.code)
        final = await other.seats[0].expect("state", room=other.code)
        assert final["view"]["outcome"]["termination"] == "abandoned"
        for c in (*game.everyone, other.seats[0]):
            assert not [f for f in c.frames if f["type"] == "error"]
    finally:
        await h.stop()
