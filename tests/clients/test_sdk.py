"""The bot SDK (``clients.sdk``) and ``stacko-bot`` against a real server on 127.0.0.1
(ephemeral port): whole games of both games, several games on one connection, a dropped
connection, a stale move, a slow bot, the README's example bot and the command."""

from __future__ import annotations

import asyncio
import io
import os
import random
import re
import socket
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from stacko.bots.registry import UnknownBotError
from stacko.clients import botcli
from stacko.clients.sdk import (
    Bot,
    BotError,
    BotRunner,
    BuiltinBot,
    ConnectionLost,
    GameResult,
    Move,
    State,
    default_fallback,
)
from tests.clients.conftest import MakeServer
from tests.clients.test_client_flow import restart

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"bricks": 12, "tower": 4, "rounds": 2}
"""Short Stacko games: a test wants whole games, not long ones."""

T = TypeVar("T")


async def within(work: Awaitable[T], seconds: float = 60) -> T:
    """``work``, or a failure after ``seconds``: a broken SDK fails a test, never hangs it."""
    async with asyncio.timeout(seconds):
        return await work


async def until(condition: Callable[[], bool]) -> None:
    """Poll the server's or a runner's state (no hook to wait on); fail after 10 s."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")


def random_bot(seed: int) -> Callable[[State], Move]:
    """A plain-function bot: any legal move, seeded."""
    rng = random.Random(seed)

    def choose(state: State) -> Move:
        return rng.choice(state.legal)

    return choose


class Recorder(Bot):
    """A subclass bot: plays the last legal move and records what the SDK calls."""

    name = "recorder"

    def __init__(self) -> None:
        self.observed: list[State] = []
        self.chosen: list[State] = []
        self.finished: list[GameResult] = []

    def observe(self, state: State) -> None:
        self.observed.append(state)

    def choose(self, state: State) -> Move:
        self.chosen.append(state)
        return state.legal[-1]

    def game_over(self, result: GameResult) -> None:
        self.finished.append(result)


def check_pair(a: GameResult, b: GameResult) -> None:
    """Two seats' results of one game tell the same story."""
    assert a.room == b.room and a.game == b.game
    assert {a.seat, b.seat} == {0, 1}
    assert (a.termination, a.winner, a.scores, a.plies) == (
        b.termination,
        b.winner,
        b.scores,
        b.plies,
    )
    assert a.termination in ("completed", "turn_cap")
    assert {a.outcome, b.outcome} in ({"won", "lost"}, {"draw"})
    assert a.moves + b.moves == a.plies  # every ply was a move one of them sent


# -- whole games --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("game", "options"),
    [("stacko", SMALL), ("stakko", {"variant": "gray", "ply_cap": 300})],
)
async def test_callable_and_subclass_bots_play_whole_games(
    make_server: MakeServer, game: str, options: dict[str, Any]
) -> None:
    srv = await make_server()
    recorder = Recorder()
    async with (
        BotRunner(random_bot(1), srv.url, name="fn") as a,
        BotRunner(recorder, srv.url, name="sub") as b,
    ):
        code = await a.create_room(game, options=options, public=False)
        ra, rb = await within(asyncio.gather(a.play_room(code), b.join(code)))
    assert len(ra) == len(rb) == 1
    check_pair(ra[0], rb[0])
    assert ra[0].seat == 0 and ra[0].game == game and ra[0].room == code
    # The subclass saw every state of its seat, chose from its own turns only, got the result.
    assert recorder.finished == rb
    assert len(recorder.chosen) == rb[0].moves > 0
    assert all(s.legal and s.seat == 1 and s.view["to_move"] == 1 for s in recorder.chosen)
    assert recorder.observed[-1].outcome is not None
    assert [s.seq for s in recorder.observed] == sorted({s.seq for s in recorder.observed})
    assert all(s.options == recorder.observed[0].options for s in recorder.observed)


@pytest.mark.parametrize(
    ("game", "levels"), [("stacko", ("strong", "easy")), ("stakko", ("search", "random"))]
)
async def test_builtin_bots_play_through_the_sdk(
    make_server: MakeServer, game: str, levels: tuple[str, str]
) -> None:
    """The engine bots decide on engine views rebuilt from the wire views."""
    srv = await make_server()
    async with (
        BotRunner(BuiltinBot(game, levels[0], seed=1), srv.url) as a,
        BotRunner(BuiltinBot(game, levels[1], seed=2), srv.url) as b,
    ):
        ra, rb = await within(asyncio.gather(a.quick_match(game), b.quick_match(game)))
    check_pair(ra[0], rb[0])
    assert ra[0].fallbacks == rb[0].fallbacks == 0  # quick matches have a 30 s clock


