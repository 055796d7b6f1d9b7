"""Taking a dead node's games over (nodes sharing one PostgreSQL store).

Every game in progress names its owner node and an epoch in the store (``games.owner``,
``games.epoch``). On each lease tick a node asks the store which other nodes own games in
progress, and Redis which of those have no lease any more; it then claims their games with
one compare-and-set (owner and epoch as it read them -> itself and epoch + 1), so that of two
nodes noticing the same death at once each game goes to exactly one (and never within a
lease after Redis lost its data: every lease is missing then, see ``keys.BOOT``). It replays
the games it won from the store, as a restart does (``server.store.recorder.restore``:
seats start in the reconnect grace, the side to move gets a whole clock again), points the
room directory and the session directory at itself, and serves them.

The former owner may only be paused (SIGSTOP, a long GC, a VM migration), not dead. Every
change it appends is fenced (``server.store.base.FENCE``): its transaction finds another
owner or epoch and commits nothing, and nothing it held behind that commit leaves (the
output gate). It also checks its games whenever it finds its lease had lapsed, before
registering anything again. Either way it fails-stop (``Fenced``): its clients are closed
with 1012 ``fenced`` and reconnect, through any node, to the new owner.

With SQLite (one file per node) nothing is taken over: a node's games come back when it
restarts on its own file.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from stacko.server.cluster import keys
from stacko.server.store.base import Fenced, Store
from stacko.server.store.recorder import Recorder, restore

if TYPE_CHECKING:
    from stacko.server.cluster.node import ClusterNode
    from stacko.server.room import Room

log = logging.getLogger("stacko.cluster")

CLAIM_SQL = (
    "UPDATE games AS g SET owner = ?, epoch = g.epoch + 1 "
    "FROM unnest(?::text[], ?::int[]) AS c(id, epoch) "
    "WHERE g.id = c.id AND g.epoch = c.epoch AND g.owner = ? AND g.status = 'playing' "
    "RETURNING g.id, g.epoch"
)
"""The compare-and-set: a game changes owner only if nobody changed it since it was read
(PostgreSQL re-checks the condition on the newest row when two claims meet)."""


async def claim(store: Store, me: str, owner: str, games: dict[str, int]) -> dict[str, int]:
    """Claim ``games`` (id -> the epoch read) of ``owner`` for ``me``: the ones won, with
    their new epochs. Idempotent: a game already claimed (by anyone) is not won again."""
    if not games:
        return {}
    ids = sorted(games)
    rows = await store.fetch(CLAIM_SQL, (me, ids, [games[i] for i in ids], owner))
    return {str(i): int(e) for i, e in rows}


class Takeover:
    """A node's side of takeovers: it claims dead nodes' games, and checks its own."""

    def __init__(self, node: ClusterNode, store: Store, recorder: Recorder) -> None:
        self.node = node
        self.store = store
        self.recorder = recorder
        self.taken = 0
        """Games this node took over (``/metrics``)."""
        self.scans = 0
        self.fenced = False
        self.on_restored: Callable[[list[Room]], Awaitable[Any]] | None = None
        """Called with the rooms of every takeover (the ratings: a rated game stays rated)."""
        self._unregistered: list[Room] = []
        self._boot: Any = None
        self._boot_since = time.monotonic()

    def interrupted(self) -> None:
        """This node lost Redis, or its own lease: so may have every node (Redis stopped,
        or lost its data); none counts as dead before they all had a lease to come back."""
        self._boot_since = time.monotonic()

    async def continuous(self) -> bool:
        """Whether Redis has kept its data and answered this node for a whole lease: just
        after a restart of Redis, or an outage longer than a lease, every lease is missing,
        dead node or not."""
        pipe = self.node.redis.pipeline(transaction=False)
        pipe.set(keys.BOOT, secrets.token_hex(8), nx=True)
        pipe.get(keys.BOOT)
        _, boot = await pipe.execute()
        if boot != self._boot:
            self._boot, self._boot_since = boot, time.monotonic()
        return time.monotonic() - self._boot_since >= self.node.lease_s

    async def scan(self) -> list[Room]:
        """One lease tick: take over the games of every owner whose lease has expired."""
        self.scans += 1
        if self._unregistered:  # taken over, but Redis failed before they were registered
            await self._register(list(self._unregistered))
            self._unregistered = []
        if not await self.continuous():
            return []
        me = self.node.node_id
        owners = [
            str(o)
            for (o,) in await self.store.fetch(
                "SELECT DISTINCT owner FROM games WHERE status = 'playing' "
                "AND owner IS NOT NULL AND owner <> ?",
                (me,),
            )
        ]
        if not owners:
            return []
        pipe = self.node.redis.pipeline(transaction=False)
        for owner in owners:
            pipe.exists(keys.lease(owner))
        alive = await pipe.execute()
        rooms: list[Room] = []
        for owner, up in zip(owners, alive, strict=True):
            if not up:
                rooms += await self.take(owner)
        return rooms

    async def take(self, owner: str) -> list[Room]:
        """Claim, replay and serve the games in progress of ``owner`` (a dead node)."""
        me = self.node.node_id
        rows = await self.store.fetch(
            "SELECT id, epoch FROM games WHERE status = 'playing' AND owner = ?", (owner,)
        )
        won = await claim(self.store, me, owner, {str(i): int(e) for i, e in rows})
        if not won:
            return []
        rooms = await restore(self.node.hub, self.store, self.recorder, won)
        if len(rooms) < len(won):
            log.error(
                "%d of the %d games taken over from node %s could not be served here",
                len(won) - len(rooms), len(won), owner,
            )  # fmt: skip
        self.taken += len(rooms)
        self._unregistered += rooms
        if self.on_restored is not None and rooms:
            try:
                await self.on_restored(rooms)
            except Exception:  # served anyway, unrated: better than not at all
                log.exception("the games taken over from node %s could not be rated", owner)
        await self._register(rooms)
        log.warning("node %s took over %d games of node %s", me, len(rooms), owner)
        return rooms

    async def _register(self, rooms: list[Room]) -> None:
        """Point the room directory and the seats' session directory at this node."""
        node = self.node
        rooms = [r for r in rooms if node.hub.rooms.get(r.code) is r]  # still served here
        if not rooms:
            return
        by_id = {room.game_id: room for room in rooms}
        hashes = await self.store.games_sessions(sorted(g for g in by_id if g is not None))
        pipe = node.redis.pipeline(transaction=False)
        for room in rooms:
            pipe.hset(keys.ROOMS, room.code, node.node_id)
            node.owners.pop(room.code, None)
        for game_id, _, h in hashes:
            key = keys.session(str(h)[:32])  # the store keeps all of the sha256, Redis half
            pipe.hset(key, by_id[game_id].code, node.node_id)
            pipe.expire(key, keys.SESSION_TTL_S)
        await pipe.execute()
        done = {id(r) for r in rooms}
        self._unregistered = [r for r in self._unregistered if id(r) not in done]

    async def still_mine(self) -> bool:
        """After this node's lease had lapsed: whether every game it serves is still its
        own. If not, it fails-stop (``Fenced``) and registers nothing again."""
        mine: dict[str, int] = {}
        for room in self.node.hub.rooms.values():
            rec: Any = room.record
            if rec is not None and rec.owner is not None:
                mine[rec.id] = rec.epoch
        if not mine:
            return True
        ids = sorted(mine)
        lost: list[str] = []
        for i in range(0, len(ids), Store.CHUNK):
            part = ids[i : i + Store.CHUNK]
            marks = ", ".join("?" * len(part))
            for game_id, owner, epoch in await self.store.fetch(
                f"SELECT id, owner, epoch FROM games WHERE id IN ({marks})", tuple(part)
            ):
                if owner != self.node.node_id or int(epoch) != mine[game_id]:
                    lost.append(str(game_id))
        if not lost:
            return True
        self.fenced = True
        log.critical("node %s: %d of its games were taken over", self.node.node_id, len(lost))
        self.store.fail(Fenced(lost))
        return False
