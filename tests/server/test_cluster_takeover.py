"""Takeover with a shared PostgreSQL store (``server.cluster.takeover``): a real
``redis-server`` and a real PostgreSQL (both fixtures). Node processes are killed
(SIGKILL) or paused (SIGSTOP) and resumed (SIGCONT); waits are bounded polls, never timing
assertions."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import redis.asyncio as aioredis
from stacko_wire import Client

from stacko.server.app import Server
from stacko.server.cluster import keys
from stacko.server.cluster.local import free_port, wait_port
from stacko.server.cluster.takeover import claim
from stacko.server.config import ServerConfig
from stacko.server.store import make_store
from stacko.server.store.base import FENCE, Fenced, StoreError
from stacko.server.store.recorder import EVENT_SQL

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 60.0
"""The bound of every poll (a loaded machine is slow; nothing here measures time)."""


async def until(check: Callable[[], Awaitable[Any]], what: str, bound: float = WAIT_S) -> Any:
    """Poll ``check`` until it returns something true (bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound
    while True:
        got = await check()
        if got:
            return got
        if loop.time() > deadline:
            raise AssertionError(f"not within {bound} s: {what}")
        await asyncio.sleep(0.1)


class Node:
    """A ``stacko-server`` process of the cluster, on the shared PostgreSQL database."""

    def __init__(self, redis_url: str, dsn: str, index: int, data: Path, lease_s: float) -> None:
        self.redis_url = redis_url
        self.dsn = dsn
        self.index = index
        self.data = data
        self.lease_s = lease_s
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data / f"n{index}.log"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}/"

    def start(self) -> None:
        self.data.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "stacko.server", "--port", str(self.port),
                 "--redis-url", self.redis_url, "--database", self.dsn,
                 "--node-id", f"n{self.index}", "--data-dir", str(self.data),
                 "--lease-s", str(self.lease_s), "--bot-workers", "0",
                 "--reconnect-grace-s", "120", "--log-level", "WARNING",
                 "--burst", "100000", "--hello-burst-per-ip", "100000",
                 "--max-connections-per-ip", "0", "--new-connections-per-ip-per-s", "0"],
                cwd=ROOT, env=env, stderr=log,
            )  # fmt: skip
        wait_port(self.port, self.proc)

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        assert self.proc is not None
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


async def connect(node: Node, name: str, token: str | None = None) -> Client:
    c = await Client.open(node.ws, f"{name}@n{node.index}")
    await c.hello(name, token)
    return c


async def resume(node: Node, name: str, token: str, code: str, clients: list[Client]) -> Client:
    """Resume ``token`` through ``node`` until the room's state comes (a node told to come
    back later, while the takeover is under way, is asked again)."""

    async def attempt() -> Client | None:
        c = await connect(node, name, token)
        clients.append(c)
        while True:
            if c.latest.get(code) is not None:
                return c
            if any(f.get("type") == "error" and f.get("room") == code for f in c.frames):
                await c.ws.close()
                return None
            if c.done.is_set():
                return None
            await asyncio.sleep(0.05)

    return await until(attempt, f"{name} resumes room {code} through n{node.index}")


async def play(mover: Client, other: Client, code: str) -> int:
    """The seat to move plays its first legal move; both see the new state. Its ply."""
    state = mover.latest[code]
    assert state["legal"], state
    reply = await mover.call("move", room=code, ply=state["view"]["ply"], move=state["legal"][0])
    assert reply["type"] == "state", reply
    await other.expect("state", room=code, seq=reply["seq"], timeout=WAIT_S)
    return int(reply["view"]["ply"])


def to_move(a: Client, b: Client, code: str) -> tuple[Client, Client]:
    return (a, b) if a.latest[code]["legal"] else (b, a)


async def play_out(a: Client, b: Client, code: str, ply: int) -> None:
    """Both play to the end; the ply only goes up."""
    for _ in range(5000):
        if a.latest[code]["view"].get("outcome") is not None:
            break
        mover, other = to_move(a, b, code)
        new = await play(mover, other, code)
        assert new > ply
        ply = new
    assert a.latest[code]["view"]["outcome"] is not None
    assert b.latest[code]["view"]["outcome"] == a.latest[code]["view"]["outcome"]


