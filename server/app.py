"""The server: one port for the WebSocket protocol and a few plain HTTP paths.

    async with Server(ServerConfig(port=0)) as server:   # port 0: any free port
        print(server.url)                                # ws://127.0.0.1:PORT/
        await server.wait_closed()

Clean shutdown (``shutdown``): every client gets a close frame 1001 "server shutting down",
or, with a store (``restart=True``), 1012 "service restart" once everything is committed.
A ``Server`` made without ``store=`` keeps nothing (``stacko-server`` opens the store that
``--database`` names and passes it in).
"""

from __future__ import annotations

import asyncio
import http
import logging
import random
import resource
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from websockets.asyncio.server import Server as WsServer
from websockets.asyncio.server import ServerConnection, serve
from websockets.http11 import Request, Response

from stacko.server import players, records, recordworker, static
from stacko.server.accountlink import AccountLink
from stacko.server.accounts import Accounts
from stacko.server.apilimit import ApiLimit, too_many
from stacko.server.batch import WriteBatch
from stacko.server.botpool import PoolThinker, acquire, default_workers, release, shared_pool
from stacko.server.clock import Clock, SystemClock
from stacko.server.config import ServerConfig, derived_max_connections, redacted_url
from stacko.server.connection import CLOSE_GOING_AWAY, CLOSE_INTERNAL, Connection
from stacko.server.forwarded import TrustedProxies
from stacko.server.hub import BotFactory, Hub
from stacko.server.metrics import CONTENT_TYPE, Metrics
from stacko.server.ratings import Ratings
from stacko.server.rng import system_shuffle
from stacko.server.store.base import Fenced, Store
from stacko.server.store.metrics import StoreCollector
from stacko.server.store.recorder import Recorder, recover
from stacko.server.wsconn import DirectServerConnection, SocketCount

log = logging.getLogger("stacko.server")

SHUTDOWN_REASON = "server shutting down"
CLOSE_SERVICE_RESTART = 1012
RESTART_REASON = "service restart"
FENCED_REASON = "fenced"
"""1012 too: another node took this node's games over (``server.cluster.takeover``)."""

ACCEPT_ERROR = "socket.accept() out of system resource"


