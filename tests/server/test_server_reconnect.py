"""Presence: dropped connections, resuming a session within the grace period, forfeiting
after it, and a second connection taking a session over. Time is a FakeClock."""

from __future__ import annotations

import asyncio

import orjson
from stacko_wire import SMALL, Harness, raw_ws, read_frame, reconnect, text_frame


async def test_reconnect_within_grace_restores_the_seat(harness):
    game = await harness.game({"tower": 5, "bricks": 14, "turn_cap": 10}, spectators=1)
    await game.move({"action": "draw"})  # seat 0 holds a drawn brick
    held = game.seats[0].latest[game.code]["view"]["drawn"]
    harness.advance(25)  # well within the 60 s grace
    new = await reconnect(game, 0)
    state = new.latest[game.code]
    # the full current view: the held brick, the own tower, the legal moves
    assert state["view"]["drawn"] == held and state["legal"]
    assert all(b is not None for b in state["view"]["towers"][0])
    harness.advance(100)  # the forfeit timer was cancelled
    assert game.engine.outcome() is None
    outcome = await game.play_out()
    assert outcome["termination"] == "completed"


async def test_forfeit_countdown_is_announced(harness):
    game = await harness.game(SMALL, spectators=1)
    a, b = game.seats
    spec = game.spectators[0]
    await a.close()
    first = await spec.expect("room", room=game.code)
    assert first["forfeit_ms"] == {"0": 60_000}
    harness.advance(20)
    await b.close()
    second = await spec.expect("room", room=game.code)
    assert second["forfeit_ms"] == {"0": 40_000, "1": 60_000}
    assert [p["connected"] for p in second["info"]["players"]] == [False, False]


async def test_grace_period_over_abandons(harness):
    game = await harness.game(SMALL, spectators=1)
    a, b = game.seats
    await game.move()
    token = a.token
    await a.close()
    for c in (b, *game.spectators):
        dropped = await c.expect("room", room=game.code)
        assert dropped["forfeit_ms"] == {"0": 60_000}
    harness.advance(59.9, game.code)
    assert game.engine.outcome() is None
    harness.advance(0.2, game.code)  # past reconnect_grace_s
    for c in (b, *game.spectators):
        st = await c.expect("state", room=game.code, seq=game.room.seq)
        out = st["view"]["outcome"]
        assert out["termination"] == "abandoned" and out["winner"] == 1
        gone = await c.expect("room", room=game.code)
        assert [p["seat"] for p in gone["info"]["players"]] == [1]
    harness.check()
    # the session expired with its seat: the token now starts a fresh session
    assert token not in harness.server.hub.sessions
    late = await harness.client("alice", hello=False)
    welcome = await late.hello("alice", token)
    assert welcome["resumed"] is False and welcome["rooms"] == []
    assert welcome["session"] != token
    err = await late.call("move", room=game.code, ply=game.engine.ply, move={"action": "draw"})
    assert err["code"] == "not_in_room"
    assert not late.pending("state")


async def test_unknown_token_starts_a_new_session(harness):
    c = await harness.client("x", hello=False)
    welcome = await c.hello("x", "A" * 32)
    assert welcome["resumed"] is False and welcome["session"] != "A" * 32


async def test_waiting_room_of_a_dropped_creator_closes_after_grace(harness):
    a = await harness.client("alice")
    code = await harness.create(a, SMALL)
    await a.close()
    harness.advance(61)
    assert code not in harness.server.hub.rooms
    b = await harness.client("bob")
    assert (await b.call("join", room=code))["code"] == "unknown_room"


async def test_a_second_connection_replaces_the_first(harness):
    game = await harness.game(SMALL, spectators=1)
    a = game.seats[0]
    await game.move()
    a2 = await harness.client("alice", hello=False)
    welcome = await a2.hello("alice", a.token)
    assert welcome["resumed"] is True and welcome["rooms"] == [game.code]
    err = await a.expect("error")
    assert err["code"] == "session_replaced" and err["fatal"] is True
    assert await a.closed() == (1008, "session_replaced")
    assert (await a2.expect("joined", room=game.code))["seat"] == 0
    assert (await a2.expect("state", room=game.code))["seq"] == game.room.seq
    game.seats[0] = a2
    harness.advance(120)  # the old connection's end does not start a forfeit
    assert game.engine.outcome() is None
    await game.play_out()


async def test_reconnect_after_game_over(harness):
    game = await harness.game(SMALL)
    outcome = await game.play_out()
    new = await reconnect(game, 1)
    assert new.latest[game.code]["view"]["outcome"] == outcome


