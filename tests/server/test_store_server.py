"""Durable games through a real server: records API, output commit, restart and resume.

Each test runs on a SQLite file and on a throwaway PostgreSQL cluster (``store_kind``)."""

from __future__ import annotations

import asyncio
import os
import signal

import orjson
import pytest
from stacko_wire import Client

from stacko.server.store import make_store
from stacko.server.store.sqlite import SQLiteStore

SMALL = {"tower": 3, "bricks": 8, "rounds": 2, "turn_cap": 6}


async def http(port: int, path: str) -> tuple[int, str, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    ctype = next(
        (line.split(b":", 1)[1].strip().decode() for line in head.split(b"\r\n")
         if line.lower().startswith(b"content-type:")), "",
    )  # fmt: skip
    return int(head.split(b" ", 2)[1]), ctype, body


async def get_json(port: int, path: str) -> tuple[int, dict]:
    status, ctype, body = await http(port, path)
    assert ctype == "application/json", (path, status, ctype, body[:200])
    return status, orjson.loads(body)


def states(c: Client, code: str) -> list[dict]:
    return [f for f in c.frames if f.get("type") == "state" and f.get("room") == code]


async def finished_ids(h) -> list[str]:
    rows = await h.server.store.fetch("SELECT id FROM games WHERE status = 'finished'")
    return [r[0] for r in rows]


async def test_records_api_lists_serves_and_replays_finished_games_only(make_harness, store_spec):
    h = await make_harness(store=make_store(*store_spec))
    port = h.server.port
    g1 = await h.game(SMALL, names=("alice", "bob"))
    await g1.play_out()
    h.advance(1)  # the FakeClock: g2 ends a second later
    g2 = await h.game({"variant": "gray", "ply_cap": 12}, names=("carol", "dave"), game="stakko")
    await g2.move()
    reply = await g2.seats[1].call("resign", room=g2.code)
    assert reply["type"] == "state"
    h.snap(g2.code)
    await g2.settle(reply["seq"], skip=g2.seats[1])
    g3 = await h.game(SMALL, names=("erin", "alice"))  # stays in progress
    await g3.move()
    await h.server.store.flush()
    status, listing = await get_json(port, "/api/games")
    assert status == 200 and listing["next"] is None
    assert [g["code"] for g in listing["games"]] == [g2.code, g1.code]  # newest first
    first = listing["games"][1]
    assert first["game"] == "stacko" and first["variant"] is None
    assert [p["name"] for p in first["players"]] == ["alice", "bob"]
    assert first["result"] == g1.current()["view"]["outcome"]
    assert first["plies"] == g1.engine.ply and first["ended_at"].endswith("Z")
    stakko = listing["games"][0]
    assert stakko["variant"] == "gray" and stakko["result"]["termination"] == "resignation"
    assert stakko["result"]["winner"] == 0

    # Filters, paging.
    async def codes(query: str) -> list[str]:
        status, body = await get_json(port, f"/api/games?{query}")
        assert status == 200, body
        return [g["code"] for g in body["games"]]

    assert await codes("game=stakko") == [g2.code]
    assert await codes("player=alice") == [g1.code]  # erin/alice is still being played
    assert await codes("player=nobody") == []
    assert await codes(f"code={g1.code.lower()}") == [g1.code]
    assert await codes("result=resignation") == [g2.code]
    assert await codes("result=seat0") == [g2.code] + (
        [g1.code] if first["result"]["winner"] == 0 else []
    )
    _, page1 = await get_json(port, "/api/games?limit=1")
    assert [g["code"] for g in page1["games"]] == [g2.code] and page1["next"]
    _, page2 = await get_json(port, f"/api/games?limit=1&cursor={page1['next']}")
    assert [g["code"] for g in page2["games"]] == [g1.code] and page2["next"] is None

    for bad in ("game=chess", "limit=0", "limit=101", "limit=x", "cursor=zzz", "result=won",
                "code=AB", "colour=red", "game=stacko&game=stakko"):  # fmt: skip
        status, body = await get_json(port, f"/api/games?{bad}")
        assert status == 400 and body["error"]["code"] in ("bad_filter", "bad_cursor"), bad

    # One record, its text, its replay.
    gid = next(g["id"] for g in listing["games"] if g["code"] == g1.code)
    status, rec = await get_json(port, f"/api/games/{gid}")
    assert status == 200 and rec["id"] == gid and rec["options"]["tower"] == 3
    assert rec["events"][0]["kind"] == "deal" and rec["events"][0]["perms"]
    assert [e["seq"] for e in rec["events"]] == list(range(1, len(rec["events"]) + 1))
    assert all(e["at"].endswith("Z") for e in rec["events"])
    assert len(rec["rounds"]) == len(g1.engine.results)
    assert rec["rounds"][-1]["towers"] == [list(t) for t in g1.engine.results[-1].towers]
    status, ctype, text = await http(port, f"/api/games/{gid}.txt")
    assert status == 200 and ctype.startswith("text/plain")
    assert '[Seat0 "alice"]' in text.decode() and "deal: towers" in text.decode()
    for seat, client in ((0, g1.seats[0]), (1, g1.seats[1])):
        status, rp = await get_json(port, f"/api/games/{gid}/replay?seat={seat}")
        assert status == 200 and rp["steps"][0]["seat"] is None and rp["steps"][0]["ply"] == 0
        live = [f["view"] for f in states(client, g1.code)]
        assert [s["view"] for s in rp["steps"]] == live  # exactly what the seat saw, in order
    status, everything = await get_json(port, f"/api/games/{gid}/replay?seat=all")
    towers0 = everything["steps"][0]["view"]["towers"]
    assert None not in towers0[0] + towers0[1]  # both towers shown from the deal on
    assert any("alice" in s["text"] for s in everything["steps"][1:])

    # A game in progress is never served; bad ids are 400.
    (live_id,) = [r[0] for r in await h.server.store.fetch(
        "SELECT id FROM games WHERE status = 'playing'")]  # fmt: skip
    for suffix in ("", ".txt", "/replay?seat=all", "/replay?seat=0"):
        status, _, body = await http(port, f"/api/games/{live_id}{suffix}")
        assert status == 404 and orjson.loads(body)["error"]["code"] == "unknown_game"
        status, _, body = await http(port, f"/api/games/0000000000000000{suffix}")
        assert status == 404
    for bad in ("xyz", "0123456789ABCDEF", "../../etc/passwd", "%00"):
        status, _, body = await http(port, f"/api/games/{bad}")
        assert status in (400, 404) and orjson.loads(body)["error"]["code"] in (
            "bad_id",
            "not_found",
        )
    status, _, body = await http(port, f"/api/games/{gid}/replay?seat=2")
    assert status == 400
    _, _, metrics = await http(port, "/metrics")
    for name in ("stacko_store_commits_total", "stacko_store_commit_seconds_bucket",
                 "stacko_store_batch_size_max", "stacko_store_errors_total 0.0"):  # fmt: skip
        assert name.encode() in metrics, name


@pytest.mark.parametrize("writer", ["journal", "loop", "thread"])
async def test_no_frame_shows_a_move_before_it_is_committed(make_harness, tmp_path, writer):
    store = StalledSQLite(tmp_path / "data", "normal", writer)
    h = await make_harness(store=store)
    g = await h.game(SMALL, spectators=1)
    before = {c: len(states(c, g.code)) for c in g.everyone}
    store.stalled = True  # from now on nothing commits
    mover = g.seats[g.engine.to_move]
    ply = mover.latest[g.code]["view"]["ply"]
    await mover.request("move", room=g.code, ply=ply, move=mover.latest[g.code]["legal"][0])
    await asyncio.sleep(0.1)
    h.snap(g.code)
    await asyncio.sleep(0.2)
    assert g.engine.ply == ply + 1  # applied in memory ...
    for c in g.everyone:  # ... and no frame shows it
        assert len(states(c, g.code)) == before[c], c
        assert all(f["view"]["ply"] == ply for f in states(c, g.code))
    assert store.stats.held_frames >= 3
    store.release()
    for c in g.everyone:
        await c.expect("state", room=g.code, seq=g.room.seq)
        assert c.latest[g.code]["view"]["ply"] == ply + 1


class StalledSQLite(SQLiteStore):
    """A SQLite store whose writer stops receiving changes while ``stalled``."""

    def __init__(self, *a, **k) -> None:
        super().__init__(*a, **k)
        self._stalled = False
        self.parked: list = []

    @property
    def stalled(self) -> bool:
        return self._stalled

    @stalled.setter
    def stalled(self, value: bool) -> None:
        # The journal's commit of a move (``journal.EventWriter``) copies it in within the
        # recorder's call: no stall can come between. Without its file it refuses, and a
        # move takes the general way, whose commit is ``_write``.
        self._stalled = value
        self._events.file = None if value else self._jfile

    def _enqueue(self, ticket, ops) -> None:
        if self.stalled and self.writer != "journal":
            self.parked.append((super()._enqueue, (ticket, ops)))
        else:
            super()._enqueue(ticket, ops)

    def _write(self, *args) -> None:  # the journal's commit (a record, or a move's line)
        if self.stalled:
            self.parked.append((super()._write, args))
        else:
            super()._write(*args)

    def release(self) -> None:
        self.stalled = False
        for commit, args in self.parked:
            commit(*args)
        self.parked.clear()


async def test_restart_resumes_games_with_old_tokens(make_harness, store_spec):
    h1 = await make_harness(store=make_store(*store_spec))
    g = await h1.game(SMALL, names=("alice", "bob"))
    for _ in range(3):
        await g.move()
    code, ply = g.code, g.engine.ply
    tokens = [c.token for c in g.seats]
    await h1.server.shutdown(restart=True)
    for c in g.seats:
        assert await c.closed(5) == (1012, "service restart")
    h1.clients.clear()
    h2 = await make_harness(store=make_store(*store_spec))
    assert h2.server.restored == 1
    h2.snap(code)
    room = h2.server.hub.rooms[code]
    assert room.game.ply == ply and room.status == "playing"
    assert [p.connected for p in room.players] == [False, False]
    assert h2.clock.pending >= 2  # the grace timers (and the clockless game has no move timer)
    seats = []
    for seat, token in enumerate(tokens):
        c = await h2.client(("alice", "bob")[seat], hello=False)
        welcome = await c.hello(("alice", "bob")[seat], token)
        assert welcome["resumed"] is True and welcome["rooms"] == [code]
        state = await c.expect("state", room=code)
        assert state["view"]["ply"] == ply and state["view"]["seat"] == seat
        seats.append(c)
    stranger = await h2.client("mallory", hello=False)
    welcome = await stranger.hello("mallory", "A" * 32)  # an unknown token: a new session
    assert welcome["resumed"] is False
    from stacko_wire import Game

    g2 = Game(h2, code, seats, [])
    outcome = await g2.play_out()
    assert outcome is not None
    await h2.server.store.flush()
    rows = await h2.server.store.fetch("SELECT status, plies FROM games")
    assert rows == [("finished", g2.engine.ply)]
    (gid,) = await finished_ids(h2)  # the restored game's final frame names its old record
    assert [states(c, code)[-1]["game_id"] for c in seats] == [gid, gid]
    assert await h2.server.store.fetch("SELECT * FROM sessions") == []


async def test_the_frame_that_ends_a_game_names_its_record(make_harness, store_spec):
    h = await make_harness(store=make_store(*store_spec))
    g = await h.game(SMALL, names=("alice", "bob"))
    await g.play_out()
    await h.server.store.flush()
    (gid,) = await finished_ids(h)
    for client in g.seats:
        frames = states(client, g.code)
        assert all("game_id" not in f for f in frames[:-1])  # not while the game goes on
        assert frames[-1]["view"]["outcome"] is not None and frames[-1]["game_id"] == gid
    status, rec = await get_json(h.server.port, f"/api/games/{gid}")
    assert status == 200 and rec["code"] == g.code
    # A rematch is a new record; its frames say nothing of the old one until it ends.
    a, b = g.seats
    await a.request("rematch", room=g.code)
    await b.expect("room", room=g.code)
    joined = await b.call("rematch", room=g.code)
    assert joined["type"] == "joined"
    h.snap(g.code)
    g.seats = [b, a]
    await g.settle(g.room.seq)
    start = b.latest[g.code]
    assert start["view"]["ply"] == 0 and "game_id" not in start
    reply = await b.call("resign", room=g.code)
    h.snap(g.code)
    assert reply["view"]["outcome"] is not None
    await h.server.store.flush()
    assert reply["game_id"] in await finished_ids(h) and reply["game_id"] != gid


async def test_a_server_without_a_store_names_no_record(make_harness):
    h = await make_harness()
    g = await h.game(SMALL)
    reply = await g.seats[0].call("resign", room=g.code)
    h.snap(g.code)
    assert reply["view"]["outcome"] is not None and reply["game_id"] is None


async def test_sessions_are_stored_only_as_hashes(make_harness, store_spec):
    h = await make_harness(store=make_store(*store_spec))
    g = await h.game(SMALL)
    await g.move()
    await h.server.store.flush()
    dump = repr(await h.server.store.fetch("SELECT * FROM sessions"))
    dump += repr(await h.server.store.fetch("SELECT * FROM games"))
    dump += repr(await h.server.store.fetch("SELECT * FROM events"))
    dump += repr(await h.server.store.fetch("SELECT * FROM event_log"))
    for c in g.seats:
        assert c.token not in dump
    import hashlib

    assert hashlib.sha256(g.seats[0].token.encode()).hexdigest() in dump


@pytest.mark.parametrize("writer", ["journal", "loop", "thread"])
async def test_a_close_waits_behind_the_frames_held_before_it(make_harness, tmp_path, writer):
    """A fatal error while a commit is pending: the error frame and then the close, in
    that order, once the commit is done (a close that went first would lose the frame)."""
    store = StalledSQLite(tmp_path / "data", "normal", writer)
    h = await make_harness(store=store)
    g = await h.game(SMALL)
    store.stalled = True
    mover = g.seats[g.engine.to_move]
    frame = mover.latest[g.code]
    await mover.request("move", room=g.code, ply=frame["view"]["ply"], move=frame["legal"][0])
    rude = await h.client("rude", hello=False)
    await rude.send({"type": "ping", "id": 1})  # before hello: fatal hello_required
    await asyncio.sleep(0.2)
    h.snap(g.code)
    assert rude.frames == [] and not rude.done.is_set()
    store.release()
    error = await rude.expect("error")
    assert error["code"] == "hello_required" and error["fatal"] is True
    assert await rude.closed(5) == (1008, "hello_required")
    for c in g.seats:
        await c.expect("state", room=g.code, seq=g.room.seq)


async def test_replay_of_a_very_long_game_is_refused(make_harness, store_spec, monkeypatch):
    from stacko.server import records

    monkeypatch.setattr(records, "MAX_REPLAY_EVENTS", 3)
    h = await make_harness(store=make_store(*store_spec))
    g = await h.game(SMALL)
    await g.play_out()
    await h.server.store.flush()
    (gid,) = await finished_ids(h)
    status, body = await get_json(h.server.port, f"/api/games/{gid}/replay?seat=0")
    assert status == 413 and body["error"]["code"] == "too_long"
    status, body = await get_json(h.server.port, f"/api/games/{gid}")
    assert status == 200 and len(body["events"]) > 3


async def test_the_side_to_move_is_not_charged_for_the_downtime(make_harness, store_spec):
    h1 = await make_harness(store=make_store(*store_spec))
    g = await h1.game({**SMALL, "clock_ms": 30_000})
    await g.move()
    h1.advance(20, g.code)  # the mover has 10 s left when the server goes down
    code = g.code
    await h1.server.shutdown(restart=True)
    h1.clients.clear()
    h2 = await make_harness(store=make_store(*store_spec))
    room = h2.server.hub.rooms[code]
    mover = room.game.to_move
    assert room.deadline == h2.clock.time() + 30  # a whole clock again, not the 10 s left
    h2.clock.advance(29)
    assert room.game.ply == 1 and room.expiries == [0, 0]
    h2.clock.advance(2)  # now it runs out: the timeout moves are played and recorded
    assert room.expiries[mover] == 1 and room.game.ply > 1


def test_the_record_cache_is_bounded_in_bytes_least_recently_used_first():
    from stacko.server.records import RecordCache

    cache = RecordCache(100)
    cache.put(("a", "json"), b"x" * 40)
    cache.put(("b", "json"), b"x" * 40)
    assert cache.get(("a", "json")) is not None  # a is now the most recently used
    cache.put(("c", "json"), b"x" * 40)  # 120 bytes: b goes
    assert cache.bytes == 80 and len(cache) == 2
    assert cache.get(("b", "json")) is None and cache.get(("a", "json")) is not None
    cache.put(("d", "txt"), b"x" * 101)  # alone over the bound: never kept
    assert cache.get(("d", "txt")) is None and cache.bytes == 80
    cache.put(("a", "json"), b"x" * 10)  # replaced: counted once
    assert cache.bytes == 50


async def test_record_answers_are_cached_within_record_cache_bytes(make_harness, tmp_path):
    h = await make_harness(store=make_store("sqlite", str(tmp_path / "d")), record_cache_bytes=6000)
    g = await h.game(SMALL)
    await g.play_out()
    await h.server.store.flush()
    (gid,) = await finished_ids(h)
    sizes = {}
    for suffix in ("", ".txt", "/replay?seat=all", "/replay?seat=0"):
        status, _, body = await http(h.server.port, f"/api/games/{gid}{suffix}")
        assert status == 200
        sizes[suffix] = len(body)
        assert h.server.record_cache.bytes <= 6000
    assert sum(sizes.values()) > 6000  # the bound did drop answers
    assert 0 < len(h.server.record_cache) < 4


async def test_record_answers_are_built_in_a_worker_process_which_a_kill_does_not_stop(
    make_harness, tmp_path
):
    """A replay's build (megabytes of views for a long game) runs in the record worker, at
    the bot workers' lower priority, not beside the server's loop; its bytes are those built
    here; a worker killed (kill -9, the OOM killer) is replaced and the request answered."""
    from stacko.server import botpool, records

    h = await make_harness(store=make_store("sqlite", str(tmp_path / "d")))
    g = await h.game(SMALL)
    await g.play_out()
    await h.server.store.flush()
    (gid,) = await finished_ids(h)
    worker = h.server.record_worker
    status, _, body = await http(h.server.port, f"/api/games/{gid}/replay?seat=0")
    assert status == 200
    pid = worker.pid
    assert pid is not None and pid != os.getpid()
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, ours + botpool.WORKER_NICENESS)
    store = h.server.store
    row, stored = await store.game(gid), await store.stored_events(gid)
    assert isinstance(stored, bytes)  # the packed record goes over, unpacked in the worker
    assert body == records.build(row, stored, "0")

    os.kill(pid, signal.SIGKILL)
    status, _, body = await http(h.server.port, f"/api/games/{gid}/replay?seat=1")
    assert status == 200 and body == records.build(row, stored, "1")
    new = worker.pid
    assert new is not None and new != pid

    await h.server.shutdown()  # the last server holding the worker stops it
    assert worker.pid is None and worker.users == 0
    with pytest.raises(ProcessLookupError):
        for _ in range(100):
            os.kill(new, 0)
            await asyncio.sleep(0.05)


