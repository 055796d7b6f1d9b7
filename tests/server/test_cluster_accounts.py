"""Accounts on a cluster (issues 16 and 17): challenges between accounts online on different
nodes, presence that dies with its node, and a revoked token that ends the account's
connections on every node at once. In-process nodes on one real redis-server and one store
(a shared SQLite file, or PostgreSQL), as in production."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio
from redis.exceptions import RedisError
from stacko_wire import Client
from test_accounts import SMALL, http, register

from stacko.server import matchmaking
from stacko.server.app import Server
from stacko.server.cluster import keys
from stacko.server.cluster.local import free_port, wait_port
from stacko.server.config import ServerConfig
from stacko.server.store import make_store

ROOT = Path(__file__).resolve().parents[2]


class Nodes:
    def __init__(self) -> None:
        self.nodes: list[Server] = []
        self.clients: list[Client] = []

    async def start(self, url: str, store_spec: tuple[Any, ...], n: int, **config: Any) -> None:
        for i in range(n):
            cfg = ServerConfig(
                port=0, redis_url=url, node_id=f"n{i}", bot_workers=0, burst=1_000_000,
                hello_burst_per_ip=1_000_000, max_connections_per_ip=0, lease_s=1.5,
                registrations_per_hour=1000, **config,
            )  # fmt: skip
            store = make_store(*store_spec, node_id=cfg.node_id, shared=True)  # as a node's
            server = Server(cfg, bots=({}, None), store=store)
            await server.start()
            self.nodes.append(server)

    async def signed_in(self, node: int, token: str, name: str) -> Client:
        c = await Client.open(self.nodes[node].url, f"{name}@n{node}")
        self.clients.append(c)
        welcome = await c.call("hello", protocol=1, name=name, account=token)
        assert welcome["type"] == "welcome" and welcome["account"]["name"] == name, welcome
        c.token = welcome["session"]
        return c

    async def stop(self) -> None:
        await asyncio.gather(*(c.ws.close() for c in self.clients if not c.done.is_set()))
        for node in self.nodes:
            if node.cluster is not None:
                await node.shutdown()


@pytest.fixture
async def nodes(redis_server):
    made: list[Nodes] = []

    def make() -> Nodes:
        made.append(Nodes())
        return made[-1]

    yield make
    for m in made:
        await asyncio.wait_for(m.stop(), 20)


async def accounts(port: int, *names: str) -> list[str]:
    tokens = []
    for name in names:
        status, body = await register(port, name)
        assert status == 201, body
        tokens.append(body["token"])
    return tokens


async def online_on(node: Server, name: str, want: int) -> None:
    """Bounded wait until ``node`` sees ``name`` online on ``want`` other nodes."""
    presence = node.cluster.presence
    for _ in range(200):
        if len(await presence.nodes_of(name)) == want:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{name} is not online on {want} other nodes")


async def rate(
    store: Any,
    name: str,
    mu: float,
    sigma: float = 100.0,
    games: int = 20,
    wins: int = 10,
    losses: int = 10,
) -> Any:
    """Give account ``name`` a Stacko rating in the store; its id."""
    (account_id,) = (await store.fetch("SELECT id FROM accounts WHERE name = ?", (name,)))[0]
    await store.execute(
        [
            (
                "INSERT INTO ratings (account_id, game, mu, sigma, games, wins, draws, losses, "
                "updated_ms) VALUES (?, 'stacko', ?, ?, ?, ?, 0, ?, 1)",
                (account_id, mu, sigma, games, wins, losses),
            )
        ]
    )
    return account_id


def hold_loads(ratings: Any, account_id: Any) -> asyncio.Event:
    """Hold every load of ``account_id``'s ratings on ``ratings`` until the event is set."""
    real = ratings.load
    release = asyncio.Event()

    async def held(account: Any) -> None:
        if account.id == account_id:
            await release.wait()
        await real(account)

    ratings.load = held
    return release


