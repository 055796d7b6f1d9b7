"""Whole games over real sockets: create/join, quick match, spectators, resignation, leaving,
rematch. Every frame is checked by the harness (schema, leaks, tokens)."""

from __future__ import annotations

import asyncio

import pytest
from stacko_wire import SMALL, Game, Harness


def assert_final(game, outcome):
    """Both seats and every spectator end with the same outcome, consistent with the scores."""
    finals = [c.latest[game.code]["view"] for c in game.everyone]
    for v in finals:
        assert v["outcome"] == outcome
        assert v["phase"] == "over" and v["to_move"] is None
    assert {c.latest[game.code]["seq"] for c in game.everyone} == {game.room.seq}
    a, b = outcome["scores"]
    if outcome["termination"] == "completed":
        assert outcome["winner"] == (None if a == b else (0 if a > b else 1))
    assert outcome["scores"] == finals[0]["totals"]
    return finals


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_full_game_with_turn_cap(make_harness, seed):
    h: Harness = await make_harness(seed=seed)
    game = await h.game({"turn_cap": 30}, spectators=1)
    outcome = await game.play_out()
    assert outcome["termination"] == "completed"
    finals = assert_final(game, outcome)
    for v in finals:
        # a completed game shows both towers whole, and every round's result
        assert all(b is not None for tower in v["towers"] for b in tower)
        assert len(v["results"]) == 2 == v["rounds"]
        assert v["turn_cap"] == 30
    assert h.checker.tracks[game.seats[0]].states > 10


async def test_full_game_default_options(harness):
    game = await harness.game(spectators=1)
    first = game.current()["view"]
    assert (first["rounds"], first["turn_cap"], len(first["towers"][0])) == (2, 200, 10)
    assert first["stack"] == 40 - 20 - 1
    outcome = await game.play_out()
    assert outcome["termination"] == "completed"
    assert_final(game, outcome)


async def test_game_start_frames(harness):
    a = await harness.client("alice")
    b = await harness.client("bob")
    created = await a.call("create_room", game="stacko", options={"tower": 4, "bricks": 12})
    assert created["type"] == "joined" and created["seat"] == 0 and created["role"] == "player"
    code = created["room"]
    assert len(code) == 8 and set(code) <= set("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")
    assert created["info"]["status"] == "waiting"
    assert created["info"]["options"]["tower"] == 4 and created["info"]["clock_ms"] is None
    rooms = await b.call("list_rooms", game="stacko")
    assert code in [r["room"] for r in rooms["rooms"]]
    joined = await b.call("join", room=code.lower())  # codes are case-insensitive
    assert joined["type"] == "joined" and joined["seat"] == 1
    harness.snap(code)
    sa = await a.expect("state", room=code)
    sb = await b.expect("state", room=code)
    assert sa["seq"] == sb["seq"] == harness.server.hub.rooms[code].seq
    assert sa["legal"] and sb["legal"] is None
    assert sa["deadline_ms"] is None and sa["clock_ms"] is None
    assert len(sa["view"]["towers"][0]) == 4
    games = await a.call("list_games")
    (info,) = [g for g in games["games"] if g["game"] == "stacko"]
    assert info["seats"] == 2 and "tower" in info["options"]["properties"]


async def test_quick_match_pairs_two_waiting_players(harness):
    a = await harness.client("alice")
    b = await harness.client("bob")
    queued = await a.call("quick_match", game="stacko")
    assert queued["type"] == "queued" and queued["waiting"] == 1
    again = await a.call("quick_match", game="stacko")
    assert again["type"] == "error" and again["code"] == "already_queued"
    jb = await b.call("quick_match", game="stacko")
    assert jb["type"] == "joined" and jb["role"] == "player"
    ja = await a.expect("joined")
    code = ja["room"]
    assert jb["room"] == code and {ja["seat"], jb["seat"]} == {0, 1}
    assert ja["info"]["clock_ms"] == harness.server.config.quick_match_clock_ms == 30_000
    harness.snap(code)
    sa = await a.expect("state", room=code)
    sb = await b.expect("state", room=code)
    deadline = int((harness.clock.time() + 30) * 1000)
    for s in (sa, sb):
        assert s["deadline_ms"] == deadline and s["clock_ms"] == 30_000
    assert harness.server.hub.queues["stacko"] == []
    seats = [a, b] if ja["seat"] == 0 else [b, a]

    game = Game(harness, code, seats, [])
    await game.move()
    await game.move()
    assert game.engine.ply == 2


