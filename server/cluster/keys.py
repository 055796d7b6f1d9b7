"""The Redis keys and Lua scripts a cluster shares (one place, so that every node agrees).

Every key starts with ``stacko:``. A node is alive while its lease key exists; everything a
node registers (room codes, lobby entries, quick-match tickets) names the node, so a dead
node's entries are recognised by its missing lease, never by a scan or a cleanup by hand.
"""

from __future__ import annotations

import hashlib

ROOMS = "stacko:rooms"
"""Hash: room code -> owner node id (codes are claimed with HSETNX: unique in the cluster)."""
LOBBY_INFO = "stacko:lobbyinfo"
"""Hash: room code -> ``{"n": node, "i": info}`` for the rooms a lobby index lists."""
TICKETS = "stacko:qseq"
"""Counter: the order of quick-match tickets."""
BOOT = "stacko:boot"
"""A random value set once (``SET NX``) into an empty Redis: when it changes, Redis lost its
data (a restart) and every lease with it, so no missing lease means a dead node until the
live ones had a whole lease to re-assert theirs (``server.cluster.takeover``)."""


def lease(node: str) -> str:
    return f"stacko:node:{node}"


LEASE_PREFIX = "stacko:node:"


def inbox(node: str) -> str:
    return f"stacko:inbox:{node}"


def queue(game: str) -> str:
    return f"stacko:q:{game}"


def lobby(game: str | None) -> str:
    """Sorted set of listable public rooms of ``game`` (``None``: every game), scored by
    when they became listable (microseconds): ``list_rooms`` pages by score."""
    return f"stacko:lobby:{game or '*'}"


def session(token_hash: str) -> str:
    """Hash: room code -> owner node, for each room where the session took a seat (the
    session directory: a client resumes through any node). Expires a day after the last seat."""
    return f"stacko:sess:{token_hash}"


SESSION_TTL_S = 86_400


def token_hash(token: str) -> str:
    """What is kept of a session token outside the node it came from."""
    return hashlib.sha256(token.encode()).hexdigest()[:32]


OWNER = """
local node = redis.call('HGET', KEYS[1], ARGV[1])
if node and redis.call('EXISTS', ARGV[2] .. node) == 1 then return node end
if node then return {node} end
return false
"""
"""The live owner of a code; ``{node}`` (a table) if its node's lease has expired."""

MATCH = """
local items = redis.call('ZRANGE', KEYS[1], 0, 127)
for _, t in ipairs(items) do
  local node, conn, h = string.match(t, '^([^|]*)|([^|]*)|([^|]*)|')
  local inc = node and redis.call('GET', ARGV[3] .. node)
  if node == nil or not inc or tonumber(conn) < tonumber(inc) then
    redis.call('ZREM', KEYS[1], t)
  elseif h ~= ARGV[2] then
    redis.call('ZREM', KEYS[1], t)
    return t
  end
end
local n = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[1], n, ARGV[1])
return redis.call('ZCARD', KEYS[1])
"""
"""Quick match, atomically: pop the oldest live ticket that is not the caller's session's
(tickets of dead nodes, and of an earlier run of a node that restarted: connection ids
below its lease's incarnation, are dropped on the way) and return it, or enqueue the caller's
ticket and return the queue's length. Tickets are ``node|conn|token hash|nonce|game|account|name``
(``account``: ``id:kind`` of a signed-in session, else empty)."""


NODES = "stacko:nodes"
"""Set: every node id that ever took a lease (a broadcast goes to those whose lease lives)."""


def online(name: str) -> str:
    """Hash: node -> how many connected sessions there are signed in as the account whose
    normalized name is ``name`` (presence; fields of a node whose lease expired are dead)."""
    return f"stacko:online:{name}"


def online_names(node: str) -> str:
    """Set: the names whose presence ``node`` wrote (cleared when it starts afresh)."""
    return f"stacko:onlineby:{node}"


def challenge(cid: str) -> str:
    """String: the node that holds pending challenge ``cid`` (expires with it)."""
    return f"stacko:chal:{cid}"
