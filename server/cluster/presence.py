"""Accounts across the nodes of a cluster: who is signed in where, challenges to an account
on another node, and a rotated or revoked token ending that account's sessions on every node.

Presence: one hash per account name, ``stacko:online:{normalized name}``: node -> how many
connected sessions there are signed in as it. A node writes its field in its flush pipeline
when the count changes (deferred to the flush: the count is taken once the welcome has set
the connection), rewrites them all whenever it (re)takes its lease, and on a fresh start
drops what its previous run wrote (``stacko:onlineby:{node}``). Readers skip (and delete)
the fields of nodes whose lease has expired: a dead node's presence disappears with it.

Challenges: a ``challenge`` to an account that is not online on the challenger's node is
forwarded, as a request (like a move for another node's room), to a node where it is
online. That node handles it as its own, the challenger a ``RemotePeer``: ``challenged``,
the timeout, ``decline_challenge`` and the room of an accepted challenge all live there,
and their frames reach the challenger through the inboxes. The node of a pending
challenge is kept in ``stacko:chal:{id}`` (expiring with it), so that an answer sent
through another node (the challenged account reconnected elsewhere) is forwarded too.

Revocation: the node that rotates or revokes a token posts ``["kick", account id]`` to the
inbox of every live node (``stacko:nodes``); each signs that account's sessions out and
closes their connections at once.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from stacko.protocol import messages
from stacko.protocol.errors import ErrorCode, ProtocolError
from stacko.server.accounts import normalize
from stacko.server.cluster import keys

if TYPE_CHECKING:
    from stacko.server.cluster.node import ClusterNode
    from stacko.server.hub import Session
    from stacko.server.room import Peer

log = logging.getLogger("stacko.cluster")

CHALLENGE_SLACK_MS = 5_000
"""How much longer a challenge's directory entry lives than the challenge."""