async def test_cancel_match_and_disconnect_leave_the_queue(harness):
    a = await harness.client("alice")
    assert (await a.call("cancel_match"))["code"] == "not_queued"
    assert (await a.call("quick_match"))["type"] == "queued"
    unq = await a.call("cancel_match", rid="c-1")
    assert unq == {"type": "unqueued", "id": "c-1"}
    assert (await a.call("cancel_match"))["code"] == "not_queued"
    b = await harness.client("bob")
    qb = await b.call("quick_match")
    assert qb["type"] == "queued" and qb["waiting"] == 1  # alice is no longer waiting
    await b.close()
    for _ in range(200):
        if not harness.server.hub.queues["stacko"]:
            break
        await asyncio.sleep(0.005)
    assert harness.server.hub.queues["stacko"] == []
    c = await harness.client("carol")
    qc = await c.call("quick_match")
    assert qc["type"] == "queued" and qc["waiting"] == 1  # bob left the queue
    await a.barrier()
    assert not a.pending("joined")


async def test_resignation(harness):
    game = await harness.game(SMALL, spectators=1)
    await game.move()
    b = game.seats[1]
    reply = await b.call("resign", room=game.code)
    assert reply["type"] == "state"
    harness.snap(game.code)
    await game.settle(reply["seq"], skip=b)
    outcome = reply["view"]["outcome"]
    assert outcome["termination"] == "resignation" and outcome["winner"] == 0
    assert_final(game, outcome)
    err = await b.call("resign", room=game.code)
    assert err["code"] == "game_over"


async def test_leave_during_game_loses_abandoned(harness):
    game = await harness.game(SMALL, spectators=1)
    a, b = game.seats
    await game.move()
    reply = await a.call("leave", room=game.code)
    assert reply == {"type": "left", "room": game.code, "id": reply["id"]}
    harness.snap(game.code)
    seq = game.room.seq
    await game.settle(seq, skip=None)
    for c in game.everyone:
        v = c.latest[game.code]["view"]
        assert v["outcome"]["termination"] == "abandoned" and v["outcome"]["winner"] == 1
    upd = await b.expect("room", room=game.code)
    assert [p["seat"] for p in upd["info"]["players"]] == [1]
    # the leaver is out: a rematch is no longer possible, moves are refused
    assert (await b.call("rematch", room=game.code))["code"] == "no_rematch"
    assert (await a.call("move", room=game.code, ply=0, move={"action": "draw"}))["code"] == (
        "not_in_room"
    )


async def test_leave_waiting_room_frees_seat_and_empty_room_closes(harness):
    a = await harness.client("alice")
    b = await harness.client("bob")
    code = await harness.create(a, SMALL)
    assert (await a.call("leave", room=code))["type"] == "left"
    assert code not in harness.server.hub.rooms
    assert (await b.call("join", room=code))["code"] == "unknown_room"


async def test_join_errors(harness):
    game = await harness.game(SMALL)
    a = game.seats[0]
    c = await harness.client("carol")
    full = await c.call("join", room=game.code, rid="j1")
    assert (full["type"], full["code"], full["id"]) == ("error", "room_full", "j1")
    again = await a.call("join", room=game.code)
    assert again["code"] == "already_in_room"
    unknown = await c.call("create_room", game="chess")
    assert unknown["code"] == "unknown_game"
    bad = await c.call("create_room", game="stacko", options={"tower": 1})
    assert bad["code"] == "bad_options" and "tower" in bad["message"]
    bad2 = await c.call("create_room", game="stacko", options={"tower": 10, "bricks": 12})
    assert bad2["code"] == "bad_options" and "bricks" in bad2["message"]
    nobot = await c.call("create_room", game="stacko", bot="grandmaster")
    assert nobot["code"] == "unknown_bot"
    await game.move()  # the game goes on


async def test_spectators_get_the_public_view_and_identical_frames(harness):
    options = {"tower": 5, "bricks": 14, "turn_cap": 12}
    game = await harness.game(options, spectators=2, public=False)
    s1, s2 = game.spectators
    await game.play_out()
    states1 = [r for r, f in zip(s1.raw, s1.frames, strict=True) if f["type"] == "state"]
    states2 = [r for r, f in zip(s2.raw, s2.frames, strict=True) if f["type"] == "state"]
    assert len(states1) == len(states2) > 5
    assert states1 == states2  # the same bytes, so the same seq, for every spectator
    seqs = [f["seq"] for f in s1.frames if f["type"] == "state"]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    for f in s1.frames:
        if f["type"] == "state":
            v = f["view"]
            assert v["seat"] is None and v["drawn"] is None and f["legal"] is None
            if v["outcome"] is None:
                for tower, seen in zip(v["towers"], v["seen"], strict=True):
                    assert [b is not None for b in tower] == seen
    # the players' frames of a change carry the same seq as the spectators'
    player_seqs = [f["seq"] for f in game.seats[1].frames if f["type"] == "state"]
    assert player_seqs == seqs