def test_builtin_bot_checks_its_level_at_once() -> None:
    with pytest.raises(UnknownBotError):
        BuiltinBot("stacko", "grandmaster")
    with pytest.raises(ValueError, match="no wire view"):
        BuiltinBot("chess", "strong")


# -- several games on one connection --------------------------------------------------------


async def test_sequential_quick_matches_on_one_connection(make_server: MakeServer) -> None:
    srv = await make_server()
    async with (
        BotRunner(random_bot(1), srv.url) as a,
        BotRunner(BuiltinBot("stacko", "medium", seed=3), srv.url) as b,
    ):
        first = a.client
        ra, rb = await within(asyncio.gather(a.quick_match(games=3), b.quick_match(games=3)))
        assert a.client is first and a.reconnects == 0
    assert len(ra) == len(rb) == 3
    assert len({r.room for r in ra}) == 3  # a new room (and game) for each match
    for x, y in zip(ra, rb, strict=True):
        check_pair(x, y)


async def test_rematches_in_a_created_room(make_server: MakeServer) -> None:
    srv = await make_server()
    async with (
        BotRunner(random_bot(1), srv.url) as a,
        BotRunner(random_bot(2), srv.url, threaded=False) as b,  # on the event loop
    ):
        created: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        play_a = asyncio.create_task(a.create(options=SMALL, games=3, on_room=created.set_result))
        code = await within(created)
        rb = await within(b.join(code, games=3))
        ra = await within(play_a)
    assert [r.room for r in ra + rb] == [code] * 6
    assert [r.seat for r in ra] == [0, 1, 0]  # the seats swap at every rematch
    for x, y in zip(ra, rb, strict=True):
        check_pair(x, y)


async def test_concurrent_games_on_one_connection(make_server: MakeServer) -> None:
    """Two quick matches at once per runner: each game waits for the other to have started,
    which only works if the SDK plays them at the same time."""
    srv = await make_server()
    rooms: set[str] = set()
    both = asyncio.Event()

    async def waits_for_both(state: State) -> Move:
        rooms.add(state.room)
        if len(rooms) == 2:
            both.set()
        await both.wait()
        return state.legal[0]

    async with (
        BotRunner(waits_for_both, srv.url) as a,
        BotRunner(random_bot(5), srv.url) as b,
    ):
        async with asyncio.timeout(60):
            ra, rb = await asyncio.gather(
                asyncio.gather(a.quick_match(), a.quick_match()),
                asyncio.gather(b.quick_match(), b.quick_match()),
            )
        assert a.reconnects == 0
    results_a = [r for rs in ra for r in rs]
    results_b = {r.room: r for rs in rb for r in rs}
    assert {r.room for r in results_a} == set(results_b) == rooms
    for r in results_a:
        check_pair(r, results_b[r.room])


# -- the protocol's hard cases ---------------------------------------------------------------


async def test_reconnects_after_a_dropped_connection_and_finishes_the_game(
    make_server: MakeServer,
) -> None:
    srv = await make_server()
    dropped = asyncio.Event()
    rng = random.Random(4)

    async def drops_midgame(state: State) -> Move:
        if state.ply >= 6 and not dropped.is_set():
            dropped.set()
            await asyncio.sleep(0)  # let the test cut the connection under this decision
        return rng.choice(state.legal)

    async with (
        BotRunner(drops_midgame, srv.url, name="dropper") as a,
        BotRunner(random_bot(6), srv.url) as b,
    ):
        code = await a.create_room(options={"bricks": 30, "tower": 8, "rounds": 2})
        play = asyncio.gather(a.play_room(code), b.join(code))
        await within(dropped.wait())
        old = a.client
        assert old is not None and old._ws is not None
        old._ws.transport.abort()  # no close frame: the network just failed
        ra, rb = await within(play)
        assert a.reconnects == 1 and a.client is not old
        assert a.welcome is not None and a.welcome["resumed"] is True
        assert a.welcome["rooms"] == [code]
        assert a.session == old.session  # the same session, resumed with its token
    check_pair(ra[0], rb[0])
    assert ra[0].plies > 6  # the game went on after the drop