class Presence:
    def __init__(self, node: ClusterNode) -> None:
        self.node = node
        self.written: set[str] = set()
        """Names whose field this node holds in Redis (count above 0)."""

    # -- presence ----------------------------------------------------------------------

    def changed(self, name: str) -> None:
        """The sessions signed in as ``name`` (normalized) here changed: write at the flush."""
        self.node.command("presence", name)

    def write(self, pipe: Any, name: str) -> None:
        node_id = self.node.node_id
        link = self.node.hub.accounts
        count = link.online_count(name) if link is not None else 0
        if count:
            pipe.hset(keys.online(name), node_id, count)  # no expiry: online for days too
            if name not in self.written:
                self.written.add(name)
                pipe.sadd(keys.online_names(node_id), name)
        elif name in self.written:
            self.written.discard(name)
            pipe.hdel(keys.online(name), node_id)
            pipe.srem(keys.online_names(node_id), name)

    async def assert_all(self, fresh: bool) -> None:
        """With the lease: this node is in the node set and its presence is all there (after
        a Redis restart too); a fresh start first drops what a previous run left."""
        node_id, redis = self.node.node_id, self.node.redis
        link = self.node.hub.accounts
        now = set(link.online_names()) if link is not None else set()
        stale: set[str] = set()
        if fresh:
            found: Any = await redis.smembers(keys.online_names(node_id))
            stale = {n.decode() for n in found}
        pipe = redis.pipeline(transaction=False)
        pipe.sadd(keys.NODES, node_id)
        for name in stale - now:
            pipe.hdel(keys.online(name), node_id)
        if fresh:
            pipe.delete(keys.online_names(node_id))
            self.written.clear()
        for name in sorted(now):
            self.written.discard(name)  # written again below, with the name set
            self.write(pipe, name)
        await pipe.execute()

    async def nodes_of(self, name: str) -> list[str]:
        """The other live nodes where an account named ``name`` (normalized) is online."""
        redis = self.node.redis
        found: Any = await redis.hgetall(keys.online(name))
        nodes = sorted(
            n.decode() for n, c in found.items() if int(c) > 0 and n.decode() != self.node.node_id
        )
        if not nodes:
            return []
        pipe = redis.pipeline(transaction=False)
        for node in nodes:
            pipe.exists(keys.lease(node))
        alive = await pipe.execute()
        dead = [n for n, ok in zip(nodes, alive, strict=True) if not ok]
        if dead:  # a node that never comes back leaves nothing behind
            self.node.command("hdel", keys.online(name), *dead)
        return [n for n, ok in zip(nodes, alive, strict=True) if ok]

    # -- challenges ----------------------------------------------------------------------

    def local_only(self) -> bool:
        """Whether this request must be answered here: one forwarded here already is."""
        return self.node._applying

    def challenge(self, peer: Peer, session: Session, msg: messages.Challenge) -> None:
        """``msg.to`` is not online here: forward the challenge to a node where it is."""
        node = self.node
        if not node.up:
            raise ProtocolError(
                ErrorCode.SERVER_BUSY, "the cluster is unreachable just now; try again later"
            )
        node._queue_op(peer, msg, lambda: self._challenge(peer, session, msg))

    async def _challenge(self, peer: Peer, session: Session, msg: messages.Challenge) -> None:
        nodes = await self.nodes_of(normalize(msg.to))
        if not nodes:
            raise ProtocolError(ErrorCode.NOT_ONLINE, f"no account {msg.to} is online")
        self.node._send_request(nodes[0], peer, session, msg)

    def made(self, cid: str, timeout_s: float) -> None:
        ms = int(timeout_s * 1000) + CHALLENGE_SLACK_MS
        self.node.command("set", keys.challenge(cid), self.node.node_id, None, ms)

    def ended(self, cid: str) -> None:
        self.node.command("delete", keys.challenge(cid))

    def answer(
        self,
        peer: Peer,
        session: Session,
        msg: messages.AcceptChallenge | messages.DeclineChallenge,
    ) -> None:
        """An answer to a challenge this node does not hold: to the node that does."""
        node = self.node
        if not node.up:
            raise ProtocolError(
                ErrorCode.SERVER_BUSY, "the cluster is unreachable just now; try again later"
            )
        node._queue_op(peer, msg, lambda: self._answer(peer, session, msg))

    async def _answer(
        self,
        peer: Peer,
        session: Session,
        msg: messages.AcceptChallenge | messages.DeclineChallenge,
    ) -> None:
        node = self.node
        found: Any = await node.redis.get(keys.challenge(msg.challenge))
        holder = found.decode() if found is not None else None
        if (
            holder is None
            or holder == node.node_id
            or not await node.redis.exists(keys.lease(holder))
        ):
            raise ProtocolError(
                ErrorCode.UNKNOWN_CHALLENGE, f"no challenge {msg.challenge} for you"
            )
        node._send_request(holder, peer, session, msg)

    # -- revocation ------------------------------------------------------------------------

    def kick(self, account_id: str) -> None:
        """Tell every other live node to end ``account_id``'s sessions now."""
        self.node._spawn(self._kick(account_id))

    async def _kick(self, account_id: str) -> None:
        node = self.node
        try:
            members: Any = await node.redis.smembers(keys.NODES)
            others = sorted(m.decode() for m in members if m.decode() != node.node_id)
            pipe = node.redis.pipeline(transaction=False)
            for other in others:
                pipe.exists(keys.lease(other))
            alive = await pipe.execute() if others else []
        except (TimeoutError, RedisError, OSError) as exc:  # refused at the next hello anyway
            log.warning("could not tell the other nodes of a revoked token: %r", exc)
            node._redis_failed(exc)
            return
        for other, ok in zip(others, alive, strict=True):
            if ok:
                node.post_item(other, ["kick", account_id])

    def kicked(self, account_id: str) -> None:
        link = self.node.hub.accounts
        if link is not None:
            link.kick_here(account_id)
