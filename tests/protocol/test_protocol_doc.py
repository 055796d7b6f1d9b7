"""PROTOCOL.md is tested: every example frame parses, every message type has an example, the
error table is the ErrorCode enum, the version is the current one, and the example game is
exactly what ``tools/example_game.py`` generates (a real game, with the hiding intact).
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
import pytest

from stacko.clients.bots.registry import levels
from stacko.engine.errors import IllegalReason
from stacko.engine.games import GAMES
from stacko.protocol.errors import ErrorCode, to_error_code
from stacko.protocol.games import CODECS
from stacko.protocol.messages import CLIENT, PROTOCOL_VERSION, SERVER, ClientMessage, ServerMessage

ROOT = Path(__file__).resolve().parents[2]
DOC_PATH = ROOT / "PROTOCOL.md"
DOC = DOC_PATH.read_text(encoding="utf-8")
BLOCK = re.compile(r"^```(json client|json server)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)


def blocks(direction: str) -> list[str]:
    """The text of every fenced block with the info string ``json <direction>``."""
    return [body for info, body in BLOCK.findall(DOC) if info == f"json {direction}"]


def section(title: str) -> str:
    """The text of the ``## title`` section, up to the next level-2 heading."""
    match = re.search(rf"^## {re.escape(title)}[ \t]*\n(.*?)(?=^## |\Z)", DOC, re.M | re.S)
    assert match is not None, f"PROTOCOL.md has no section '## {title}'"
    return match.group(1)


def message_types(adapter: Any) -> set[str]:
    return set(adapter.json_schema()["discriminator"]["mapping"])


