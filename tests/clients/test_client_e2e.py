"""The reference client and ``stacko-client`` against a real server on 127.0.0.1 (ephemeral port):
in-process runs of the CLI, real subprocesses, and a keyboard session driven through stdin."""

from __future__ import annotations

import asyncio
import io
import os
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from stacko.clients.cli import amain
from stacko.clients.client import ServerError, StackoClient
from stacko.protocol.messages import SERVER
from stacko.server.app import Server
from stacko.server.config import ServerConfig

ROOT = Path(__file__).resolve().parents[2]
FAST = {"rate_per_second": 1000.0, "burst": 2000}
"""Limits for whole default games (about 220 frames per player) played at full speed."""

MakeServer = Callable[..., Awaitable[Server]]


@pytest.fixture
async def make_server() -> AsyncIterator[MakeServer]:
    servers: list[Server] = []

    async def make(**config: object) -> Server:
        srv = Server(ServerConfig(host="127.0.0.1", port=0, **config))  # type: ignore[arg-type]
        await srv.start()
        servers.append(srv)
        return srv

    yield make
    for srv in servers:
        await srv.shutdown()


async def spawn(*args: str, keyboard: bool = False) -> asyncio.subprocess.Process:
    """``python -m clients.cli ARGS`` in a real process (stdin a pipe with ``keyboard``)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "stacko.clients.cli",
        *args,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=asyncio.subprocess.PIPE if keyboard else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


def last_line(out: io.StringIO | str) -> str:
    text = out if isinstance(out, str) else out.getvalue()
    return text.rstrip("\n").splitlines()[-1]


RESULT = re.compile(r"^result: (you won|you lost|draw) (\d+):(\d+) \((\w+)\)$")


def check_pair(a: str, b: str) -> None:
    """Two players' result lines of one game tell the same story from both sides."""
    ma, mb = RESULT.match(a), RESULT.match(b)
    assert ma and mb, (a, b)
    assert (ma[2], ma[3]) == (mb[3], mb[2])
    assert ma[4] == mb[4]
    assert {ma[1], mb[1]} in ({"you won", "you lost"}, {"draw"})


async def wait_for_line(out: io.StringIO, pattern: str) -> re.Match[str]:
    async with asyncio.timeout(10):
        while True:
            found = re.search(pattern, out.getvalue(), re.MULTILINE)
            if found:
                return found
            await asyncio.sleep(0.01)


async def test_client_library_round_trip(make_server: MakeServer) -> None:
    srv = await make_server()
    async with StackoClient(srv.url, "ada") as a, StackoClient(srv.url, "bob") as b:
        assert a.session and a.welcome and a.welcome["resumed"] is False
        assert (await a.ping())["type"] == "pong"
        assert [g["game"] for g in await a.list_games()] == ["stacko", "stakko"]
        joined = await a.create_room(options={"rounds": 1})
        room = joined["room"]
        assert [r["room"] for r in await b.list_rooms("stacko")] == [room]
        with pytest.raises(ServerError) as refused:
            await b.move(room, 0, {"action": "draw"})
        assert refused.value.code == "not_in_room"
        await b.join(room)
        frames: list[dict[str, Any]] = []
        async with asyncio.timeout(5):
            while not any(f["type"] == "state" for f in frames):
                frame = await a.next_frame()
                assert frame is not None
                frames.append(frame)
        state = frames[-1]
        answer = await a.move(room, state["view"]["ply"], {"action": "draw"})
        assert answer["type"] == "state" and answer["view"]["drawn"] is not None
        with pytest.raises(ServerError) as stale:
            await a.move(room, 0, {"action": "pass"})
        assert stale.value.code == "stale_ply"
        final = await b.resign(room)
        assert final["view"]["outcome"]["termination"] == "resignation"
        for frame in frames:
            SERVER.validate_python(frame)


async def test_two_auto_clients_quick_match_in_process(make_server: MakeServer) -> None:
    srv = await make_server(**FAST)
    outs = [io.StringIO(), io.StringIO()]
    async with asyncio.timeout(60):
        codes = await asyncio.gather(
            *(
                amain([srv.url, "--quick-match", "--auto", "--seed", str(i)], out=out)
                for i, out in enumerate(outs)
            )
        )
    assert codes == [0, 0], [o.getvalue()[-500:] for o in outs]
    check_pair(last_line(outs[0]), last_line(outs[1]))


async def test_quick_match_several_games_queue_again(make_server: MakeServer) -> None:
    srv = await make_server(**FAST)
    outs = [io.StringIO(), io.StringIO()]
    argv = [srv.url, "--quick-match", "--auto", "--quiet", "--games", "2"]
    async with asyncio.timeout(90):
        codes = await asyncio.gather(
            *(amain([*argv, "--seed", str(i)], out=out) for i, out in enumerate(outs))
        )
    assert codes == [0, 0]
    for out in outs:
        assert re.match(r"^result: \d won, \d lost, \d drawn of 2 games$", last_line(out))
        lines = out.getvalue().splitlines()
        # --quiet: the two games' results and the summary, no room, join or queue lines
        assert len(lines) == 3, lines
        assert [line[:7] for line in lines[:2]] == ["game 1:", "game 2:"], lines


async def test_two_auto_clients_as_subprocesses(make_server: MakeServer) -> None:
    srv = await make_server(**FAST)
    procs = [await spawn(srv.url, "--quick-match", "--auto", "--seed", str(i)) for i in range(2)]
    try:
        async with asyncio.timeout(90):
            results = await asyncio.gather(*(p.communicate() for p in procs))
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, (out[-500:], err[-2000:])
    check_pair(last_line(results[0][0].decode()), last_line(results[1][0].decode()))