async def test_rematch_swaps_seats(harness):
    game = await harness.game(SMALL, spectators=1)
    a, b = game.seats
    early = await a.call("rematch", room=game.code)
    assert early["code"] == "no_rematch"
    await game.play_out()
    await a.request("rematch", room=game.code)
    ask = await a.expect("room", room=game.code)  # the first asker's answer: a room frame
    assert ask["rematch"] == [0]
    note = await b.expect("room", room=game.code)
    assert note["rematch"] == [0]
    old_seq = game.room.seq
    jb = await b.call("rematch", room=game.code)
    assert jb["type"] == "joined" and jb["seat"] == 0  # bob was seat 1
    ja = await a.expect("joined", room=game.code)
    assert ja["seat"] == 1
    harness.snap(game.code)
    game.seats = [b, a]
    assert game.room.seq == old_seq + 1
    await game.settle(game.room.seq)
    for c in game.everyone:
        v = c.latest[game.code]["view"]
        assert v["outcome"] is None and v["ply"] == 0 and v["to_move"] == 0 and v["results"] == []
    assert b.latest[game.code]["legal"] and a.latest[game.code]["legal"] is None
    assert b.latest[game.code]["id"] == jb["id"]
    outcome = await game.play_out()
    assert_final(game, outcome)


async def test_list_rooms_shows_public_rooms_in_play(harness):
    public = await harness.game(SMALL)
    private = await harness.game(SMALL, public=False)
    waiting = await harness.create(await harness.client("wanda"), SMALL)
    c = await harness.client("carol")
    listed = {r["room"]: r for r in (await c.call("list_rooms"))["rooms"]}
    assert public.code in listed and waiting in listed and private.code not in listed
    assert listed[waiting]["status"] == "waiting" and listed[public.code]["status"] == "playing"
    await public.play_out()
    listed = {r["room"] for r in (await c.call("list_rooms", game="stacko"))["rooms"]}
    assert public.code not in listed and waiting in listed


async def test_creator_may_take_seat_one(harness):
    a = await harness.client("alice")
    b = await harness.client("bob")
    created = await a.call("create_room", options=SMALL, seat=1)
    assert created["seat"] == 1
    joined = await b.call("join", room=created["room"])
    assert joined["seat"] == 0
    harness.snap(created["room"])
    game = Game(harness, created["room"], [b, a], [])
    await game.settle(game.room.seq)
    assert b.latest[game.code]["legal"] and a.latest[game.code]["legal"] is None
    await game.play_out()


async def test_server_busy_keeps_the_waiting_player_queued(make_harness):
    h = await make_harness(max_rooms=1)
    a = await h.client("alice")
    code = await h.create(a, SMALL)
    busy = await a.call("create_room", options=SMALL)
    assert busy["code"] == "server_busy" and busy["fatal"] is False
    w = await h.client("wait")
    assert (await w.call("quick_match"))["type"] == "queued"
    x = await h.client("x")
    busy = await x.call("quick_match")
    assert busy["code"] == "server_busy"
    assert (await a.call("leave", room=code))["type"] == "left"  # the room closes
    y = await h.client("y")
    paired = await y.call("quick_match")
    assert paired["type"] == "joined"  # with the player who was still waiting
    h.snap(paired["room"])
    assert (await w.expect("joined"))["room"] == paired["room"]


async def test_joining_tells_the_creator_and_says_the_game_starts(harness):
    """PROTOCOL.md "Rooms": the joiner gets joined (status playing: its state follows), the
    creator a room frame, then both the first state."""
    a = await harness.client("alice")
    b = await harness.client("bob")
    code = await harness.create(a, SMALL)
    joined = await b.call("join", room=code)
    assert joined["info"]["status"] == "playing"
    assert [p["name"] for p in joined["info"]["players"]] == ["alice", "bob"]
    update = await a.expect("room", room=code)
    assert update["text"] == "bob joined" and update["info"]["status"] == "playing"
    harness.snap(code)
    for c in (a, b):
        state = await c.expect("state", room=code)
        assert state["view"]["ply"] == 0


async def test_quick_match_joined_lists_both_players(harness):
    a = await harness.client("alice")
    b = await harness.client("bob")
    assert (await a.call("quick_match", game="stacko"))["type"] == "queued"
    second = await b.call("quick_match", game="stacko")
    first = await a.expect("joined")
    for frame in (first, second):
        assert frame["info"]["status"] == "playing"
        assert [p["name"] for p in frame["info"]["players"]] == ["alice", "bob"]
    harness.snap(first["room"])
