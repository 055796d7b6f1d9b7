"""The transport shortcuts keep the WebSocket guarantees: frames cut by the server's own
framer and frames websockets parses are handled in the order they were sent, whichever path
they take, bad frames still close with the right code (``server/wsconn.py``), and one
connection closing never costs another its frames (``server/batch.py``). The first three
tests reproduce defects found by review."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from stacko_wire import SMALL, raw_ws, read_frame, text_frame
from websockets.client import ClientProtocol
from websockets.frames import Frame
from websockets.protocol import State
from websockets.uri import parse_uri

from stacko.server.wsconn import DirectServerConnection


async def test_a_queued_message_is_not_overtaken_by_later_whole_ones(harness) -> None:
    """A fragmented message takes websockets' queue; whole messages sent a few loop turns
    later, while it is still on its way to the handler, must queue behind it."""
    for turns in range(5):
        c = await harness.client(f"p{turns}")
        proto = c.ws.protocol
        proto.send_text(b'{"type": "ping", ', fin=False)
        proto.send_continuation(b'"id": 43}', fin=True)
        c.ws.send_data()
        for _ in range(turns):
            await asyncio.sleep(0)
        proto.send_text(b'{"type": "ping", "id": 44}')
        c.ws.send_data()
        got = [(await c.expect("pong"))["id"] for _ in range(2)]
        assert got == [43, 44], f"{turns} loop turns apart"


async def test_a_frame_pipelined_with_the_upgrade_request(harness) -> None:
    """hello in the same TCP write as the HTTP upgrade: handled, and the order of what
    follows is still kept."""
    proto = ClientProtocol(parse_uri(harness.url))
    proto.send_request(proto.connect())
    proto.state = State.OPEN  # only to frame the message before the handshake's answer
    proto.send_text(b'{"type": "hello", "protocol": 1, "name": "early", "id": 1}')
    proto.state = State.CONNECTING
    host, port = harness.url.split("//")[1].strip("/").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"".join(proto.data_to_send()))

    async def frames() -> Any:
        while True:
            data = await asyncio.wait_for(reader.read(65536), 5)
            assert data, "the server closed the connection"
            proto.receive_data(data)
            for event in proto.events_received():
                if isinstance(event, Frame):
                    yield orjson.loads(event.data)

    received = frames()
    try:
        assert (await anext(received))["type"] == "welcome"
        conn = next(iter(harness.server.connections)).ws
        assert isinstance(conn, DirectServerConnection) and conn.queued == 0
        for rid in (44, 45, 46):
            proto.send_text(orjson.dumps({"type": "ping", "id": rid}))
        writer.write(b"".join(proto.data_to_send()))
        assert [(await anext(received))["id"] for _ in range(3)] == [44, 45, 46]
    finally:
        writer.close()


async def test_a_peer_closing_in_the_same_turn_costs_no_one_else_a_frame(harness) -> None:
    """In one loop turn: a third client pings, the mover moves, and the opponent closes.
    websockets answers the close by itself (and half-closes that socket); the frames held
    for the others in that turn must still go out."""
    loop = asyncio.get_running_loop()
    errors: list[str] = []
    loop.set_exception_handler(lambda _, ctx: errors.append(str(ctx.get("message"))))
    try:
        game = await harness.game(SMALL)
        bystander = await harness.client("bystander")
        mover = game.seats[game.engine.to_move]
        opponent = game.seats[1 - game.engine.to_move]
        mine = mover.latest[game.code]
        ping = {"type": "ping", "id": 7}
        move = {"type": "move", "room": game.code, "ply": mine["view"]["ply"],
                "move": mine["legal"][0], "id": 8}  # fmt: skip
        for client, message in ((bystander, ping), (mover, move)):
            client.ws.protocol.send_text(orjson.dumps(message))
            client.ws.send_data()
        opponent.ws.protocol.send_close(1000, "bye")
        opponent.ws.send_data()
        assert (await bystander.expect("pong"))["id"] == 7
        reply = await mover.expect(id=8)
        assert reply["type"] == "state"
        harness.snap(game.code)
        assert errors == []
    finally:
        loop.set_exception_handler(None)


MASKS = [bytes([7, 99, 200, 13]), bytes([255, 0, 128, 1]), b"\0\0\0\0"]


async def hello(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await raw_ws(port)
    writer.write(text_frame({"type": "hello", "protocol": 1, "name": "raw"}, MASKS[0]))
    opcode, welcome = await read_frame(reader)
    assert opcode == 1 and orjson.loads(welcome)["type"] == "welcome"
    return reader, writer


async def test_frames_cut_anywhere_and_mixed_with_control_frames(harness) -> None:
    """Masked frames of both sizes (7- and 16-bit length) split at every byte, a ping and a
    binary frame in between: answered in order, the ping with a pong."""
    reader, writer = await hello(harness.server.port)
    pings = [{"type": "ping", "id": i, **({"id": "x" * 60} if i == 3 else {})} for i in range(6)]
    stream = b"".join(text_frame(p, MASKS[i % 3]) for i, p in enumerate(pings[:3]))
    stream += bytes([0x89, 0x80 | 4]) + MASKS[1] + bytes(b ^ MASKS[1][i] for i, b in
                                                         enumerate(b"beat"))  # fmt: skip
    stream += text_frame(b"\x01\x02", MASKS[2], first=0x82)  # binary: refused, not fatal
    big = {"type": "ping", "id": 99, "pad": "y" * 200}  # > 125 bytes: a 16-bit length
    stream += text_frame(big, MASKS[0]) + text_frame(pings[5], MASKS[1])
    for i in range(len(stream)):
        writer.write(stream[i : i + 1])
        await writer.drain()
        if i % 7 == 0:
            await asyncio.sleep(0.001)  # separate TCP reads
    got = []
    while len(got) < 7:
        opcode, payload = await asyncio.wait_for(read_frame(reader), 5)
        got.append((opcode, payload if opcode == 10 else orjson.loads(payload)))
    assert [g[1]["id"] for g in got[:3]] == [0, 1, 2]
    assert got[3] == (10, b"beat")
    assert got[4][1]["code"] == "binary_frame"
    assert got[5][1]["code"] == "bad_message" and got[5][1]["id"] == 99  # the extra "pad"
    assert got[6][1] == {"type": "pong", "id": 5}
    writer.close()


async def close_code(reader: asyncio.StreamReader) -> int:
    while True:
        opcode, payload = await asyncio.wait_for(read_frame(reader), 5)
        if opcode == 8:
            return int.from_bytes(payload[:2], "big")


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (bytes([0x81, 0xFF]) + (2**40).to_bytes(8, "big") + MASKS[0], 1009),  # declared huge
        (bytes([0x81, 5]) + b"hello", 1002),  # not masked
        (text_frame({"type": "ping"}, MASKS[0], first=0xC1), 1002),  # RSV1 without extension
        (text_frame(b'"\xff\xfe"', MASKS[1]), 1007),  # not UTF-8
    ],
)
async def test_bad_frames_close_with_websockets_codes(harness, frame: bytes, code: int) -> None:
    reader, writer = await hello(harness.server.port)
    writer.write(text_frame({"type": "ping", "id": 1}, MASKS[1]) + frame)
    opcode, pong = await read_frame(reader)
    assert opcode == 1
    assert orjson.loads(pong) == {"type": "pong", "id": 1}
    assert await close_code(reader) == code
    writer.close()


@pytest.mark.parametrize("size", [0, 1, 125, 126, 1000, 65535, 65536, 70000])
def test_text_frames_are_framed_as_websockets_frames_them(size: int) -> None:
    from websockets.server import ServerProtocol

    from stacko.server.batch import text_frame

    protocol = ServerProtocol()
    protocol.state = State.OPEN
    payload = bytes(range(32, 127)) * (size // 95) + b"x" * (size % 95)
    protocol.send_text(payload)
    assert text_frame(payload) == b"".join(protocol.data_to_send())
