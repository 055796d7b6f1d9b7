"""Hidden information on the wire: every frame every seat and spectator receives is compared
with the server's engine state at the moment it was produced (``stacko_wire.LeakChecker``),
across moves, stale resends, refused moves, reconnects and round ends. The first test shows
the checker does catch each kind of leak."""

from __future__ import annotations

import copy
import random

import orjson
import pytest
from stacko_wire import Harness, check_view, hidden_bricks, reconnect, token_bits

from stacko.engine.stacko import DRAW, Stacko, StackoOptions
from stacko.protocol import frames
from stacko.protocol.games import CODECS


def _frame(game: Stacko, seat: int | None) -> dict:
    raw = frames.state(
        CODECS["stacko"], game.view(seat), room="ABCDEF", seq=1, deadline_ms=None, clock_ms=None
    )
    return orjson.loads(raw)


def _holding_game() -> Stacko:
    """Seat 0 has drawn a brick (> 1, so no seat number or zero score can mask it)."""
    for seed in range(100):
        g = Stacko(StackoOptions(bricks=14, tower=5), rng=random.Random(seed))
        g.apply(DRAW, 0)
        if g.drawn is not None and g.drawn > 1:
            return g
    raise AssertionError("no suitable deal")


def test_the_checker_catches_every_kind_of_leak():
    g = _holding_game()
    for seat in (0, 1, None):
        check_view(_frame(g, seat), seat, g)  # the real frames pass
    hidden_slot = next(i for i, v in enumerate(g.seen[0]) if not v)
    brick = g.towers[0][hidden_slot]
    assert brick in hidden_bricks(g, 1) and g.drawn in hidden_bricks(g, 1)

    def tampered(seat, change):
        f = copy.deepcopy(_frame(g, seat))
        change(f)
        return f

    leaks = [
        (1, lambda f: f["view"]["towers"][0].__setitem__(hidden_slot, brick)),
        (None, lambda f: f["view"]["towers"][0].__setitem__(hidden_slot, brick)),
        (1, lambda f: f["view"].__setitem__("drawn", g.drawn)),
        (None, lambda f: f["view"].__setitem__("drawn", g.drawn)),
        (1, lambda f: f["view"]["events"][0].__setitem__("brick", g.drawn)),
        (1, lambda f: f.__setitem__("text", f"opponent drew {g.drawn}")),
        (None, lambda f: f.__setitem__("text", f"seat 0 drew {brick}")),
        (1, lambda f: f["view"]["discard"].append(brick)),
        (1, lambda f: f["view"]["results"].append(
            {"round": 1, "finisher": None, "towers": [g.towers[0], g.towers[1]], "scores": [5, 5]}
        )),
        (1, lambda f: f.__setitem__("legal", [{"action": "draw"}])),
    ]  # fmt: skip
    for seat, change in leaks:
        with pytest.raises(AssertionError):
            check_view(tampered(seat, change), seat, g)


async def test_the_error_checker_catches_a_hidden_brick(harness):
    game = await harness.game({"tower": 8, "bricks": 40})
    engine = game.engine
    cfg_numbers = {0, 1, 4096, 65536, 10, 20, 8, 7, engine.ply}
    hidden = sorted(hidden_bricks(engine, 1) - cfg_numbers)
    b = game.seats[1]
    harness.check()
    b.frames.append(
        {"type": "error", "code": "bad_slot", "message": f"slot holds {hidden[0]}", "fatal": False,
         "id": None, "room": game.code}
    )  # fmt: skip
    with pytest.raises(AssertionError, match="hidden bricks"):
        harness.check()
    b.frames.pop()
    harness.checker.tracks[b].pos -= 1


