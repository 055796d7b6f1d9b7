"""``kill -9`` durability: a real server process on a temporary data directory is killed
with SIGKILL at random points while two clients play, restarted on the same data, and the
clients resume with their tokens. After every restart the game is at the last ply any
client saw, or later, never earlier; the position is one the game really had (never half a
move); the game then finishes normally and its record is served."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import signal
import sys
from pathlib import Path

import orjson
from stacko_wire import Client

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = {"tower": 5, "bricks": 16, "rounds": 3, "turn_cap": 40}


def _env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKO_")}
    env["PYTHONPATH"] = str(ROOT)
    env["STACKO_DATA_DIR"] = str(data)
    return env


async def start(data: Path, log) -> tuple[asyncio.subprocess.Process, str, int]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "stacko.server", "--port", "0", "--log-level", "WARNING",
        "--rate-per-second", "100000", "--burst", "100000",
        cwd=ROOT, env=_env(data), stdout=asyncio.subprocess.PIPE, stderr=log,
    )  # fmt: skip
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
    m = re.search(r"connect to (ws://127\.0\.0\.1:(\d+)/)", line)
    assert m, line
    return proc, m.group(1), int(m.group(2))


def children(pid: int, running: str) -> list[int]:
    """The processes whose parent is ``pid`` and whose command line holds ``running``."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and running.encode() in cmdline:
                out.append(int(entry))
    return out


async def killed(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL, then the process's end and its stdout's: nothing the server started (its
    applier) holds that pipe, so a reader of it sees the end at once."""
    kill(proc)
    await proc.wait()
    assert proc.stdout is not None
    await asyncio.wait_for(proc.stdout.read(), 10)


def seen_ply(clients: list[Client], code: str) -> int:
    """The highest ply any client saw in a state frame (every one is acknowledged output)."""
    plies = [
        f["view"]["ply"] for c in clients for f in c.frames
        if f.get("type") == "state" and f.get("room") == code
    ]  # fmt: skip
    return max(plies, default=0)


async def finished(port: int, code: str) -> dict | None:
    """The record of room ``code``'s game from ``/api/games``, if it is finished."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /api/games?code={code} HTTP/1.1\r\nHost: x\r\n"
                 "Connection: close\r\n\r\n".encode())  # fmt: skip
    body = (await asyncio.wait_for(reader.read(), 10)).partition(b"\r\n\r\n")[2]
    writer.close()
    games = orjson.loads(body)["games"]
    assert len(games) <= 1
    return games[0] if games else None


def kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):  # killed (and reaped) already
        os.kill(proc.pid, signal.SIGKILL)


def current(clients: list[Client], code: str) -> dict:
    """The newest view any client has (the mover's own reply may come before the other's)."""
    return max((c.latest[code] for c in clients), key=lambda f: f["seq"])["view"]


