"""What a newcomer meets in ``stacko-client`` and the SDK (issue "the first ten minutes"):
names instead of seats, confirmations before a game is given up, one message per rematch
question, plain-words errors, browser URLs, the built-in opponent, resuming after a server
restart (close 1012), and ``--replay``. Real servers on 127.0.0.1 (ephemeral ports)."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import random
import re
import threading
from typing import Any

import pytest

from stacko.clients import botcli
from stacko.clients.cli import Player, amain, fetch_replay, http_base, parse_args, replay_lines
from stacko.clients.client import StackoClient, websocket_url
from stacko.clients.sdk import Bot, BotRunner, GameResult, Move, State, play
from stacko.server.app import Server
from stacko.server.config import ServerConfig
from stacko.server.store import make_store
from tests.clients.conftest import FAST, MakeServer

SMALL = {"bricks": 12, "tower": 4, "rounds": 1}


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
    t = Terminal([srv.url, "--create", "--name", "alice"])
    await t.expect(r"^room: \w+$")
    srv.hub.sessions.clear()  # a restart that lost everything (no store)
    await restart(srv)
    await t.expect(r"^error: reconnected, but the server no longer knows this session$")
    assert await t.exit_code() == 2


async def test_a_queued_terminal_client_queues_again_after_a_restart(
    make_server: MakeServer,
) -> None:
    """A restart keeps no session without a seat (queues start empty): a client waiting in
    quick match ended with "error: reconnected, but the server no longer knows this
    session" after every restart of a server with a store. It has nothing to lose: it
    queues again on its new session."""
    srv = await make_server()
    t = Terminal([srv.url, "--quick-match", "--name", "alice", "--auto"])
    await t.expect(r"^waiting for an opponent")
    srv.hub.sessions.clear()  # what a restart of a server with a store keeps of it
    await restart(srv)
    await t.expect(r"^reconnected with a new session \(the server forgot the old one\)")
    await t.expect(r"^waiting for an opponent")
    async with StackoClient(srv.url, "bob") as bob:
        joined = await bob.quick_match("stacko")
        assert joined["type"] == "joined", joined
        await bob.resign(joined["room"])
    await t.expect(r"^result: you won")
    assert await t.exit_code() == 0


async def test_an_auto_client_plays_on_when_its_move_crosses_the_end_of_the_game() -> None:
    """The opponent resigned while this client's move was on its way: the move is refused
    with ``game_over``, and that answer reaches ``play`` before the reader shows the final
    state. ``--auto`` exited with status 2 on it (CI, once, in the test above); like a
    ``stale_ply``, it is the game moving on, and the final state follows."""
    out = io.StringIO()
    args = parse_args(["ws://127.0.0.1:1/", "--quick-match", "--auto"])
    player = Player(StackoClient("ws://127.0.0.1:1/", "alice"), args, out)
    refused = {"type": "error", "code": "game_over", "message": "the game is over"}
    player.on_error({**refused, "fatal": False})
    assert not player.done.done() and "refused: the game is over" in out.getvalue()
    player.on_error({**refused, "code": "not_your_turn", "fatal": False})  # a real mistake
    assert player.done.done() and player.done.result() == 2


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


@pytest.mark.parametrize(
    ("game", "bot", "options"),
    [
        ("stacko", "easy", ["tower=4", "bricks=12", "rounds=1"]),
        ("stakko", "random", ["variant=gray"]),
    ],
)
async def test_replay_prints_a_finished_game_move_by_move(
    game: str, bot: str, options: list[str], tmp_path: Any
) -> None:
    """A real game on a server with a SQLite store: the client names its record at the end,
    and ``--replay`` prints exactly the server's record with everything shown."""
    store = make_store("sqlite", str(tmp_path / "data"))
    async with Server(ServerConfig(host="127.0.0.1", port=0, **FAST), store=store) as srv:  # type: ignore[arg-type]
        url = f"http://127.0.0.1:{srv.port}/"
        played = io.StringIO()
        argv = [url, "--create", "--game", game, "--bot", bot, "--auto", "--seed", "3",
                "--name", "ann", *(x for o in options for x in ("--option", o))]  # fmt: skip
        assert await asyncio.wait_for(amain(argv, out=played), 30) == 0, played.getvalue()
        *_, hint, result = played.getvalue().splitlines()
        found = re.fullmatch(
            r"replay: stacko-client (\S+) --replay ([0-9a-f]{16}) \(or (\S+) in a browser\)", hint
        )
        assert found is not None, hint
        ws_url, gid, page = found.groups()
        assert ws_url == f"ws://127.0.0.1:{srv.port}/" and page == f"{url}games/{gid}"
        assert result.startswith("result: ")
        (row,) = await srv.store.fetch("SELECT id, status FROM games")
        assert row == (gid, "finished")

        out = io.StringIO()
        assert await amain([ws_url, "--replay", gid], out=out) == 0, out.getvalue()
        record = await asyncio.to_thread(fetch_replay, url, gid)
        text = out.getvalue()
        assert text == "\n\n".join(replay_lines(record, ascii=True)) + "\n"  # StringIO: ASCII
        head = text.splitlines()[0]
        assert head.startswith(f"game {gid}: {game.capitalize()}, ") and "ann (seat " in head
        assert f", {bot} bot)" in head
        steps = re.findall(r"^-- ply (\d+)", text, re.M)
        assert [int(p) for p in steps] == [s["ply"] for s in record["steps"]]
        live_plies = [int(p) for p in re.findall(r"^\[\w+ ply (\d+)\]", played.getvalue(), re.M)]
        assert int(steps[-1]) == live_plies[-1]  # the game the client played, to its end
        for s in record["steps"][1:]:
            assert f"last: {s['text']}" in text
        # read by someone who is neither player: it was drawn as seat 0 saw it ("you (seat
        # 0)", "your turn: take ... (t SLOT)", "you drew 7", "result: you lost")
        for line in text.splitlines():
            if not line.startswith(("* = ", "W white")):  # the legends
                assert not re.search(r"\byour?\b", line), line
        assert "ann (seat 0)" in text or "ann, seat 0" in text
        if game == "stacko":  # every brick shown: no "?" in any tower row
            assert record["steps"][0]["view"]["towers"][1].count(None) == 0
            assert not re.search(r"^ +\d+  .*\?", text, re.M)
        # the same outcome as the client saw it, scores and all
        scores = record["result"]["scores"]
        assert text.splitlines()[-1].startswith("result: ")
        assert f"{min(scores)}" in result and f"{max(scores)}" in result

        # A game in progress is not served; nor an unknown or malformed id.
        async with StackoClient(srv.url, "bo") as client:
            await client.create_room(game="stacko", options={"tower": 4, "bricks": 12}, bot="easy")
            await first_state(client)
            (live,) = await srv.store.fetch("SELECT id FROM games WHERE status = 'playing'")
            for gid_asked, said in (
                (live[0], f"no finished game {live[0]} (HTTP 404)"),
                ("0000000000000000", "no finished game 0000000000000000 (HTTP 404)"),
                ("nope", "a game id is 16 lowercase hexadecimal digits (HTTP 400)"),
            ):
                missing = io.StringIO()
                assert await amain([url, "--replay", gid_asked], out=missing) == 2
                assert missing.getvalue() == f"error: cannot replay {gid_asked}: {said}\n"