async def test_player_who_asked_for_a_rematch_and_left_forfeits_the_new_game(harness):
    """Seats swap at a rematch; the grace period of a player who dropped before it must
    still run out against that player (not against whoever sits in the old seat)."""
    game = await harness.game(SMALL)
    a, b = game.seats
    await game.play_out()
    await a.request("rematch", room=game.code)
    await b.expect("room", room=game.code)
    await a.close()
    await b.expect("room", room=game.code)
    joined = await b.call("rematch", room=game.code)
    assert joined["type"] == "joined" and joined["seat"] == 0
    harness.snap(game.code)
    await b.expect("state", room=game.code, seq=game.room.seq)
    assert game.engine.outcome() is None
    harness.advance(61, game.code)
    st = await b.expect("state", room=game.code, seq=game.room.seq)
    out = st["view"]["outcome"]
    assert out is not None and out["termination"] == "abandoned" and out["winner"] == 0


async def test_disconnected_spectator_is_dropped(harness: Harness):
    game = await harness.game(SMALL, spectators=1)
    s = game.spectators.pop()
    await s.close()
    await game.seats[0].barrier()
    assert len(game.room.spectators) == 0
    assert harness.server.hub.watching == {}
    await game.move()  # the game goes on; nothing is sent to the dropped spectator


async def test_keepalive_drops_a_silent_player(make_harness):
    h = await make_harness(ping_interval_s=0.2, ping_timeout_s=0.5)
    reader, writer = await raw_ws(h.server.port)
    writer.write(text_frame({"type": "hello", "protocol": 1, "name": "mute"}))
    writer.write(text_frame({"type": "create_room", "options": {"tower": 3, "bricks": 8}}))
    opcode, welcome = await read_frame(reader)
    assert opcode == 1 and orjson.loads(welcome)["type"] == "welcome"
    opcode, joined = await read_frame(reader)
    code = orjson.loads(joined)["room"]
    b = await h.client("bob")
    assert (await b.call("join", room=code))["seat"] == 1
    h.snap(code)
    opcodes = []
    try:
        async with asyncio.timeout(5):
            while True:  # read, never answer: a ping (9) comes, then the close
                opcode, _ = await read_frame(reader)
                opcodes.append(opcode)
    except asyncio.IncompleteReadError:
        pass
    writer.close()
    assert 9 in opcodes
    gone = await b.expect("room", room=code)
    assert gone["info"]["players"][0]["connected"] is False and gone["forfeit_ms"] == {"0": 60_000}
    await b.barrier()  # the healthy client, pinged too, is still there


async def test_session_tokens_and_room_codes_look_as_documented(harness):
    """PROTOCOL.md: a token is 192 random bits in 32 URL-safe base64 characters; a room code
    is 8 characters without I, O, 0 or 1 (40 bits: guessing a private room is hopeless).
    Drawn from the OS's secure source by default."""
    import random
    import re

    tokens = set()
    for i in range(20):
        c = await harness.client(f"t{i}", hello=False)
        tokens.add((await c.hello(f"t{i}"))["session"])
    assert len(tokens) == 20
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{32}", t) for t in tokens), tokens
    code = await harness.create(await harness.client("maker"), SMALL)
    assert re.fullmatch(r"[A-HJ-NP-Z2-9]{8}", code), code
    assert isinstance(harness.server.hub._ids, random.SystemRandom)


async def test_departures_count_ended_connections_rooms_and_expired_sessions(harness):
    """What the GcPacer reads to tell garbage from growth (``Server.departures``): every
    ended connection of the process (a health check too), closed rooms, expired sessions."""
    server = harness.server
    start = server.departures()
    game = await harness.game(SMALL)
    a, b = game.seats
    assert server.departures() == start
    await a.close()
    await b.expect("room", room=game.code)
    assert server.departures() == start + 1  # a's connection
    # past the grace period: a forfeits and its session expires
    harness.advance(server.config.reconnect_grace_s + 1, game.code)
    await b.expect("state", room=game.code)
    assert server.departures() == start + 2
    await b.call("leave", room=game.code)  # the last player leaves: the room closes
    assert game.code not in server.hub.rooms
    assert server.departures() == start + 3
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert (await reader.read()).startswith(b"HTTP/1.1 200")
    writer.close()
    for _ in range(100):  # the server notices the end of the socket on its next turns
        if server.departures() == start + 4:
            break
        await asyncio.sleep(0.01)
    assert server.departures() == start + 4