async def test_create_join_rematch_and_spectator(make_server: MakeServer) -> None:
    """Default server limits: the client paces itself under the announced rate limit."""
    srv = await make_server()
    creator, joiner, watcher = io.StringIO(), io.StringIO(), io.StringIO()
    games = ["--games", "2"]
    options = ["--option", "turn_cap=24", "--option", "rounds=1"]
    async with asyncio.timeout(60):
        first = asyncio.create_task(
            amain(
                [srv.url, "--create", *options, "--auto", "--seed", "1", "--name", "ann", *games],
                out=creator,
            )
        )
        code = (await wait_for_line(creator, r"^room: (\w+)$"))[1]
        assert f"--join {code}" in creator.getvalue()
        watch = asyncio.create_task(
            amain([srv.url, "--join", code, "--spectate", "--auto", *games], out=watcher)
        )
        await wait_for_line(watcher, rf"^joined room {code} as spectator")
        second = amain(
            [srv.url, "--join", code, "--auto", "--seed", "2", "--name", "bob", *games], out=joiner
        )
        codes = list(await asyncio.gather(first, second, watch))
    assert codes == [0, 0, 0], [o.getvalue()[-500:] for o in (creator, joiner, watcher)]
    for out in (creator, joiner):
        assert re.match(r"^result: \d won, \d lost, \d drawn of 2 games$", last_line(out))
        assert "rate_limited" not in out.getvalue()
    seats = re.findall(r"^joined room \w+ as seat (\d)", creator.getvalue(), re.MULTILINE)
    assert seats == ["0", "1"]  # the rematch swaps the seats
    one = r"((ann|bob) won|draw) \d+:\d+ \(completed\)"  # names, not seats
    assert re.match(rf"^result: 2 games watched: {one}; {one}$", last_line(watcher))


async def test_unknown_room_exits_2(make_server: MakeServer) -> None:
    srv = await make_server()
    out = io.StringIO()
    assert await amain([srv.url, "--join", "ZZZZZZ", "--auto"], out=out) == 2
    assert last_line(out) == "error: no room ZZZZZZ (unknown_room)"


async def test_server_going_away_exits_2(make_server: MakeServer) -> None:
    srv = await make_server()
    out = io.StringIO()
    run = asyncio.create_task(amain([srv.url, "--create", "--auto"], out=out))
    await wait_for_line(out, r"^room: ")
    await srv.shutdown()
    async with asyncio.timeout(10):
        assert await run == 2
    assert last_line(out) == "error: the server closed the connection (1001 server shutting down)"


async def test_no_server_exits_2() -> None:
    out = io.StringIO()
    assert await amain(["ws://127.0.0.1:9", "--quick-match", "--auto"], out=out) == 2
    assert last_line(out).startswith("error: cannot connect to ws://127.0.0.1:9")


class Keyboard:
    """A ``stacko-client`` subprocess driven through its stdin, read line by line."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []

    async def expect(self, pattern: str) -> re.Match[str]:
        assert self.proc.stdout is not None
        async with asyncio.timeout(10):
            while True:
                raw = await self.proc.stdout.readline()
                if not raw:
                    raise AssertionError(f"no {pattern!r} before exit: {self.lines[-20:]}")
                line = raw.decode().rstrip("\n")
                self.lines.append(line)
                found = re.search(pattern, line)
                if found:
                    return found

    async def type(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()


async def test_interactive_session_through_stdin(make_server: MakeServer) -> None:
    srv = await make_server()
    proc = await spawn(srv.url, "--create", "--name", "alice", keyboard=True)
    keys = Keyboard(proc)
    bob = io.StringIO()
    try:
        async with asyncio.timeout(60):
            code = (await keys.expect(r"^room: (\w+)$"))[1]
            opponent = asyncio.create_task(
                amain([srv.url, "--join", code, "--auto", "--seed", "5", "--name", "bob"], out=bob)
            )
            await keys.expect(r"^slot  you \(seat 0\) +bob \(seat 1\)$")  # names, not seats
            await keys.expect(r"^your turn: take the open \d+ \(t SLOT\) or draw \(d\)")
            await keys.expect(r"^your move")
            await keys.type("p 3")  # not before a draw
            await keys.expect(r"^refused: .* \(wrong_phase\)$")
            await keys.type("bogus")
            await keys.expect(r"^unknown command 'bogus'")
            await keys.type("d")
            drawn = (await keys.expect(r"^you drew (\d+)$"))[1]
            await keys.expect(r"^your turn: place the drawn \d+ \(p SLOT\) or pass it")
            await keys.type("pass")
            await keys.expect(rf"^last: you drew and passed {drawn}$")
            await keys.expect(r"^last: bob ")  # the auto opponent answers
            await keys.type("q")  # a game in progress: asked first
            await keys.expect(r"^leaving loses the game in progress against bob: q again")
            await keys.type("b")
            await keys.expect(r"^not leaving: play on$")
            await keys.expect(r"^slot  you")  # ... and the line is still a command
            await keys.type("r")
            await keys.expect(r"^resign, and lose the game against bob\? r again")
            await keys.type("n")
            await keys.expect(r"^not resigning: play on$")
            await keys.type("r")
            await keys.expect(r"^resign, and lose the game against bob\? r again")
            await keys.type("y")
            await keys.expect(r"^result: you lost \d+:\d+ \(resignation\)$")
            assert await opponent == 0
            assert re.match(r"^result: you won \d+:\d+ \(resignation\)$", last_line(bob))
            await keys.type("q")
            await keys.expect(r"^bye$")
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
