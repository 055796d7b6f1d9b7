"""Move clocks with the FakeClock: deadlines on the wire, the automatic draw+pass on expiry,
and the forfeit (termination "timeout") after too many expiries."""

from __future__ import annotations

import random

import pytest
from stacko_wire import Game, Harness

from stacko.engine.games import GAMES
from stacko.engine.stacko import StackoOptions
from stacko.protocol.games import CODECS
from stacko.server.clock import FakeClock
from stacko.server.room import Player, Room, RoomHooks

OPTIONS = {"tower": 5, "bricks": 16, "rounds": 1, "turn_cap": 100, "clock_ms": 5000}


def ms(seconds: float) -> int:
    return int(seconds * 1000)


async def expiry(h: Harness, game: Game, seconds: float = 5.01) -> list[dict]:
    """Advance the clock; every receiver gets exactly one new state (checked for leaks)."""
    seq = game.room.seq
    h.advance(seconds, game.code)
    assert game.room.seq == seq + 1
    frames = [await c.expect("state", room=game.code, seq=seq + 1) for c in game.everyone]
    h.check()
    return frames


async def test_deadlines_on_the_wire(harness):
    game = await harness.game(OPTIONS, spectators=1)
    start = harness.clock.time()
    for c in game.everyone:
        st = c.latest[game.code]
        assert st["deadline_ms"] == ms(start + 5) and st["clock_ms"] == 5000
    assert game.room.info()["clock_ms"] == 5000
    harness.advance(2)
    reply = await game.move({"action": "draw"})  # each decision gets the full clock again
    assert reply["deadline_ms"] == ms(harness.clock.time() + 5) and reply["clock_ms"] == 5000
    harness.advance(4.9)
    assert game.engine.ply == 1  # not yet
    reply = await game.move({"action": "pass"})
    assert reply["view"]["to_move"] == 1 and reply["deadline_ms"] == ms(harness.clock.time() + 5)


async def test_expiry_plays_draw_and_pass(harness):
    game = await harness.game(OPTIONS, spectators=1)
    before = game.engine.copy()
    harness.advance(4.9, game.code)
    assert game.engine == before
    frames = await expiry(harness, game, 0.2)
    for f in frames:
        v = f["view"]
        assert v["ply"] == 2 and v["to_move"] == 1 and v["phase"] == "turn"
        assert [e["kind"] for e in v["events"]] == ["passed"] and v["events"][0]["seat"] == 0
        assert f["text"].startswith("alice's clock ran out; ")  # a name, not "seat 0"
        assert f["deadline_ms"] is not None and f["clock_ms"] == 5000
    # the towers did not change: draw then pass touches no slot
    assert game.engine.towers == before.towers and game.engine.seen == before.seen
    assert game.seats[1].latest[game.code]["legal"]
    await game.move()  # and play goes on


async def test_expiry_after_a_draw_passes(harness):
    game = await harness.game(OPTIONS)
    await game.move({"action": "draw"})
    drawn = game.engine.drawn
    frames = await expiry(harness, game)
    for f in frames:
        v = f["view"]
        assert v["events"] == [{"kind": "passed", "seat": 0, "brick": drawn}]
        assert v["ply"] == 2 and v["to_move"] == 1 and v["discard"][-1] == drawn
        assert "clock" in f["text"]


async def test_three_expiries_forfeit(harness):
    game = await harness.game(OPTIONS, spectators=1)
    for round_ in range(2):
        await expiry(harness, game)  # seat 0 runs out: draw + pass for it
        assert game.engine.to_move == 1 and game.room.expiries[0] == round_ + 1
        if round_ == 0:
            await game.move({"action": "draw"})
            await expiry(harness, game)  # seat 1 runs out once too (after its draw)
            assert game.room.expiries == [1, 1]
        else:
            await game.move({"action": "draw"})
            await game.move({"action": "pass"})
    assert game.engine.to_move == 0 and game.engine.outcome() is None
    frames = await expiry(harness, game)  # the third for seat 0
    for f in frames:
        out = f["view"]["outcome"]
        assert out["termination"] == "timeout" and out["winner"] == 1
        assert f["deadline_ms"] is None and f["clock_ms"] is None
    harness.advance(60)  # no clock runs after the end
    assert game.room.seq == frames[0]["seq"]


async def test_quick_match_clock_expires(harness):
    a = await harness.client("alice")
    b = await harness.client("bob")
    await a.call("quick_match")
    jb = await b.call("quick_match")
    ja = await a.expect("joined")
    harness.snap(jb["room"])
    seats = [a, b] if ja["seat"] == 0 else [b, a]
    game = Game(harness, jb["room"], seats, [])
    await game.settle(game.room.seq)
    harness.advance(29.9, game.code)
    assert game.engine.ply == 0
    frames = await expiry(harness, game, 0.2)
    assert all("clock" in f["text"] and f["view"]["ply"] == 2 for f in frames)


def test_a_failing_send_neither_leaks_the_old_timer_nor_loses_the_new_one() -> None:
    """Room._changed books its clock after the frames are out; a send that raises must still
    cancel the old move timer (it would charge the next player at the old deadline) and book
    the new one."""
    clock = FakeClock()
    hooks = RoomHooks(
        clock=clock, rng_factory=lambda: random.Random(1), schedule_soon=lambda cb: cb(),
        on_empty=lambda room: None,
    )  # fmt: skip

    class Peer:
        broken = False

        def send(self, frame: bytes) -> None:
            if self.broken:
                raise RuntimeError("a send failed")

    peers = (Peer(), Peer())
    room = Room(
        "ROOM01", GAMES["stacko"], CODECS["stacko"], StackoOptions(turn_cap=10, rounds=1),
        60_000, False, hooks,
    )  # fmt: skip
    for name, peer in zip("ab", peers, strict=True):
        room.seat(Player(name, peer=peer))
    room.start()
    clock.advance(50)  # 10 s left for the seat to move
    game = room.game
    assert game is not None and game.to_move is not None
    game.apply(game.legal_moves()[0], game.to_move)
    for peer in peers:
        peer.broken = True
    with pytest.raises(RuntimeError):
        room._changed(request=(0, 1))
    for peer in peers:
        peer.broken = False
    clock.advance(11)  # past the old deadline: nothing happens
    assert room.expiries == [0, 0]
    clock.advance(50)  # past the new one, 60 s after the move
    assert sum(room.expiries) == 1