async def owner_of(dsn: str, code: str) -> tuple[str, int] | None:
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(
            "SELECT owner, epoch FROM games WHERE code = $1 ORDER BY started_ms DESC LIMIT 1", code
        )
    finally:
        await conn.close()
    return None if row is None else (row[0], row[1])


async def start_game(owner: Node, other: Node, clients: list[Client]) -> tuple[Client, Client, str]:
    alice = await connect(owner, "alice")
    bob = await connect(other, "bob")
    clients += [alice, bob]
    code = (await alice.call("create_room", game="stacko", options={}))["room"]
    assert (await bob.call("join", room=code))["type"] == "joined"
    await alice.expect("state", room=code)
    await bob.expect("state", room=code)
    for _ in range(3):
        await play(*to_move(alice, bob, code), code)
    return alice, bob, code


async def start_in_process(
    servers: list[Server], redis_url: str, dsn: str, leases: tuple[float, ...]
) -> None:
    """Nodes ``n0``, ``n1``... in this process on one PostgreSQL, one per lease, each
    appended to ``servers`` once started (so that the caller's cleanup stops what started)."""
    for i, lease in enumerate(leases):
        cfg = ServerConfig(
            port=0, redis_url=redis_url, node_id=f"n{i}", bot_workers=0,
            burst=1_000_000, hello_burst_per_ip=1_000_000, max_connections_per_ip=0,
            lease_s=lease,
        )  # fmt: skip
        server = Server(cfg, bots=({}, None), store=make_store(dsn))
        await server.start()
        servers.append(server)


@pytest.fixture
def nodes(redis_server, pg_cluster, tmp_path):
    dsn = pg_cluster.fresh_db()
    made: list[Node] = []

    def make(n: int = 3, lease_s: float = 1.5) -> list[Node]:
        for i in range(n):
            node = Node(redis_server.url, dsn, i, tmp_path / f"n{i}", lease_s)
            node.start()
            made.append(node)
        return made

    yield make
    for node in made:
        node.stop()


async def test_kill_the_owner_another_node_takes_over(nodes):
    """SIGKILL the owner mid-game: a surviving node takes the game over; Alice (on the
    dead node) resumes through another node, Bob (on a surviving one) gets his seat back
    on his connection without asking; they finish the game; the ply never goes back."""
    n0, n1, n2 = nodes(3)
    clients: list[Client] = []
    try:
        alice, bob, code = await start_game(n0, n1, clients)
        ply = alice.latest[code]["view"]["ply"]
        assert await owner_of(n0.dsn, code) == ("n0", 0)
        bob.drain()
        n0.kill()

        async def taken() -> Any:
            found = await owner_of(n0.dsn, code)
            return found if found is not None and found[0] != "n0" else None

        new_owner, epoch = await until(taken, "another node takes the game over")
        assert new_owner in ("n1", "n2") and epoch == 1
        assert alice.token is not None and bob.token is not None
        alice2 = await resume(n2, "alice", alice.token, code, clients)
        back = await bob.expect("joined", room=code, timeout=WAIT_S)
        assert back["seat"] == 1, back
        await bob.expect("state", room=code, timeout=WAIT_S)
        for c in (alice2, bob):
            assert c.latest[code]["view"]["ply"] == ply  # never earlier, never half a move
            assert c.latest[code]["view"].get("outcome") is None
        await play_out(alice2, bob, code, ply)
        assert await owner_of(n0.dsn, code) == (new_owner, 1)
        for c in clients:
            assert not c.invalid, c.invalid
    finally:
        await asyncio.gather(*(c.ws.close() for c in clients), return_exceptions=True)


