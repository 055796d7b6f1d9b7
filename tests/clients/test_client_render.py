"""clients.render and the keyboard parsing of clients.cli, on views of real engine games."""

from __future__ import annotations

import random
import re
from typing import Any

import orjson
import pytest

from stacko.clients.cli import Command, parse_args, parse_command, parse_option, summary
from stacko.clients.render import BAR_WIDTH, HIDDEN, SEEN, bar, brick_count, describe_result, render_state
from stacko.engine.outcome import Termination
from stacko.engine.stacko import Stacko, StackoOptions
from stacko.engine.stakko import Stakko
from stacko.protocol import frames
from stacko.protocol.games import CODECS
from stacko.protocol.messages import SERVER


def frame_for(
    game: Any, seat: int | None, clock_ms: int | None = 12_000, *, room: str = "ABC234"
) -> dict[str, Any]:
    """A state frame as the server builds it (``protocol.frames.state``), for a Stacko or
    Stakko game, validated against the protocol model."""
    codec = CODECS["stakko" if isinstance(game, Stakko) else "stacko"]
    deadline = None if clock_ms is None else 1_700_000_000_000 + clock_ms
    raw = frames.state(
        codec, game.view(seat), room=room, seq=game.ply + 1, deadline_ms=deadline,
        clock_ms=clock_ms,
    )  # fmt: skip
    frame: dict[str, Any] = orjson.loads(raw)
    SERVER.validate_python(frame)
    return frame


