"""The server's own frame cutting (``DirectServerConnection.data_received``) against
websockets' parser: every byte stream below, fed whole and one byte at a time, must get the
same answers either way. Each case ends with a sentinel ping, so a case that keeps the
connection open ends at its pong and one that closes ends at the close; no timeouts.
(Adapted from a review that ran these probes, and found the two closing-time defects tested
at the end.)"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from stacko_wire import raw_ws, read_frame
from websockets.asyncio.server import ServerConnection

from stacko.server.wsconn import DirectServerConnection

MASK = bytes([7, 99, 200, 13])
SENTINEL = 999


def frame(payload: bytes, b0: int = 0x81, form: int | None = None, masked: bool = True) -> bytes:
    n = len(payload)
    m = 0x80 if masked else 0
    if form is None:
        form = 7 if n < 126 else 16 if n < 65536 else 64
    if form == 7:
        head = bytes([b0, m | n])
    elif form == 16:
        head = bytes([b0, m | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([b0, m | 127]) + n.to_bytes(8, "big")
    if not masked:
        return head + payload
    return head + MASK + bytes(b ^ MASK[i % 4] for i, b in enumerate(payload))


def ping(i: int) -> bytes:
    return orjson.dumps({"type": "ping", "id": i})


HELLO = frame(orjson.dumps({"type": "hello", "protocol": 1, "name": "raw"}))
CLOSE1000 = frame((1000).to_bytes(2, "big") + b"bye", b0=0x88)
LIMIT = 65536  # hard_frame_bytes with the default max_frame_bytes

CASES = {
    "zero_length_text": frame(b"") + frame(ping(1)),
    "nonminimal_16": frame(ping(1), form=16) + frame(ping(2)),
    "nonminimal_64": frame(ping(1), form=64) + frame(ping(2)),
    "top_bit_64": bytes([0x81, 0xFF]) + (2**63 + 5).to_bytes(8, "big") + MASK + b"x" * 5,
    "ping_126": frame(b"p" * 126, b0=0x89) + frame(ping(1)),
    "ping_fragmented": frame(b"p", b0=0x09) + frame(ping(1)),
    "close_short": frame(b"\x03", b0=0x88) + frame(ping(1)),
    "close_bad_code": frame((999).to_bytes(2, "big"), b0=0x88) + frame(ping(1)),
    "at_limit": frame(b" " * (LIMIT - len(ping(1))) + ping(1)) + frame(ping(2)),
    "over_limit": frame(b" " * (LIMIT + 1 - len(ping(1))) + ping(1)) + frame(ping(2)),
    "utf8_split_across_fragments": frame(b'{"type":"ping","id":"\xc3', b0=0x01)
    + frame(b'\xa9"}', b0=0x80)
    + frame(ping(2)),
    "ping_between_fragments": frame(b'{"type":"ping",', b0=0x01)
    + frame(b"hb", b0=0x89)
    + frame(b'"id":3}', b0=0x80)
    + frame(ping(4)),
    "bad_utf8": frame(b'"\xff"') + frame(ping(1)),
    "surrogate_utf8": frame(b'"\xed\xa0\x80"') + frame(ping(1)),
    "rsv2": frame(ping(1), b0=0xA1) + frame(ping(2)),
    "reserved_opcode": frame(ping(1), b0=0x83) + frame(ping(2)),
    "unmasked": frame(ping(1), masked=False) + frame(ping(2)),
    "text_during_fragment": frame(b'{"type":', b0=0x01) + frame(ping(7)),
    "continuation_without_start": frame(ping(1), b0=0x80) + frame(ping(2)),
    "binary_then_text": frame(b"\x00", b0=0x82) + frame(ping(1)),
    "many_small": b"".join(frame(ping(i)) for i in range(30)),
}


@pytest.fixture(params=["framer", "websockets"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "websockets":
        monkeypatch.setattr(DirectServerConnection, "data_received", ServerConnection.data_received)
    return str(request.param)


async def open_raw(h: Any) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, Any]:
    before = set(h.server.connections)
    reader, writer = await raw_ws(h.server.port)
    writer.write(HELLO)
    opcode, welcome = await read_frame(reader)
    assert opcode == 1 and orjson.loads(welcome)["type"] == "welcome"
    (conn,) = set(h.server.connections) - before
    return reader, writer, conn


async def answers(reader: asyncio.StreamReader) -> list[Any]:
    """Frames until the sentinel's pong, a close, or the end of the stream."""
    out: list[Any] = []
    async with asyncio.timeout(10):
        while True:
            try:
                opcode, payload = await read_frame(reader)
            except asyncio.IncompleteReadError:
                return [*out, "EOF"]
            if opcode == 8:
                return [*out, ("close", int.from_bytes(payload[:2], "big"))]
            if opcode != 1:
                out.append((opcode, bytes(payload)))
                continue
            d = orjson.loads(payload)
            if d.get("id") == SENTINEL:
                return out
            out.append((d["type"], d.get("id"), d.get("code")))


