"""``stacko-client`` playing Stakko: the rendering of Stakko views (built by the real engine and
codec, validated against the protocol), the keyboard syntax and its local checks against
``legal``, and whole games against a real server on 127.0.0.1 (ephemeral port): two auto
clients, a keyboard session through stdin, and a built-in bot."""

from __future__ import annotations

import asyncio
import io
import random
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from test_client_e2e import FAST, RESULT, Keyboard, check_pair, last_line, spawn, wait_for_line
from test_client_render import frame_for as render_frame_for

from stacko.clients.cli import Command, amain, commands_text, parse_args, parse_command, stakko_refusal
from stacko.clients.render import (
    STAKKO_LEGEND,
    describe_result,
    describe_stakko_moves,
    disc_letters,
    render_state,
)
from stacko.engine.outcome import Termination
from stacko.engine.stakko import Stakko, StakkoOptions, move
from stacko.server.app import Server
from stacko.server.config import ServerConfig

LETTER = {"white": "W", "black": "B", "gray": "G", "red": "R"}

# -- frames and how to read a rendering back ----------------------------------------------


def frame_for(game: Stakko, seat: int | None, clock_ms: int | None = None) -> dict[str, Any]:
    """A state frame as the server builds it, validated against the protocol model."""
    return render_frame_for(game, seat, clock_ms, room="Q4TZ8M")


def stack_rows(text: str) -> list[tuple[int, int, str, str, str]]:
    """The stack rows of a rendering: (index, discs, owner, letters bottom to top, note)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("stack discs  owner"))
    rows = []
    for line in lines[start + 1 :]:
        m = re.match(r"^ *(\d+) +(\d+)  (.{8})  ([WBGR](?: [WBGR])*) *(.*)$", line)
        if m is None:
            break
        rows.append((int(m[1]), int(m[2]), m[3].strip(), m[4], m[5]))
    return rows


def letters(stack: list[str]) -> str:
    return " ".join(LETTER[d] for d in stack)


def check_rows(frame: dict[str, Any], text: str) -> None:
    """Every stack of the view is a row: index, size, owner and every disc bottom to top."""
    view = frame["view"]
    rows = stack_rows(text)
    assert [r[0] for r in rows] == list(range(len(view["line"])))
    for (_, size, owner, shown, _), stack in zip(rows, view["line"], strict=True):
        assert size == len(stack)
        assert shown == letters(stack)
        top = {"white": 0, "black": 1}.get(stack[-1])
        if top is None:
            assert owner == "-"
        elif view["seat"] is None:
            assert owner == f"seat {top}"
        else:
            assert owner == ("you" if top == view["seat"] else "opponent")


def play_random(seed: int, variant: str, steps: int) -> Stakko:
    rng = random.Random(seed)
    game = Stakko(StakkoOptions(variant), rng=random.Random(0))
    for _ in range(steps):
        if game.outcome() is not None:
            break
        game.apply(rng.choice(game.legal_moves()))
    return game


# -- rendering ------------------------------------------------------------------------------


def test_start_of_a_basic_game_from_each_side() -> None:
    game = Stakko(rng=random.Random(0))
    white = render_state(frame_for(game, 0, clock_ms=30_000))
    check_rows(frame_for(game, 0), white)
    rows = stack_rows(white)
    assert rows[0][3:] == ("R W W W W W W W W W", "White's home, Black's goal")
    assert rows[-1][3:] == ("R B B B B B B B B B", "Black's home, White's goal")
    assert all(r[3] == "G" and r[4] == "" for r in rows[1:-1])
    assert (
        white.splitlines()[0]
        == "room Q4TZ8M \u00b7 Stakko \u00b7 basic variant \u00b7 ply 0 of at most 500"
    )
    assert re.search(
        r"^White \(W\) you, seat 0: owns 1 stack, a move goes 1 toward stack 8 "
        r"\u00b7 height 0 \u00b7 passes 0$",
        white,
        re.M,
    )
    assert "\nBlack (B) opponent, seat 1: owns 1 stack" in white
    assert re.search(
        r"^your turn \(White\): .*m STACK COUNT or STACKxCOUNT \u00b7 clock 30 s$", white, re.M
    )
    assert "\nyour moves: 0x1..9 onto 1\n" in white
    assert white.endswith(STAKKO_LEGEND)

    black = render_state(frame_for(game, 1))
    check_rows(frame_for(game, 1), black)
    assert "\nopponent's turn (White)\n" in black and "your moves" not in black
    assert "\nBlack (B) you, seat 1: owns 1 stack, a move goes 1 toward stack 0" in black

    watcher = render_state(frame_for(game, None))
    check_rows(frame_for(game, None), watcher)
    assert "\nseat 0's turn (White)\n" in watcher and "you" not in watcher
    assert "\nWhite (W) seat 0: owns 1 stack" in watcher


def test_gray_variant_whole_stack_leaves_and_the_line_shrinks() -> None:
    """PROTOCOL.md's example: White 0x9, Black 8x4; then White lifts stack 1 with its base."""
    game = Stakko(StakkoOptions("gray"), rng=random.Random(0))
    game.apply(move(0, 9))
    game.apply(move(8, 4))
    frame = frame_for(game, 0)
    text = render_state(frame)
    check_rows(frame, text)
    assert "gray variant" in text.splitlines()[0]
    assert (
        "\nyour moves: 1x1..10 onto 2 (1x10: the whole stack, its space leaves the line)\n" in text
    )
    assert "\nlast: opponent moved 4 discs from stack 8 onto stack 7\n" in text
    assert "owns 2 stacks, a move goes 2 toward stack 0" in text

    game.apply(move(1, 10))
    frame = frame_for(game, 1)
    text = render_state(frame)
    check_rows(frame, text)
    rows = stack_rows(text)
    assert len(rows) == 8
    assert rows[1][3] == "G G W W W W W W W W W"  # the gray base came along, on top of stack 2's
    assert rows[-1][0] == 7 and rows[-1][4] == "Black's home, White's goal"
    assert "a move goes 1 toward stack 7" in text  # White's end of the line is index 7 now
    assert "its space left the line" in text