async def test_a_paused_owner_is_fenced(nodes):
    """SIGSTOP the owner until another node took its game over, with a move of Alice's
    waiting in its socket; SIGCONT: its write is refused, it closes Alice with 1012
    ``fenced`` having shown her nothing of that move, and stops; the game goes on at the
    new owner from the committed ply."""
    n0, n1, n2 = nodes(3)
    clients: list[Client] = []
    try:
        alice, bob, code = await start_game(n0, n1, clients)
        if to_move(alice, bob, code)[0] is bob:
            await play(bob, alice, code)
        state = alice.latest[code]
        ply = state["view"]["ply"]
        n0.signal(signal.SIGSTOP)
        alice.drain()
        await alice.request("move", room=code, ply=ply, move=state["legal"][0])

        async def taken() -> Any:
            found = await owner_of(n0.dsn, code)
            return found if found is not None and found[0] != "n0" else None

        new_owner, _ = await until(taken, "another node takes the game over")
        assert bob.token is not None and alice.token is not None
        bob2 = await resume(n1, "bob", bob.token, code, clients)
        assert bob2.latest[code]["view"]["ply"] == ply
        n0.signal(signal.SIGCONT)
        await until(lambda: asyncio.sleep(0, alice.done.is_set()), "n0 closes alice")
        assert (alice.ws.close_code, alice.ws.close_reason) == (1012, "fenced")
        seen = [f for f in alice.drain() if f.get("type") == "state"]
        assert seen == [], seen  # nothing of the move it could not commit
        assert n0.proc is not None
        assert await asyncio.to_thread(n0.proc.wait, WAIT_S) == 1
        assert "taken over" in n0.log.read_text()
        assert all(f["view"]["ply"] == ply for f in bob2.frames if f.get("type") == "state")
        n0.start()  # restarted by its supervisor: it claims nothing of the new owner's
        assert await owner_of(n0.dsn, code) == (new_owner, 1)
        # the game goes on at the new owner, from the committed ply
        alice2 = await resume(n2, "alice", alice.token, code, clients)
        assert alice2.latest[code]["view"]["ply"] == ply
        mover, other = to_move(alice2, bob2, code)
        assert mover is alice2
        assert await play(mover, other, code) > ply
        await play(*to_move(alice2, bob2, code), code)
        assert await owner_of(n0.dsn, code) == (new_owner, 1)
        conn = await asyncpg.connect(n0.dsn)
        try:
            plies = [
                r[0]
                for r in await conn.fetch(
                    "SELECT e.ply FROM event_log e JOIN games g ON g.id = e.game_id "
                    "WHERE g.code = $1 ORDER BY e.seq, e.id",
                    code,
                )
            ]
        finally:
            await conn.close()
        assert plies == sorted(set(plies)) and plies[-1] == ply + 2, plies
        for c in clients:
            assert not c.invalid, c.invalid
    finally:
        await asyncio.gather(*(c.ws.close() for c in clients), return_exceptions=True)


async def test_a_node_restarted_within_its_lease_drops_its_old_peers(nodes):
    """A non-owner node killed and restarted before its lease lapses: the owner sees a new
    incarnation in the lease and gives the seats of the old run's clients the grace."""
    n0, n1 = nodes(2, lease_s=10)
    clients: list[Client] = []
    try:
        alice, bob, code = await start_game(n0, n1, clients)
        alice.drain()
        n1.kill()
        n1.start()  # well within the 10 s lease
        gone = await alice.expect("room", room=code, text="bob disconnected", timeout=WAIT_S)
        assert gone["forfeit_ms"]["1"] > 0
        assert bob.token is not None
        bob2 = await resume(n1, "bob", bob.token, code, clients)
        await play(*to_move(alice, bob2, code), code)
    finally:
        await asyncio.gather(*(c.ws.close() for c in clients), return_exceptions=True)


async def test_a_restarted_nodes_old_quick_match_ticket_is_dropped(nodes):
    """A ticket queued through a node that then restarted within its lease belongs to a
    connection that is gone: the next player is queued, not paired with it."""
    n0, n1 = nodes(2, lease_s=10)
    clients: list[Client] = []
    try:
        ghost = await connect(n1, "ghost")
        clients.append(ghost)
        queued = await ghost.call("quick_match", game="stacko")
        assert queued["type"] == "queued", queued
        n1.kill()
        n1.start()  # well within the 10 s lease
        carol = await connect(n0, "carol")
        clients.append(carol)
        reply = await carol.call("quick_match", game="stacko")
        assert reply["type"] == "queued", reply
    finally:
        await asyncio.gather(*(c.ws.close() for c in clients), return_exceptions=True)