async def test_reconnects_while_queued_and_queues_again(make_server: MakeServer) -> None:
    """Queueing belongs to the connection: after a drop the SDK queues again on the new one."""
    srv = await make_server()
    async with (
        BotRunner(random_bot(1), srv.url) as a,
        BotRunner(random_bot(2), srv.url) as b,
    ):
        queued = asyncio.create_task(a.quick_match())
        await until(lambda: bool(srv.hub.queues["stacko"]))  # a waits in the queue
        old = a.client
        assert old is not None and old._ws is not None
        old._ws.transport.abort()
        await until(lambda: a.reconnects == 1 and bool(srv.hub.queues["stacko"]))
        assert a.client is not old
        rb = await within(b.quick_match())
        ra = await within(queued)
    check_pair(ra[0], rb[0])


async def test_a_queued_runner_queues_again_when_the_server_forgot_its_session(
    make_server: MakeServer,
) -> None:
    """A restart keeps no session without a seat (queues start empty): a runner waiting in
    quick match failed with ConnectionLost ("its seats are gone") after every restart of a
    server with a store, though it held no seat. It queues again on its new session."""
    srv = await make_server()
    async with (
        BotRunner(random_bot(1), srv.url) as a,
        BotRunner(random_bot(2), srv.url) as b,
    ):
        queued = asyncio.create_task(a.quick_match())
        await until(lambda: bool(srv.hub.queues["stacko"]))  # a waits in the queue
        old = a.client
        srv.hub.sessions.clear()  # what a restart of a server with a store keeps of it
        await restart(srv)
        await until(lambda: a.reconnects == 1 and bool(srv.hub.queues["stacko"]))
        assert a.client is not old and a.welcome is not None and not a.welcome["resumed"]
        rb = await within(b.quick_match())
        ra = await within(queued)
    check_pair(ra[0], rb[0])


async def test_without_reconnection_a_drop_loses_the_games(make_server: MakeServer) -> None:
    srv = await make_server()
    started = asyncio.Event()

    async def first_move(state: State) -> Move:
        started.set()
        return state.legal[0]

    async with (
        BotRunner(first_move, srv.url, reconnect=False) as a,
        BotRunner(random_bot(1), srv.url) as b,
    ):
        code = await a.create_room(options=SMALL)
        play = asyncio.create_task(a.play_room(code))
        join = asyncio.create_task(b.join(code))
        await within(started.wait())
        assert a.client is not None and a.client._ws is not None
        a.client._ws.transport.abort()
        with pytest.raises(ConnectionLost):
            await within(play)
        join.cancel()


async def test_a_stale_move_is_survived(make_server: MakeServer) -> None:
    """The game moves on between the bot's decision and its move (here the bot itself plays
    first over the raw connection): the server refuses the SDK's move as ``stale_ply``, and
    the SDK decides again on the current state instead of giving up."""
    srv = await make_server()
    runner: BotRunner | None = None
    raced: list[int] = []

    async def races_itself(state: State) -> Move:
        move = state.legal[0]
        if not raced and state.ply >= 2:
            raced.append(state.ply)
            assert runner is not None and runner.client is not None
            await runner.client.send(
                {"type": "move", "room": state.room, "ply": state.ply, "move": move}
            )
        return move

    async with (
        BotRunner(races_itself, srv.url) as a,
        BotRunner(random_bot(2), srv.url) as b,
    ):
        runner = a
        code = await a.create_room(options=SMALL)
        ra, rb = await within(asyncio.gather(a.play_room(code), b.join(code)))
    assert raced
    assert ra[0].stale == 1
    assert ra[0].termination == "completed"
    assert ra[0].moves + rb[0].moves + 1 == ra[0].plies  # + the move sent past the SDK