async def test_challenges_between_nodes(nodes, redis_server, store_spec):
    ns = nodes()
    await ns.start(redis_server.url, store_spec, 3, challenge_timeout_s=4)
    n0, n1, _ = ns.nodes
    ta, tb = await accounts(n0.port, "Alice", "Bobby")
    ca = await ns.signed_in(0, ta, "Alice")
    cb = await ns.signed_in(1, tb, "Bobby")
    await online_on(n0, "bobby", 1)
    # Accepted: the room is on Bobby's node, Alice plays it from hers; rated, both credited.
    sent = await ca.call("challenge", to="bobby", game="stacko", options=SMALL, rated=True)
    assert sent["type"] == "challenge_sent" and sent["to"] == "Bobby", sent
    seen = await cb.expect("challenged", challenge=sent["challenge"])
    assert seen["account"] == {"name": "Alice", "kind": "human"} and seen["rated"]
    joined = await cb.call("accept_challenge", challenge=seen["challenge"])
    assert joined["type"] == "joined" and joined["seat"] == 1, joined
    code = joined["room"]
    assert (await ca.expect("joined", room=code))["seat"] == 0
    assert code in n1.hub.rooms and n1.hub.rooms[code].rated
    await ca.expect("state", room=code)
    assert (await ca.call("resign", room=code))["type"] != "error"
    ratings = [await c.expect("rating", room=code) for c in (ca, cb)]
    assert ratings[0] == ratings[1]
    changes = {c["name"]: c["delta"] for c in ratings[0]["changes"]}
    assert changes["Bobby"] > 0 > changes["Alice"]
    for _ in range(100):  # committed by Bobby's node, read through Alice's
        status, profile = await http(n0.port, "/api/players/Alice")
        if profile.get("ratings", {}).get("stacko", {}).get("losses") == 1:
            break
        await asyncio.sleep(0.05)
    assert status == 200 and profile["ratings"]["stacko"]["losses"] == 1, profile
    # Declined, from a second connection of Bobby's on a third node: the answer goes to the
    # node that holds the challenge, and both sides hear of it.
    sent = await ca.call("challenge", to="Bobby", game="stacko")
    seen = await cb.expect("challenged", challenge=sent["challenge"])
    cb2 = await ns.signed_in(2, tb, "Bobby")
    answer = await cb2.call("decline_challenge", challenge=seen["challenge"])
    assert answer["type"] == "challenge_over" and answer["reason"] == "declined", answer
    assert (await ca.expect("challenge_over", challenge=sent["challenge"]))["reason"] == "declined"
    again = await cb2.call("accept_challenge", challenge=seen["challenge"])
    assert again["code"] == "unknown_challenge"
    # Accepted through the third node: the room is on Bobby's first node, played from both.
    sent = await ca.call("challenge", to="Bobby", game="stacko", options=SMALL)
    seen = await cb.expect("challenged", challenge=sent["challenge"])
    joined = await cb2.call("accept_challenge", challenge=seen["challenge"])
    assert joined["type"] == "joined" and joined["seat"] == 1, joined
    code = joined["room"]
    assert code in n1.hub.rooms and not n1.hub.rooms[code].rated
    await ca.expect("joined", room=code)
    await cb2.expect("state", room=code)
    assert (await cb2.call("resign", room=code))["type"] != "error"
    await ca.expect("state", room=code, seq=2)
    await cb2.close()
    # Timed out on Bobby's node: both sides are told.
    sent = await ca.call("challenge", to="Bobby", game="stacko")
    await cb.expect("challenged", challenge=sent["challenge"])
    over = await ca.expect("challenge_over", challenge=sent["challenge"], timeout=15)
    assert over["reason"] == "expired"
    assert (await cb.expect("challenge_over", challenge=sent["challenge"]))["reason"] == "expired"
    # The challenger goes away: cancelled on the other node.
    sent = await ca.call("challenge", to="Bobby", game="stacko")
    await cb.expect("challenged", challenge=sent["challenge"])
    await ca.close()
    over = await cb.expect("challenge_over", challenge=sent["challenge"])
    assert over["reason"] == "cancelled"
    # Nobody of that name anywhere; the challenged account on no live node once its node
    # stops (its presence goes with its lease).
    cc = await ns.signed_in(0, ta, "Alice")
    assert (await cc.call("challenge", to="Nobody"))["code"] == "not_online"
    await cb.close()
    await online_on(n0, "bobby", 0)
    assert (await cc.call("challenge", to="Bobby"))["code"] == "not_online"
    cb = await ns.signed_in(1, tb, "Bobby")
    await online_on(n0, "bobby", 1)
    await n1.shutdown()
    await cb.closed(10)
    assert (await cc.call("challenge", to="Bobby"))["code"] == "not_online"