async def test_sdk_results_name_their_records(tmp_path: Any) -> None:
    store = make_store("sqlite", str(tmp_path / "data"))
    async with Server(ServerConfig(host="127.0.0.1", port=0, **FAST), store=store) as srv:  # type: ignore[arg-type]
        results = await asyncio.wait_for(
            play(lambda s: s.legal[0], srv.url, bot="easy", games=2, options=SMALL), 60
        )
        ids = [r.game_id for r in results]
        assert len(set(ids)) == 2 and None not in ids  # a rematch is a game of its own
        assert not any(r.rated for r in results)  # a guest's games are never rated
        rows = await srv.store.fetch("SELECT id, status, plies FROM games")
        assert sorted(rows) == sorted((r.game_id, "finished", r.plies) for r in results)


async def test_replay_from_a_server_without_records_says_so(make_server: MakeServer) -> None:
    srv = await make_server()  # memory only: no record, no id at the end of a game
    played = io.StringIO()
    argv = [srv.url, "--create", "--bot", "easy", "--auto", "--option", "tower=4",
            "--option", "bricks=12"]  # fmt: skip
    assert await asyncio.wait_for(amain(argv, out=played), 30) == 0, played.getvalue()
    assert "replay:" not in played.getvalue()
    (result,) = await asyncio.wait_for(play(lambda s: s.legal[0], srv.url, bot="easy"), 30)
    assert result.game_id is None
    out = io.StringIO()
    assert await amain([srv.url, "--replay", "0123456789abcdef"], out=out) == 2
    assert out.getvalue() == (
        "error: cannot replay 0123456789abcdef: this server keeps no records (started with"
        " --database memory) (HTTP 503)\n"
    )