async def test_kill_9_at_random_points_loses_nothing_acknowledged(tmp_path):
    rng = random.Random(os.getpid())
    data = tmp_path / "data"
    log = (tmp_path / "stacko.server.log").open("wb")
    proc, url, _ = await start(data, log)
    try:
        a, b = await Client.open(url, "alice"), await Client.open(url, "bob")
        await a.hello("alice")
        await b.hello("bob")
        code = (await a.call("create_room", options=OPTIONS))["room"]
        assert (await b.call("join", room=code))["type"] == "joined"
        clients = [a, b]
        views: dict[tuple[int, int], dict] = {}
        listed = None  # (seat, ply) -> the view that seat saw
        await asyncio.gather(*(c.expect("state", room=code) for c in clients))
        for trial in range(4):
            for _ in range(rng.randint(2, 30)):
                cur = current(clients, code)
                if cur["outcome"] is not None:
                    break
                mover = clients[cur["to_move"]]
                frame = mover.latest[code]
                reply = await mover.call(
                    "move", room=code, ply=frame["view"]["ply"], move=rng.choice(frame["legal"])
                )
                assert reply["type"] == "state", reply
                await asyncio.sleep(0)
            # One more move in flight, then SIGKILL at a random instant around it.
            cur = current(clients, code)
            if cur["outcome"] is None:
                mover = clients[cur["to_move"]]
                frame = mover.latest[code]
                rid = await mover.request("move", room=code, ply=cur["ply"],
                                          move=rng.choice(frame["legal"]))  # fmt: skip
                if trial % 2:  # the moment the move is acknowledged: the narrowest case
                    await mover.expect(id=rid)
                    kill(proc)
            await asyncio.sleep(rng.random() * 0.004)  # or at any instant around it
            await killed(proc)
            for c in clients:
                await c.closed(10)
            for seat, c in enumerate(clients):
                for f in c.frames:
                    if f.get("type") == "state" and f.get("room") == code:
                        views[(seat, f["view"]["ply"])] = f["view"]
            last = seen_ply(clients, code)
            proc, url, port = await start(data, log)
            listed = await finished(port, code)
            if listed is not None:  # the game ended by the last move: it is a record now
                assert listed["plies"] >= last, (trial, listed, last)
                break
            resumed = []
            for seat, old in enumerate(clients):
                c = await Client.open(url, old.label)
                welcome = await c.hello(old.label, old.token)
                assert welcome["resumed"] is True and welcome["rooms"] == [code], (trial, welcome)
                state = await c.expect("state", room=code)
                ply = state["view"]["ply"]
                assert ply >= last, f"trial {trial}: back at ply {ply}, a client saw {last}"
                if (seat, ply) in views:  # a position the seat saw before: the same one
                    assert state["view"] == views[(seat, ply)], (trial, seat, ply)
                resumed.append(c)
            assert resumed[0].latest[code]["view"]["ply"] == resumed[1].latest[code]["view"]["ply"]
            clients = resumed
        # The game goes on to its end after the last restart.
        a, b = clients
        while listed is None:
            cur = current(clients, code)
            if cur["outcome"] is not None:
                break
            mover = clients[cur["to_move"]]
            frame = mover.latest[code]
            move = rng.choice(frame["legal"])
            reply = await mover.call("move", room=code, ply=cur["ply"], move=move)
            assert reply["type"] == "state", reply
            if mover is b:  # alice's view of it, before reading her latest
                await a.expect("state", room=code, seq=reply["seq"])
        for c in clients:
            assert not c.invalid, c.invalid[:2]
        if listed is None:
            game = await finished(port, code)
            assert game is not None
            assert game["plies"] == cur["ply"] and game["result"] == cur["outcome"]
            # A clean stop: 1012 to every client, and exit status 0.
            proc.send_signal(signal.SIGTERM)
            for c in clients:
                assert await c.closed(10) == (1012, "service restart")
        else:
            proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 15) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        log.close()


async def test_kill_9_keeps_a_waiting_room_and_a_finished_one(tmp_path):
    """Killed right after the room's creator saw ``joined``: the room is back with its code
    (the friend joins with it) and its creator's token resumes the seat; a finished room
    killed right after the last move comes back finished, and its rematch is played."""
    data = tmp_path / "data"
    log = (tmp_path / "stacko.server.log").open("wb")
    proc, url, _ = await start(data, log)
    try:
        a, c, d = [await Client.open(url, n) for n in ("alice", "carol", "dave")]
        for client, name in ((a, "alice"), (c, "carol"), (d, "dave")):
            await client.hello(name)
        over = (await c.call("create_room", options=OPTIONS))["room"]
        assert (await d.call("join", room=over))["type"] == "joined"
        await c.expect("state", room=over)
        assert (await c.call("resign", room=over))["view"]["outcome"] is not None
        waiting = (await a.call("create_room", options=OPTIONS, public=False))["room"]
        (applier,) = children(proc.pid, "journal.py")
        assert os.readlink(f"/proc/{applier}/fd/1") == os.devnull  # not the server's stdout
        await killed(proc)  # right after the acknowledgement
        proc, url, _ = await start(data, log)
        a2 = await Client.open(url, "alice")
        welcome = await a2.hello("alice", a.token)
        assert welcome["resumed"] is True and welcome["rooms"] == [waiting]
        bob = await Client.open(url, "bob")
        await bob.hello("bob")
        assert (await bob.call("join", room=waiting))["type"] == "joined"
        for who in (a2, bob):
            assert (await who.expect("state", room=waiting))["view"]["ply"] == 0
        back = []
        for old, name in ((c, "carol"), (d, "dave")):
            new = await Client.open(url, name)
            assert (await new.hello(name, old.token))["rooms"] == [over]
            assert (await new.expect("state", room=over))["view"]["outcome"] is not None
            back.append(new)
        await back[0].request("rematch", room=over)
        assert (await back[1].call("rematch", room=over))["type"] == "joined"
        assert (await back[1].expect("state", room=over))["view"]["ply"] == 0
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 15) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        log.close()