async def test_a_dead_nodes_presence_disappears_with_its_lease(nodes, redis_server, store_spec):
    ns = nodes()
    await ns.start(redis_server.url, store_spec, 2)
    n0, n1 = ns.nodes
    (tb,) = await accounts(n0.port, "Bobby")
    await ns.signed_in(1, tb, "Bobby")
    await online_on(n0, "bobby", 1)
    # The node stops renewing its lease (as if killed): its presence is dead with the lease.
    node = n1.cluster
    node._stopping = True
    node._stop_event.set()
    await node.redis.delete(f"stacko:node:{node.node_id}")
    assert await n0.cluster.presence.nodes_of("bobby") == []


def spawn(port: int, redis_url: str, index: int, database: str, data: str) -> Any:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "stacko.server", "--port", str(port), "--redis-url", redis_url,
         "--node-id", f"n{index}", "--database", database, "--data-dir", data,
         "--lease-s", "1.5", "--bot-workers", "0", "--log-level", "WARNING"],
        cwd=ROOT, env=env,
    )  # fmt: skip


async def test_revoking_or_rotating_on_one_node_ends_the_sessions_on_another_at_once(
    redis_server, store_spec, tmp_path
):
    """Two node processes on one store: the token is revoked (rotated) through node A's
    HTTP API; the account's connection on node B is signed out and closed at once (before,
    only at its next ``hello``)."""
    database = store_spec[0] if store_spec[0] != "sqlite" else "sqlite"
    data = store_spec[1] or str(tmp_path / "data")
    procs: list[subprocess.Popen[bytes]] = []
    ports = [free_port(), free_port()]
    clients: list[Client] = []
    try:
        for i, port in enumerate(ports):
            proc = spawn(port, redis_server.url, i, database, data)
            procs.append(proc)
            await asyncio.to_thread(wait_port, port, proc)
        a, b = ports
        ta, tb = await accounts(a, "Alice", "Bobby")
        for token, name in ((ta, "Alice"), (tb, "Bobby")):
            c = await Client.open(f"ws://127.0.0.1:{b}/", f"{name}@n1")
            clients.append(c)
            welcome = await c.call("hello", protocol=1, name=name, account=token)
            assert welcome["account"]["name"] == name, welcome
        ca, cb = clients
        status, _ = await http(a, "/api/accounts/revoke", "POST", ta)
        assert status == 200
        await ca.expect("error", code="bad_account")
        await ca.closed(10)
        status, body = await http(a, "/api/accounts/rotate", "POST", tb)
        assert status == 200, body
        await cb.expect("error", code="bad_account")
        await cb.closed(10)
        # The rotated account signs in with its new token; the revoked one nowhere.
        for port in ports:
            c = await Client.open(f"ws://127.0.0.1:{port}/", "again")
            clients.append(c)
            fresh = await c.call("hello", protocol=1, name="b", account=body["token"])
            assert fresh["account"]["name"] == "Bobby", fresh
            c = await Client.open(f"ws://127.0.0.1:{port}/", "revoked")
            clients.append(c)
            assert (await c.call("hello", protocol=1, name="a", account=ta))[
                "code"
            ] == "bad_account"
    finally:
        await asyncio.gather(*(c.ws.close() for c in clients if not c.done.is_set()))
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                await asyncio.to_thread(proc.wait, 20)
            except subprocess.TimeoutExpired:
                proc.kill()


