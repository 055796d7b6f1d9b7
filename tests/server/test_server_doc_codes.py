"""The refusal codes the documents name are the ones the wire sends, in the order they say
(issue 14, item 9: docs/rules-*.md once listed engine-only codes, `bad_slot` for a take
without a slot, and "`not_your_turn` before anything else", which the wire does not do)."""

from __future__ import annotations

import re
from pathlib import Path

from stacko.protocol.errors import ErrorCode

ROOT = Path(__file__).resolve().parents[2]
CODE = re.compile(r"`([a-z]+(?:_[a-z]+)+)`")
WIRE_CODES = {c.value for c in ErrorCode}


def stacko_rule_table() -> list[str]:
    """The code column of the rules table in docs/rules-stacko.md, in order."""
    text = (ROOT / "docs" / "rules-stacko.md").read_text()
    part = text.split("## Refused moves", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", part, re.M)


def stakko_rule_order() -> list[str]:
    text = (ROOT / "docs" / "rules-stakko.md").read_text()
    part = text.split("- Refused moves", 1)[1].split("\n- ", 1)[0]
    rules = part.split("Then the rules, in this order:", 1)[1].split(". A program", 1)[0]
    return [c for c in re.findall(r"`([a-z_]+)`", rules) if c in WIRE_CODES]


def test_every_code_the_rules_documents_name_is_a_wire_code() -> None:
    for name in ("rules-stacko.md", "rules-stakko.md"):
        text = (ROOT / "docs" / name).read_text()
        section = text.split("efused moves", 1)[1][:3000]
        for code in CODE.findall(section):
            if code.endswith(("_ms", "_cap")) or code in ("ply_cap", "turn_cap"):
                continue  # options, not codes
            assert code in WIRE_CODES, f"{name}: `{code}` is not an error code"


async def test_the_stacko_rules_order_is_the_wires(harness) -> None:
    """A move breaking the rules of the table from row i on is refused with row i's code."""
    table = stacko_rule_table()
    assert table == ["not_your_turn", "wrong_phase", "bad_slot"]
    game = await harness.game({"tower": 3, "bricks": 8, "rounds": 1, "turn_cap": 20})
    mover = game.seats[game.engine.to_move]
    other = game.seats[1 - game.engine.to_move]
    ply = game.current()["view"]["ply"]
    tower = 3
    breaking = {  # in phase "turn": place is the other phase's, a slot >= tower is bad
        "not_your_turn": (other, {"action": "place", "slot": tower}),
        "wrong_phase": (mover, {"action": "place", "slot": tower}),
        "bad_slot": (mover, {"action": "take", "slot": tower}),
    }
    for code in table:
        who, move = breaking[code]
        reply = await who.call("move", room=game.code, ply=ply, move=move)
        assert (reply["type"], reply["code"]) == ("error", code), (move, reply)
    # what the document says the wire refuses before the rules
    for move in ({"action": "take"}, {"action": "draw", "slot": 0}, {"action": "take", "slot": 20},
                 {"action": "jump"}):  # fmt: skip
        reply = await mover.call("move", room=game.code, ply=ply, move=move)
        assert reply["code"] == "bad_message", (move, reply)
    reply = await mover.call("move", room=game.code, ply=ply, move={"stack": 0, "count": 1})
    assert reply["code"] == "wrong_game"
    await game.move()  # nothing changed meanwhile


async def test_the_stakko_rules_order_is_the_wires(harness) -> None:
    order = stakko_rule_order()
    assert order == ["not_your_turn", "no_such_stack", "overshoot", "bad_count"]
    game = await harness.game(game="stakko")
    a, b = game.seats
    ply = game.current()["view"]["ply"]
    cases = [
        (b, {"stack": 3, "count": 12}, "not_your_turn"),  # also no such stack, bad count
        (a, {"stack": 3, "count": 12}, "no_such_stack"),  # a gray stack: also bad count
        (a, {"stack": 0, "count": 12}, "bad_count"),
        (a, {"stack": 0, "count": 0}, "bad_message"),  # fewer than 1: refused before the rules
    ]
    for who, move, code in cases:
        reply = await who.call("move", room=game.code, ply=ply, move=move)
        assert (reply["type"], reply["code"]) == ("error", code), (move, reply)


async def test_a_type_that_is_not_a_string_is_unknown_type(harness) -> None:
    """PROTOCOL.md's error table says so."""
    table = (ROOT / "PROTOCOL.md").read_text().split("## Error codes", 1)[1]
    row = next(line for line in table.splitlines() if line.startswith("| `unknown_type`"))
    assert '`{"type": 5}`' in row
    c = await harness.client("typist")
    await c.send({"type": 5, "id": 1})
    reply = await c.expect("error")
    assert reply["code"] == "unknown_type" and reply["fatal"] is False


def test_protocol_lists_every_close_reason_the_server_sends() -> None:
    """The close-code table names the reasons the server and websockets really send."""
    from stacko.server.app import FENCED_REASON, RESTART_REASON, SHUTDOWN_REASON

    text = (ROOT / "PROTOCOL.md").read_text()
    closes = text.split("**Close codes**", 1)[1].split("\n\n", 2)[1]
    for code, reason in [
        (1001, SHUTDOWN_REASON),
        (1008, "slow_consumer"),
        (1011, "internal_error"),
        (1011, "keepalive ping timeout"),  # websockets' own keepalive
        (1012, RESTART_REASON),
        (1012, FENCED_REASON),
    ]:
        rows = [r for r in closes.splitlines() if r.startswith(f"| {code} |")]
        assert any(f"`{reason}`" in r for r in rows), (code, reason)
    for code in (1002, 1007, 1009):
        assert f"| {code} |" in closes
