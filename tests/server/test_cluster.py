"""Many nodes on one Redis (``server.cluster``): in-process nodes on loopback, a real
``redis-server`` (the ``redis_server`` fixture), the same frames as on one node."""

from __future__ import annotations

import asyncio
import random
import urllib.request
from typing import Any

import pytest
import redis.asyncio as aioredis
from stacko_wire import Client, Game, Harness

from stacko.server.app import Server
from stacko.server.clock import SystemClock
from stacko.server.cluster import keys
from stacko.server.config import ServerConfig


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


async def health(node: Server) -> str:
    return await asyncio.to_thread(fetch, node.http_url + "healthz")


async def start_nodes(url: str, n: int, **config: Any) -> list[Server]:
    nodes = []
    for i in range(n):
        cfg = ServerConfig(
            port=0, redis_url=url, node_id=f"n{i}", bot_workers=0, burst=1_000_000,
            hello_burst_per_ip=1_000_000, max_connections_per_ip=0, lease_s=1.5, **config,
        )  # fmt: skip
        server = Server(cfg, bots=({}, None))
        await server.start()
        nodes.append(server)
    return nodes


class Cluster:
    """Nodes, and a harness around the owner of the rooms under test (its leak checker)."""

    def __init__(self, nodes: list[Server]) -> None:
        self.nodes = nodes
        self.h = Harness(nodes[0], SystemClock(), 7)  # type: ignore[arg-type]

    async def client(self, node: int, name: str = "player", token: str | None = None) -> Client:
        c = await Client.open(self.nodes[node].url, f"{name}@n{node}#{len(self.h.clients)}")
        self.h.clients.append(c)
        self.h.checker.names.add(name)
        await c.hello(name, token)
        return c

    async def stop(self) -> None:
        await asyncio.gather(*(c.ws.close() for c in self.h.clients if not c.done.is_set()))
        for node in self.nodes:
            await node.shutdown()


@pytest.fixture
async def cluster(redis_server):
    made: list[Cluster] = []

    async def make(n: int = 3, **config: Any) -> Cluster:
        c = Cluster(await start_nodes(redis_server.url, n, **config))
        made.append(c)
        return c

    yield make
    for c in made:
        task = asyncio.ensure_future(c.stop())
        done, _ = await asyncio.wait([task], timeout=10)
        if not done:
            for t in asyncio.all_tasks():
                t.print_stack(limit=4)
            raise AssertionError("the nodes did not stop")


async def test_a_game_across_three_nodes_leaks_nothing(cluster):
    """Alice on the owner, Bob on a second node, spectators on a third: every frame of every
    client passes the per-seat leak checks, as on one node."""
    cl = await cluster(3)
    alice = await cl.client(0, "alice")
    bob = await cl.client(1, "bob")
    code = await cl.h.create(alice, public=True)
    assert code in cl.nodes[0].hub.rooms
    joined = await bob.call("join", room=code)
    assert joined["type"] == "joined" and joined["seat"] == 1, joined
    update = await alice.expect("room", room=code)
    assert update["text"] == "bob joined"
    cl.h.snap(code)
    seq = cl.nodes[0].hub.rooms[code].seq
    await alice.expect("state", room=code, seq=seq)
    await bob.expect("state", room=code, seq=seq)
    watchers = []
    for i in range(2):
        w = await cl.client(2, f"watcher{i}")
        j = await w.call("join", room=code, role="spectator")
        assert j["type"] == "joined" and j["seat"] is None, j
        await w.expect("state", room=code, seq=seq)
        watchers.append(w)
    game = Game(cl.h, code, [alice, bob], watchers)
    # a refused move from the remote seat: the same coded error as on one node
    legal = alice.latest[code]["legal"][0]
    wrong = await bob.call("move", room=code, ply=0, move=legal)
    assert wrong["type"] == "error" and wrong["code"] == "not_your_turn", wrong
    stale = await bob.call("move", room=code, ply=99, move=legal)
    assert stale["type"] == "error" and stale["code"] == "stale_ply", stale
    outcome = await game.play_out()
    assert outcome is not None
    # a watcher leaves, a remote player asks for a rematch
    left = await watchers[0].call("leave", room=code)
    assert left["type"] == "left", left
    await bob.request("rematch", room=code)
    await alice.expect("room", room=code, text="bob asks for a rematch")
    assert cl.nodes[1].cluster.requests_out > 0 and cl.nodes[0].cluster.requests_in > 0
    cl.h.final_checks()