# -- in one process: the compare-and-set, fencing, and two nodes racing ----------------------


async def test_a_fenced_append_commits_nothing(pg_cluster):
    """An append fenced by an owner and epoch commits while they hold; after another node
    claimed the game it is refused (``Fenced``), with nothing of its batch committed."""
    dsn = pg_cluster.fresh_db()
    a, b = make_store(dsn), make_store(dsn)
    assert a is not None and b is not None
    await a.open()
    await b.open()
    try:
        await a.execute([(
            "INSERT INTO games (id, code, game, options, rules_version, public, players, "
            "player0, player1, status, started_ms, owner) "
            "VALUES ('g1', 'ABCD', 'stacko', '{}', 1, 0, '[]', 'a', 'b', 'playing', 1, 'A')",
            (),
        )])  # fmt: skip
        event = (EVENT_SQL, ("g1", 1, "move", 0, 1, "{}", 1))
        a.submit([(FENCE, ("g1", "A", 0)), event])
        await a.flush()
        assert await claim(b, "B", "A", {"g1": 0}) == {"g1": 1}
        assert await claim(b, "C", "A", {"g1": 0}) == {}  # once only
        a.submit([(FENCE, ("g1", "A", 0)), (EVENT_SQL, ("g1", 2, "move", 1, 2, "{}", 2))])
        with pytest.raises(StoreError):
            await a.flush()
        assert isinstance(a.failed, Fenced) and a.failed.games == ["g1"]
        assert await b.fetch("SELECT seq FROM events WHERE game_id = 'g1'") == [(1,)]
        assert await b.fetch("SELECT owner, epoch FROM games") == [("B", 1)]
    finally:
        await a.close()
        await b.close()


async def test_two_nodes_racing_claim_each_game_once(redis_server, pg_cluster):
    """Two live nodes take the games of a third over at the same moment (and their own
    lease ticks may too): each game is claimed and served exactly once."""
    dsn = pg_cluster.fresh_db()
    servers: list[Server] = []
    clients: list[Client] = []
    try:
        await start_in_process(servers, redis_server.url, dsn, (1.5, 1.5, 1.5))
        codes = []
        for k in range(6):
            a = await Client.open(servers[0].url, f"a{k}")
            b = await Client.open(servers[0].url, f"b{k}")
            clients += [a, b]
            await a.hello(f"a{k}")
            await b.hello(f"b{k}")
            code = (await a.call("create_room", game="stacko", options={}))["room"]
            assert (await b.call("join", room=code))["type"] == "joined"
            await a.expect("state", room=code)
            codes.append(code)
        n0, n1, n2 = servers
        await n0.cluster.stop()  # its lease goes: n0 is dead to the others
        t1, t2 = n1.cluster.takeover, n2.cluster.takeover
        got1, got2 = await asyncio.gather(t1.take("n0"), t2.take("n0"))

        def served() -> tuple[set[str], set[str]]:
            return set(codes) & set(n1.hub.rooms), set(codes) & set(n2.hub.rooms)

        await until(lambda: asyncio.sleep(0, sum(map(len, served())) >= len(codes)), "served")
        on1, on2 = served()
        assert not on1 & on2 and on1 | on2 == set(codes)
        assert {r.code for r in got1} <= on1 and {r.code for r in got2} <= on2
        assert t1.taken + t2.taken == len(codes)
        assert await t1.take("n0") == [] and await t2.take("n0") == []  # idempotent
        rows = await n1.store.fetch("SELECT code, owner, epoch FROM games")
        assert sorted(rows) == sorted((c, "n1" if c in on1 else "n2", 1) for c in codes)
        r = aioredis.from_url(redis_server.url)
        try:
            directory = await r.hmget(keys.ROOMS, codes)
        finally:
            await r.aclose()
        assert [d.decode() for d in directory] == ["n1" if c in on1 else "n2" for c in codes]
        metrics = n1.metrics.render().decode() + n2.metrics.render().decode()
        counts = [
            float(line.split()[-1])
            for line in metrics.splitlines()
            if line.startswith("stacko_cluster_takeovers_total")
        ]
        assert sum(counts) == len(codes)
    finally:
        await asyncio.gather(*(c.ws.close() for c in clients), return_exceptions=True)
        for s in servers:
            await s.shutdown()


