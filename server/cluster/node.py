"""One node of a cluster: its lease, its inbox, and the forwarding of requests to the rooms
other nodes own.

Each room has one owner node that decides everything about it, synchronously, as on one
node. A client connected elsewhere reaches it through its own node: that node forwards the
request (with the session token: the owner finds the seat by the session, never trusting the
forwarding node) to the owner's inbox, a Redis Stream read with ``XREAD BLOCK`` from the last
id (pub/sub would lose messages silently across a reconnect). The owner runs the request
through its hub like a local one, with a ``RemotePeer`` for the client: every frame that peer
is sent goes back to the client's node, which delivers it on the connection.

Writes to Redis are queued and sent by one task as one pipeline per loop turn (one ``XADD``
per destination node per turn, however many frames), in order. A request that needs Redis
while it is unreachable gets ``server_busy`` at once, never a hang; the rooms a node owns
play on without Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import orjson
import redis.asyncio as aioredis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from redis.exceptions import RedisError

from stacko.engine.games import GAMES
from stacko.protocol import frames, messages
from stacko.protocol.errors import ErrorCode, ProtocolError
from stacko.server import matchmaking
from stacko.server.cluster import keys
from stacko.server.cluster.link import Link
from stacko.server.cluster.presence import Presence
from stacko.server.hub import ROOM_ALPHABET, ROOM_CODE_LENGTH, Session
from stacko.server.room import Peer, Room

if TYPE_CHECKING:
    from stacko.server.cluster.takeover import Takeover
    from stacko.server.hub import Hub
    from stacko.server.store.base import Store

log = logging.getLogger("stacko.cluster")

FORWARDED = (
    messages.MoveMessage,
    messages.Join,
    messages.Resign,
    messages.Rematch,
    messages.Leave,
)
"""Requests about one room, sent to the room's owner when it is another node."""
CODE_POOL = 256
"""Room codes each node claims ahead (``HSETNX``), so creating a room never waits on Redis."""
INBOX_MAXLEN = 100_000
"""Entries an inbox stream keeps (approximately): a node that was away does not need more."""
REDIS_CONNECTIONS = 32
"""Connections of the pool (requests off the per-move path); the inbox reader and the
writer have one each besides."""
READ_COUNT = 1024
"""Inbox entries one XREAD returns at most (all of them are handled in one pass)."""
BLOCK_MS = 500
"""How long one XREAD waits for the inbox (a stopping node's reader ends within it)."""
REDIS_ERRORS = (RedisError, OSError, asyncio.TimeoutError)
FIELDS = tuple(str(i) for i in range(64))
"""Field names of one inbox entry's messages (one field per message)."""


def default_node_id(port: int) -> str:
    """Stable across restarts of the same process on the same host and port (the store's rows
    and the room directory name it); with port 0, unique to this process."""
    host = socket.gethostname()
    return f"{host}-{port}" if port else f"{host}-{os.getpid()}"


def busy(what: str) -> ProtocolError:
    return ProtocolError(
        ErrorCode.SERVER_BUSY, f"{what}: the cluster is unreachable just now; try again later"
    )


class RemotePeer:
    """A client connected to another node, as this node's hub and rooms see it."""

    __slots__ = ("cluster", "conn", "node")

    def __init__(self, cluster: ClusterNode, node: str, conn: int) -> None:
        self.cluster = cluster
        self.node = node
        self.conn = conn

    def send(self, frame: bytes) -> None:
        gate = self.cluster.gate
        if gate is not None and gate.holding:  # output commit, as for a local connection
            gate.hold(self._post, frame)
            return
        self._post(frame)

    def _post(self, frame: bytes) -> None:
        self.cluster.frames_out += 1
        self.cluster.post(self.node, b"o%d %b" % (self.conn, frame))


class Ticket:
    """A local connection's quick-match ticket. ``queued`` is answered exactly once, and
    before the match's frames: the pairing may come (from this node or another) before the
    script that queued the ticket has returned here."""

    __slots__ = ("game", "replied", "rid", "session", "text")

    def __init__(self, session: Session, text: str, game: str, rid: frames.RequestId) -> None:
        self.session = session
        self.text = text
        self.game = game
        self.rid = rid
        self.replied = False

    def queued(self, peer: Peer, waiting: int) -> None:
        if not self.replied:
            self.replied = True
            peer.send(frames.reply("queued", self.rid, game=self.game, waiting=waiting))