async def test_fifty_clients_on_three_nodes_race_for_one_seat(cluster):
    cl = await cluster(3)
    owner = await cl.client(0, "owner")
    code = await cl.h.create(owner)
    racers = [await cl.client(i % 3, f"r{i}") for i in range(50)]
    ids = [await c.request("join", room=code) for c in racers]
    answers = [await c.expect(id=rid) for c, rid in zip(racers, ids, strict=True)]
    seated = [a for a in answers if a["type"] == "joined"]
    refused = [a for a in answers if a["type"] == "error"]
    assert len(seated) == 1, seated
    assert {a["code"] for a in refused} == {"room_full"} and len(refused) == 49
    room = cl.nodes[0].hub.rooms[code]
    assert all(p is not None for p in room.players)


async def test_unknown_rooms_and_codes_unique_across_nodes(cluster):
    cl = await cluster(2)
    c = await cl.client(1, "c")
    nope = await c.call("join", room="ZZZZZZZZ")
    assert nope["type"] == "error" and nope["code"] == "unknown_room", nope
    move = await c.call("move", room="ZZZZZZZZ", ply=0, move={"action": "draw"})
    assert move["type"] == "error" and move["code"] == "not_in_room", move
    r = aioredis.Redis.from_url(cl.nodes[0].config.redis_url)
    owners = await r.hgetall("stacko:rooms")
    await r.aclose()
    pooled = [set(n.cluster.codes) for n in cl.nodes]
    assert not pooled[0] & pooled[1]
    assert all(owners[code.encode()] == b"n0" for code in pooled[0])


async def list_all(reader: Client) -> list[str]:
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        fields = {"cursor": cursor} if cursor is not None else {}
        page = await reader.call("list_rooms", **fields)
        assert page["type"] == "rooms", page
        assert len(page["rooms"]) <= 3
        seen += [r["room"] for r in page["rooms"]]
        cursor = page["next"]
        if cursor is None:
            return seen
    raise AssertionError("list_rooms did not end")


async def test_list_rooms_shows_every_nodes_rooms(cluster):
    cl = await cluster(3, list_rooms_page=3)
    codes = set()
    for i in range(6):
        c = await cl.client(i % 3, f"host{i}")
        codes.add(await cl.h.create(c, public=True))
    hidden = await cl.client(0, "hidden")
    await cl.h.create(hidden, public=False)
    reader = await cl.client(1, "reader")
    assert sorted(await list_all(reader)) == sorted(codes)
    # a node dies: its rooms leave the lobby when its lease expires
    dead = cl.nodes.pop(2)
    assert dead.cluster is not None
    for task in dead.cluster._tasks:
        task.cancel()
    await asyncio.sleep(2.0)
    gone = {code for code in codes if code in dead.hub.rooms}
    assert len(gone) == 2
    assert sorted(await list_all(reader)) == sorted(codes - gone)
    await dead.shutdown()