def tower_rows(text: str, slots: int) -> list[str]:
    """The tower lines of a rendering, top slot first."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("slot"))
    return lines[start + 1 : start + 1 + slots]


def halves(row: str) -> tuple[str, str]:
    """The left and right tower cells of a row ("* 23 ████": mark, number, bar)."""
    width = 6 + BAR_WIDTH
    return row[6 : 6 + width], row[6 + width + 3 :]


def cells(row: str) -> list[str]:
    """The brick labels of one tower row: numbers or "?"."""
    return re.findall(r"(?:^|\s)(\d+|\?)(?=\s|$)", row)[1:]


def play_random(seed: int, options: StackoOptions, steps: int) -> Stacko:
    rng = random.Random(seed)
    game = Stacko(options, rng=random.Random(seed + 1000))
    for _ in range(steps):
        if game.outcome() is not None:
            break
        game.apply(rng.choice(game.legal_moves()))
    return game


def test_own_tower_shown_opponent_hidden_at_start() -> None:
    game = Stacko(StackoOptions(), rng=random.Random(7))
    text = render_state(frame_for(game, 0))
    rows = tower_rows(text, 10)
    assert rows[0].lstrip().startswith("9")
    assert rows[-1].lstrip().startswith("0")
    for i, row in enumerate(rows):
        slot = 9 - i
        own, theirs = cells(row)
        assert own == str(game.towers[0][slot])
        assert theirs == HIDDEN
    assert f"open brick {game.open_brick}" in text
    assert "draw stack 19" in text
    assert "your turn" in text and "clock 12 s" in text
    assert "round 1 of 2" in text


def test_opponent_sees_only_what_entered_and_marks_it() -> None:
    game = Stacko(StackoOptions(), rng=random.Random(3))
    open_brick = game.open_brick
    game.apply(game.legal_moves()[4])  # seat 0 takes the open brick into slot 4
    theirs = render_state(frame_for(game, 1))
    row = tower_rows(theirs, 10)[9 - 4]
    assert cells(row)[1] == str(open_brick)
    assert halves(row)[1].startswith(f"{SEEN} {open_brick:>3}")  # the eye before the number
    assert not halves(row)[0].startswith(SEEN)
    assert sum(cells(r)[1] == HIDDEN for r in tower_rows(theirs, 10)) == 9
    mine = render_state(frame_for(game, 0))
    row0 = tower_rows(mine, 10)[9 - 4]
    assert halves(row0)[0].startswith(SEEN)  # the opponent can see this one of yours
    assert sum(halves(r)[0].startswith(SEEN) for r in tower_rows(mine, 10)) == 1
    assert "opponent's turn" in mine


def test_drawn_brick_only_for_the_drawer() -> None:
    game = Stacko(StackoOptions(), rng=random.Random(5))
    game.apply(next(m for m in game.legal_moves() if m.action.value == "draw"))
    drawn = game.drawn
    mine = render_state(frame_for(game, 0))
    assert f"you drew {drawn}" in mine and "place the drawn" in mine
    theirs = render_state(frame_for(game, 1))
    assert "holding a drawn brick" in theirs and f"drew {drawn}" not in theirs


def test_spectator_sees_neither_dealt_tower() -> None:
    game = Stacko(StackoOptions(), rng=random.Random(11))
    text = render_state(frame_for(game, None))
    assert "seat 0" in text and "seat 1" in text and "you" not in text.split("\n")[1]
    assert all(cells(r) == [HIDDEN, HIDDEN] for r in tower_rows(text, 10))


def test_bar_width_follows_the_number() -> None:
    assert len(bar(40, 40)) == 20 and len(bar(1, 40)) == 1 and len(bar(20, 40)) == 10
    assert bar(40, 40, ascii=True) == "#" * 20
    game = Stacko(StackoOptions(), rng=random.Random(2))
    text = render_state(frame_for(game, 0), ascii=True)
    for row in tower_rows(text, 10):
        own = cells(row)[0]
        assert row.count("#") == len(bar(int(own), 40))


@pytest.mark.parametrize("seed", range(12))
def test_random_games_never_crash(seed: int) -> None:
    small = seed % 3 == 0
    options = StackoOptions(bricks=10, tower=4, rounds=3, turn_cap=30) if small else StackoOptions()
    steps = random.Random(seed).randrange(0, 700)
    game = play_random(seed, options, steps)
    for seat in (0, 1, None):
        frame = frame_for(game, seat, clock_ms=None if seed % 2 else 5_000)
        view = frame["view"]
        assert brick_count(view) == options.bricks
        text = render_state(frame, ascii=bool(seed % 2))
        rows = tower_rows(text, options.tower)
        for i, row in enumerate(rows):
            slot = options.tower - 1 - i
            left = seat if seat is not None else 0
            shown = [view["towers"][left][slot], view["towers"][1 - left][slot]]
            assert cells(row) == [HIDDEN if b is None else str(b) for b in shown]
        if game.outcome() is not None:
            assert "game over" in text
            assert describe_result(view) in text


def test_describe_result_puts_your_score_first() -> None:
    game = Stacko(StackoOptions(), rng=random.Random(1))
    game.totals = [65, 60]
    game.end(0, Termination.RESIGNATION)
    assert describe_result(frame_for(game, 0)["view"]) == "you lost 65:60 (resignation)"
    assert describe_result(frame_for(game, 1)["view"]) == "you won 60:65 (resignation)"
    assert describe_result(frame_for(game, None)["view"]) == "seat 1 won 65:60 (resignation)"


def test_finished_game_reveals_both_towers() -> None:
    options = StackoOptions(bricks=8, tower=3, rounds=1, turn_cap=5)
    game = play_random(4, options, 1000)
    assert game.outcome() is not None
    text = render_state(frame_for(game, 1))
    assert HIDDEN not in "".join("".join(cells(r)) for r in tower_rows(text, 3))
    assert "round 1:" in text and "game over" in text


@pytest.mark.parametrize(
    ("line", "command"),
    [
        ("t 3", Command("move", {"action": "take", "slot": 3})),
        ("take 0", Command("move", {"action": "take", "slot": 0})),
        ("d", Command("move", {"action": "draw"})),
        ("DRAW", Command("move", {"action": "draw"})),
        ("p 5", Command("move", {"action": "place", "slot": 5})),
        ("place 9", Command("move", {"action": "place", "slot": 9})),
        ("pass", Command("move", {"action": "pass"})),
        ("r", Command("resign")),
        ("q", Command("quit")),
        ("rematch", Command("rematch")),
        ("h", Command("help")),
    ],
)
def test_parse_command(line: str, command: Command) -> None:
    assert parse_command(line) == command


@pytest.mark.parametrize("line", ["", "t", "t x", "p 1 2", "d 3", "jump", "pass 2", "t -1"])
def test_parse_command_refuses(line: str) -> None:
    with pytest.raises(ValueError):
        parse_command(line)


def test_parse_option_and_args() -> None:
    assert parse_option("turn_cap=50") == ("turn_cap", 50)
    assert parse_option("clock_ms=null") == ("clock_ms", None)
    assert parse_option("x=true") == ("x", True)
    assert parse_option("name=abc") == ("name", "abc")
    args = parse_args(["ws://h:1", "--create", "--private", "--option", "rounds=1"])
    assert (
        args.url == "ws://h:1" and args.create and args.private and args.option == [("rounds", 1)]
    )
    with pytest.raises(SystemExit):
        parse_args(["--join", "ABC234", "--quick-match"])
    with pytest.raises(SystemExit):
        parse_args(["--quick-match", "--private"])
    with pytest.raises(SystemExit):
        parse_args([])


def test_summary_of_several_games() -> None:
    drawn = ["draw 5:5 (completed)", "draw 0:0 (completed)"]
    assert summary(drawn) == "0 won, 0 lost, 2 drawn of 2 games"  # a player's draws only
    mixed = ["you won 65:60 (completed)", "you lost 5:50 (completed)", *drawn]
    assert summary(mixed) == "1 won, 1 lost, 2 drawn of 4 games"
    watched = summary(["seat 0 won 65:60 (completed)", drawn[0]], watched=True)
    assert watched == "2 games watched: seat 0 won 65:60 (completed); draw 5:5 (completed)"