def load_tool() -> ModuleType:
    path = ROOT / "tools" / "example_game.py"
    spec = importlib.util.spec_from_file_location("example_game", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("example_game", module)
    spec.loader.exec_module(module)
    return module


# -- every example is a valid frame, and every message type has one ------------------------


def test_the_document_has_examples_in_both_directions() -> None:
    assert len(blocks("client")) >= len(message_types(CLIENT))
    assert len(blocks("server")) >= len(message_types(SERVER))


def _id(body: str) -> str:
    try:
        return str(json.loads(body)["type"])
    except (ValueError, KeyError, TypeError):
        return "not-a-message"


@pytest.mark.parametrize("body", blocks("client"), ids=_id)
def test_client_example_parses(body: str) -> None:
    assert isinstance(json.loads(body), dict)  # one JSON object per block, nothing else
    msg: ClientMessage = CLIENT.validate_json(body)
    assert msg.type == json.loads(body)["type"]


@pytest.mark.parametrize("body", blocks("server"), ids=_id)
def test_server_example_parses(body: str) -> None:
    assert isinstance(json.loads(body), dict)
    msg: ServerMessage = SERVER.validate_json(body)
    assert msg.type == json.loads(body)["type"]


@pytest.mark.parametrize(("direction", "adapter"), [("client", CLIENT), ("server", SERVER)])
def test_every_message_type_has_an_example(direction: str, adapter: Any) -> None:
    shown = {json.loads(body)["type"] for body in blocks(direction)}
    missing = message_types(adapter) - shown
    assert not missing, f"PROTOCOL.md has no `json {direction}` example of {sorted(missing)}"


@pytest.mark.parametrize(("direction", "adapter"), [("client", CLIENT), ("server", SERVER)])
def test_every_message_type_has_a_section(direction: str, adapter: Any) -> None:
    headings = set(re.findall(r"^### `([a-z_]+)`", DOC, re.M))
    assert message_types(adapter) <= headings


def test_games_example_shows_the_real_options_schema() -> None:
    games = [json.loads(b) for b in blocks("server") if json.loads(b)["type"] == "games"]
    shown = {g["game"]: g for frame in games for g in frame["games"]}
    assert set(shown) == set(CODECS) == set(GAMES)
    for name, codec in CODECS.items():
        assert shown[name]["options"] == codec.options_model.model_json_schema()
        assert shown[name]["bots"] == levels(name)


# -- error codes -------------------------------------------------------------------------


def documented_codes() -> list[str]:
    return re.findall(r"^\| `([a-z_]+)` \|", section("Error codes"), re.M)


def test_error_table_lists_exactly_the_error_codes() -> None:
    codes = documented_codes()
    assert len(codes) == len(set(codes)), "a code is listed twice"
    assert set(codes) == {c.value for c in ErrorCode}


def test_error_table_rows_say_meaning_and_fatal() -> None:
    rows = re.findall(r"^\| `[a-z_]+` \|(.*)\|(.*)\|[ \t]*$", section("Error codes"), re.M)
    assert len(rows) == len(ErrorCode)
    for meaning, fatal in rows:
        assert meaning.strip()
        assert fatal.strip().split(" ")[0] in ("yes", "no", "before")


@pytest.mark.parametrize("reason", list(IllegalReason))
def test_every_illegal_reason_maps_to_an_error_code(reason: IllegalReason) -> None:
    code = to_error_code(reason)
    assert isinstance(code, ErrorCode)
    assert code.value == reason.value


# -- the version ------------------------------------------------------------------------------


def test_the_document_states_the_current_version() -> None:
    title = DOC.splitlines()[0]
    assert title.startswith("# ")
    assert re.search(rf"\bProtocol version {PROTOCOL_VERSION}\b", title)
    assert f"protocol version {PROTOCOL_VERSION}**" in section("Versions")
    versions = {int(v) for v in re.findall(r"[Pp]rotocol version (\d+)", DOC)}
    assert versions == {PROTOCOL_VERSION}


def test_examples_speak_the_current_version() -> None:
    for direction in ("client", "server"):
        for body in blocks(direction):
            frame = json.loads(body)
            if frame["type"] in ("hello", "welcome"):
                assert frame["protocol"] == PROTOCOL_VERSION


# -- links --------------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def test_internal_links_resolve() -> None:
    outside_code = re.sub(r"^```.*?^```", "", DOC, flags=re.M | re.S)
    anchors = {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", outside_code, re.M)}
    targets = set(re.findall(r"\]\(#([^)]+)\)", outside_code))
    assert len(targets) > 20
    assert targets - anchors == set()


# -- the example game --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    return load_tool()


def test_example_game_is_what_the_generator_prints(tool: ModuleType) -> None:
    start, end = DOC.index(tool.BEGIN), DOC.index(tool.END) + len(tool.END) + 1
    assert DOC[start:end] == tool.render(), "run: python tools/example_game.py --write"


def _state_frames(tool: ModuleType) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for step in tool.play():
        for seat in (0, 1):
            for raw in step.received[seat]:
                frame = orjson.loads(raw)
                if frame["type"] == "state":
                    out.append((seat, frame))
    return out


def test_example_game_is_a_complete_game(tool: ModuleType) -> None:
    frames = _state_frames(tool)
    last = frames[-1][1]["view"]
    assert last["outcome"] is not None and last["outcome"]["termination"] == "completed"
    kinds = {e["kind"] for _, f in frames for e in f["view"]["events"]}
    assert kinds == {"took", "drew", "placed", "passed", "reshuffled", "round_ended", "game_ended"}
    seqs = [f["seq"] for _, f in frames]
    assert seqs == sorted(seqs) and seqs[0] == 1


def test_example_game_hides_what_each_seat_may_not_see(tool: ModuleType) -> None:
    for seat, frame in _state_frames(tool):
        v = frame["view"]
        assert v["seat"] == seat
        revealed = v["outcome"] is not None and v["outcome"]["termination"] == "completed"
        assert None not in v["towers"][seat]
        other = v["towers"][1 - seat]
        for brick, seen in zip(other, v["seen"][1 - seat], strict=True):
            assert (brick is None) == (not seen and not revealed)
        for e in v["events"]:
            if e["kind"] == "drew":
                assert (e["brick"] is None) == (e["seat"] != seat)
        if v["drawn"] is not None:
            assert v["to_move"] == seat and v["phase"] == "drawn"
        assert (frame["legal"] is not None) == (v["to_move"] == seat)


def test_example_game_shows_both_seats_and_a_stale_ply(tool: ModuleType) -> None:
    part = DOC[DOC.index(tool.BEGIN) : DOC.index(tool.END)]
    assert "To seat 0" in part and "To seat 1" in part
    sent = [json.loads(body) for info, body in BLOCK.findall(part) if info == "json server"]
    codes = {frame["code"] for frame in sent if frame["type"] == "error"}
    assert {"stale_ply", "not_your_turn"} <= codes


def test_the_words_about_the_example_game_quote_it(tool: ModuleType) -> None:
    intro = section("Example game").split(tool.BEGIN)[0].split("Watch the hiding")[1]
    part = DOC[DOC.index(tool.BEGIN) : DOC.index(tool.END)]
    quoted = [q for q in re.findall(r"`([^`]+)`", intro) if '"' in q or q.startswith("[[")]
    assert len(quoted) >= 4
    for fragment in quoted:
        assert fragment in part, f"the example game no longer contains {fragment}"


def test_state_examples_of_the_example_room_are_generated_frames(tool: ModuleType) -> None:
    """The pretty-printed state frames quoted elsewhere come from the same generated game."""
    made = {
        raw
        for step in tool.play()
        for raw in [*step.received[0], *step.received[1], *step.spectator]
    }
    made_frames = [orjson.loads(raw) for raw in made]
    quoted = [json.loads(b) for b in blocks("server")]
    (room,) = {f["room"] for f in made_frames if f["type"] == "state"}
    states = [f for f in quoted if f["type"] == "state" and f["room"] == room]
    assert len(states) >= 3
    for frame in states:
        assert frame in made_frames