@pytest.mark.parametrize("outage", ["restart", "pause"])
async def test_a_redis_outage_takes_nothing_over(redis_server, pg_cluster, outage):
    """Redis restarts empty, or stops answering for longer than a lease (SIGSTOP): every
    lease is missing at once, yet no live node's game is taken over (a node waits a whole
    lease after Redis lost its data or its own lease), and the game goes on across the
    nodes."""
    dsn = pg_cluster.fresh_db()
    servers: list[Server] = []
    clients: list[Client] = []
    try:
        await start_in_process(servers, redis_server.url, dsn, (1.5, 1.5))
        # the owner is the node started last: the first to tick after Redis comes back
        # finds it without a lease
        alice = await Client.open(servers[1].url, "alice")
        bob = await Client.open(servers[0].url, "bob")
        clients += [alice, bob]
        await alice.hello("alice")
        await bob.hello("bob")
        code = (await alice.call("create_room", game="stacko", options={}))["room"]
        assert (await bob.call("join", room=code))["type"] == "joined"
        await alice.expect("state", room=code)
        await bob.expect("state", room=code)
        await play(*to_move(alice, bob, code), code)
        if outage == "restart":
            redis_server.kill()
            redis_server.start()
        else:
            assert redis_server.proc is not None
            redis_server.proc.send_signal(signal.SIGSTOP)
            try:
                await until(
                    lambda: asyncio.sleep(0, all(s.cluster.redis_errors for s in servers)),
                    "both nodes find Redis gone",
                )
                await asyncio.sleep(2 * 1.5)  # every lease (1.5 s) lapses meanwhile
            finally:
                redis_server.proc.send_signal(signal.SIGCONT)
        takers = [s.cluster.takeover for s in servers]
        marks = [t.scans for t in takers]

        async def scanned() -> bool:  # two leases of ticks after Redis came back
            return all(t.scans >= m + 6 for t, m in zip(takers, marks, strict=True))

        await until(scanned, "the nodes look for dead nodes again and again")
        assert [t.taken for t in takers] == [0, 0]
        assert not any(t.fenced for t in takers) and servers[1].store.failed is None
        assert await servers[0].store.fetch("SELECT owner, epoch FROM games") == [("n1", 0)]

        async def moved() -> bool:  # a cross-node request may be refused until re-asserted
            mover, other = to_move(alice, bob, code)
            state = mover.latest[code]
            reply = await mover.call(
                "move", room=code, ply=state["view"]["ply"], move=state["legal"][0]
            )
            if reply["type"] == "error":
                assert reply["code"] == "server_busy", reply
                return False
            await other.expect("state", room=code, seq=reply["seq"], timeout=WAIT_S)
            return True

        await until(moved, "a move after Redis came back")
        await play(*to_move(alice, bob, code), code)
        await play(*to_move(alice, bob, code), code)
    finally:
        await asyncio.gather(*(c.ws.close() for c in clients), return_exceptions=True)
        for s in servers:
            await s.shutdown()


async def test_no_takeover_within_a_lease_of_losing_redis(redis_server, pg_cluster):
    """A node that just lost Redis (or its own lease) does not take a missing lease for a
    dead node: every node may have lost Redis too, and not re-asserted yet. A lease
    later, with Redis answering throughout, it does take the dead node's games over."""
    dsn = pg_cluster.fresh_db()
    servers: list[Server] = []
    clients: list[Client] = []
    try:
        await start_in_process(servers, redis_server.url, dsn, (3, 3))
        alice = await Client.open(servers[1].url, "alice")
        bob = await Client.open(servers[1].url, "bob")
        clients += [alice, bob]
        await alice.hello("alice")
        await bob.hello("bob")
        code = (await alice.call("create_room", game="stacko", options={}))["room"]
        assert (await bob.call("join", room=code))["type"] == "joined"
        await alice.expect("state", room=code)
        n0 = servers[0].cluster
        await until(n0.takeover.continuous, "n0 saw Redis answer for a lease since it started")
        n0._redis_failed(ConnectionError("a test: Redis was unreachable"))
        await servers[1].cluster.stop()  # n1 is dead to n0 (within a second: BLOCK_MS)
        assert await n0.takeover.scan() == []  # too soon to call anyone dead
        assert await servers[0].store.fetch("SELECT owner, epoch FROM games") == [("n1", 0)]
        await until(lambda: asyncio.sleep(0, code in servers[0].hub.rooms), "n0 takes over")
        assert n0.takeover.taken == 1
        assert await servers[0].store.fetch("SELECT owner, epoch FROM games") == [("n0", 1)]
    finally:
        await asyncio.gather(*(c.ws.close() for c in clients), return_exceptions=True)
        for s in servers:
            await s.shutdown()


