"""Stakko on the same server, over real sockets: whole games of every variant with a spectator,
every frame checked against the engine (``check_stakko_view``: the full state, disc by disc,
for every receiver), and the refusals that must change nothing."""

from __future__ import annotations

import pytest
from stacko_wire import Harness

from stacko.engine.stakko import Stakko


def same_but_seat(frames: list[dict]) -> None:
    """No hidden information: the views differ in ``seat`` alone."""
    views = [{k: v for k, v in f["view"].items() if k != "seat"} for f in frames]
    assert all(v == views[0] for v in views[1:])


@pytest.mark.parametrize(("variant", "seed"), [("basic", 1), ("gray", 2), ("red", 3)])
async def test_full_stakko_game_every_receiver_sees_everything(make_harness, variant, seed):
    h: Harness = await make_harness(seed=seed)
    game = await h.game({"variant": variant, "ply_cap": 60}, spectators=1, game="stakko")
    first = game.current()["view"]
    assert first["variant"] == variant and first["ply_cap"] == 60
    assert [len(s) for s in first["line"]] == [10, 1, 1, 1, 1, 1, 1, 1, 10]
    assert first["line"][0] == ["red"] + ["white"] * 9
    assert first["owned"] == [1, 1] and first["heights"] == [0, 0]
    moves = 0
    while game.engine.outcome() is None:
        await game.move()
        moves += 1
        same_but_seat([c.latest[game.code] for c in game.everyone])
    final = [c.latest[game.code]["view"] for c in game.everyone]
    outcome = final[0]["outcome"]
    assert all(v["outcome"] == outcome and v["to_move"] is None for v in final)
    assert outcome["termination"] in ("completed", "turn_cap")
    assert outcome["scores"] == final[0]["heights"]
    a, b = outcome["scores"]
    assert outcome["winner"] == (None if a == b else (0 if a > b else 1))
    assert moves == final[0]["ply"] <= 60
    assert h.checker.tracks[game.spectators[0]].states == moves + 1


async def test_list_games_shows_both_games_with_their_options(harness):
    c = await harness.client("ada")
    games = {g["game"]: g for g in (await c.call("list_games"))["games"]}
    assert set(games) == {"stacko", "stakko"}
    stakko = games["stakko"]
    assert stakko["title"] == "Stakko" and stakko["seats"] == 2
    props = stakko["options"]["properties"]
    assert props["variant"]["enum"] == ["basic", "gray", "red"]
    assert props["variant"]["default"] == "basic"
    assert props["ply_cap"]["default"] == 500 and props["ply_cap"]["maximum"] == 10_000
    assert "tower" in games["stacko"]["options"]["properties"]


@pytest.mark.parametrize(
    ("options", "needle"),
    [({"variant": "blue"}, "variant"), ({"ply_cap": 0}, "ply_cap"), ({"tower": 4}, "tower")],
)
async def test_bad_stakko_options_are_refused(harness, options, needle):
    c = await harness.client("ada")
    reply = await c.call("create_room", game="stakko", options=options)
    assert reply["type"] == "error" and reply["code"] == "bad_options", reply
    assert needle in reply["message"]
    assert not harness.server.hub.rooms


async def test_refused_stakko_moves_change_nothing(harness):
    game = await harness.game(game="stakko")
    a, b = game.seats
    before = game.room.seq
    engine: Stakko = game.engine
    position = engine.copy()
    ply = game.current()["view"]["ply"]
    cases = [
        (a, {"action": "draw"}, "wrong_game"),  # a Stacko move in a Stakko room
        (a, {"stack": 3, "count": 1}, "no_such_stack"),  # a gray stack nobody owns
        (a, {"stack": 0, "count": 10}, "bad_count"),  # the red base never moves in basic
        (a, {"stack": 0, "count": 12}, "bad_count"),  # more discs than the stack holds
        (a, {"stack": 9, "count": 1}, "bad_message"),  # the line never has 10 stacks
        (b, {"stack": 8, "count": 1}, "not_your_turn"),
    ]
    for who, move, code in cases:
        reply = await who.call("move", room=game.code, ply=ply, move=move)
        assert reply["type"] == "error", (move, reply)
        assert reply["code"] == code, (move, reply)
        assert reply["room"] == (None if code == "bad_message" else game.code)
    assert game.room.seq == before and engine == position
    # and the game goes on: the refused moves hurt nobody
    await game.move({"stack": 0, "count": 9})
    assert game.current()["view"]["line"][1] == ["gray"] + ["white"] * 9


async def test_a_stacko_move_in_a_stakko_room_and_back(harness):
    stacko = await harness.game()
    reply = await stacko.seats[0].call(
        "move", room=stacko.code, ply=0, move={"stack": 0, "count": 1}
    )
    assert reply["code"] == "wrong_game" and "Stacko" in reply["message"]
    await stacko.move()  # unaffected


async def test_stakko_bot_opponent_plays_to_the_end():
    """A built-in Stakko bot seated by ``create_room``; the default bot registry, so this runs
    outside the leak-checking harness (whose rooms have no bots)."""
    import random

    from stacko.clients.client import StackoClient
    from stacko.protocol.messages import SERVER
    from stacko.server.app import Server
    from stacko.server.config import ServerConfig

    srv = Server(ServerConfig(port=0, rate_per_second=1000.0, burst=2000))
    await srv.start()
    try:
        async with StackoClient(srv.url, "ada") as c:
            games = {g["game"]: g for g in await c.list_games()}
            assert set(games["stakko"]["bots"]) >= {"random", "search"}
            joined = await c.create_room("stakko", options={"ply_cap": 80}, bot="random", seat=0)
            code = joined["room"]
            rng = random.Random(5)
            async for frame in c:
                assert frame["type"] != "error", frame
                if frame["type"] != "state":
                    continue
                SERVER.validate_python(frame)
                view = frame["view"]
                if view["outcome"] is not None:
                    break
                if frame["legal"]:
                    move = rng.choice(frame["legal"])
                    await c.send({"type": "move", "room": code, "ply": view["ply"], "move": move})
            state = frame
            assert state["view"]["ply"] <= 80
            assert state["view"]["outcome"]["scores"] == state["view"]["heights"]
    finally:
        await srv.shutdown()