async def test_quick_match_across_nodes_is_rated_from_the_latest_ratings(
    nodes, redis_server, store_spec
):
    """A quick match of two accounts on different nodes is rated (it was not: the remote
    seat had no account), and a rated game on one node starts from the ratings another node
    wrote (it used those the node had loaded at ``hello``)."""
    ns = nodes()
    await ns.start(redis_server.url, store_spec, 2)
    n0, n1 = ns.nodes
    ta, tb = await accounts(n0.port, "Alice", "Bobby")
    ca = await ns.signed_in(0, ta, "Alice")
    cb = await ns.signed_in(1, tb, "Bobby")
    assert (await ca.call("quick_match", game="stacko"))["type"] == "queued"
    joined = await cb.call("quick_match", game="stacko")
    assert joined["type"] == "joined", joined
    code = joined["room"]
    assert code in n1.hub.rooms  # paired by Bobby's node
    info = (await ca.expect("joined", room=code))["info"]
    assert [p.get("account") for p in info["players"]] == ["human", "human"]
    await ca.expect("state", room=code)
    assert (await ca.call("resign", room=code))["type"] != "error"
    first = await cb.expect("rating", room=code)
    after = {c["name"]: c["after"] for c in first["changes"]}
    assert after["Bobby"] > 1500 > after["Alice"]
    # A rated room on Alice's node: it starts from what Bobby's node wrote.
    room = (await ca.call("create_room", options=SMALL, public=False, rated=True))["room"]
    assert (await cb.call("join", room=room))["type"] == "joined"
    await cb.expect("state", room=room)
    assert (await cb.call("resign", room=room))["type"] != "error"
    second = await ca.expect("rating", room=room)
    before = {c["name"]: c["before"] for c in second["changes"]}
    assert before == after, (before, after)


async def test_a_rated_game_over_before_its_ratings_are_read_is_rated_from_them(
    nodes, redis_server, store_spec
):
    """Alice signed in on n0, then another node rated her (the row in the store): a rated
    game on n0 that ends before her ratings are read again is rated once they are, from the
    store's (it was rated from those of her ``hello``: the read came after the pair count)."""
    ns = nodes()
    await ns.start(redis_server.url, store_spec, 2)
    n0, _ = ns.nodes
    ta, tb = await accounts(n0.port, "Alice", "Bobby")
    ca = await ns.signed_in(0, ta, "Alice")
    cb = await ns.signed_in(1, tb, "Bobby")
    alice_id = await rate(n0.store, "Alice", 1342.0, 450.0, games=1, wins=0, losses=1)
    release = hold_loads(n0.ratings, alice_id)
    room = (await ca.call("create_room", options=SMALL, public=False, rated=True))["room"]
    assert (await cb.call("join", room=room))["type"] == "joined"
    await cb.expect("state", room=room)
    over = await cb.call("resign", room=room)
    assert over["view"]["outcome"] is not None, over  # over, Alice's ratings not read yet
    release.set()
    rating = await ca.expect("rating", room=room)
    alice = next(c for c in rating["changes"] if c["name"] == "Alice")
    assert alice["before"] == 1342 and alice["after"] > 1342, rating


async def test_presence_comes_back_with_an_emptied_redis(nodes, redis_server, store_spec):
    """Redis restarts empty: each node writes its accounts' presence again with its lease,
    and a challenge finds the account on the other node again."""
    ns = nodes()
    await ns.start(redis_server.url, store_spec, 2)
    n0, _ = ns.nodes
    ta, tb = await accounts(n0.port, "Alice", "Bobby")
    ca = await ns.signed_in(0, ta, "Alice")
    cb = await ns.signed_in(1, tb, "Bobby")
    await online_on(n0, "bobby", 1)
    redis_server.kill()
    redis_server.start()
    for _ in range(200):  # bounded: until a lease round has re-asserted both nodes
        try:
            if len(await n0.cluster.presence.nodes_of("bobby")) == 1 and n0.cluster.up:
                break
        except (OSError, RedisError):
            pass
        await asyncio.sleep(0.05)
    sent = await ca.call("challenge", to="Bobby", game="stacko")
    assert sent["type"] == "challenge_sent", sent
    await cb.expect("challenged", challenge=sent["challenge"])