async def test_a_client_on_a_surviving_node_gets_its_seat_back(redis_server, pg_cluster):
    """Bob stays connected to his node (n1) while the owner (n0) dies and a third node (n2)
    takes the game over: n1 finds the new owner in the session directory and gives Bob's
    seat his connection back, without Bob asking; his moves reach n2."""
    dsn = pg_cluster.fresh_db()
    servers: list[Server] = []
    clients: list[Client] = []
    try:
        # n1 takes nothing over for 6 s
        await start_in_process(servers, redis_server.url, dsn, (1.5, 6.0, 1.5))
        alice = await Client.open(servers[0].url, "alice")
        bob = await Client.open(servers[1].url, "bob")
        clients += [alice, bob]
        await alice.hello("alice")
        await bob.hello("bob")
        code = (await alice.call("create_room", game="stacko", options={}))["room"]
        assert (await bob.call("join", room=code))["type"] == "joined"
        await alice.expect("state", room=code)
        await bob.expect("state", room=code)
        await play(*to_move(alice, bob, code), code)
        ply = bob.latest[code]["view"]["ply"]
        bob.drain()
        await servers[0].cluster.stop()  # n0 is dead to the others
        taken = await servers[2].cluster.takeover.take("n0")
        assert [r.code for r in taken] == [code]
        back = await bob.expect("joined", room=code, timeout=WAIT_S)
        assert back["seat"] == 1, back
        state = await bob.expect("state", room=code, timeout=WAIT_S)
        assert state["view"]["ply"] == ply
        assert alice.token is not None
        alice2 = await Client.open(servers[2].url, "alice@n2")
        clients.append(alice2)
        await alice2.hello("alice", alice.token)
        await alice2.expect("state", room=code)
        await play(*to_move(alice2, bob, code), code)
        await play(*to_move(alice2, bob, code), code)
        assert servers[2].hub.rooms[code].game.ply == ply + 2
    finally:
        await asyncio.gather(*(c.ws.close() for c in clients), return_exceptions=True)
        for s in servers:
            await s.shutdown()


async def test_a_rated_game_taken_over_stays_rated(redis_server, pg_cluster):
    """The accounts of a rated game are in the shared store: the node that takes the game
    over rates it too."""
    from test_accounts import SMALL, register

    dsn = pg_cluster.fresh_db()
    servers: list[Server] = []
    clients: list[Client] = []
    try:
        await start_in_process(servers, redis_server.url, dsn, (1.5, 1.5))
        signed = []
        for name in ("Alice", "Bobby"):
            _, account = await register(servers[0].port, name)
            c = await Client.open(servers[0].url, name)
            clients.append(c)
            welcome = await c.call("hello", protocol=1, name=name, account=account["token"])
            assert welcome["type"] == "welcome", welcome
            signed.append(c)
        ca, cb = signed
        code = (await ca.call("create_room", options=SMALL, public=False, rated=True))["room"]
        assert (await cb.call("join", room=code))["type"] == "joined"
        await ca.expect("state", room=code)
        assert servers[0].hub.rooms[code].rated
        await servers[0].cluster.stop()  # n0 is dead to n1
        taken = await servers[1].cluster.takeover.take("n0")
        assert [r.code for r in taken] == [code] and servers[1].hub.rooms[code].rated
    finally:
        await asyncio.gather(*(c.ws.close() for c in clients), return_exceptions=True)
        for s in servers:
            await s.shutdown()