async def test_quick_match_pairs_each_ticket_exactly_once(cluster):
    """Tickets spread over three nodes, some cancelling at once: each paired exactly once,
    nobody with themselves, none left behind."""
    cl = await cluster(3)
    rng = random.Random(3)
    n = 1000
    clients = await asyncio.gather(*(cl.client(i % 3, f"q{i}") for i in range(n)))
    cancelling = set(rng.sample(range(n), n // 5))
    ids = await asyncio.gather(*(c.request("quick_match", game="stacko") for c in clients))
    cancels = {i: await clients[i].request("cancel_match") for i in cancelling}
    firsts = [await c.expect(id=rid, timeout=30) for c, rid in zip(clients, ids, strict=True)]
    odd = [f for f in firsts if f["type"] not in ("queued", "joined")]
    assert not odd, odd[:3]
    cancelled = set()
    for i, rid in cancels.items():
        answer = await clients[i].expect(id=rid, timeout=30)
        if answer["type"] == "unqueued":
            cancelled.add(i)
        else:
            assert answer["code"] == "not_queued", answer
    await asyncio.sleep(0.3)
    rooms: dict[str, list[int]] = {}
    for i, c in enumerate(clients):
        joined = [f for f in c.frames if f["type"] == "joined"]
        assert len(joined) <= 1, (i, joined)
        kinds = [f["type"] for f in c.frames if f["type"] in ("queued", "joined")]
        assert kinds in ([], ["queued"], ["joined"], ["queued", "joined"]), (i, kinds)
        if joined:
            assert i not in cancelled
            rooms.setdefault(joined[0]["room"], []).append(i)
    for code, members in rooms.items():
        assert len(members) == 2, (code, members)
        names = {clients[m].token for m in members}
        assert len(names) == 2
    waiting = [i for i in range(n) if i not in cancelled and not any(
        i in m for m in rooms.values())]  # fmt: skip
    assert len(waiting) <= 1, waiting
    sizes = 0
    for node in cl.nodes:
        await node.cluster._queue_sizes()
        sizes = node.cluster.queue_sizes["stacko"]
    assert sizes == len(waiting)


async def test_redis_restart_mid_game(cluster, redis_server):
    """Redis goes away: the owner's local game plays on, a cross-node move gets a coded
    error at once; Redis comes back (empty): the nodes re-assert and the game goes on."""
    cl = await cluster(2)
    alice = await cl.client(0, "alice")
    bob = await cl.client(1, "bob")
    code = await cl.h.create(alice)
    assert (await bob.call("join", room=code))["type"] == "joined"
    cl.h.snap(code)
    game = Game(cl.h, code, [alice, bob], [])
    seq = cl.nodes[0].hub.rooms[code].seq
    await alice.expect("state", room=code, seq=seq)
    await bob.expect("state", room=code, seq=seq)
    await game.move()  # alice moves (local to the owner)
    redis_server.kill()
    for _ in range(100):
        if not cl.nodes[1].cluster.up:
            break
        rid = await bob.request("ping")
        await bob.expect(id=rid)
        await asyncio.sleep(0.05)
        cl.nodes[1].cluster.redis_errors  # noqa: B018
        if cl.nodes[1].cluster.redis_errors:
            break
    mine = bob.latest[code]
    move = mine["legal"][0]
    refused = await bob.call("move", room=code, ply=mine["view"]["ply"], move=move)
    assert refused["type"] == "error" and refused["code"] == "server_busy", refused
    assert await health(cl.nodes[1]) == "ok\nredis: down\n"
    redis_server.start()
    for _ in range(100):
        if all(n.cluster.up for n in cl.nodes):
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)  # a lease round: the owner re-asserts its rooms
    assert await health(cl.nodes[1]) == "ok\nredis: up\n"
    await game.move()  # bob, through his node, again
    await game.move()
    # the session directory came back too: bob could resume through any node
    r = aioredis.Redis.from_url(redis_server.url)
    seats = await r.hgetall(keys.session(keys.token_hash(bob.token)))
    await r.aclose()
    assert seats == {code.encode(): b"n0"}
    metrics = await asyncio.to_thread(fetch, cl.nodes[1].http_url + "metrics")
    assert "stacko_cluster_redis_errors_total" in metrics
    assert "stacko_cluster_requests_forwarded_out_total" in metrics
    cl.h.final_checks()


async def test_resume_through_a_node_other_than_the_owner(cluster):
    """Bob plays through node 1, then his connection moves to node 2 (which never saw his
    session): he resumes there, gets his seat and view back, and plays on."""
    cl = await cluster(3, reconnect_grace_s=30)
    alice = await cl.client(0, "alice")
    bob = await cl.client(1, "bob")
    code = await cl.h.create(alice)
    assert (await bob.call("join", room=code))["type"] == "joined"
    cl.h.snap(code)
    game = Game(cl.h, code, [alice, bob], [])
    seq = cl.nodes[0].hub.rooms[code].seq
    await bob.expect("state", room=code, seq=seq)
    await game.move()
    await game.move()
    token = bob.token
    await bob.ws.close()
    await alice.expect("room", room=code, text="bob disconnected")
    bob2 = await Client.open(cl.nodes[2].url, "bob@n2")
    cl.h.clients.append(bob2)
    welcome = await bob2.hello("bob", token)
    assert welcome["resumed"] is True and welcome["rooms"] == [code], welcome
    again = await bob2.expect("joined", room=code)
    assert again["seat"] == 1
    state = await bob2.expect("state", room=code)
    assert state["seq"] == cl.nodes[0].hub.rooms[code].seq
    await alice.expect("room", room=code, text="bob reconnected")
    game.seats[1] = bob2
    await game.move()
    await game.move()
    # an unknown token through any node: a fresh session, as on one node
    stranger = await Client.open(cl.nodes[1].url, "stranger")
    cl.h.clients.append(stranger)
    fresh = await stranger.hello("stranger", "x" * 32)
    assert fresh["resumed"] is False and fresh["session"] != "x" * 32 and fresh["rooms"] == []
    cl.h.final_checks()


async def test_quick_match_with_a_session_the_owner_already_knows(cluster):
    """X reached node 1 before (watching one of its rooms), then queues on node 0; Y on node 1
    pairs with X: node 1 must seat X's known session, or X's forwarded moves would be refused."""
    cl = await cluster(2)
    host = await cl.client(1, "host")
    code = await cl.h.create(host)
    x = await cl.client(0, "x")
    watched = await x.call("join", room=code, role="spectator")
    assert watched["type"] == "joined", watched
    queued = await x.call("quick_match", game="stacko")
    assert queued["type"] == "queued", queued
    y = await cl.client(1, "y")
    joined = await y.call("quick_match", game="stacko")
    assert joined["type"] == "joined", joined
    room = joined["room"]
    await x.expect("joined", room=room)
    await x.expect("state", room=room)
    await y.expect("state", room=room)
    for _ in range(4):
        mover, other = (x, y) if x.latest[room]["view"]["to_move"] == 0 else (y, x)
        state = mover.latest[room]
        reply = await mover.call(
            "move", room=room, ply=state["view"]["ply"], move=state["legal"][0]
        )
        assert reply["type"] == "state", reply
        await other.expect("state", room=room, seq=reply["seq"])


async def test_a_node_restarted_within_its_lease_never_gets_old_frames(cluster, redis_server):
    """Node 1 dies (no goodbye) and comes back under the same id before its lease lapses: the
    owner still holds the old run's peer for Bob's seat. A new client of the new run must
    never receive what was meant for Bob's seat (connection ids do not repeat)."""
    cl = await cluster(2)
    alice = await cl.client(0, "alice")
    bob = await cl.client(1, "bob")
    code = await cl.h.create(alice)
    assert (await bob.call("join", room=code))["type"] == "joined"
    await alice.expect("state", room=code)
    old = cl.nodes[1]
    for task in old.cluster._tasks:
        task.cancel()  # a crash: nothing more is sent, the lease is not given back
    old.cluster = None
    await old.shutdown()
    cfg = old.config
    new = Server(cfg, bots=({}, None))
    await new.start()
    cl.nodes[1] = new
    eve = await cl.client(1, "eve")
    watched = await eve.call("join", room=code, role="spectator")
    assert watched["type"] == "joined" and watched["seat"] is None, watched
    state = alice.latest[code]
    reply = await alice.call("move", room=code, ply=state["view"]["ply"], move=state["legal"][0])
    assert reply["type"] == "state", reply
    await eve.expect("state", room=code, seq=reply["seq"])
    await asyncio.sleep(0.2)
    seats = {f["view"]["seat"] for f in eve.frames if f["type"] == "state"}
    assert seats == {None}, seats
    assert not [f for f in eve.frames if f["type"] == "joined" and f["seat"] is not None]