async def feed(conn: Any, data: bytes, chunk: int) -> None:
    """Straight into the connection's data_received, ``chunk`` bytes at a time."""
    for i in range(0, len(data), chunk):
        conn.ws.data_received(data[i : i + chunk])
        if i % 64 == 0:
            await asyncio.sleep(0)


@pytest.mark.parametrize("chunk", [1, 1 << 30])
@pytest.mark.parametrize("case", sorted(CASES))
async def test_same_answers_as_websockets(
    harness, monkeypatch: pytest.MonkeyPatch, case: str, chunk: int
) -> None:
    got: dict[str, list[Any]] = {}
    for mode in ("framer", "websockets"):
        with monkeypatch.context() as patch:
            if mode == "websockets":
                patch.setattr(
                    DirectServerConnection, "data_received", ServerConnection.data_received
                )
            reader, writer, conn = await open_raw(harness)
            await feed(conn, CASES[case] + frame(ping(SENTINEL)), chunk)
            got[mode] = await answers(reader)
            writer.close()
    assert got["framer"] == got["websockets"], f"{case}, {chunk}-byte reads"


async def test_a_frame_half_read_when_the_server_closes(harness, mode: str) -> None:
    """The server closes while a client frame is half received: websockets must get the
    held half too, or it parses from the middle of the frame and misses the client's close."""
    reader, writer, conn = await open_raw(harness)
    whole = frame(orjson.dumps({"type": "ping", "id": 5, "pad": "z" * 3000}))
    writer.write(whole[:1500])
    await writer.drain()
    await asyncio.sleep(0.05)
    conn.close(1001, "going_away")
    async with asyncio.timeout(5):
        while (await read_frame(reader))[0] != 8:
            pass
    writer.write(whole[1500:] + CLOSE1000)
    await writer.drain()
    async with asyncio.timeout(5):
        await reader.read()  # the server ends the TCP connection
    close = conn.ws.protocol.close_rcvd
    assert close is not None and close.code == 1000
    writer.close()


@pytest.mark.parametrize(
    "header",
    [
        bytes([0x81, 126]) + (60000).to_bytes(2, "big"),  # unmasked
        bytes([0x83, 0xFE]) + (60000).to_bytes(2, "big") + MASK,  # reserved opcode
    ],
)
async def test_a_frame_wrong_from_its_header_closes_at_once(harness, mode: str, header: bytes):
    """1002 as soon as the header is in, without waiting for the 60,000 bytes announced, as
    websockets does. (RSV bits are not here: websockets too checks them on the whole frame.)"""
    reader, writer, _ = await open_raw(harness)
    writer.write(header)
    async with asyncio.timeout(5):
        while (frame_ := await read_frame(reader))[0] != 8:
            pass
    assert int.from_bytes(frame_[1][:2], "big") == 1002
    writer.close()
