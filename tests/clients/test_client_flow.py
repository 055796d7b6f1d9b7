"""What a newcomer meets in ``stacko-client`` and the SDK (issue "the first ten minutes"):
names instead of seats, confirmations before a game is given up, one message per rematch
question, plain-words errors, browser URLs, the built-in opponent, resuming after a server
restart (close 1012), and ``--replay``. Real servers on 127.0.0.1 (ephemeral ports)."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import random
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from stacko.clients import botcli
from stacko.clients.cli import amain, http_base, parse_args, replay_lines
from stacko.clients.client import StackoClient, websocket_url
from stacko.clients.sdk import Bot, BotRunner, GameResult, Move, State, play
from stacko.engine.stacko import StackoOptions
from stacko.engine.stacko import new_game as new_stacko
from stacko.engine.stakko import StakkoOptions
from stacko.engine.stakko import new_game as new_stakko
from stacko.protocol.games import CODECS
from stacko.server.app import Server
from stacko.server.config import ServerConfig

FAST = {"rate_per_second": 1000.0, "burst": 2000}
SMALL = {"bricks": 12, "tower": 4, "rounds": 1}
MakeServer = Callable[..., Awaitable[Server]]


@pytest.fixture
async def make_server() -> AsyncIterator[MakeServer]:
    servers: list[Server] = []

    async def make(**config: object) -> Server:
        srv = Server(ServerConfig(host="127.0.0.1", port=0, **{**FAST, **config}))  # type: ignore[arg-type]
        await srv.start()
        servers.append(srv)
        return srv

    yield make
    for srv in servers:
        await srv.shutdown()


class Terminal:
    """An in-process ``stacko-client`` run: lines typed into a queue, output in a buffer."""

    def __init__(self, argv: list[str]) -> None:
        self.out = io.StringIO()
        self.lines: asyncio.Queue[str | None] = asyncio.Queue()
        self.task = asyncio.create_task(amain(argv, out=self.out, lines=self.lines))
        self.seen = 0

    def type(self, line: str | None) -> None:
        self.lines.put_nowait(line)

    async def expect(self, pattern: str) -> re.Match[str]:
        """The next output line (after the last one matched) that matches ``pattern``."""
        async with asyncio.timeout(10):
            while True:
                lines = self.out.getvalue().splitlines()
                for i in range(self.seen, len(lines)):
                    found = re.search(pattern, lines[i])
                    if found:
                        self.seen = i + 1
                        return found
                if self.task.done():
                    raise AssertionError(f"no {pattern!r}: {lines[-15:]}")
                await asyncio.sleep(0.01)

    def after(self) -> list[str]:
        """The lines after the last one matched."""
        return self.out.getvalue().splitlines()[self.seen :]

    async def exit_code(self) -> int:
        async with asyncio.timeout(10):
            return await self.task


async def first_state(client: StackoClient) -> dict[str, Any]:
    async with asyncio.timeout(10):
        while True:
            frame = await client.next_frame()
            assert frame is not None
            if frame["type"] == "state":
                return frame


# -- names, not seats ---------------------------------------------------------------------------


async def test_server_texts_name_the_players_for_players_and_spectators(
    make_server: MakeServer,
) -> None:
    srv = await make_server()
    async with (
        StackoClient(srv.url, "Alice") as alice,
        StackoClient(srv.url, "Bob") as bob,
        StackoClient(srv.url, "Carol") as carol,
    ):
        code = (await alice.create_room(options=SMALL))["room"]
        await carol.join(code, "spectator")
        await bob.join(code)
        async with asyncio.timeout(10):
            while (frame := await alice.next_frame()) and frame["type"] != "room":
                pass
        assert frame is not None and frame["text"] == "Bob joined"
        ply = (await first_state(alice))["view"]["ply"]
        await first_state(bob)
        await first_state(carol)
        mine = await alice.move(code, ply, {"action": "draw"})
        assert re.fullmatch(r"you drew \d+", mine["text"])
        assert (await first_state(bob))["text"] == "Alice drew"
        assert (await first_state(carol))["text"] == "Alice drew"
        with pytest.raises(Exception, match="it is Alice's turn"):
            await bob.move(code, ply + 1, {"action": "draw"})
        final = await bob.resign(code)
        assert final["text"] == "game over (resignation): Alice won 0:0"
        assert (await first_state(carol))["text"] == "game over (resignation): Alice won 0:0"


async def test_same_names_get_their_seats(make_server: MakeServer) -> None:
    srv = await make_server()
    async with StackoClient(srv.url, "player") as a, StackoClient(srv.url, "player") as b:
        code = (await a.create_room(options=SMALL))["room"]
        await b.join(code)
        ply = (await first_state(a))["view"]["ply"]
        await first_state(b)
        await a.move(code, ply, {"action": "draw"})
        assert (await first_state(b))["text"] == "player (seat 0) drew"


async def test_terminal_names_the_opponent_and_spectator_columns(make_server: MakeServer) -> None:
    srv = await make_server()
    alice = Terminal([srv.url, "--create", "--name", "alice", "--option", "tower=4",
                      "--option", "bricks=12"])  # fmt: skip
    code = (await alice.expect(r"^room: (\w+)$"))[1]
    watcher = Terminal([srv.url, "--join", code, "--spectate", "--name", "carol"])
    await watcher.expect(r"^joined room \w+ as spectator")
    async with StackoClient(srv.url, "bob") as bob:
        await bob.join(code)
        await alice.expect(r"^slot  you \(seat 0\) +bob \(seat 1\)$")
        await alice.expect(r"^your turn")
        await watcher.expect(r"^slot  alice \(seat 0\) +bob \(seat 1\)$")
        await watcher.expect(r"^alice's turn$")
        await watcher.expect(r"^scores alice 0 : 0 bob$")
        alice.type("d")
        await alice.expect(r"^you drew \d+$")
        alice.type("pass")
        await alice.expect(r"^bob's turn$")
        alice.type("d")
        await alice.expect(r"^refused: it is bob's turn \(not_your_turn\)$")
        await bob.resign(code)
        await alice.expect(r"^result: you won 0:0 \(resignation\)$")
        await watcher.expect(r"^game over: alice won 0:0 \(resignation\)$")
    alice.type("q")
    await alice.expect(r"^bye$")
    assert await alice.exit_code() == 0
    watcher.type("q")
    assert await watcher.exit_code() == 0


# -- confirmations and the end of a game ------------------------------------------------------


async def test_end_of_input_asks_before_leaving_a_game(make_server: MakeServer) -> None:
    srv = await make_server()
    t = Terminal([srv.url, "--create", "--bot", "easy", "--name", "alice"])
    await t.expect(r"^your move")
    t.type(None)  # Ctrl-D
    await t.expect(r"^end of input: leaving now loses the game against easy \(bot\); Ctrl-D again")
    t.type("b")  # anything else plays on ...
    await t.expect(r"^not leaving: play on$")
    await t.expect(r"^slot  you \(seat 0\) +easy \(bot\) \(seat 1\)$")  # ... and is a command
    t.type(None)
    t.type(None)
    await t.expect(r"^leaving a game in progress: you lose it$")
    await t.expect(r"^end of input$")
    assert await t.exit_code() == 0


async def test_end_of_input_after_a_game_leaves_at_once(make_server: MakeServer) -> None:
    srv = await make_server()
    t = Terminal([srv.url, "--create", "--bot", "easy"])
    await t.expect(r"^your move")
    t.type("r")
    t.type("r")
    await t.expect(r"^result: you lost")
    await t.expect(r"^type rematch for another game, or q to quit$")
    t.type(None)
    await t.expect(r"^end of input$")
    assert await t.exit_code() == 0
    assert "loses" not in "\n".join(t.after())


async def test_rematch_messages_do_not_contradict_each_other(make_server: MakeServer) -> None:
    srv = await make_server()
    t = Terminal([srv.url, "--create", "--name", "alice", "--option", "tower=4",
                  "--option", "bricks=12"])  # fmt: skip
    code = (await t.expect(r"^room: (\w+)$"))[1]
    async with StackoClient(srv.url, "bob") as bob:
        await bob.join(code)
        await t.expect(r"^your move")
        t.type("rematch")
        await t.expect(r"^the game is not over yet \(r resigns it\)$")
        await bob.resign(code)
        await t.expect(r"^result: you won")
        await t.expect(r"^type rematch for another game, or q to quit$")
        t.type("rematch")
        await t.expect(r"^asked bob for a rematch; waiting for their answer$")
        t.type("rematch")
        await t.expect(r"^you asked already; waiting for bob$")
        await bob.leave(code)
        await t.expect(r"^room \w+: bob left$")
        await t.expect(r"^no rematch: the opponent has left the room; q quits$")
        t.type("rematch")
        await t.expect(r"^no rematch: the opponent has left the room; q quits$")
    t.type("q")
    await t.expect(r"^bye$")
    assert await t.exit_code() == 0
    text = t.out.getvalue()
    assert "refused" not in text and text.count("asked bob") == 1, text


# -- arguments -------------------------------------------------------------------------------------


def test_a_malformed_room_code_is_said_in_plain_words(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(["--join", "zz"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--join zz: that is not a room code; a room code is 4 to 12 letters and digits" in err
    assert "pattern" not in err
    assert parse_args(["--join", "k7qj2m"]).join == "k7qj2m"  # the server reads it upper-case


def test_browser_urls_become_websocket_urls() -> None:
    assert websocket_url("http://127.0.0.1:8765/") == "ws://127.0.0.1:8765/"
    assert websocket_url("HTTPS://stacko.example/play") == "wss://stacko.example/play"
    assert websocket_url("ws://h:1/") == "ws://h:1/"
    assert websocket_url("127.0.0.1:8765") == "ws://127.0.0.1:8765"
    assert parse_args(["http://h:9/", "--quick-match"]).url == "ws://h:9/"
    assert http_base("wss://stacko.example:443/x") == "https://stacko.example:443"


def test_auto_delay_and_why_auto_is_paced(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args(["--quick-match", "--auto", "--auto-delay", "0.5"]).delay == 0.5
    assert parse_args(["--quick-match", "--auto", "--delay", "2"]).delay == 2.0  # the old name
    with pytest.raises(SystemExit):
        parse_args(["--quick-match", "--auto", "--auto-delay", "-1"])
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "the client keeps under the rate limit the server announces" in help_text
    assert "--auto-delay SECONDS waits that long before each move" in help_text


async def test_an_http_url_plays_against_a_bot(make_server: MakeServer) -> None:
    srv = await make_server()
    out = io.StringIO()
    http = f"http://127.0.0.1:{srv.port}/"
    code = await asyncio.wait_for(
        amain(
            [
                http,
                "--create",
                "--bot",
                "easy",
                "--auto",
                "--option",
                "tower=4",
                "--option",
                "bricks=12",
            ],
            out=out,
        ),
        30,
    )
    assert code == 0, out.getvalue()[-500:]
    assert re.match(r"^result: (you won|you lost|draw) \d+:\d+ \(completed\)$",
                    out.getvalue().splitlines()[-1])  # fmt: skip


# -- resuming after a restart ------------------------------------------------------------------


async def restart(srv: Server, down_s: float = 0.3) -> None:
    """What a restart of a server that keeps its games looks like to a client: every
    connection closed with 1012, nothing listening for a moment (connections refused), then
    the same port again, with the sessions and rooms it had."""
    port, ws = srv.port, srv._ws
    assert ws is not None
    ws.close(close_connections=False)
    for conn in list(srv.connections):
        conn.close(1012, "server restarting")
    await ws.wait_closed()
    await asyncio.sleep(down_s)
    srv.config = dataclasses.replace(srv.config, port=port)
    await srv.start()
    assert srv.port == port


async def test_terminal_client_resumes_after_a_restart(make_server: MakeServer) -> None:
    srv = await make_server()
    t = Terminal([srv.url, "--create", "--name", "alice", "--option", "tower=4",
                  "--option", "bricks=12"])  # fmt: skip
    code = (await t.expect(r"^room: (\w+)$"))[1]
    async with StackoClient(srv.url, "bob") as bob:
        await bob.join(code)
        await t.expect(r"^your move")
        await restart(srv)
        await t.expect(r"^the server is restarting; reconnecting \.\.\.$")
        await t.expect(r"^reconnected: the session is resumed$")
        await t.expect(r"^your move")  # the state again, at the same ply
        t.type("d")
        await t.expect(r"^you drew \d+$")  # the resumed session plays on
        bob2 = await bob.reconnect()
        try:
            assert bob2.welcome is not None and bob2.welcome["resumed"] is True
            await bob2.resign(code)
        finally:
            await bob2.close()
    await t.expect(r"^result: you won")
    await restart(srv)  # after the game: the final state comes again, the result does not
    await t.expect(r"^reconnected: the session is resumed$")
    await t.expect(r"^game over: you won")
    t.type("q")
    assert await t.exit_code() == 0
    assert t.out.getvalue().count("\nresult: ") == 1, t.out.getvalue()[-800:]


async def test_terminal_client_says_when_the_session_is_gone(make_server: MakeServer) -> None:
    srv = await make_server()
    t = Terminal([srv.url, "--quick-match", "--name", "alice"])
    await t.expect(r"^waiting for an opponent")
    srv.hub.sessions.clear()  # a restart that lost everything (no store)
    await restart(srv)
    await t.expect(r"^error: reconnected, but the server no longer knows this session$")
    assert await t.exit_code() == 2


async def test_sdk_resumes_after_a_restart(make_server: MakeServer) -> None:
    srv = await make_server()
    restarted = threading.Event()
    rng = random.Random(3)
    loop = asyncio.get_running_loop()

    def choose(state: State) -> Move:
        if not restarted.is_set():
            # in the bot's thread: restart the server under this decision, then answer
            asyncio.run_coroutine_threadsafe(restart(srv), loop).result(10)
            restarted.set()
        return rng.choice(state.legal)

    statuses: list[str] = []
    async with BotRunner(choose, srv.url, on_status=statuses.append) as runner:
        options = {"bricks": 20, "tower": 6, "rounds": 1}
        results = await asyncio.wait_for(runner.create(options=options, bot="easy"), 60)
        assert restarted.is_set() and runner.reconnects == 1
    # the move decided across the restart went out on the new connection and was applied
    assert results[0].termination == "completed" and results[0].moves >= 1
    assert any("1012 server restarting" in s and "resuming" in s for s in statuses), statuses


# -- the SDK ---------------------------------------------------------------------------------------


class Counting(Bot):
    """Counts games through ``new_game`` and keeps per-game memory."""

    def __init__(self) -> None:
        self.started: list[tuple[str, int]] = []
        self.moves_per_game: list[int] = []
        self.moves = -1

    def new_game(self, state: State) -> None:
        assert state.view["outcome"] is None
        self.started.append((state.room, state.ply))
        self.moves = 0

    def choose(self, state: State) -> Move:
        self.moves += 1
        return state.legal[0]

    def game_over(self, result: GameResult) -> None:
        self.moves_per_game.append(self.moves)


async def test_sdk_plays_a_built_in_opponent_with_hooks(make_server: MakeServer) -> None:
    srv = await make_server()
    bot, seen, statuses = Counting(), [], []
    results = await asyncio.wait_for(
        play(
            bot,
            srv.url,
            bot="easy",
            games=2,
            options=SMALL,
            on_result=seen.append,
            on_status=statuses.append,
        ),
        60,
    )
    assert len(results) == 2 and seen == results
    assert [s[1] for s in bot.started] == [0, 0]  # new_game at the start of each game
    assert bot.moves_per_game == [r.moves for r in results]
    assert statuses == []  # a bot opponent: nothing to wait for
    with pytest.raises(ValueError, match="cannot go with join"):
        await play(bot, srv.url, bot="easy", join="ABCDEF")


async def test_sdk_says_it_waits_for_an_opponent(make_server: MakeServer) -> None:
    srv = await make_server()
    statuses: list[str] = []
    said = asyncio.Event()

    def status(text: str) -> None:
        statuses.append(text)
        said.set()

    task = asyncio.create_task(play(lambda s: s.legal[0], srv.url, on_status=status))
    await asyncio.wait_for(said.wait(), 10)
    assert statuses[0].startswith("waiting for an opponent for stacko (1 waiting)")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_stacko_bot_against_a_built_in_bot(make_server: MakeServer) -> None:
    srv = await make_server()
    out = io.StringIO()
    argv = [srv.url, "--create", "--bot", "easy", "--games", "2", "--level", "medium",
            "--option", "tower=4", "--option", "bricks=12"]  # fmt: skip
    assert await asyncio.wait_for(botcli.amain(argv, out), 60) == 0, out.getvalue()
    assert re.search(r"^medium: \d won, \d lost, \d drawn of 2 games$", out.getvalue(), re.M)
    with pytest.raises(SystemExit):
        botcli.parse_args(["--quick-match", "--bot", "easy"])  # --bot goes with --create
    with pytest.raises(SystemExit):
        botcli.parse_args(["--create", "--bot", "grandmaster"])


# -- --replay ------------------------------------------------------------------------------------


def replay_record(game: str, seed: int) -> dict[str, Any]:
    """A replay in the contract of ``GET /api/games/{id}/replay?seat=all``, from a real game on
    the engine: each step's ``view`` is what the codec puts in a state frame; with
    ``seat=all`` a Stacko view shows both towers whole (as at the end of a completed game)."""
    rng = random.Random(seed)
    codec = CODECS[game]
    state: Any
    if game == "stacko":
        state = new_stacko(StackoOptions(bricks=12, tower=4, rounds=1), rng=random.Random(seed))
    else:
        state = new_stakko(StakkoOptions(variant="gray"), rng=random.Random(seed))
    names = ("ann", "bob")

    def step(seat: int | None) -> dict[str, Any]:
        view = json.loads(json.dumps(codec.view_to_wire(state.view(None))))
        if game == "stacko":
            view["towers"] = [list(t) for t in state.towers]
        return {"ply": view["ply"], "seat": seat, "text": codec.describe(state.view(None), names),
                "view": view}  # fmt: skip

    steps = [step(None)]
    while state.outcome() is None:
        seat = state.to_move
        state.apply(rng.choice(state.legal_moves()), seat)
        steps.append(step(seat))
    outcome = steps[-1]["view"]["outcome"]
    return {
        "id": f"{game}-{seed}",
        "game": game,
        "options": codec.options_to_wire(state.options, None),
        "players": [
            {"seat": 0, "name": "ann", "bot": None},
            {"seat": 1, "name": "bob", "bot": "easy"},
        ],
        "result": outcome,
        "steps": steps,
    }


class ReplayStub:
    """A plain HTTP server with one finished game: the records endpoint's contract only."""

    def __init__(self, records: dict[str, dict[str, Any]]) -> None:
        self.requests: list[str] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                stub.requests.append(self.path)
                found = re.fullmatch(r"/api/games/([^/]+)/replay\?seat=all", self.path)
                record = records.get(found[1]) if found else None
                body = json.dumps(record or {"error": "no such game"}).encode()
                self.send_response(200 if record else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ReplayStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("game", ["stacko", "stakko"])
async def test_replay_prints_a_finished_game_move_by_move(game: str) -> None:
    record = replay_record(game, 5)
    with ReplayStub({record["id"]: record}) as stub:
        out = io.StringIO()
        url = f"http://127.0.0.1:{stub.port}/"
        assert await amain([url, "--replay", record["id"]], out=out) == 0, out.getvalue()
        missing = io.StringIO()
        assert await amain([url, "--replay", "nope"], out=missing) == 2
    assert stub.requests == [f"/api/games/{record['id']}/replay?seat=all",
                             "/api/games/nope/replay?seat=all"]  # fmt: skip
    text = out.getvalue()
    assert text == "\n\n".join(replay_lines(record, ascii=True)) + "\n"  # StringIO: ASCII
    assert text.startswith(f"game {record['id']}: {game.capitalize()}, ann (seat 0) vs "
                           "bob (seat 1, easy bot)")  # fmt: skip
    steps = re.findall(r"^-- ply (\d+)", text, re.M)
    assert [int(p) for p in steps] == [s["ply"] for s in record["steps"]]
    for s in record["steps"][1:]:
        assert f"last: {s['text']}" in text
    if game == "stacko":  # every brick shown: no "?" in any tower row
        assert not re.search(r"^ +\d+  .*\?", text, re.M)
        assert "slot  ann (seat 0)" in text
    assert text.splitlines()[-1].startswith("result: ")
    assert (
        missing.getvalue()
        == "error: cannot replay nope: no finished game with that id (HTTP 404)\n"
    )
