"""``/metrics`` and ``/healthz`` over real sockets: a short game, a bad frame, then a scrape."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect

from stacko.server.app import Server
from stacko.server.config import ServerConfig
from stacko.server.metrics import MOVE_BUCKETS, Metrics, error_code


async def http_get(port: int, path: str) -> tuple[int, dict[str, str], str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    raw = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, body.decode()


def samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


async def recv(ws: ClientConnection, kind: str) -> dict[str, Any]:
    """The next frame of type ``kind`` (other frames, e.g. ``room``, are skipped)."""
    while True:
        frame = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
        if frame["type"] == kind:
            return frame  # type: ignore[no-any-return]


async def hello(ws: ClientConnection, name: str) -> None:
    await ws.send(orjson.dumps({"type": "hello", "protocol": 1, "name": name}).decode())
    await recv(ws, "welcome")


async def play_short_game(url: str) -> int:
    """Two players, random legal moves until the game is over; returns the moves applied."""
    rng = random.Random(3)
    async with connect(url, compression=None) as a, connect(url, compression=None) as b:
        await hello(a, "alice")
        await hello(b, "bob")
        await a.send(
            orjson.dumps(
                {"type": "create_room", "options": {"turn_cap": 2, "rounds": 1}, "id": 1}
            ).decode()
        )
        room = (await recv(a, "joined"))["room"]
        await b.send(orjson.dumps({"type": "join", "room": room}).decode())
        await recv(b, "joined")
        states = {a: await recv(a, "state"), b: await recv(b, "state")}
        moves = 0
        while states[a]["view"]["outcome"] is None:
            mover = a if states[a]["legal"] else b
            state = states[mover]
            move = rng.choice(state["legal"])
            moves += 1
            await mover.send(
                orjson.dumps(
                    {"type": "move", "room": room, "ply": state["view"]["ply"], "move": move,
                     "id": 100 + moves}
                ).decode()
            )  # fmt: skip
            states = {a: await recv(a, "state"), b: await recv(b, "state")}
            assert states[mover]["id"] == 100 + moves
        # A stale move (the game is over: refused, not applied) and a frame that is not JSON.
        await a.send(orjson.dumps({"type": "move", "room": room, "ply": 0,
                                   "move": {"action": "draw"}}).decode())  # fmt: skip
        assert (await recv(a, "error"))["code"] == "game_over"
        await a.send("this is not json")
        assert (await recv(a, "error"))["code"] == "bad_json"
        await a.send(orjson.dumps({"type": "ping", "id": 9}).decode())
        await recv(a, "pong")  # everything before it has been handled
        return moves


async def test_metrics_after_a_short_game() -> None:
    async with Server(ServerConfig(port=0)) as server:
        moves = await play_short_game(server.url)
        assert moves > 0
        status, headers, body = await http_get(server.port, "/metrics")
        assert status == 200
        assert headers["content-type"].startswith("text/plain; version=0.0.4")
        m = samples(body)
        assert m["stacko_moves_applied_total"] == moves
        assert m["stacko_move_processing_seconds_count"] == moves
        assert m['stacko_move_processing_seconds_bucket{le="+Inf"}'] == moves
        assert m["stacko_move_processing_seconds_sum"] > 0
        # hello x2, create, join, the moves, the refused move, the bad frame, ping
        assert m["stacko_frames_in_total"] == 2 + 1 + 1 + moves + 1 + 1 + 1
        assert m["stacko_frames_out_total"] > 2 * moves
        assert m['stacko_errors_total{code="bad_json"}'] == 1
        assert m['stacko_errors_total{code="game_over"}'] == 1
        assert m['stacko_rooms{status="finished"}'] == 1
        assert m['stacko_rooms{status="playing"}'] == 0
        assert m["stacko_sessions"] == 2

        status, _, body = await http_get(server.port, "/healthz")
        assert (status, body) == (200, "ok\n")


async def test_each_server_counts_its_own() -> None:
    async with Server(ServerConfig(port=0)) as one, Server(ServerConfig(port=0)) as two:
        moves = await play_short_game(one.url)
        first = samples((await http_get(one.port, "/metrics"))[2])
        second = samples((await http_get(two.port, "/metrics"))[2])
        assert first["stacko_moves_applied_total"] == moves
        assert second["stacko_moves_applied_total"] == 0
        assert second["stacko_frames_in_total"] == 0
        assert not any(key.startswith("stacko_errors_total{") for key in second)


async def test_connections_gauge_counts_open_sockets() -> None:
    async with (
        Server(ServerConfig(port=0)) as server,
        connect(server.url, compression=None) as ws,
    ):
        await hello(ws, "carol")
        m = samples((await http_get(server.port, "/metrics"))[2])
        assert m["stacko_connections"] == 1


def test_counters_without_a_server() -> None:
    metrics = Metrics()
    metrics.sent(b'{"type":"error","code":"rate_limited","message":"x"}')
    metrics.sent(b'{"type":"state","room":"ABCDEF"}')
    metrics.move_applied(MOVE_BUCKETS[0] / 2)
    metrics.move_applied(10.0)  # beyond the last bound: only +Inf holds it
    m = samples(metrics.render().decode())
    assert m["stacko_frames_out_total"] == 2
    assert m['stacko_errors_total{code="rate_limited"}'] == 1
    assert m["stacko_moves_applied_total"] == 2
    first = f'stacko_move_processing_seconds_bucket{{le="{MOVE_BUCKETS[0]!r}"}}'
    assert m[first] == 1
    assert m['stacko_move_processing_seconds_bucket{le="+Inf"}'] == 2
    assert error_code(b'{"type":"error","code":"too_big"}') == "too_big"
    assert error_code(b'{"type":"pong","id":null}') is None
