"""Bad input of every kind. Each case checks the error (code, id echo, fatal or not, what
happens to the connection), that the room it aimed at did not change for anyone, and then
that a game in ANOTHER room still works: a move there is applied and both players see it."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from stacko_wire import SMALL, Game, Harness
from websockets.exceptions import ConnectionClosed


async def other_room_works(other: Game) -> None:
    seq = other.room.seq
    if other.engine.outcome() is not None:
        raise AssertionError("the other game is over; use a longer one")
    reply = await other.move()  # both players get the new state (Game.move waits for it)
    assert reply["seq"] == seq + 1 and other.room.seq == seq + 1


async def unchanged(h: Harness, game: Game, seq: int, ply: int) -> None:
    """A refused request changed nothing for anyone in ``game``."""
    assert game.room.seq == seq and game.engine.ply == ply
    for c in game.everyone:
        if not c.done.is_set():
            await c.barrier()
            assert not [f for f in c.pending("state") if f["room"] == game.code]
    h.check()


async def expect_error(c, code: str, rid=None, fatal: bool = False, room=None) -> dict:
    err = await c.expect("error")
    assert err["code"] == code, err
    assert err["id"] == rid and err["fatal"] is fatal and err["room"] == room, err
    return err


async def expect_policy_close(c, reason: str) -> None:
    assert await c.closed() == (1008, reason)


@pytest.fixture
async def rooms(harness):
    other = await harness.game({"tower": 6, "bricks": 20, "turn_cap": 200}, names=("olga", "oscar"))
    game = await harness.game(SMALL, spectators=1)
    return harness, game, other


async def case_bad_json(h, game, c):
    await c.send_raw('{"type": "ping", "id": 3')
    err = await expect_error(c, "bad_json")
    assert "JSON" in err["message"]


async def case_not_an_object(h, game, c):
    await c.send_raw("[1, 2, 3]")
    await expect_error(c, "bad_message")


async def case_binary_frame(h, game, c):
    await c.send_raw(b"\x00\x01binary")
    await expect_error(c, "binary_frame")


async def case_unknown_type(h, game, c):
    await c.send({"type": "teleport", "id": "u-1"})
    err = await expect_error(c, "unknown_type", rid="u-1")
    assert "move" in err["message"]  # lists the known types


async def case_wrong_field_types(h, game, c):
    ply = game.engine.ply
    await c.send({"type": "move", "room": game.code, "ply": "three", "move": {"action": "draw"},
                  "id": 41})  # fmt: skip
    err = await expect_error(c, "bad_message", rid=41)
    assert "ply" in err["message"]
    await c.send({"type": "join", "room": 123456, "id": 42})
    await expect_error(c, "bad_message", rid=42)
    await c.send({"type": "move", "room": game.code, "ply": ply, "move": {"action": "take"},
                  "id": 43})  # fmt: skip
    err = await expect_error(c, "bad_message", rid=43)
    assert "slot" in err["message"]
    await c.send({"type": "ping", "id": 44, "extra": True})
    await expect_error(c, "bad_message", rid=44)
    await c.send({"type": "ping", "id": [1]})  # an id that cannot be echoed
    await expect_error(c, "bad_message", rid=None)
    assert (await c.call("ping", rid=2**53))["type"] == "pong"
    assert (await c.call("ping", rid="s" * 64))["type"] == "pong"
    await c.send({"type": "ping", "id": 2**53 + 1})
    await expect_error(c, "bad_message", rid=None)
    await c.send({"type": "ping", "id": "s" * 65})
    await expect_error(c, "bad_message", rid=None)
    await c.send({"type": "create_room", "options": {"tower": "tall"}, "id": 45})
    err = await expect_error(c, "bad_options", rid=45)
    assert "tower" in err["message"]


async def case_too_big(h, game, c):
    await c.send({"type": "ping", "id": 5, "pad": "x" * 5000})
    err = await expect_error(c, "too_big")
    assert "4096" in err["message"]
    await c.barrier()  # not fatal: the connection stays open
    await c.send({"type": "ping", "id": 5, "pad": "\u00e9" * 2100})  # < 4096 chars, > 4096 bytes
    await expect_error(c, "too_big")
    await c.send({"type": "ping", "id": 5, "pad": "x" * 3900})  # under the limit: parsed
    await expect_error(c, "bad_message", rid=5)  # (an extra field), not too_big


async def case_too_big_for_the_library(h, game, c):
    with contextlib.suppress(ConnectionClosed):
        await c.send({"type": "ping", "id": 6, "pad": "x" * 70_000})
    code, _ = await c.closed()
    assert code == 1009


async def case_not_your_turn(h, game, c):
    b = game.seats[1]
    await b.send({"type": "move", "room": game.code, "ply": game.engine.ply,
                  "move": {"action": "draw"}, "id": "nt"})  # fmt: skip
    await expect_error(b, "not_your_turn", rid="nt", room=game.code)


async def case_not_in_room(h, game, c):
    await c.send({"type": "move", "room": game.code, "ply": game.engine.ply,
                  "move": {"action": "draw"}, "id": 7})  # fmt: skip
    await expect_error(c, "not_in_room", rid=7, room=game.code)
    assert (await c.call("resign", room=game.code))["code"] == "not_in_room"
    assert (await c.call("leave", room=game.code))["code"] == "not_in_room"


async def case_spectator_moves(h, game, c):
    s = game.spectators[0]
    await s.send({"type": "move", "room": game.code, "ply": game.engine.ply,
                  "move": {"action": "draw"}, "id": 8})  # fmt: skip
    await expect_error(s, "not_a_player", rid=8, room=game.code)
    assert (await s.call("resign", room=game.code))["code"] == "not_a_player"


async def case_unknown_room(h, game, c):
    """A move, resign, rematch or leave for a room one is not in gets one answer whether or
    not the room exists, so those requests cannot probe which codes are taken."""
    await c.send({"type": "move", "room": "ZZZZZZ", "ply": 0, "move": {"action": "draw"},
                  "id": 9})  # fmt: skip
    await expect_error(c, "not_in_room", rid=9, room="ZZZZZZ")
    for kind in ("resign", "rematch", "leave"):
        missing = await c.call(kind, room="ZZZZZZ")
        there = await c.call(kind, room=game.code)
        assert missing["code"] == there["code"] == "not_in_room", (missing, there)
        assert missing["message"].replace("ZZZZZZ", game.code) == there["message"]
    assert (await c.call("join", room="ZZZZZZ"))["code"] == "unknown_room"


async def case_not_started(h, game, c):
    code = await h.create(c, SMALL)
    await c.send({"type": "move", "room": code, "ply": 0, "move": {"action": "draw"}, "id": 10})
    await expect_error(c, "not_started", rid=10, room=code)


async def case_already_welcomed(h, game, c):
    await c.send({"type": "hello", "protocol": 1, "name": "again", "id": 11})
    await expect_error(c, "already_welcomed", rid=11)
    await c.barrier()


async def case_hello_required(h, game, c):
    fresh = await h.client("fresh", hello=False)
    await fresh.send({"type": "ping", "id": 12})
    await expect_error(fresh, "hello_required", rid=12, fatal=True)
    await expect_policy_close(fresh, "hello_required")


async def case_hello_required_for_a_move(h, game, c):
    fresh = await h.client("fresh", hello=False)
    await fresh.send({"type": "move", "room": game.code, "ply": game.engine.ply,
                      "move": {"action": "draw"}, "id": "m"})  # fmt: skip
    await expect_error(fresh, "hello_required", rid="m", fatal=True)
    await expect_policy_close(fresh, "hello_required")


async def case_unsupported_version(h, game, c):
    fresh = await h.client("fresh", hello=False)
    await fresh.send({"type": "hello", "protocol": 2, "name": "future", "id": "h"})
    err = await expect_error(fresh, "unsupported_version", rid="h", fatal=True)
    assert "1" in err["message"]
    await expect_policy_close(fresh, "unsupported_version")


async def case_malformed_first_frame(h, game, c):
    """A first frame that is not even a message is refused fatally as well."""
    fresh = await h.client("fresh", hello=False)
    await fresh.send_raw("{nope")
    err = await fresh.expect("error")
    assert err["fatal"] is True
    code, _ = await fresh.closed()
    assert code == 1008


async def case_binary_first_frame(h, game, c):
    """Before welcome every frame that is not a valid hello is fatal, binary ones too."""
    fresh = await h.client("fresh", hello=False)
    await fresh.ws.send(b'{"type": "hello", "protocol": 1, "name": "bin"}')
    await expect_error(fresh, "binary_frame", rid=None, fatal=True)
    await expect_policy_close(fresh, "binary_frame")


async def case_oversize_first_frame(h, game, c):
    fresh = await h.client("fresh", hello=False)
    await fresh.send_raw('{"type": "hello", "protocol": 1, "name": "' + "x" * 5000 + '"}')
    await expect_error(fresh, "too_big", rid=None, fatal=True)
    await expect_policy_close(fresh, "too_big")


async def case_fragmented_message(h, game, c):
    """A message in three fragments is one message (an error here: it is not valid)."""
    await c.ws.send(iter(['{"type": "ping", ', '"id": 41', ", 1}"]))
    err = await expect_error(c, "bad_json", rid=None)
    assert "JSON" in err["message"]
    await c.ws.send(iter(['{"type": "ping", ', '"id": 42}']))
    pong = await c.expect("pong")
    assert pong["id"] == 42


async def case_fragments_then_whole_in_one_write(h, game, c):
    """A fragmented message and a whole one in the same TCP write: answered in that order
    (the fragmented one takes websockets' queue; the whole one must not overtake it)."""
    proto = c.ws.protocol
    proto.send_text(b'{"type": "ping", ', fin=False)
    proto.send_continuation(b'"id": 43}', fin=True)
    proto.send_text(b'{"type": "ping", "id": 44}')
    proto.send_text(b'{"type": "ping", "id": 45}')
    c.ws.send_data()
    assert [(await c.expect("pong"))["id"] for _ in range(3)] == [43, 44, 45]


async def case_invalid_utf8(h, game, c):
    """A text frame that is not UTF-8 breaks the WebSocket protocol: close 1007."""
    from websockets.frames import Frame, Opcode

    c.ws.protocol.send_frame(Frame(Opcode.TEXT, b'{"type": "ping", "id": "\xff\xfe"}'))
    c.ws.send_data()
    code, _ = await c.closed()
    assert code == 1007


async def case_back_to_back_frames(h, game, c):
    """hello and a request sent without waiting are both answered, in order."""
    fresh = await h.client("eager", hello=False)
    await fresh.send_raw('{"type": "hello", "protocol": 1, "name": "eager", "id": 1}')
    await fresh.send_raw('{"type": "ping", "id": 2}')
    assert (await fresh.expect("welcome"))["id"] == 1
    assert (await fresh.expect("pong"))["id"] == 2


CASES = {name[5:]: fn for name, fn in dict(globals()).items() if name.startswith("case_")}


@pytest.mark.parametrize("name", sorted(CASES))
async def test_bad_input(rooms, name):
    h, game, other = rooms
    await other_room_works(other)
    seq, ply = game.room.seq, game.engine.ply
    c = await h.client("mallory")
    await CASES[name](h, game, c)
    await unchanged(h, game, seq, ply)
    await other_room_works(other)
    await other_room_works(other)
    if not c.done.is_set():
        await c.barrier()  # still alive after a non-fatal error


async def test_move_in_a_finished_game(rooms):
    h, game, other = rooms
    a, b = game.seats
    reply = await a.call("resign", room=game.code)
    h.snap(game.code)
    await game.settle(reply["seq"], skip=a)
    seq, ply = game.room.seq, game.engine.ply
    for c in (a, b):
        await c.send({"type": "move", "room": game.code, "ply": ply, "move": {"action": "draw"},
                      "id": "late"})  # fmt: skip
        await expect_error(c, "game_over", rid="late", room=game.code)
    await unchanged(h, game, seq, ply)
    await other_room_works(other)


async def test_refused_engine_moves(rooms):
    h, game, other = rooms
    a = game.seats[0]
    seq, ply = game.room.seq, game.engine.ply
    for move, code in (
        ({"action": "place", "slot": 0}, "wrong_phase"),
        ({"action": "pass"}, "wrong_phase"),
        ({"action": "take", "slot": 3}, "bad_slot"),  # towers of 3: slots 0..2
        ({"action": "take", "slot": 19}, "bad_slot"),
    ):
        err = await a.call("move", room=game.code, ply=ply, move=move)
        assert err["type"] == "error" and err["code"] == code and err["room"] == game.code
    bad = await a.call("move", room=game.code, ply=ply, move={"action": "take", "slot": 20})
    assert bad["code"] == "bad_message"  # outside the wire's bounds
    await unchanged(h, game, seq, ply)
    await other_room_works(other)


async def test_stale_ply_from_the_future(rooms):
    h, game, other = rooms
    a = game.seats[0]
    seq, ply = game.room.seq, game.engine.ply
    err = await a.call("move", room=game.code, ply=ply + 5, move={"action": "draw"})
    assert err["code"] == "stale_ply" and f"ply {ply + 5}" in err["message"]
    st = await a.expect("state", room=game.code, id=err["id"])
    assert st["seq"] == seq
    await unchanged(h, game, seq, ply)
    await other_room_works(other)


async def test_idle_connection_without_hello(make_harness):
    h = await make_harness(hello_timeout_s=0.2)
    other = await h.game({"tower": 6, "bricks": 20, "turn_cap": 200})
    idle = await h.client("idle", hello=False)
    started = asyncio.get_running_loop().time()
    await expect_error(idle, "idle_timeout", fatal=True)
    await expect_policy_close(idle, "idle_timeout")
    assert asyncio.get_running_loop().time() - started < 3
    # the players' sessions were not touched by the timeout
    await other_room_works(other)
    await other_room_works(other)


async def test_flooding_is_rate_limited(make_harness):
    h = await make_harness(burst=6, rate_per_second=1.0)
    other = await h.game({"tower": 6, "bricks": 20, "turn_cap": 200})
    flood = await h.client("flood")  # hello: 1 token of 6
    try:
        for i in range(12):
            await flood.send({"type": "ping", "id": i})
    except ConnectionClosed:
        pass
    err = await flood.expect("error")
    assert err["code"] == "rate_limited" and err["fatal"] is True
    await expect_policy_close(flood, "rate_limited")
    assert [f["id"] for f in flood.frames if f["type"] == "pong"] == [0, 1, 2, 3, 4]
    await other_room_works(other)


async def test_rate_limit_refills_with_time(make_harness):
    h = await make_harness(burst=4, rate_per_second=1.0)
    c = await h.client("steady")  # 1 token used
    for _ in range(3):
        await c.barrier()
    h.advance(2.0)  # two tokens back
    await c.barrier()
    await c.barrier()
    await c.send({"type": "ping", "id": "over"})
    await expect_error(c, "rate_limited", fatal=True)
    await expect_policy_close(c, "rate_limited")
    assert not [f for f in c.frames if f.get("id") == "over" and f["type"] == "pong"]