class ClusterNode:
    def __init__(
        self,
        hub: Hub,
        url: str,
        node_id: str,
        *,
        lease_s: float = 6.0,
        gate: Store | None = None,
    ) -> None:
        self.hub = hub
        self.node_id = node_id
        self.lease_s = lease_s
        self.gate = gate
        # A bounded pool that waits for a free connection: a burst of requests (a thousand
        # quick-match tickets at once) queues for a moment instead of failing.
        pool = aioredis.BlockingConnectionPool.from_url(
            url, max_connections=REDIS_CONNECTIONS, timeout=max(1.0, lease_s / 3),
            socket_timeout=max(1.0, lease_s / 3), socket_connect_timeout=1.0,
        )  # fmt: skip
        self.redis = aioredis.Redis(connection_pool=pool)
        # The hot path's two connections, each held by its task (``link.py``: why not the pool)
        self._reader = Link(url, max(1.0, lease_s / 3))
        self._writer = Link(url, max(1.0, lease_s / 3))
        self.up = False
        """Whether the last Redis command worked (``/healthz``, and the fast refusals)."""
        self.inbox = keys.inbox(node_id)
        self._owner = self.redis.register_script(keys.OWNER)
        self._match = self.redis.register_script(keys.MATCH)
        self.match_window = (matchmaking.BASE, matchmaking.GROWTH, matchmaking.MAX_WAIT_S)
        """Quick match's rating window (``server.matchmaking``), sent to the script."""
        self.match_time: Callable[[], float] = hub.clock.time
        """The clock of tickets' waits (nodes' clocks agree to well under a second)."""
        # Connection ids never repeat across restarts of this node: an owner may still hold
        # the previous run's RemotePeers, and a new connection must never receive frames
        # meant for an old one. The first id is this run's incarnation, the lease's value:
        # an owner that finds a node's lease newer than a peer's id knows that peer is gone
        # (the node restarted within its lease), as every id of a run is above its start.
        self.incarnation = time.time_ns() // 1000
        self._ids = itertools.count(self.incarnation)
        self.takeover: Takeover | None = None
        """Set when nodes share a PostgreSQL store: this node takes dead nodes' games over
        (``server.cluster.takeover``)."""
        self.conn_ids: dict[Peer, int] = {}
        self.local: dict[int, Peer] = {}
        self.touched: dict[Peer, set[str]] = {}
        """Per local connection: the nodes whose rooms it reached (told when it goes)."""
        self._orphans: dict[Peer, float] = {}
        """Local connections seated on a node that died, since when (``_rehome``)."""
        self.remote: dict[tuple[str, int], RemotePeer] = {}
        self.remote_sessions: dict[RemotePeer, Session] = {}
        self.by_hash: dict[str, Session] = {}
        """Sessions of other nodes' clients seated here by quick match, before their first
        request brings the token whose hash this is."""
        self.owners: dict[str, str] = {}
        """Room code -> owner node (a cache; a wrong entry only costs an error reply)."""
        self.codes: list[str] = []
        self.tickets: dict[int, Ticket] = {}
        """Per local connection waiting for a quick match: its session and its ticket."""
        self._pending: dict[Peer, list[tuple[Any, Callable[[], Awaitable[None]]]]] = {}
        self._out: dict[str, list[bytes]] = {}
        self._cmds: list[tuple[Any, ...]] = []
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._last_id = "0-0"
        self._applying = False
        self._refill_lock = asyncio.Lock()
        self._stopping = False
        self._stop_event = asyncio.Event()
        # figures for /metrics
        self.frames_out = 0
        self.frames_in = 0
        self.requests_out = 0
        self.requests_in = 0
        self.redis_errors = 0
        self.inbox_lag_s = 0.0
        self.queue_sizes: dict[str, int] = {}
        self.presence = Presence(self)
        """Accounts across nodes: presence, challenges, revocation (``cluster.presence``)."""

    # -- life ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Take the lease, register this node's rooms (restored ones too) and start reading
        the inbox; raises if Redis cannot be reached at start (a misconfiguration)."""
        await self._assert_lease(fresh=True)
        loop = asyncio.get_running_loop()
        for coro in (
            self._read_inbox(),
            self._flush_loop(),
            self._lease_loop(),
            self._sweep_loop(),
        ):
            self._tasks.append(loop.create_task(coro))

    async def stop(self) -> None:
        # Nothing is cancelled inside a redis-py command (a cancelled XREAD or pipeline can
        # hang on its connection): the loops see ``_stopping`` within one BLOCK period.
        self._stopping = True
        self._wake.set()
        self._stop_event.set()
        tasks = list(self._tasks)
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=2 * BLOCK_MS / 1000)
            for task in late:
                task.cancel()
        with contextlib.suppress(*REDIS_ERRORS):
            await self._flush_once()
            await self.redis.delete(keys.lease(self.node_id))
        with contextlib.suppress(*REDIS_ERRORS):
            await self.redis.aclose()
        for link in (self._reader, self._writer):
            with contextlib.suppress(*REDIS_ERRORS):
                await link.close()

    async def _assert_lease(self, fresh: bool = False) -> None:
        """(Re)take the lease and re-assert what this node owns: after a start, a Redis
        restart or an expired lease, the directory, the session directory and the lobby hold
        this node's rooms again, and the codes claimed ahead are claimed again (a code another
        node took meanwhile is dropped from the pool)."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(keys.lease(self.node_id), str(self.incarnation), px=int(self.lease_s * 1000))
        for code, room in self.hub.rooms.items():
            pipe.hset(keys.ROOMS, code, self.node_id)
            if room.listed_at:
                self._lobby_cmds(pipe, room, True)
            for player in room.players:
                if player is not None and player.session is not None:
                    self._seat_cmds(pipe, player.session, room)
        if fresh:  # what was sent to a previous run of this node is for nobody now
            pipe.delete(self.inbox)
            pipe.xadd(self.inbox, {"0": b"j[]"}, maxlen=INBOX_MAXLEN, approximate=True)
        pool = list(self.codes)
        for code in pool:
            pipe.hsetnx(keys.ROOMS, code, self.node_id)
        results = await pipe.execute()
        if pool:
            mine = await self.redis.hmget(keys.ROOMS, pool)
            kept = {c for c, n in zip(pool, mine, strict=True) if n == self.node_id.encode()}
            self.codes = [c for c in self.codes if c in kept]
        if fresh:
            self._last_id = results[-1 - len(pool)].decode()
        await self.presence.assert_all(fresh)
        self.up = True
        await self._refill_codes()

    async def _lease_loop(self) -> None:
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop_event.wait(), self.lease_s / 3)
            if self._stopping:
                return
            try:
                renewed = await self.redis.set(
                    keys.lease(self.node_id),
                    str(self.incarnation),
                    px=int(self.lease_s * 1000),
                    xx=True,
                )
                if not renewed:
                    log.warning("the lease of node %s had expired: re-asserting", self.node_id)
                    if self.takeover is not None:
                        self.takeover.interrupted()
                        if not await self.takeover.still_mine():
                            return  # taken over meanwhile: fail-stop, nothing registered
                    await self._assert_lease()
                self.up = True
                await self._check_remote_nodes()
                if self.takeover is not None:
                    await self._take_over()
                await self._queue_sizes()
                self._forget_sessions()
                if len(self.codes) < CODE_POOL // 2:
                    await self._refill_codes()
            except REDIS_ERRORS as exc:
                self._redis_failed(exc)

    async def _take_over(self) -> None:
        assert self.takeover is not None
        try:
            await self.takeover.scan()
        except REDIS_ERRORS:
            raise
        except Exception:  # the store answered badly: try again at the next tick
            log.exception("node %s: a takeover failed", self.node_id)

    def _redis_failed(self, exc: BaseException) -> None:
        if self.takeover is not None:
            self.takeover.interrupted()
        self.redis_errors += 1
        if self.up:
            log.warning("Redis unreachable: %s", exc)
        self.up = False

    def _forget_sessions(self) -> None:
        """Drop the hash index's sessions the hub has let go (expired, seatless)."""
        sessions = self.hub.sessions
        if len(self.by_hash) > 2 * len(sessions) + 1024:
            self.by_hash = {
                h: s for h, s in self.by_hash.items() if s.rooms or sessions.get(s.token) is s
            }

    async def _check_remote_nodes(self) -> None:
        """The clients of a node whose lease expired are gone, and so are those of an
        earlier run of a node that restarted (ids below its incarnation, the lease's value):
        their seats get the grace. Cached owners that died are forgotten (their rooms may
        have been taken over)."""
        found = {node for node, _ in self.remote} | set(self.owners.values())
        if self.takeover is not None:  # the rooms its clients reached may be taken over
            found.update(*self.touched.values())
            found.discard(self.node_id)
        nodes = sorted(found)
        if not nodes:
            return
        pipe = self.redis.pipeline(transaction=False)
        for node in nodes:
            pipe.get(keys.lease(node))
        leases = dict(zip(nodes, await pipe.execute(), strict=True))
        for node, conn in list(self.remote):
            lease = leases.get(node)
            if lease is None or not lease.isdigit() or conn < int(lease):
                self._gone(node, conn)
        dead = {node for node, lease in leases.items() if lease is None}
        if dead:
            self.owners = {c: n for c, n in self.owners.items() if n not in dead}
        if self.takeover is not None:
            await self._rehome(dead)

    async def _rehome(self, dead: set[str]) -> None:
        """Local clients seated in rooms of a node that died stay connected here: once
        another node took those rooms over (the session directory names it), their seats
        there get these connections back, as a resume would (without it a client waiting
        for its opponent would never hear of the room again)."""
        now = time.monotonic()
        if dead:
            for peer, reached in self.touched.items():
                if reached & dead:
                    self._orphans.setdefault(peer, now)
        if not self._orphans:
            return
        for peer in [p for p, since in self._orphans.items() if now - since > 4 * self.lease_s]:
            del self._orphans[peer]  # given up: the client may still resume by itself
            self.touched.get(peer, set()).difference_update(dead)
        orphans = [
            (peer, session)
            for peer in list(self._orphans)[:256]
            if (session := getattr(peer, "session", None)) is not None and peer in self.conn_ids
        ]
        pipe = self.redis.pipeline(transaction=False)
        for _, session in orphans:
            pipe.hgetall(keys.session(keys.token_hash(session.token)))
        seats: list[dict[bytes, bytes]] = await pipe.execute()
        owners = {n.decode() for found in seats for n in found.values()}
        for peer, _ in orphans:
            owners.update(self.touched.get(peer, ()))
        check = sorted(owners - {self.node_id})
        pipe = self.redis.pipeline(transaction=False)
        for node in check:
            pipe.exists(keys.lease(node))
        alive = dict(zip(check, await pipe.execute(), strict=True))
        for (peer, session), found in zip(orphans, seats, strict=True):
            waiting = False
            told: set[str] = set()
            for code, node in sorted((c.decode(), n.decode()) for c, n in found.items()):
                if node == self.node_id:
                    continue  # taken over here: the seat had this connection back at once
                if not alive.get(node):
                    waiting = True  # not taken over yet
                    continue
                self.owners[code] = node
                if node not in told:
                    told.add(node)
                    self.touched.setdefault(peer, set()).add(node)
                    conn, token = self._conn(peer), session.token
                    self.post_item(node, ["resume", self.node_id, conn, token, session.name, 1])
            if not waiting:
                self._orphans.pop(peer, None)
                nodes = self.touched.get(peer)
                if nodes:  # nothing of it is on a node still dead: no "gone" to send there
                    nodes -= {n for n in nodes if n != self.node_id and not alive.get(n)}

    async def _queue_sizes(self) -> None:
        pipe = self.redis.pipeline(transaction=False)
        for game in GAMES:
            pipe.zcard(keys.queue(game))
        sizes = await pipe.execute()
        self.queue_sizes = dict(zip(GAMES, sizes, strict=True))

    # -- room codes and the lobby --------------------------------------------------------

    def claim_code(self) -> str:
        """A code unique in the cluster, claimed ahead: creating a room never waits."""
        if len(self.codes) < CODE_POOL // 2:
            self._spawn(self._refill_codes())
        if not self.codes:
            raise busy("cannot create a room")
        return self.codes.pop()

    async def _refill_codes(self) -> None:
        async with self._refill_lock:  # one refill at a time; a waiter finds the pool full
            if len(self.codes) >= CODE_POOL // 2:
                return
            try:
                ids = self.hub._ids
                while len(self.codes) < CODE_POOL:
                    want = [
                        "".join(ids.choice(ROOM_ALPHABET) for _ in range(ROOM_CODE_LENGTH))
                        for _ in range(CODE_POOL - len(self.codes))
                    ]
                    pipe = self.redis.pipeline(transaction=False)
                    for code in want:
                        pipe.hsetnx(keys.ROOMS, code, self.node_id)
                    got = await pipe.execute()
                    self.codes.extend(c for c, ok in zip(want, got, strict=True) if ok)
            except REDIS_ERRORS as exc:
                self._redis_failed(exc)

    def room_closed(self, room: Room) -> None:
        self.command("hdel", keys.ROOMS, room.code)

    def listing(self, room: Room, listable: bool) -> None:
        """The hub's listing changed: mirror it in the cluster's lobby index."""
        self._cmds.append(("lobby", room, listable))
        self._wake.set()

    def _lobby_cmds(self, pipe: Any, room: Room, listable: bool) -> None:
        game_key, all_key = keys.lobby(room.spec.name), keys.lobby(None)
        if listable:
            score = time.time_ns() // 1000
            info = orjson.dumps({"n": self.node_id, "i": room.info()})
            pipe.hset(keys.LOBBY_INFO, room.code, info)
            pipe.zadd(game_key, {room.code: score}, nx=True)
            pipe.zadd(all_key, {room.code: score}, nx=True)
        else:
            pipe.zrem(game_key, room.code)
            pipe.zrem(all_key, room.code)
            pipe.hdel(keys.LOBBY_INFO, room.code)

    async def list_rooms(self, peer: Peer, msg: messages.ListRooms) -> None:
        """A page of every node's listable rooms, from the lobby index (never a scan);
        entries of nodes whose lease expired are skipped and dropped."""
        size = self.hub.config.list_rooms_page
        after = int(msg.cursor) if msg.cursor is not None else 0
        key = keys.lobby(msg.game)
        fetch = 2 * size + 1
        found: Any = await self.redis.zrangebyscore(
            key, f"({after}", "+inf", start=0, num=fetch, withscores=True
        )
        codes = [c.decode() for c, _ in found]
        infos = await self.redis.hmget(keys.LOBBY_INFO, codes) if codes else []
        entries = [orjson.loads(i) if i else None for i in infos]
        nodes = sorted({e["n"] for e in entries if e is not None})
        alive: dict[str, bool] = {}
        if nodes:
            pipe = self.redis.pipeline(transaction=False)
            for node in nodes:
                pipe.exists(keys.lease(node))
            alive = dict(zip(nodes, (bool(x) for x in await pipe.execute()), strict=True))
        rooms: list[Any] = []
        last = after
        nxt: str | None = None
        dead: list[str] = []
        for i, entry in enumerate(entries):
            code, score = codes[i], int(found[i][1])
            if entry is None or not alive.get(entry["n"], False):
                dead.append(code)
                continue
            if len(rooms) == size:
                nxt = str(last)
                break
            rooms.append(entry["i"])
            last = score
        else:
            if len(found) == fetch:
                nxt = str(int(found[-1][1]))
        if dead:
            self.command("zrem", key, *dead)
        peer.send(frames.reply("rooms", msg.id, rooms=rooms, next=nxt))

    # -- the hub's hooks -----------------------------------------------------------------

    def intercepts(self, peer: Peer, session: Session, msg: messages.ClientMessage) -> bool:
        """Whether the cluster answers ``msg`` (then the hub does nothing more with it)."""
        if self._applying:
            return False  # a request forwarded here is answered here, whatever it is
        if isinstance(msg, FORWARDED):
            code = msg.room
            if code in self.hub.rooms:
                return False
            self._forward(peer, session, msg, code)
            return True
        if isinstance(msg, messages.QuickMatch):
            self._quick_match(peer, session, msg)
            return True
        if isinstance(msg, messages.CancelMatch) and session.queued_for is not None:
            self._queue_op(peer, msg, lambda: self._cancel(peer, session, msg))
            return True
        if isinstance(msg, messages.ListRooms):
            if not self.up:
                raise busy("cannot list the rooms")
            self._queue_op(peer, msg, lambda: self.list_rooms(peer, msg))
            return True
        return False

    def disconnected(self, peer: Peer, session: Session | None) -> None:
        if isinstance(peer, RemotePeer):
            return
        conn = self.conn_ids.pop(peer, None)
        if conn is None:
            return
        self.local.pop(conn, None)
        self._pending.pop(peer, None)
        ticket = self.tickets.pop(conn, None)
        if ticket is not None:
            ticket.session.queued_for = None
            self.command("zrem", keys.queue(ticket.game), ticket.text)
        self._orphans.pop(peer, None)
        for node in self.touched.pop(peer, ()):
            self.post_item(node, ["gone", self.node_id, conn])

    def seated(self, session: Session, room: Room) -> None:
        self._cmds.append(("seat", session, room))
        self._wake.set()

    def _seat_cmds(self, pipe: Any, session: Session, room: Room) -> None:
        token = session.token
        h = token[1:] if token.startswith("?") else keys.token_hash(token)
        pipe.hset(keys.session(h), room.code, self.node_id)
        pipe.expire(keys.session(h), keys.SESSION_TTL_S)

    def resume(self, peer: Peer, msg: messages.Hello, session: Session | None) -> Session:
        """``hello`` with a token: its session may hold seats on other nodes (the client's
        node died, or its connection moved). The welcome waits for the session directory;
        a token known nowhere gets a fresh session, as on one node."""
        assert msg.token is not None
        known = session is not None
        if session is None:
            session = Session(msg.token, msg.name)
            self.hub.sessions[msg.token] = session
        self.hub.adopt(session, peer, msg.name)
        if not self.up:
            self._welcome(peer, session, msg, known, {})
        else:
            found = session
            self._queue_op(peer, msg, lambda: self._resume(peer, found, msg, known))
        return session

    def _welcome(
        self, peer: Peer, session: Session, msg: messages.Hello, known: bool, rooms: dict[str, str]
    ) -> None:
        hub = self.hub
        if not known and not rooms:  # a fresh session
            if hub.sessions.get(session.token) is session:
                del hub.sessions[session.token]
            session.token = hub._token()
            hub.sessions[session.token] = session
        codes = sorted(set(session.rooms) | set(rooms))
        hub.welcome_back(peer, session, msg.id, known or bool(rooms), codes)

    async def _resume(self, peer: Peer, session: Session, msg: messages.Hello, known: bool) -> None:
        try:
            found: Any = await self.redis.hgetall(keys.session(keys.token_hash(session.token)))
            rooms = {c.decode(): n.decode() for c, n in found.items()}
            nodes = sorted(set(rooms.values()) - {self.node_id})
            pipe = self.redis.pipeline(transaction=False)
            for node in nodes:
                pipe.exists(keys.lease(node))
            alive = dict(zip(nodes, await pipe.execute(), strict=True))
        except REDIS_ERRORS as exc:  # cannot look: what this node knows
            self._redis_failed(exc)
            rooms, alive = {}, {}
        rooms = {c: n for c, n in rooms.items() if n in alive}
        for code, node in rooms.items():  # where its requests go from now on
            if alive[node]:
                self.owners[code] = node
        self._welcome(peer, session, msg, known, rooms)
        if not rooms:
            return
        conn = self._conn(peer)
        for node in nodes:
            if alive[node]:
                self.touched.setdefault(peer, set()).add(node)
                self.post_item(node, ["resume", self.node_id, conn, session.token, session.name])
        for code, node in sorted(rooms.items()):
            if not alive[node]:  # told at once what became of the room
                stopped = busy(f"room {code} is on a node that stopped")
                stopped.message = (
                    f"room {code} is on a node that stopped; its game comes back when that "
                    "node restarts: resume again later"
                )
                if self.takeover is not None:
                    stopped.message = (
                        f"room {code} is on a node that stopped; another node takes its game "
                        f"over within {self.lease_s:g} s: resume again then"
                    )
                peer.send(frames.from_exception(stopped, room=code))

    def _conn(self, peer: Peer) -> int:
        conn = self.conn_ids.get(peer)
        if conn is None:
            conn = self.conn_ids[peer] = next(self._ids)
            self.local[conn] = peer
        return conn

    # -- forwarding (the client's node) ----------------------------------------------------

    def _forward(self, peer: Peer, session: Session, msg: Any, code: str) -> None:
        if not self.up:
            raise busy(f"cannot reach room {code}")
        node = self.owners.get(code)
        if node is not None and peer not in self._pending:
            self._send_request(node, peer, session, msg)
            return
        self._queue_op(peer, msg, lambda: self._forward_later(peer, session, msg, code))

    async def _forward_later(self, peer: Peer, session: Session, msg: Any, code: str) -> None:
        node = self.owners.get(code)
        if node is None:
            found = await self._owner(keys=[keys.ROOMS], args=[code, keys.LEASE_PREFIX])
            if isinstance(found, list):  # its node's lease expired
                raise busy(f"the node that holds room {code} is not reachable")
            if found is not None:
                node = found.decode()
        if node is None or node == self.node_id:
            if isinstance(msg, messages.Join):
                raise ProtocolError(ErrorCode.UNKNOWN_ROOM, f"no room {code}")
            raise ProtocolError(ErrorCode.NOT_IN_ROOM, f"you are not in room {code}")
        if len(self.owners) > 100_000:
            self.owners.clear()
        self.owners[code] = node
        self._send_request(node, peer, session, msg)

    def _send_request(self, node: str, peer: Peer, session: Session, msg: Any) -> None:
        conn = self._conn(peer)
        self.touched.setdefault(peer, set()).add(node)
        self.requests_out += 1
        account = session.account
        signed = (
            None if account is None else [account.id, account.name, account.kind, account.builtin]
        )
        head = orjson.dumps([self.node_id, conn, session.token, session.name, signed])
        self.post(node, b"r%b\n%b" % (head, msg.model_dump_json().encode()))

    def _queue_op(self, peer: Peer, msg: Any, op: Callable[[], Awaitable[None]]) -> None:
        """Runs ``op`` after the peer's earlier cluster operations: its requests keep their
        order, as on one node."""
        ops = self._pending.get(peer)
        if ops is not None:
            ops.append((msg, op))
            return
        self._pending[peer] = [(msg, op)]
        self._spawn(self._run_ops(peer))

    async def _run_ops(self, peer: Peer) -> None:
        ops = self._pending.get(peer)
        while ops:
            msg, op = ops[0]
            try:
                try:
                    await op()
                except REDIS_ERRORS as exc:
                    log.warning("a cluster request failed: %r", exc)
                    self._redis_failed(exc)
                    raise busy("cannot complete the request") from None
            except ProtocolError as exc:
                exc.request_id = msg.id
                peer.send(frames.from_exception(exc, room=getattr(msg, "room", None)))
            except Exception:
                log.exception("a cluster request failed")
                peer.send(frames.error(ErrorCode.INTERNAL_ERROR, "internal error", id=msg.id))
            ops.pop(0)
            if self._pending.get(peer) is not ops:
                return  # the connection went away
        self._pending.pop(peer, None)

    # -- the owner's side -------------------------------------------------------------------

    def _remote(self, node: str, conn: int) -> RemotePeer:
        peer = self.remote.get((node, conn))
        if peer is None:
            peer = self.remote[(node, conn)] = RemotePeer(self, node, conn)
        return peer

    def _session_for(self, token: str, name: str, peer: RemotePeer) -> Session:
        hub = self.hub
        session = hub.sessions.get(token)
        if session is None and hub.revive is not None:
            session = hub.revive(token)  # seated here before this node restarted
        if session is None:
            session = self.by_hash.get(keys.token_hash(token))
            if session is not None:
                session.token = token
            else:
                session = Session(token, name)
            hub.sessions[token] = session
        if session.expiry is not None:
            session.expiry.cancel()
            session.expiry = None
        old = session.peer
        if old is not peer:
            # Quick match finds a remote player's session by its token's hash.
            self.by_hash[keys.token_hash(token)] = session
            session.peer = peer
            replace = getattr(old, "replace", None)
            if replace is not None:
                replace()  # the newer connection wins, as with hello
            for room in list(session.rooms.values()):  # a client that moved to another node
                seat = room.seat_of(session)
                player = room.players[seat] if seat is not None else None
                if seat is not None and player is not None and player.peer is not peer:
                    room.returned(seat, peer)
        self.remote_sessions[peer] = session
        return session

    def _apply(
        self, node: str, conn: int, token: str, name: str, text: str, signed: Any = None
    ) -> None:
        """``signed``: the account the client's node has the session signed in as
        (``[id, name, kind, builtin]``, or ``None``: a guest), which nodes take on trust."""
        self.requests_in += 1
        peer = self._remote(node, conn)
        session = self._session_for(token, name, peer)
        link = self.hub.accounts
        if link is not None:
            session.account = link.remote_account(signed)
        msg: messages.ClientMessage | None = None
        self._applying = True
        try:
            msg = messages.parse_client(text)  # checked again: nothing is taken on trust
            self.hub.handle(peer, session, msg)
        except ProtocolError as exc:
            peer.send(frames.from_exception(exc, room=getattr(msg, "room", None)))
        except Exception:
            log.exception("internal error while handling a forwarded frame")
            peer.send(frames.error(ErrorCode.INTERNAL_ERROR, "internal error"))
        finally:
            self._applying = False

    def _resume_here(
        self, node: str, conn: int, token: str, name: str, only_if_away: bool = False
    ) -> None:
        """A client resumed through ``node``: its seats here get the new connection.
        ``only_if_away`` (``_rehome``: the connection is an old one): unless one of them
        has a connection already (the client resumed by itself meanwhile)."""
        hub = self.hub
        if only_if_away:
            session = hub.sessions.get(token)
            for room in session.rooms.values() if session is not None else ():
                seat = room.seat_of(session)
                player = room.players[seat] if seat is not None else None
                if player is not None and player.peer is not None:
                    return
        known = (
            token in hub.sessions
            or keys.token_hash(token) in self.by_hash
            or (hub.revive is not None and hub.revive(token) is not None)
        )
        if known:
            self._session_for(token, name, self._remote(node, conn))

    def _gone(self, node: str, conn: int) -> None:
        peer = self.remote.pop((node, conn), None)
        if peer is None:
            return
        session = self.remote_sessions.pop(peer, None)
        self.hub.disconnected(peer, session)

    # -- quick match ------------------------------------------------------------------------

    def _quick_match(self, peer: Peer, session: Session, msg: messages.QuickMatch) -> None:
        if msg.game not in GAMES:
            raise ProtocolError(ErrorCode.UNKNOWN_GAME, f"no game {msg.game!r}; see list_games")
        if session.queued_for is not None:
            raise ProtocolError(
                ErrorCode.ALREADY_QUEUED, f"already waiting for {session.queued_for}"
            )
        self.hub._check_seats(session)
        if not self.up:
            raise busy("cannot look for a match")
        session.queued_for = msg.game  # held while the script runs
        self._queue_op(peer, msg, lambda: self._match_now(peer, session, msg))

    def _window_args(self) -> list[str | float]:
        """The script's window arguments: ``server.matchmaking``'s, and the time now."""
        base, growth, max_wait = self.match_window
        return [keys.LEASE_PREFIX, base, growth, max_wait, f"{self.match_time():.3f}"]

    async def _match_now(self, peer: Peer, session: Session, msg: messages.QuickMatch) -> None:
        conn = self._conn(peer)
        if not self.codes:  # a burst used the codes claimed ahead: claim more first
            await self._refill_codes()
        mine = keys.token_hash(session.token)
        acct = session.account
        signed = f"{acct.id}:{acct.kind}" if acct is not None else ""
        rating = matchmaking.rating_of(session, msg.game)
        r = "" if rating is None else f"{rating:.3f}"
        ticket = (
            f"{self.node_id}|{conn}|{mine}|{next(self._ids)}|{msg.game}|{signed}|{r}"
            f"|{self.match_time():.3f}|{session.name}"
        )
        mine_t = self.tickets[conn] = Ticket(session, ticket, msg.game, msg.id)
        try:
            found = await self._match(
                keys=[keys.queue(msg.game), keys.TICKETS],
                args=[*self._window_args(), "new", ticket],
            )
        except BaseException:
            session.queued_for = None
            if self.tickets.get(conn) is mine_t:
                del self.tickets[conn]
            raise
        if isinstance(found, int):
            if self.conn_ids.get(peer) != conn:  # it left while the script ran
                self.command("zrem", keys.queue(msg.game), ticket)
                return
            mine_t.queued(peer, found)  # unless a match already came (and said it first)
            return
        if self.tickets.get(conn) is mine_t:
            del self.tickets[conn]
        session.queued_for = None
        self._pair(peer, session, msg.id, msg.game, found.decode())

    def _pair(
        self,
        peer: Peer,
        session: Session,
        rid: frames.RequestId | None,
        game: str,
        other: str,
        *,
        mine_first: bool = False,
    ) -> None:
        """Seat the local ``session`` and the owner of ticket ``other`` (popped for it); the
        one who waited longer (``other``, unless ``mine_first``) gets seat 0."""
        node, oconn, ohash, _, _, osigned, _, _, oname = self._ticket_fields(other)
        try:
            room = self.hub._new_room(
                game, {}, False, clock_ms=self.hub.config.quick_match_clock_ms, quick=True
            )
        except ProtocolError:
            self.command("zadd", keys.queue(game), {other: 0})  # first in line again
            raise
        room.rated = True  # rated when both are accounts, as on one node (server.ratings)
        hub = self.hub
        if node == self.node_id:
            opeer = self.local.get(int(oconn))
            theirs = self.tickets.pop(int(oconn), None)
            if opeer is None or theirs is None:  # cannot happen: leaving removes the ticket
                hub._close_room(room)
                raise busy("the match was lost")
            theirs.queued(opeer, 1)
            osession = theirs.session
            osession.queued_for = None
        else:
            opeer = self._remote(node, int(oconn))
            known = self.by_hash.get(ohash)
            if known is None:
                known = self.by_hash[ohash] = Session(f"?{ohash}", oname)
            osession = known
            osession.peer = opeer
            link = self.hub.accounts
            if link is not None:  # the account its node signed it in as (ticket: id:kind)
                aid, _, kind = osigned.partition(":")
                osession.account = link.remote_account([aid, oname, kind, False] if aid else None)
            self.remote_sessions[opeer] = osession
            self.post_item(node, ["matched", int(oconn), self.node_id])
        first: tuple[Peer, Session, frames.RequestId | None] = (opeer, osession, None)
        second: tuple[Peer, Session, frames.RequestId | None] = (peer, session, rid)
        pair = (second, first) if mine_first else (first, second)
        for s, (p, who, _) in enumerate(pair):
            hub._take_seat(p, who, room, s)
        for s, (p, _, rid_) in enumerate(pair):
            p.send(room.joined_frame(s, rid_, starting=True))
        room.start()

    async def _sweep_loop(self) -> None:
        """Every ``SWEEP_S``: pair this node's waiting tickets whose windows have grown to
        meet another's (``server.matchmaking``), so everyone waiting is paired in time."""
        while not self._stopping:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop_event.wait(), matchmaking.SWEEP_S)
            if self._stopping or not self.tickets or not self.up:
                continue
            try:
                await self.sweep()
            except REDIS_ERRORS as exc:
                self._redis_failed(exc)
            except Exception:  # one bad pass must not end the sweeps for good
                log.exception("quick match sweep failed")

    async def sweep(self) -> None:
        """Run the matching script over this node's waiting tickets, a game at a time."""
        by_game: dict[str, list[str]] = {}
        for t in sorted(self.tickets.values(), key=lambda t: t.text.split("|", 8)[7]):
            by_game.setdefault(t.game, []).append(t.text)
        for game, mine in by_game.items():
            if not self.codes:
                await self._refill_codes()
            found = await self._match(
                keys=[keys.queue(game), keys.TICKETS], args=[*self._window_args(), "sweep", *mine]
            )
            for i in range(0, len(found), 2):
                self._swept(game, found[i].decode(), found[i + 1].decode())

    def _swept(self, game: str, text: str, other: str) -> None:
        """The sweep popped our ``text`` and ``other`` for each other: seat them."""
        conn = int(self._ticket_fields(text)[1])
        entry = self.tickets.pop(conn, None)
        peer = self.local.get(conn)
        if entry is None or peer is None or entry.text != text:  # it left meanwhile
            self.command("zadd", keys.queue(game), {other: 0})  # first in line again
            return
        entry.session.queued_for = None
        entry.queued(peer, 1)  # ``queued`` before the match's frames (``Ticket``)
        try:
            since = float(self._ticket_fields(text)[7])
            older = since <= float(self._ticket_fields(other)[7])
            self._pair(peer, entry.session, None, game, other, mine_first=older)
        except ProtocolError as exc:  # server_busy: ours waits on, in its old place
            log.warning("quick match sweep: %s", exc.message)
            entry.session.queued_for = game
            self.tickets[conn] = entry
            self.command("zadd", keys.queue(game), {text: 0})

    @staticmethod
    def _ticket_fields(ticket: str) -> list[str]:
        """``node|conn|hash|nonce|game|account|rating|since|name`` (``keys.MATCH``)."""
        return ticket.split("|", 8)

    async def _cancel(self, peer: Peer, session: Session, msg: messages.CancelMatch) -> None:
        conn = self.conn_ids.get(peer)
        entry = self.tickets.get(conn) if conn is not None else None
        if entry is None:
            raise ProtocolError(ErrorCode.NOT_QUEUED, "you are not waiting for a match")
        removed = await self.redis.zrem(keys.queue(entry.game), entry.text)
        if not removed:  # already paired: the joined frames are on their way
            raise ProtocolError(ErrorCode.NOT_QUEUED, "you are not waiting for a match")
        if conn is not None:
            self.tickets.pop(conn, None)
        session.queued_for = None
        peer.send(frames.reply("unqueued", msg.id))

    def _matched(self, conn: int, owner: str) -> None:
        """A ticket of ours was paired on ``owner``: its frames follow in this inbox."""
        entry = self.tickets.pop(conn, None)
        peer = self.local.get(conn)
        if entry is not None:
            entry.session.queued_for = None
            if peer is not None:
                entry.queued(peer, 1)
        if peer is None:
            self.post_item(owner, ["gone", self.node_id, conn])
            return
        self.touched.setdefault(peer, set()).add(owner)

    # -- the inbox ------------------------------------------------------------------------

    async def _read_inbox(self) -> None:
        link = self._reader
        while not self._stopping:
            xread = ("XREAD", "COUNT", READ_COUNT, "BLOCK", BLOCK_MS, "STREAMS", self.inbox,
                     self._last_id)  # fmt: skip
            try:
                (got,) = await link.exchange((xread,), BLOCK_MS / 1000)
            except REDIS_ERRORS as exc:
                self._redis_failed(exc)
                await asyncio.sleep(0.2)
                continue
            if not got:
                continue  # nothing within BLOCK_MS
            entries = got[0][1]  # raw RESP: [[stream, [[id, [field, value, ...]], ...]]]
            for entry_id, fields in entries:
                try:
                    for value in fields[1::2]:
                        self._dispatch(value)
                except Exception:
                    log.exception("a bad inbox entry %r", entry_id)
            last = entries[-1][0].decode()
            self._last_id = last
            self.inbox_lag_s = max(0.0, time.time() - int(last.split("-", 1)[0]) / 1e3)

    def _dispatch(self, value: bytes) -> None:
        """One inbox message: ``o<conn> <frame>`` (a frame for a local client),
        ``r<json head>\\n<request>`` (a forwarded request), or ``j<json list>``."""
        kind = value[:1]
        if kind == b"o":
            conn, frame = value[1:].split(b" ", 1)
            peer = self.local.get(int(conn))
            self.frames_in += 1
            if peer is not None:
                deliver = getattr(peer, "deliver", None)
                (deliver or peer.send)(frame)
            return
        if kind == b"r":
            head, text = value[1:].split(b"\n", 1)
            node, conn, token, name, *signed = orjson.loads(head)
            self._apply(node, conn, token, name, text.decode(), signed[0] if signed else None)
            return
        item = orjson.loads(value[1:])
        what = item[0] if item else None  # the empty entry a node starts its inbox with
        if what == "gone":
            self._gone(item[1], item[2])
        elif what == "resume":
            self._resume_here(item[1], item[2], item[3], item[4], len(item) > 5)
        elif what == "matched":
            self._matched(item[1], item[2])
        elif what == "kick":
            self.presence.kicked(item[1])

    # -- writing ----------------------------------------------------------------------------

    def post_item(self, node: str, item: list[Any]) -> None:
        self.post(node, b"j" + orjson.dumps(item))

    def post(self, node: str, item: bytes) -> None:
        """Queue ``item`` for ``node``'s inbox; sent with this loop turn's pipeline (one
        stream entry per node and turn, one field per message: no escaping of frames)."""
        out = self._out.get(node)
        if out is None:
            self._out[node] = [item]
            self._wake.set()
        else:
            out.append(item)

    def command(self, name: str, *args: Any) -> None:
        self._cmds.append((name, *args))
        self._wake.set()

    async def _flush_loop(self) -> None:
        while not self._stopping:
            await self._wake.wait()
            await asyncio.sleep(0)  # the rest of this loop turn joins the batch
            self._wake.clear()
            if self._stopping:
                return
            try:
                await self._flush_once()
            except REDIS_ERRORS as exc:
                self._redis_failed(exc)

    async def _flush_once(self) -> None:
        out, cmds = self._out, self._cmds
        if not out and not cmds:
            return
        self._out, self._cmds = {}, []
        if out:
            xadds: list[list[Any]] = []
            for node, items in out.items():
                xadd: list[Any] = ["XADD", keys.inbox(node), "MAXLEN", "~", INBOX_MAXLEN, "*"]
                for i, item in enumerate(items):
                    xadd += (FIELDS[i] if i < len(FIELDS) else str(i), item)
                xadds.append(xadd)
            try:
                await self._writer.exchange(xadds)
            except REDIS_ERRORS:
                self._undelivered(out)
                raise
        if cmds:
            pipe = self.redis.pipeline(transaction=False)
            for cmd in cmds:
                if cmd[0] == "lobby":
                    self._lobby_cmds(pipe, cmd[1], cmd[2])
                elif cmd[0] == "seat":
                    self._seat_cmds(pipe, cmd[1], cmd[2])
                elif cmd[0] == "presence":
                    self.presence.write(pipe, cmd[1])
                else:
                    getattr(pipe, cmd[0])(*cmd[1:])
            await pipe.execute()
        self.up = True

    def _undelivered(self, out: dict[str, list[bytes]]) -> None:
        """Requests that could not be forwarded get ``server_busy`` (never silence)."""
        for items in out.values():
            for item in items:
                if item[:1] == b"r":
                    head, text = item[1:].split(b"\n", 1)
                    conn = orjson.loads(head)[1]
                    peer = self.local.get(conn)
                    if peer is not None:
                        exc = busy("the request could not be forwarded")
                        exc.request_id = orjson.loads(text).get("id")
                        peer.send(frames.from_exception(exc))

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.append(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        with contextlib.suppress(ValueError):
            self._tasks.remove(task)


class ClusterCollector:
    """The node's cluster figures on ``/metrics``."""

    def __init__(self, node: ClusterNode) -> None:
        self.node = node

    def collect(self) -> Iterator[Metric]:
        n = self.node
        yield CounterMetricFamily(
            "stacko_cluster_frames_forwarded_out",
            "Frames this node sent to clients of other nodes.",
            value=n.frames_out,
        )
        yield CounterMetricFamily(
            "stacko_cluster_frames_forwarded_in",
            "Frames other nodes sent for this node's clients.",
            value=n.frames_in,
        )
        yield CounterMetricFamily(
            "stacko_cluster_requests_forwarded_out",
            "Requests forwarded to the owner of a room.",
            value=n.requests_out,
        )
        yield CounterMetricFamily(
            "stacko_cluster_requests_forwarded_in",
            "Requests other nodes forwarded here.",
            value=n.requests_in,
        )
        yield CounterMetricFamily(
            "stacko_cluster_redis_errors", "Failed Redis commands.", value=n.redis_errors
        )
        yield GaugeMetricFamily(
            "stacko_cluster_inbox_lag_seconds",
            "Age of the last inbox entry read when it was read.",
            value=n.inbox_lag_s,
        )
        yield GaugeMetricFamily("stacko_cluster_redis_up", "Redis reachable.", value=int(n.up))
        yield CounterMetricFamily(
            "stacko_cluster_takeovers",
            "Games this node took over from nodes whose lease expired (a shared PostgreSQL).",
            value=n.takeover.taken if n.takeover is not None else 0,
        )
        queue = GaugeMetricFamily(
            "stacko_cluster_queue_size", "Quick-match tickets waiting.", labels=["game"]
        )
        for game, size in n.queue_sizes.items():
            queue.add_metric([game], size)
        yield queue
