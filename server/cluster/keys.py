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
local prefix, base, growth, maxwait, now = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4]), tonumber(ARGV[5])
local function parse(t)
  local node, conn, h, acct, r, since = string.match(t,
    '^([^|]*)|([^|]*)|([^|]*)|[^|]*|[^|]*|([^|]*)|([^|]*)|([^|]*)|')
  if node == nil or tonumber(conn) == nil or tonumber(since) == nil then return nil end
  return {node = node, conn = tonumber(conn), h = h, acct = acct, r = tonumber(r),
          since = tonumber(since)}
end
local incs = {}
local function live(p)
  if not p then return false end
  local inc = incs[p.node]
  if inc == nil then
    inc = tonumber(redis.call('GET', prefix .. p.node)) or false
    incs[p.node] = inc
  end
  return inc and p.conn >= inc
end
local function acceptable(a, b)
  if a.h == b.h then return false end
  if a.r == nil or b.r == nil then return true end
  if a.acct ~= '' and a.acct == b.acct then return false end
  local waited = now - math.min(a.since, b.since)
  if waited >= maxwait then return true end
  return math.abs(a.r - b.r) <= base + growth * math.max(0, waited)
end
local taken = {}
local function best(t, p)
  local pick, gap = nil, nil
  for _, o in ipairs(redis.call('ZRANGE', KEYS[1], 0, 127)) do
    if o ~= t and not taken[o] then
      local q = parse(o)
      if not live(q) then
        redis.call('ZREM', KEYS[1], o)
      elseif acceptable(p, q) then
        local g = 0
        if p.r ~= nil and q.r ~= nil then g = math.abs(p.r - q.r) end
        if gap == nil or g < gap then pick, gap = o, g end
        if g == 0 then break end
      end
    end
  end
  return pick
end
if ARGV[6] == 'new' then
  local p = parse(ARGV[7])
  local other = best(ARGV[7], p)
  if other then
    redis.call('ZREM', KEYS[1], other)
    return other
  end
  local n = redis.call('INCR', KEYS[2])
  redis.call('ZADD', KEYS[1], n, ARGV[7])
  return redis.call('ZCARD', KEYS[1])
end
local pairs_made = {}
for i = 7, #ARGV do
  local t = ARGV[i]
  if not taken[t] and redis.call('ZSCORE', KEYS[1], t) then
    local other = best(t, parse(t))
    if other then
      redis.call('ZREM', KEYS[1], t, other)
      taken[t], taken[other] = true, true
      table.insert(pairs_made, t)
      table.insert(pairs_made, other)
    end
  end
end
return pairs_made
"""
"""Quick match by strength (``server.matchmaking``'s rule), atomically. Tickets are
``node|conn|token hash|nonce|game|account|rating|since|name`` (``account``: ``id:kind`` of a
signed-in session, else empty; ``rating``: the account's in this game, empty for a guest;
``since``: when it was queued, in the node's seconds since the epoch). ``ARGV``: the lease
prefix, the window's ``BASE``, ``GROWTH`` and ``MAX_WAIT_S``, now, then ``new`` and the
caller's ticket: pop the acceptable ticket of the closest rating (ties: the oldest) that is
not the caller's session's and return it, or enqueue the caller's ticket and return the
queue's length; or ``sweep`` and the node's own waiting tickets (oldest first): pair each
still queued one the same way, removing both, and return the pairs flat ``[mine, theirs,
...]``. Tickets of dead nodes, of an earlier run of a node that restarted (connection ids
below its lease's incarnation) and unreadable ones are dropped on the way. Only the first 128
tickets are looked at: the oldest, whose windows open first."""


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