class ThrottleAcceptErrors(logging.Filter):
    """asyncio logs ``ACCEPT_ERROR`` with a traceback each time ``accept()`` fails for want
    of descriptors, and retries every second per listening socket, and again at once when a
    descriptor is freed: thousands of lines a second once the process is out of them. This
    lets one through per ``interval`` seconds, saying how many it held back, with the
    traceback only the first time."""

    def __init__(self, interval: float = 10.0, now: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval = interval
        self._now = now
        self._last: float | None = None
        self.held_back = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(ACCEPT_ERROR):
            return True
        now = self._now()
        if self._last is not None and now - self._last < self.interval:
            self.held_back += 1
            return False
        if self._last is not None:
            record.msg = (
                f"{ACCEPT_ERROR} ({self.held_back} more in the last "
                f"{now - self._last:.0f} s; lower --max-connections or raise the open-files "
                "limit)"
            )
            record.args = ()
            record.exc_info = None
            record.exc_text = None
        self._last = now
        self.held_back = 0
        return True


def throttle_accept_errors() -> ThrottleAcceptErrors:
    """Install the filter on asyncio's logger once per process; returns it."""
    logger = logging.getLogger("asyncio")
    for f in logger.filters:
        if isinstance(f, ThrottleAcceptErrors):
            return f
    made = ThrottleAcceptErrors()
    logger.addFilter(made)
    return made


def _default_bots() -> tuple[dict[str, list[str]], BotFactory | None]:
    """The built-in bots, if the bots package is importable (it ships with the server)."""
    try:
        from stacko.bots.registry import (  # type: ignore[import-not-found,unused-ignore]
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
        rng_factory: Callable[[], random.Random] = system_shuffle,
        bots: tuple[dict[str, list[str]], BotFactory | None] | None = None,
        store: Store | None = None,
    ) -> None:
        self.config = config or ServerConfig()
        self.clock = clock or SystemClock()
        levels, factory = bots if bots is not None else _default_bots()
        self.bot_pool: PoolThinker | None = None
        """Where bots think (``server.botpool``): shared with the other servers of the
        process, its workers started (in a thread) by the first server's ``start``; ``None`` with
        ``bot_workers=0`` (on the loop) or without bots."""
        self._pool_held = False
        if factory is not None and self.config.bot_workers != 0:
            self.bot_pool = shared_pool(default_workers(self.config.bot_workers))
        self.hub = Hub(
            self.config, self.clock, rng_factory=rng_factory, schedule_soon=self._soon,
            bots=levels, bot_factory=factory, thinker=self.bot_pool,
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
        self.store = store
        if store is not None:
            store.gate.batch = self.batch
        self.restored = 0
        """Games in progress rebuilt from the store at start."""
        self.record_cache = records.RecordCache(self.config.record_cache_bytes)
        """Built answers of ``/api/games/{id}`` (``--record-cache-bytes``)."""
        self.record_worker = recordworker.WORKER
        """Where they are built (``server.recordworker``: held from ``start`` to ``shutdown``)."""
        self._worker_held = False
        self.failure: asyncio.Future[BaseException] | None = None
        """Resolves if the store fails: the process must stop (``__main__`` exits 1)."""
        self.accounts: Accounts | None = None
        self.ratings: Ratings | None = None
        self.cluster: Any = None
        """The ``server.cluster.node.ClusterNode`` with ``redis_url``; made at ``start``."""
        if store is not None:
            self.hub._hooks.recorder = Recorder(store, self.clock)
            self._link_accounts(store)
            store.on_failure = self._store_failed
            self.metrics.registry.register(StoreCollector(store))
        self.proxies = TrustedProxies(self.config.forwarded_allow_ips)
        self.sockets = SocketCount(
            self.config.max_connections_per_ip, self.config.new_connections_per_ip_per_s,
            self.proxies,
        )  # fmt: skip
        self.api_limit = ApiLimit(
            self.config.api_rate_per_ip, self.config.api_burst_per_ip, self.clock.monotonic
        )
        self.max_connections = self.config.max_connections or derived_max_connections(
            resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        )
        """Open sockets above which upgrades are refused (503)."""
        self.refused = {"max_connections": 0, "max_connections_per_ip": 0}

    def _link_accounts(self, store: Store) -> None:
        """Accounts, ratings and challenges (issue 17): they live in the store."""
        cfg = self.config
        burst = max(1, int(cfg.registrations_per_hour))
        self.accounts = Accounts(
            store, register_per_hour=cfg.registrations_per_hour, register_burst=burst
        )
        self.ratings = Ratings(store, self.accounts, cfg.rated_pair_per_day)
        self.hub.accounts = AccountLink(
            self.hub, self.accounts, self.ratings, cfg.challenge_timeout_s
        )
        recorder = self.hub._hooks.recorder
        assert isinstance(recorder, Recorder)
        recorder.on_finish = self.ratings.finished

    def _soon(self, callback: Callable[[], None]) -> None:
        asyncio.get_running_loop().call_soon(callback)

    @property
    def url(self) -> str:
        return f"ws://{self.config.host}:{self.port}/"

    @property
    def http_url(self) -> str:
        """The address to open in a browser (the web client); a wildcard host is this
        machine's loopback."""
        host = self.config.host
        host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(host, host)
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}/"

    def _connection(self, *args: Any, **kwargs: Any) -> DirectServerConnection:
        return DirectServerConnection(*args, sockets=self.sockets, **kwargs)

    async def start(self) -> None:
        cfg = self.config
        throttle_accept_errors()
        if self.bot_pool is not None and not self._pool_held:
            acquire(self.bot_pool)
            self._pool_held = True
        if not self._worker_held:
            acquire(self.record_worker)
            self._worker_held = True
        self.failure = asyncio.get_running_loop().create_future()
        if self.store is not None:  # before listening: nobody sees a game before it is back
            await self.store.open()
            recorder = self.hub._hooks.recorder
            assert isinstance(recorder, Recorder)
            if cfg.redis_url and self.store.kind == "postgresql":
                # nodes share the database: games are owned, fenced, and taken over
                recorder.owner = self._node_id()
            if self.ratings is not None:
                await self.ratings.start(self.hub.bots)
            self.restored = await recover(self.hub, self.store, recorder)
            if self.ratings is not None:
                await self.ratings.restore(self.hub.rooms.values())
            if self.restored:
                log.info(
                    "%d rooms restored from the store (games in progress first)", self.restored
                )
        if cfg.redis_url:  # before listening: every room code is claimed in the cluster
            await self._join_cluster()
        self._ws = await serve(
            self._handle, cfg.host, cfg.port,
            max_size=cfg.hard_frame_bytes,
            compression="deflate" if cfg.compression else None,
            ping_interval=cfg.ping_interval_s, ping_timeout=cfg.ping_timeout_s,
            max_queue=16, write_limit=32_768,
            process_request=self._http,
            server_header="stacko",
            create_connection=self._connection,  # type: ignore[arg-type]  # a factory will do
        )  # fmt: skip
        self.port = self._ws.sockets[0].getsockname()[1] if self._ws.sockets else cfg.port
        if self.bot_pool is not None:  # in a thread: the first decision finds it up
            self.bot_pool.start_soon()
        log.info("stacko server listening on %s; web client at %s", self.url, self.http_url)

    def _node_id(self) -> str:
        from stacko.server.cluster.node import default_node_id

        return self.config.node_id or default_node_id(self.config.port)

    async def _join_cluster(self) -> None:
        from stacko.server.cluster.node import ClusterCollector, ClusterNode
        from stacko.server.cluster.takeover import Takeover

        cfg = self.config
        node = ClusterNode(
            self.hub, cfg.redis_url, self._node_id(), lease_s=cfg.lease_s, gate=self.store
        )
        recorder = self.hub._hooks.recorder
        if self.store is not None and isinstance(recorder, Recorder) and recorder.owner:
            node.takeover = Takeover(node, self.store, recorder)
            if self.ratings is not None:
                node.takeover.on_restored = self.ratings.restore
        await node.start()
        self.cluster = self.hub.cluster = node
        self.metrics.registry.register(ClusterCollector(node))
        log.info("node %s joined the cluster at %s", node.node_id, redacted_url(cfg.redis_url))

    async def shutdown(self, restart: bool = False) -> None:
        """Close every client and stop. ``restart`` (SIGTERM with a store): commit what is
        pending first, then close with 1012, which tells clients to reconnect and resume."""
        store = self.store
        recorder = self.hub._hooks.recorder
        if isinstance(recorder, Recorder):
            await recorder.close()  # a compaction of the log under way stops
        if store is not None and store.failed is None:
            try:
                await asyncio.wait_for(store.flush(), 30)
            except Exception as exc:
                log.error("could not commit everything before stopping: %s", exc)
        if restart and store is not None:
            code, reason = CLOSE_SERVICE_RESTART, RESTART_REASON
        else:
            code, reason = CLOSE_GOING_AWAY, SHUTDOWN_REASON
        for conn in list(self.connections):
            conn.close(code, reason)
        if self._ws is not None:
            await asyncio.sleep(0)  # let the writers flush their close frames
            self._ws.close(close_connections=True)
            await self._ws.wait_closed()
        if self.cluster is not None:
            await self.cluster.stop()
        if self.bot_pool is not None and self._pool_held:
            self._pool_held = False
            await release(self.bot_pool)
        if self._worker_held:
            self._worker_held = False
            await release(self.record_worker)
        if store is not None:
            await store.close()

    def _store_failed(self, exc: BaseException) -> None:
        """Fail-stop: nothing uncommitted ever leaves; clients are closed with 1011."""
        assert self.store is not None
        log.critical(
            "the store (%s %s) failed: %s. Stopping: a server that cannot commit must not "
            "run on. Games in progress come back from what was committed at the next start.",
            self.store.kind, self.store.location, exc,
        )  # fmt: skip
        # Fenced: another node took this one's games over (it was paused past its lease):
        # its clients reconnect, through any node, to the new owner.
        how = (CLOSE_SERVICE_RESTART, FENCED_REASON) if isinstance(exc, Fenced) else None
        for conn in list(self.connections):
            conn.close_now(how or (CLOSE_INTERNAL, "store_failed"))
        if self.failure is not None and not self.failure.done():
            self.failure.set_result(exc)

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
        conn = Connection(
            ws,
            self.hub,
            self.config,
            self.clock,
            self.metrics,
            self.batch,
            None if self.store is None else self.store.gate,
        )
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

    def _http(
        self, ws: ServerConnection, request: Request
    ) -> Response | Awaitable[Response] | None:
        """Plain HTTP on the same port; WebSocket upgrades pass through."""
        client = self.client_ip(ws, request)
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return self._admit(ws)
        path = request.path.split("?", 1)[0]
        if path.startswith("/api/"):
            wait = self.api_limit.wait(client)
            if wait:
                return too_many(ws, wait)
        if path == records.PREFIX or path.startswith(records.PREFIX + "/"):
            return records.handle(self.store, ws, request, self.record_cache, self.record_worker)
        if players.handles(path):
            return players.handle(self.accounts, ws, request)
        response = self._plain(ws, request, path)
        if response.status_code == http.HTTPStatus.NOT_FOUND:
            return response
        method = request.method
        if method not in ("GET", "HEAD"):  # a POST or DELETE was answered as a GET
            response = ws.respond(
                http.HTTPStatus.METHOD_NOT_ALLOWED, f"{path} takes GET or HEAD, not {method}\n"
            )
            response.headers["Allow"] = "GET, HEAD"
        elif method == "HEAD":  # the GET's headers (its Content-Length too), no body
            response.body = b""
        return response

    def _plain(self, ws: ServerConnection, request: Request, path: str) -> Response:
        """The answer to a GET of a path that is neither the records nor accounts API."""
        if path == "/healthz":
            if self.cluster is not None:  # a node without Redis still plays its own rooms
                redis = "up" if self.cluster.up else "down"
                return ws.respond(http.HTTPStatus.OK, f"ok\nredis: {redis}\n")
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

    def client_ip(self, ws: ServerConnection, request: Request) -> str:
        """The address every per-address limit counts for this socket: its peer, or the
        one a trusted proxy names in ``X-Forwarded-For`` (``server.forwarded``)."""
        assert isinstance(ws, DirectServerConnection)  # serve(create_connection=...) above
        if ws.proxied:
            ws.ip = self.proxies.client(ws.peer_ip, request.headers.get_all("X-Forwarded-For"))
        return ws.ip

    def _admit(self, ws: ServerConnection) -> Response | None:
        """Descriptors are finite: an upgrade while over ``max_connections`` open sockets
        (this one counted) gets 503; one from an address that already holds
        ``max_connections_per_ip`` upgraded connections, or that opens sockets faster than
        ``new_connections_per_ip_per_s``, gets 429."""
        sockets = self.sockets
        if sockets.total > self.max_connections:
            self.refused["max_connections"] += 1
            return ws.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, "max_connections\n")
        assert isinstance(ws, DirectServerConnection)  # serve(create_connection=...) above
        cap = self.config.max_connections_per_ip
        if ws.proxied and cap and not sockets.request_allowed(ws.ip, self.clock.monotonic()):
            ws.refuse = True  # a proxy's client opening connections in a loop
        if cap and (ws.refuse or sockets.admitted.get(ws.ip, 0) >= cap):
            self.refused["max_connections_per_ip"] += 1
            return ws.respond(http.HTTPStatus.TOO_MANY_REQUESTS, "max_connections_per_ip\n")
        sockets.admit(ws.ip)
        ws.admitted = True
        return None

    def stats(self) -> dict[str, Any]:
        return {"connections": len(self.connections), "rooms": len(self.hub.rooms)}