async def test_a_slow_bot_gets_a_fallback_move_and_does_not_block(
    make_server: MakeServer,
) -> None:
    """A plain ``choose`` stuck in its thread: the event loop keeps serving the connection,
    and the SDK plays ``fallback`` before the clock runs out."""
    srv = await make_server()
    entered = threading.Event()
    release = threading.Event()

    class Stuck(Bot):
        def __init__(self) -> None:
            self.fallbacks: list[Move] = []

        def choose(self, state: State) -> Move:
            if not entered.is_set():
                entered.set()
                release.wait(30)  # stuck until the fallback has been played
            return state.legal[0]

        def fallback(self, state: State) -> Move:
            move = default_fallback(state)
            self.fallbacks.append(move)
            release.set()
            return move

    bot = Stuck()
    async with (
        BotRunner(bot, srv.url) as a,
        BotRunner(random_bot(3), srv.url) as b,
    ):
        code = await a.create_room(options={**SMALL, "clock_ms": 1000})
        play = asyncio.gather(a.play_room(code), b.join(code))
        assert await asyncio.to_thread(entered.wait, 30)
        assert a.client is not None
        assert (await a.client.ping())["type"] == "pong"  # the loop is free
        ra, rb = await within(play)
    release.set()
    assert bot.fallbacks == [{"action": "draw"}]  # its first decision: draw, not take
    assert ra[0].fallbacks == 1
    assert ra[0].termination in ("completed", "timeout")
    assert rb[0].room == ra[0].room


async def test_an_illegal_move_is_a_bot_error(make_server: MakeServer) -> None:
    srv = await make_server()
    async with (
        BotRunner(lambda state: {"action": "take", "slot": 99}, srv.url) as a,
        BotRunner(random_bot(1), srv.url) as b,
    ):
        code = await a.create_room(options=SMALL)
        join = asyncio.create_task(b.join(code))
        with pytest.raises(BotError, match="not one of the legal moves"):
            await within(a.play_room(code))
        join.cancel()


# -- the README's example bot ----------------------------------------------------------------


