"""The server: one port for the WebSocket protocol and a few plain HTTP paths.

    async with Server(ServerConfig(port=0)) as server:   # port 0: any free port
        print(server.url)                                # ws://127.0.0.1:PORT/
        await server.wait_closed()

Clean shutdown (``shutdown``): every client gets a close frame 1001 "server shutting down".
"""

from __future__ import annotations

import asyncio
import http
import logging
import random
from collections.abc import Callable
from types import TracebackType
from typing import Any

from websockets.asyncio.server import Server as WsServer
from websockets.asyncio.server import ServerConnection, serve
from websockets.http11 import Request, Response

from server import static
from server.batch import WriteBatch
from server.clock import Clock, SystemClock
from server.config import ServerConfig
from server.connection import CLOSE_GOING_AWAY, Connection
from server.hub import BotFactory, Hub
from server.metrics import CONTENT_TYPE, Metrics
from server.rng import SystemShuffle
from server.wsconn import DirectServerConnection

log = logging.getLogger("stacko.server")

SHUTDOWN_REASON = "server shutting down"


def _default_bots() -> tuple[dict[str, list[str]], BotFactory | None]:
    """The built-in bots, if the bots package is importable (it ships with the server)."""
    try:
        from bots.registry import (  # type: ignore[import-not-found,unused-ignore]
            available,
            make_bot,
        )
    except ImportError:
        return {}, None
    return available(), make_bot


class Server:
    def __init__(
        self,
        config: ServerConfig | None = None,
        *,
        clock: Clock | None = None,
        rng_factory: Callable[[], random.Random] = SystemShuffle,
        bots: tuple[dict[str, list[str]], BotFactory | None] | None = None,
    ) -> None:
        self.config = config or ServerConfig()
        self.clock = clock or SystemClock()
        levels, factory = bots if bots is not None else _default_bots()
        self.hub = Hub(
            self.config, self.clock, rng_factory=rng_factory, schedule_soon=self._soon,
            bots=levels, bot_factory=factory,
        )  # fmt: skip
        self.connections: set[Connection] = set()
        self.batch = WriteBatch()
        self.metrics = Metrics(
            connections=lambda: len(self.connections),
            rooms=lambda: (room.status for room in self.hub.rooms.values()),
            sessions=lambda: len(self.hub.sessions),
        )
        self._ws: WsServer | None = None
        self.port = 0

    def _soon(self, callback: Callable[[], None]) -> None:
        asyncio.get_running_loop().call_soon(callback)

    @property
    def url(self) -> str:
        return f"ws://{self.config.host}:{self.port}/"

    async def start(self) -> None:
        cfg = self.config
        self._ws = await serve(
            self._handle, cfg.host, cfg.port,
            max_size=cfg.hard_frame_bytes,
            compression="deflate" if cfg.compression else None,
            ping_interval=cfg.ping_interval_s, ping_timeout=cfg.ping_timeout_s,
            max_queue=16, write_limit=32_768,
            process_request=self._http,
            server_header="stacko", create_connection=DirectServerConnection,
        )  # fmt: skip
        self.port = self._ws.sockets[0].getsockname()[1] if self._ws.sockets else cfg.port
        log.info("stacko server listening on %s", self.url)

    async def shutdown(self) -> None:
        for conn in list(self.connections):
            conn.close(CLOSE_GOING_AWAY, SHUTDOWN_REASON)
        if self._ws is not None:
            await asyncio.sleep(0)  # let the writers flush their close frames
            self._ws.close(close_connections=True)
            await self._ws.wait_closed()

    async def wait_closed(self) -> None:
        if self._ws is not None:
            await self._ws.wait_closed()

    async def __aenter__(self) -> Server:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()

    async def _handle(self, ws: ServerConnection) -> None:
        assert isinstance(ws, DirectServerConnection)  # serve(create_connection=...) above
        conn = Connection(ws, self.hub, self.config, self.clock, self.metrics, self.batch)
        self.connections.add(conn)
        try:
            await conn.run()
        finally:
            self.connections.discard(conn)

    def departures(self) -> int:
        """Connections ended (every socket of the process: a health check or a failed
        handshake leaves reference cycles too), rooms closed and sessions expired: what the
        ``GcPacer`` needs to tell growth that may hide garbage from live data."""
        return DirectServerConnection.lost + self.hub.closed

    def _http(self, ws: ServerConnection, request: Request) -> Response | None:
        """Plain HTTP on the same port; WebSocket upgrades pass through."""
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return None
        path = request.path.split("?", 1)[0]
        if path == "/healthz":
            return ws.respond(http.HTTPStatus.OK, "ok\n")
        if path == "/metrics":
            response = ws.respond(http.HTTPStatus.OK, self.metrics.render().decode())
            del response.headers["Content-Type"]
            response.headers["Content-Type"] = CONTENT_TYPE
            return response
        page = static.serve(ws, request)  # the web client: / and its files
        if page is not None:
            return page
        return ws.respond(http.HTTPStatus.NOT_FOUND, "not found\n")

    def stats(self) -> dict[str, Any]:
        return {"connections": len(self.connections), "rooms": len(self.hub.rooms)}