async def test_a_remote_accounts_game_is_rated_from_its_loaded_rating(
    nodes, redis_server, store_spec
):
    """A quick match seats an account from another node: its ratings are read from the
    store as it arrives; a game over before they are in is rated once they are (it was rated
    from the default rating, overwriting the account's)."""
    ns = nodes()
    await ns.start(redis_server.url, store_spec, 2)
    n0, n1 = ns.nodes
    ta, tb = await accounts(n0.port, "Alice", "Bobby")
    alice_id = await rate(n0.store, "Alice", 1700.0, 300.0, games=12, wins=12, losses=0)
    release = hold_loads(n1.ratings, alice_id)
    ca = await ns.signed_in(0, ta, "Alice")
    cb = await ns.signed_in(1, tb, "Bobby")
    assert (await ca.call("quick_match", game="stacko"))["type"] == "queued"
    # 1700 and 1500 are far apart (server.matchmaking): Alice has waited long enough on n1's
    # clock for Bobby to be acceptable.
    n1.cluster.match_time = lambda: time.time() + matchmaking.MAX_WAIT_S
    joined = await cb.call("quick_match", game="stacko")
    code = joined["room"]
    assert code in n1.hub.rooms
    await cb.expect("state", room=code)
    over = await cb.call("resign", room=code)
    assert over["view"]["outcome"] is not None, over  # over, Alice's ratings not in yet
    release.set()
    rating = await ca.expect("rating", room=code)
    alice = next(c for c in rating["changes"] if c["name"] == "Alice")
    assert alice["before"] == 1700 and alice["after"] > 1700, rating
    await n1.store.flush()
    rows = await n0.store.fetch(
        "SELECT games, wins FROM ratings WHERE account_id = ? AND game = 'stacko'", (alice_id,)
    )
    assert rows == [(13, 13)]


async def test_quick_match_across_nodes_pairs_close_ratings_first(nodes, redis_server, store_spec):
    """Quick match across nodes follows one node's rule (server.matchmaking): the newcomer
    takes the closest acceptable rating, not the oldest ticket (it did: first come, first
    served), and a far pair waits until their windows meet, then a node's sweep pairs them.
    The nodes' ticket clock is a shared fake one, moved by hand."""
    ns = nodes()
    await ns.start(redis_server.url, store_spec, 2)
    n0 = ns.nodes[0]
    now = [time.time()]
    for n in ns.nodes:
        n.cluster.match_time = lambda: now[0]
    names = {"Carol": 1620.0, "Alice": 1500.0, "Bobby": 1550.0, "Dave": 1000.0}
    tokens = dict(zip(names, await accounts(n0.port, *names), strict=True))
    for name, mu in names.items():
        await rate(n0.store, name, mu)
    queue = keys.queue("stacko")
    r = redis.asyncio.Redis.from_url(redis_server.url)
    try:
        carol = await ns.signed_in(0, tokens["Carol"], "Carol")
        assert (await carol.call("quick_match", game="stacko"))["type"] == "queued"
        alice = await ns.signed_in(1, tokens["Alice"], "Alice")  # 120 from Carol: > 100
        assert (await alice.call("quick_match", game="stacko"))["type"] == "queued"
        # Bobby: 70 from Carol (waiting longest, on his node), 50 from Alice: Alice.
        bobby = await ns.signed_in(0, tokens["Bobby"], "Bobby")
        joined = await bobby.call("quick_match", game="stacko")
        assert joined["type"] == "joined", joined
        await alice.expect("joined", room=joined["room"])
        dave = await ns.signed_in(1, tokens["Dave"], "Dave")  # 620 from Carol
        assert (await dave.call("quick_match", game="stacko"))["type"] == "queued"
        now[0] += 20  # windows of 500 points: still apart, whichever node sweeps
        for n in ns.nodes:
            await n.cluster.sweep()
        assert await r.zcard(queue) == 2
        now[0] += matchmaking.MAX_WAIT_S - 20  # unbounded: the next sweep pairs them
        met = await carol.expect("joined")
        assert met["seat"] == 0, met  # she waited longer, whichever node swept
        assert (await dave.expect("joined", room=met["room"]))["seat"] == 1
        assert await r.zcard(queue) == 0
    finally:
        await r.aclose()