def readme_bot(which: int = 0) -> str:
    """A python block of README.md's "Write a bot" section: the first (Stacko), the second
    (Stakko)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Write a bot\n", 1)[1].split("\n## ", 1)[0]
    found = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(found) > which, "README.md: python blocks missing under 'Write a bot'"
    return str(found[which])


RESULT_LINE = re.compile(
    r"^(won|lost|draw) (\d+):(\d+) \((\w+)\) as seat ([01]), stacko room ([A-Z0-9]+), (\d+) plies$"
)


async def test_readme_example_bot_plays_a_game(make_server: MakeServer, tmp_path: Path) -> None:
    code = readme_bot()
    assert len(code.strip().splitlines()) < 30
    script = tmp_path / "spreader.py"
    script.write_text(code, encoding="utf-8")
    srv = await make_server()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), srv.url,
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    # Run alone, it says that it waits instead of sitting in silence.
    said = await asyncio.wait_for(proc.stderr.readline(), 60)
    assert said.decode().startswith("waiting for an opponent for stacko (1 waiting)"), said
    async with BotRunner(BuiltinBot("stacko", "medium", seed=1), srv.url) as opponent:
        async with asyncio.timeout(120):
            theirs = await opponent.quick_match()
            out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    line = out.decode().strip()
    found = RESULT_LINE.match(line)
    assert found, line
    outcome, mine, other, termination, seat, room, plies = found.groups()
    assert (room, int(seat), termination, int(plies)) == (
        theirs[0].room,
        1 - theirs[0].seat,
        theirs[0].termination,
        theirs[0].plies,
    )
    assert (int(other), int(mine)) == (theirs[0].score, theirs[0].opponent_score)
    assert termination == "completed"
    assert {outcome, theirs[0].outcome} in ({"won", "lost"}, {"draw"})


async def test_readme_stakko_bot_plays_the_built_in_bot(
    make_server: MakeServer, tmp_path: Path
) -> None:
    script = tmp_path / "racer.py"
    script.write_text(readme_bot(1), encoding="utf-8")
    srv = await make_server()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), srv.url,
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert re.fullmatch(r"room [A-Z0-9]+: playing (White|Black)", lines[0]), lines
    assert re.fullmatch(r"(won|lost|draw) \d+:\d+ in \d+ moves", lines[1]), lines
    assert re.fullmatch(r"[01] won of 1", lines[2]), lines
    assert "waiting" not in err.decode()  # a built-in opponent: nobody to wait for


# -- stacko-bot ------------------------------------------------------------------------------

GAME_LINE = re.compile(
    r"^game (\d+): (won|lost|draw) (\d+):(\d+) \((\w+)\) as seat ([01]), (\w+) room ([A-Z0-9]+)",
    re.MULTILINE,
)
SUMMARY = re.compile(r"^(\w+): (\d+) won, (\d+) lost, (\d+) drawn of (\d+) games$", re.MULTILINE)


def games_of(text: str) -> dict[str, tuple[str, ...]]:
    return {m[8]: m.groups() for m in GAME_LINE.finditer(text)}


async def test_stacko_bot_plays_quick_matches_against_another(make_server: MakeServer) -> None:
    srv = await make_server()
    outs = [io.StringIO(), io.StringIO()]
    async with asyncio.timeout(120):
        codes = await asyncio.gather(
            botcli.amain([srv.url, "--level", "strong", "--quick-match", "--games", "2",
                          "--seed", "1"], outs[0]),
            botcli.amain([srv.url, "--level", "medium", "--quick-match", "--games", "2",
                          "--seed", "2", "--name", "middle"], outs[1]),
        )  # fmt: skip
    assert list(codes) == [0, 0], [o.getvalue() for o in outs]
    texts = [o.getvalue() for o in outs]
    assert "as strong-bot" in texts[0] and "as middle" in texts[1]
    a, b = games_of(texts[0]), games_of(texts[1])
    assert len(a) == 2 and a.keys() == b.keys()  # the same two rooms, one line per game
    for room in a:
        assert {a[room][1], b[room][1]} in ({"won", "lost"}, {"draw"})
        assert (a[room][2], a[room][3]) == (b[room][3], b[room][2])
    for text, level in zip(texts, ("strong", "medium"), strict=True):
        summary = SUMMARY.search(text)
        assert summary and summary[1] == level and summary[5] == "2"
        won, lost, drawn = (int(summary[i]) for i in (2, 3, 4))
        assert won + lost + drawn == 2
        assert won == sum(g[1] == "won" for g in games_of(text).values())


async def test_stacko_bot_command_creates_a_room_for_rematches(make_server: MakeServer) -> None:
    """The installed command in its own process creates a Stakko room; another joins it."""
    srv = await make_server()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "stacko.clients.botcli", srv.url, "--game", "stakko", "--level",
        "random", "--create", "--games", "2", "--seed", "1",
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    async with asyncio.timeout(120):
        lines: list[str] = []
        while not any(line.startswith("room: ") for line in lines):
            raw = await proc.stdout.readline()
            assert raw, "stacko-bot ended before printing the room"
            lines.append(raw.decode().strip())
        code = lines[-1].removeprefix("room: ")
        out = io.StringIO()
        status = await botcli.amain([srv.url, "--game", "stakko", "--level", "search",
                                     "--join", code, "--games", "2"], out)  # fmt: skip
        rest, err = await proc.communicate()
    assert status == 0 and proc.returncode == 0, err.decode()
    theirs = games_of("\n".join(lines) + "\n" + rest.decode())
    mine = games_of(out.getvalue())
    assert list(theirs) == list(mine) == [code]  # both games in the one room
    assert "random: " in rest.decode() and "of 2 games" in rest.decode()
    assert "search: " in out.getvalue() and "of 2 games" in out.getvalue()


def test_stacko_bot_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        botcli.main(["--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: stacko-bot")
    for word in ("--quick-match", "--create", "--join", "--games", "--seed", "--level"):
        assert word in text
    assert re.search(r"stacko +easy, medium, strong", text)
    assert "exit status" in text


def test_stacko_bot_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--quick-match", "--level", "grandmaster"], ["--games", "2"],
                 ["--join", "ABCDEF", "--option", "rounds=1"]):  # fmt: skip
        with pytest.raises(SystemExit) as exited:
            botcli.main(argv)
        assert exited.value.code == 2
    assert "grandmaster" in capsys.readouterr().err


async def test_stacko_bot_connection_and_refusal_exit_2(make_server: MakeServer) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = io.StringIO()
    assert await botcli.amain([f"ws://127.0.0.1:{port}", "--quick-match"], out) == 2
    assert out.getvalue().startswith("error: cannot connect")
    srv = await make_server()
    out = io.StringIO()
    assert await botcli.amain([srv.url, "--join", "ZZZZZZ"], out) == 2
    assert "(unknown_room)" in out.getvalue()