def test_red_variant_a_home_moves_away() -> None:
    game = Stakko(StakkoOptions("red"), rng=random.Random(0))
    assert {"stack": 0, "count": 10} in frame_for(game, 0)["legal"]
    game.apply(move(0, 10))  # White's whole home, red disc and all, onto space 1
    frame = frame_for(game, 1, clock_ms=5_000)
    text = render_state(frame)
    check_rows(frame, text)
    rows = stack_rows(text)
    assert len(rows) == 8
    assert rows[0][3] == "G R W W W W W W W W W"
    assert rows[0][4] == "White's end, Black's goal"  # in the red game the ends are not homes
    assert rows[-1][4] == "Black's end, White's goal"
    assert (
        "\nyour moves: 7x1..10 onto 6 (7x10: the whole stack, its space leaves the line)\n" in text
    )


def test_a_line_of_one_stack_is_both_ends() -> None:
    line = "R" + "B" * 9 + "G" * 7 + "R" + "W" * 9
    game = Stakko.from_line(line, options=StakkoOptions("red"))
    assert game.outcome() is not None  # nobody can move any more
    frame = frame_for(game, 0)
    text = render_state(frame)
    check_rows(frame, text)
    assert stack_rows(text)[0][4] == "both ends: White's and Black's end, both goals"
    assert "\ngame over: you won 26:0 (completed)\n" in text
    assert "height 26" in text


def test_game_over_shows_the_outcome_and_no_moves() -> None:
    game = play_random(3, "basic", 10_000)
    outcome = game.outcome()
    assert outcome is not None and outcome.termination == Termination.COMPLETED
    for seat in (0, 1, None):
        frame = frame_for(game, seat)
        text = render_state(frame, ascii=True)
        check_rows(frame, text)
        assert f"\ngame over: {describe_result(frame['view'])}\n" in text
        assert "your moves" not in text and "your turn" not in text
        h0, h1 = frame["view"]["heights"]
        assert f"height {h0} - passes" in text and f"height {h1} - passes" in text

    resigned = Stakko(rng=random.Random(0))
    resigned.apply(move(0, 2))
    resigned.end(1, Termination.RESIGNATION)
    text = render_state(frame_for(resigned, 1))
    assert "\ngame over: you lost 0:0 (resignation)\n" in text


def test_ascii_mode_is_pure_ascii() -> None:
    game = play_random(1, "gray", 6)
    frame = frame_for(game, game.to_move, clock_ms=9_000)
    plain = render_state(frame, ascii=True)
    assert plain.isascii()
    assert "bottom -> top" in plain and " - ply 6 of at most 500" in plain
    fancy = render_state(frame)
    assert not fancy.isascii() and "bottom \u2192 top" in fancy
    assert stack_rows(plain) == stack_rows(fancy)