async def test_a_stored_record_that_cannot_be_read_is_a_json_500(make_harness, tmp_path):
    """A corrupt ``games.record`` (a disk, a hand edit) answers the JSON error every other
    error of ``/api/games`` is, with its own code; the worker and the other games go on."""
    h = await make_harness(store=make_store("sqlite", str(tmp_path / "d")))
    for _ in range(2):
        await (await h.game(SMALL)).play_out()
    store = h.server.store
    await store.flush()
    bad, good = await finished_ids(h)
    await store.execute([("UPDATE games SET record = ? WHERE id = ?", (b"not a record", bad))])
    for suffix in ("", ".txt", "/replay?seat=0"):
        status, body = await get_json(h.server.port, f"/api/games/{bad}{suffix}")
        assert status == 500 and body["error"]["code"] == "record_unreadable", body
    status, body = await get_json(h.server.port, f"/api/games/{good}")
    assert status == 200 and body["id"] == good


async def test_waiting_and_finished_rooms_come_back_after_a_restart(make_harness, store_spec):
    """A private room waiting for the friend who has its code, and a finished room waiting
    for a rematch, are back after a restart with their codes and seats; their players'
    tokens resume them, the friend joins with the code, the rematch is played."""
    h1 = await make_harness(store=make_store(*store_spec))
    alice = await h1.client("alice")
    waiting = await h1.create(alice, SMALL, public=False)
    public = await h1.create(await h1.client("erin"), SMALL, public=True)
    g = await h1.game(SMALL, names=("carol", "dave"))
    await g.play_out()
    finished = g.code
    await g.seats[1].request("rematch", room=finished)  # dave asks; carol has not yet
    await g.seats[0].expect("room", room=finished)
    tokens = {"alice": alice.token, "carol": g.seats[0].token, "dave": g.seats[1].token}
    h1.snap(finished)
    await h1.server.shutdown(restart=True)
    h1.clients.clear()

    h2 = await make_harness(store=make_store(*store_spec))
    assert h2.server.restored == 3
    h2.snap(finished)
    rooms = h2.server.hub.rooms
    assert {waiting, public, finished} == set(rooms)
    assert rooms[waiting].status == "waiting" and not rooms[waiting].public
    assert rooms[finished].status == "finished" and rooms[finished].game_id is not None
    assert [p.connected for p in rooms[finished].players] == [False, False]
    assert rooms[public].listed_at != 0  # listed again
    assert h2.clock.pending >= 4  # every seat's reconnect grace runs

    alice2 = await h2.client("alice", hello=False)
    welcome = await alice2.hello("alice", tokens["alice"])
    assert welcome["resumed"] is True and welcome["rooms"] == [waiting]
    assert (await alice2.expect("joined", room=waiting))["seat"] == 0
    bob = await h2.client("bob")
    joined = await bob.call("join", room=waiting)  # the friend with the code
    assert joined["type"] == "joined" and joined["seat"] == 1
    h2.snap(waiting)
    for c in (alice2, bob):
        state = await c.expect("state", room=waiting)
        assert state["view"]["ply"] == 0

    seats = []
    for name in ("carol", "dave"):
        c = await h2.client(name, hello=False)
        welcome = await c.hello(name, tokens[name])
        assert welcome["resumed"] is True and welcome["rooms"] == [finished]
        state = await c.expect("state", room=finished)
        assert state["view"]["outcome"] == g.seats[0].latest[finished]["view"]["outcome"]
        seats.append(c)
    assert rooms[finished].rematch == {1}  # dave's request outlived the restart
    again = await seats[0].call("rematch", room=finished)  # carol's completes it
    assert again["type"] == "joined"
    h2.snap(finished)
    assert rooms[finished].status == "playing"

    # A room that closes is forgotten: after the next restart only the two games are back.
    erin = await h2.client("erin", hello=False)
    await erin.hello("erin", None)
    await h2.server.store.flush()
    assert len(await h2.server.store.fetch("SELECT code FROM rooms")) == 3
    h2.advance(h2.server.config.reconnect_grace_s + 1)  # erin never came back: room closed
    await h2.server.store.flush()
    assert public not in rooms
    codes = {r[0] for r in await h2.server.store.fetch("SELECT code FROM rooms")}
    assert codes == {waiting, finished}
