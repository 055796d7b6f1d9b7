"""The transport shortcuts keep the WebSocket guarantees: messages are handled in the order
they were sent whichever path they take (``server/wsconn.py``), and one connection closing
never costs another its frames (``server/batch.py``). Found by review, each first reproduced
against a real server."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from stacko_wire import SMALL
from websockets.client import ClientProtocol
from websockets.frames import Frame
from websockets.protocol import State
from websockets.uri import parse_uri

from server.wsconn import DirectServerConnection


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