@pytest.mark.parametrize("variant", ["basic", "gray", "red"])
@pytest.mark.parametrize("seed", range(8))
def test_random_games_never_crash(variant: str, seed: int) -> None:
    steps = random.Random(seed).randrange(0, 60)
    game = play_random(seed, variant, steps)
    for seat in (0, 1, None):
        frame = frame_for(game, seat, clock_ms=None if seed % 2 else 7_000)
        text = render_state(frame, ascii=bool(seed % 2))
        check_rows(frame, text)
        if seed % 2:
            assert text.isascii()
        view = frame["view"]
        if game.outcome() is not None:
            assert "game over: " + describe_result(view) in text
        elif frame["legal"] is not None:
            moves = describe_stakko_moves(view, frame["legal"])
            assert f"\nyour moves: {moves}\n" in text
            listed = {int(m[1]) for m in re.finditer(r"(?:^|; )(\d+)x", moves)}
            assert listed == {m["stack"] for m in frame["legal"]}


def test_describe_moves_groups_counts_and_targets() -> None:
    view = {"to_move": 1, "owned": [1, 3], "line": [["red"]] * 4 + [["gray"] + ["black"] * 5]}
    legal = [{"stack": 4, "count": c} for c in (1, 2, 3, 5)]
    assert describe_stakko_moves(view, legal) == "4x1..3,5 onto 1"
    assert describe_stakko_moves(view, []) == "none"
    assert disc_letters(["red", "white", "black", "gray"]) == "R W B G"


# -- the keyboard ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "move"),
    [
        ("m 2 3", {"stack": 2, "count": 3}),
        ("move 0 9", {"stack": 0, "count": 9}),
        ("2x3", {"stack": 2, "count": 3}),
        ("2X3", {"stack": 2, "count": 3}),
        (" m 7x1 ", {"stack": 7, "count": 1}),
        ("8 x 10", {"stack": 8, "count": 10}),
    ],
)
def test_parse_stakko_moves(line: str, move: dict[str, int]) -> None:
    assert parse_command(line, "stakko") == Command("move", move)


def test_parse_commands_per_game() -> None:
    for game in ("stacko", "stakko"):
        assert parse_command("r", game) == Command("resign")
        assert parse_command("rematch", game) == Command("rematch")
    with pytest.raises(ValueError, match="is a Stacko command; in Stakko type m STACK COUNT"):
        parse_command("t 3", "stakko")
    with pytest.raises(ValueError, match="that is a Stakko move; this game is Stacko"):
        parse_command("2x3", "stacko")
    for bad in ("m 2", "m -1 3", "2x", "m a b"):
        with pytest.raises(ValueError, match="m STACK COUNT or STACKxCOUNT"):
            parse_command(bad, "stakko")
    # before the joined frame says the game, both kinds of move parse
    assert parse_command("d", None) == Command("move", {"action": "draw"})
    assert parse_command("1x2", None) == Command("move", {"stack": 1, "count": 2})
    assert "m STACK COUNT" in commands_text("stakko") and "take" not in commands_text("stakko")
    assert "t SLOT" in commands_text("stacko") and "STACKxCOUNT" not in commands_text("stacko")
    assert "t SLOT" in commands_text(None) and "STACKxCOUNT" in commands_text(None)