async def test_no_leaks_through_a_whole_game(make_harness):
    """Two rounds with spectators; along the way: stale resends, refused moves of every
    kind, reconnects of both seats and a late spectator. Every frame is checked."""
    h: Harness = await make_harness(seed=7)
    game = await h.game({"tower": 5, "bricks": 16, "rounds": 2, "turn_cap": 14}, spectators=2)
    rng = random.Random(7)
    saw_hidden_draw = 0
    step = 0
    while game.engine.outcome() is None:
        step += 1
        mover_seat = game.engine.to_move
        reply = await game.move()
        mover = game.seats[mover_seat]
        other = game.seats[1 - mover_seat]
        if reply["view"]["holding"]:
            # the opponent and the spectators know a brick was drawn, not which
            for c in (other, *game.spectators):
                v = c.latest[game.code]["view"]
                assert v["holding"] and v["drawn"] is None
                assert v["events"] == [{"kind": "drew", "seat": mover_seat, "brick": None}]
            assert reply["view"]["drawn"] is not None
            saw_hidden_draw += 1
        kind = step % 5
        if kind == 0:  # a stale resend of the move just made
            seq = game.room.seq
            sent = mover.sent[reply["id"]]
            err = await mover.call("move", room=game.code, ply=sent["ply"], move=sent["move"])
            assert err["room"] == game.code
            if game.engine.outcome() is not None:  # checked before the ply
                assert err["code"] == "game_over"
            else:
                assert err["code"] == "stale_ply"
                again = await mover.expect("state", room=game.code, id=err["id"])
                assert again["seq"] == seq == game.room.seq
        elif kind == 1 and game.engine.outcome() is None:  # out of turn
            waiting = game.seats[1 - game.engine.to_move]
            ply = game.engine.ply
            err = await waiting.call("move", room=game.code, ply=ply, move={"action": "draw"})
            assert err["code"] == "not_your_turn" and game.engine.ply == ply
        elif kind == 2 and game.engine.outcome() is None:  # a slot that does not exist
            m = game.seats[game.engine.to_move]
            action = "take" if game.engine.phase.value == "turn" else "place"
            err = await m.call(
                "move", room=game.code, ply=game.engine.ply, move={"action": action, "slot": 17}
            )
            assert err["code"] == "bad_slot"
        elif kind == 3 and game.engine.outcome() is None:  # wrong phase
            m = game.seats[game.engine.to_move]
            action = "pass" if game.engine.phase.value == "turn" else "draw"
            err = await m.call("move", room=game.code, ply=game.engine.ply, move={"action": action})
            assert err["code"] == "wrong_phase"
        elif kind == 4 and step % 2 == 0:
            await reconnect(game, rng.randrange(2))
        if step == 9:  # a late spectator gets the current public view
            late = await h.client("late")
            assert (await late.call("join", room=game.code, role="spectator"))["seat"] is None
            st = await late.expect("state", room=game.code)
            assert st["seq"] == game.room.seq
            game.spectators.append(late)
        h.check()
    assert saw_hidden_draw > 0
    assert game.engine.round == 2 and len(game.engine.results) == 2
    assert h.checker.errors_checked >= 10
    # every state frame of every client was checked against a snapshot
    for c in h.clients:
        n = sum(1 for f in c.frames if f["type"] == "state")
        assert h.checker.tracks[c].states == n


async def test_round_end_reveals_only_after_the_round(make_harness):
    h = await make_harness(seed=3)
    game = await h.game({"tower": 6, "bricks": 20, "rounds": 3, "turn_cap": 4}, spectators=1)
    history: list[tuple[int, dict]] = []
    while game.engine.outcome() is None:
        await game.move()
        for c in game.everyone:
            history.append((game.engine.round, c.latest[game.code]))
    spec = game.spectators[0]
    rounds_seen = [(f["view"]["round"], len(f["view"]["results"])) for f in spec.frames
                   if f["type"] == "state"]  # fmt: skip
    # the results grow by one exactly when a round ends, never earlier
    for r, n in rounds_seen:
        assert n == r - 1 or (r == 3 and n == 3)
    ended = [f for f in spec.frames if f["type"] == "state"
             and any(e["kind"] == "round_ended" for e in f["view"]["events"])]  # fmt: skip
    assert [f["view"]["results"][-1]["round"] for f in ended] == [1, 2, 3]
    for f in ended[:2]:  # the new round's towers stay hidden from the spectator
        v = f["view"]
        assert v["outcome"] is None and all(b is None for t in v["towers"] for b in t)
        revealed = v["results"][-1]["towers"]
        assert all(isinstance(b, int) for t in revealed for b in t)
    final = ended[-1]["view"]
    assert final["towers"] == final["results"][-1]["towers"]


async def test_duplicate_move_is_applied_once(harness):
    game = await harness.game({"tower": 5, "bricks": 14}, spectators=1)
    a, b = game.seats
    await game.move({"action": "draw"})
    ply = game.engine.ply
    seq = game.room.seq
    msg = {"room": game.code, "ply": ply, "move": {"action": "pass"}}
    # the same move, twice, back to back (a client retrying)
    await a.request("move", rid="try-1", **msg)
    await a.request("move", rid="try-2", **msg)
    applied = await a.expect("state", id="try-1")
    harness.snap(game.code)
    err = await a.expect("error", id="try-2")
    assert err["code"] == "stale_ply" and err["fatal"] is False and err["room"] == game.code
    assert f"ply {ply}" in err["message"] and f"ply {ply + 1}" in err["message"]
    resent = await a.expect("state", id="try-2")
    assert applied["seq"] == resent["seq"] == seq + 1
    assert resent["view"] == applied["view"]
    assert game.engine.ply == ply + 1 and game.room.seq == seq + 1
    await b.barrier()
    await game.spectators[0].barrier()
    for c in (b, *game.spectators):
        states = [f for f in c.pending("state") if f["room"] == game.code]
        assert [f["seq"] for f in states] == [seq + 1]  # one change, seen once
    harness.check()


async def test_session_tokens_are_secret_and_strong(harness):
    game = await harness.game({"tower": 4, "bricks": 12}, spectators=2)
    tokens = [c.token for c in harness.clients]
    assert len(set(tokens)) == len(tokens)
    for t in tokens:
        assert token_bits(t) >= 128
        assert token_bits(t) == 192  # the spec: 192 bits from secrets
    await game.play_out()
    await reconnect(game, 0)
    for c in harness.clients:
        others = {t for t in tokens if t != c.token}
        for raw in c.raw:
            assert not any(t in raw for t in others)
        # a client sees its own token in its welcome frames only
        own = [f["type"] for f, raw in zip(c.frames, c.raw, strict=True) if c.token in raw]
        assert set(own) == {"welcome"}