def test_local_refusals_name_the_server_codes() -> None:
    line = "RWWWWWWW GW G G G G G GW RBBBBBBBBB"  # White owns stacks 0, 1 and 7: N = 3
    game = Stakko.from_line(line)
    mine = frame_for(game, 0)
    assert stakko_refusal(mine, {"stack": 1, "count": 1}) is None
    code, message = stakko_refusal(mine, {"stack": 7, "count": 1}) or ("", "")
    assert (code, message) == (
        "overshoot",
        "stack 7 cannot move: going 3 would pass stack 8, the end",
    )
    code, message = stakko_refusal(mine, {"stack": 0, "count": 8}) or ("", "")
    assert code == "bad_count"
    assert message == (
        "you may lift 1 to 7 discs off stack 0, not 8; "
        "the red disc below may not be lifted in the basic game"
    )
    assert (stakko_refusal(mine, {"stack": 2, "count": 1}) or ("",))[0] == "no_such_stack"
    assert (stakko_refusal(mine, {"stack": 8, "count": 1}) or ("",))[0] == "no_such_stack"
    code, message = stakko_refusal(mine, {"stack": 9, "count": 1}) or ("", "")
    assert (code, message) == ("no_such_stack", "there is no stack 9: the line has stacks 0 to 8")
    assert (stakko_refusal(mine, {"stack": 1, "count": 0}) or ("",))[0] == "bad_count"
    assert (stakko_refusal(frame_for(game, 1), {"stack": 8, "count": 1}) or ("",))[0] == (
        "not_your_turn"
    )
    assert (stakko_refusal(frame_for(game, None), {"stack": 1, "count": 1}) or ("",))[0] == (
        "not_a_player"
    )
    game.end(0, Termination.RESIGNATION)
    assert (stakko_refusal(frame_for(game, 0), {"stack": 1, "count": 1}) or ("",))[0] == (
        "game_over"
    )
    assert stakko_refusal(None, {"stack": 1, "count": 1}) == (
        "not_started",
        "the game has not started yet",
    )


def test_game_argument() -> None:
    assert parse_args(["--create"]).game == "stacko"
    assert parse_args(["--quick-match", "--game", "stakko"]).game == "stakko"
    args = parse_args(
        ["--create", "--game", "stakko", "--option", "variant=red", "--bot", "search"]
    )
    assert (args.game, args.option, args.bot) == ("stakko", [("variant", "red")], "search")
    assert parse_args(["--join", "ABC234"]).game is None  # the room says
    with pytest.raises(SystemExit):
        parse_args(["--join", "ABC234", "--game", "stakko"])
    with pytest.raises(SystemExit):
        parse_args(["--create", "--game", "chess"])


# -- against a real server ------------------------------------------------------------------


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    srv = Server(ServerConfig(host="127.0.0.1", port=0, **FAST))  # type: ignore[arg-type]
    await srv.start()
    yield srv
    await srv.shutdown()


async def test_two_auto_clients_quick_match_stakko(server: Server) -> None:
    outs = [io.StringIO(), io.StringIO()]
    argv = [server.url, "--quick-match", "--game", "stakko", "--auto"]
    async with asyncio.timeout(60):
        codes = await asyncio.gather(
            *(
                amain([*argv, "--seed", str(i), "--name", ("ann", "bob")[i]], out=out)
                for i, out in enumerate(outs)
            )
        )
    assert codes == [0, 0], [o.getvalue()[-500:] for o in outs]
    check_pair(last_line(outs[0]), last_line(outs[1]))
    for out in outs:
        text = out.getvalue()
        assert re.search(
            r"^joined room \w+ as seat [01]: Stakko, basic variant, you play "
            r"(White|Black), 30 s per move$",
            text,
            re.M,
        )
        assert re.search(r"^\[\w+ ply \d+\] (you|ann|bob) moved \d+ discs? from stack", text, re.M)


async def test_keyboard_session_plays_stakko(server: Server) -> None:
    proc = await spawn(server.url, "--create", "--game", "stakko", "--name", "alice", keyboard=True)
    keys = Keyboard(proc)
    bob = io.StringIO()
    try:
        async with asyncio.timeout(60):
            code = (await keys.expect(r"^room: (\w+)$"))[1]
            opponent = asyncio.create_task(
                amain([server.url, "--join", code, "--auto", "--seed", "5", "--name", "bob"], bob)
            )
            await keys.expect(r"^joined room \w+ as seat 0: Stakko, basic variant, you play White$")
            await keys.expect(r"^ +0 +10  you +R W W W W W W W W W +White's home")
            await keys.expect(r"^your moves: 0x1\.\.9 onto 1$")
            await keys.expect(r"^your move")
            await keys.type("t 3")  # a Stacko command
            await keys.expect(r"^'t' is a Stacko command; in Stakko type m STACK COUNT")
            await keys.type("m 4 1")  # a gray stack: refused here, never sent
            await keys.expect(
                r"^refused: stack 4 is not yours: its top disc is gray "
                r"\(no_such_stack\)$"
            )
            await keys.expect(r"^  your moves: 0x1\.\.9 onto 1$")
            await keys.type("0x10")
            red = "the red disc below may not be lifted in the basic game"
            await keys.expect(
                rf"^refused: you may lift 1 to 9 discs off stack 0, not 10; {red} "
                r"\(bad_count\)$"
            )
            await keys.type("h")
            await keys.expect(r"^Stakko commands:$")
            await keys.type("0x3")
            await keys.expect(r"^ +1 +4  you +G W W W$")
            await keys.expect(r"^last: you moved 3 discs from stack 0 onto stack 1$")
            await keys.expect(r"^your moves: 0x1\.\.6 onto 2; 1x1\.\.3 onto 3$")
            # Black owned one stack, so its move could only land on stack 7
            await keys.expect(r"^last: bob moved \d+ discs? from stack 8 onto stack 7$")
            await keys.type("m 1 3")
            await keys.expect(r"^ +3 +4  you +G W W W$")
            await keys.expect(r"^last: you moved 3 discs from stack 1 onto stack 3$")
            await keys.expect(r"^last: bob moved")
            await keys.type("r")
            await keys.expect(r"^resign, and lose the game against bob\? r again")
            await keys.type("r")
            await keys.expect(r"^result: you lost 0:0 \(resignation\)$")
            assert await opponent == 0
            assert last_line(bob) == "result: you won 0:0 (resignation)"
            assert "as seat 1: Stakko, basic variant, you play Black" in bob.getvalue()
            await keys.type("q")
            await keys.expect(r"^bye$")
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.mark.parametrize("games", [1, 2])
async def test_auto_against_a_built_in_bot(server: Server, games: int) -> None:
    out = io.StringIO()
    argv = [server.url, "--create", "--game", "stakko", "--bot", "random", "--auto"]
    argv += ["--option", "variant=gray", "--seed", "3", "--games", str(games)]
    async with asyncio.timeout(60):
        assert await amain(argv, out=out) == 0, out.getvalue()[-500:]
    text = out.getvalue()
    assert "\nplaying against the built-in random bot\n" in text
    assert "others join with" not in text
    seats = re.findall(r"^joined room \w+ as seat (\d): Stakko, gray variant", text, re.M)
    if games == 1:
        assert seats == ["0"]
        m = RESULT.match(last_line(out))
        assert m and m[4] in ("completed", "turn_cap"), last_line(out)
    else:
        assert seats == ["0", "1"]  # the bot accepted the rematch; the seats swapped
        assert re.match(r"^result: \d won, \d lost, \d drawn of 2 games$", last_line(out))


@pytest.mark.parametrize(
    ("game", "levels"), [("stakko", "random, search"), ("stacko", "easy, medium, strong")]
)
async def test_unknown_bot_level_exits_2(server: Server, game: str, levels: str) -> None:
    out = io.StringIO()
    argv = [server.url, "--create", "--game", game, "--bot", "nonsense", "--auto"]
    assert await amain(argv, out=out) == 2
    assert last_line(out) == f"error: no bot 'nonsense' for {game} (levels: {levels}) (unknown_bot)"


async def test_unknown_bot_level_exits_2_from_the_keyboard_client(server: Server) -> None:
    """A real process, stdin closed at once: the refusal wins over the end of input."""
    proc = await spawn(server.url, "--create", "--game", "stakko", "--bot", "nonsense")
    async with asyncio.timeout(30):
        out, err = await proc.communicate()
    assert proc.returncode == 2, (out, err)
    assert last_line(out.decode()).endswith("(unknown_bot)")


async def test_join_follows_the_rooms_game(server: Server) -> None:
    """``--join`` has no --game: a Stakko room is played as Stakko because ``joined`` says so."""
    creator, joiner = io.StringIO(), io.StringIO()
    async with asyncio.timeout(60):
        first = asyncio.create_task(
            amain(
                [
                    server.url,
                    "--create",
                    "--game",
                    "stakko",
                    "--auto",
                    "--seed",
                    "1",
                    "--option",
                    "variant=red",
                ],
                out=creator,
            )
        )
        code = (await wait_for_line(creator, r"^room: (\w+)$"))[1]
        second = amain([server.url, "--join", code, "--auto", "--seed", "2"], out=joiner)
        assert list(await asyncio.gather(first, second)) == [0, 0]
    check_pair(last_line(creator), last_line(joiner))
    assert f"joined room {code} as seat 1: Stakko, red variant, you play Black" in (
        joiner.getvalue()
    )
