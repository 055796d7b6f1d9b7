"""Built-in bots think in worker processes (``server.botpool``), never on the event loop: a
slow bot stalls no other room, a bot out of time plays the fallback, and an answer that comes
after the room moved on is dropped. Order of events only, no timings: the test bots wait for
a file the test creates (``slow_bots``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from slow_bots import AnytimeBot, SlowBot
from stacko_wire import SMALL, Client

WAIT_S = 10.0


def bots(folder: Path) -> tuple[dict[str, list[str]], Any]:
    def make(game: str, level: str, rng: Any) -> Any:
        if level == "slow":
            return SlowBot(folder)
        return AnytimeBot()

    return {"stacko": ["anytime", "slow"]}, make


async def until(predicate: Any, what: str) -> None:
    """Wait (polling the loop) until ``predicate()``; fails after ``WAIT_S``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + WAIT_S
    while not predicate():
        assert loop.time() < end, f"timed out waiting until {what}"
        await asyncio.sleep(0.01)


async def outsider(h: Any, name: str) -> Client:
    """A client outside the harness's leak checker, which follows no bot room."""
    c = await Client.open(h.url, name)
    await c.hello(name)
    return c


async def bot_room(h: Any, level: str = "slow") -> tuple[Client, str]:
    """A client playing seat 1 against a bot in seat 0, which is to move at once."""
    c = await outsider(h, "human")
    joined = await c.call("create_room", game="stacko", options=SMALL, seat=1, bot=level)
    assert joined["type"] == "joined" and joined["info"]["status"] == "playing", joined
    await c.expect("state", room=joined["room"], seq=1)
    return c, joined["room"]


async def test_a_slow_bot_does_not_stall_another_room(make_harness, tmp_path):
    h = await make_harness(bots=bots(tmp_path))
    other = await h.game(SMALL)
    human, code = await bot_room(h)
    await until(lambda: (tmp_path / "started1").exists(), "the bot started thinking")
    for _ in range(4):  # each waits for both players' state frames
        await other.move()
    room = h.server.hub.rooms[code]
    assert room.seq == 1, "the bot moved before it was released"
    (tmp_path / "release").touch()
    moved = await human.expect("state", room=code, seq=2, timeout=WAIT_S)
    assert moved["view"]["ply"] >= 1 and "ran out of time" not in moved["text"]
    await human.ws.close()


async def test_a_bot_out_of_time_plays_the_fallback_and_its_late_answer_is_dropped(
    make_harness, tmp_path
):
    h = await make_harness(bots=bots(tmp_path), bot_budget_s=1.0)
    human, code = await bot_room(h)
    room = h.server.hub.rooms[code]
    await until(lambda: (tmp_path / "started1").exists(), "the bot started thinking")
    h.clock.advance(1.0)  # the budget is over: draw and pass for the bot
    fallback = await human.expect("state", room=code, seq=2)
    assert fallback["text"].startswith("seat 0's bot ran out of time;"), fallback["text"]
    assert fallback["view"]["to_move"] == 1 and room.expiries == [0, 0]
    (tmp_path / "release").touch()
    await until(lambda: h.server.hub.late_bot_answers == 1, "the late answer came")
    assert room.seq == 2 and room.game is not None and room.game.to_move == 1
    # The game goes on: the human moves, the (now released) bot answers in time.
    move = human.latest[code]["legal"][0]
    reply = await human.call("move", room=code, ply=human.latest[code]["view"]["ply"], move=move)
    assert reply["type"] == "state" and reply["seq"] == 3, reply
    nxt = await human.expect("state", room=code, seq=4, timeout=WAIT_S)
    assert "ran out of time" not in nxt["text"]
    await human.ws.close()


async def test_resigning_while_the_bot_thinks_drops_its_answer(make_harness, tmp_path):
    h = await make_harness(bots=bots(tmp_path))
    human, code = await bot_room(h)
    room = h.server.hub.rooms[code]
    await until(lambda: (tmp_path / "started1").exists(), "the bot started thinking")
    over = await human.call("resign", room=code)
    assert over["type"] == "state" and over["view"]["outcome"] is not None, over
    (tmp_path / "release").touch()
    await until(lambda: h.server.hub.late_bot_answers == 1, "the late answer came")
    assert room.seq == over["seq"] and room.status == "finished"
    assert human.pending("state") == []
    await human.ws.close()


async def test_a_killed_worker_costs_one_fallback_move_not_the_game(make_harness, tmp_path):
    """A worker that dies (out of memory, an operator's kill) breaks its pool: the decision
    it held gets the fallback move at once, and the next one runs in a new pool."""
    import os
    import signal

    h = await make_harness(bots=bots(tmp_path), bot_workers=1)
    human, code = await bot_room(h)
    await until(lambda: (tmp_path / "started1").exists(), "the bot started thinking")
    pool = h.server.bot_pool
    assert pool is not None
    (pid,) = pool.executor()._processes  # the one worker, busy with the decision
    os.kill(pid, signal.SIGKILL)
    fallback = await human.expect("state", room=code, seq=2, timeout=WAIT_S)
    assert "bot ran out of time" in fallback["text"] and fallback["view"]["outcome"] is None
    (tmp_path / "release").touch()
    frame = human.latest[code]
    reply = await human.call("move", room=code, ply=frame["view"]["ply"], move=frame["legal"][0])
    assert reply["type"] == "state" and reply["seq"] == 3, reply
    answered = await human.expect("state", room=code, seq=4, timeout=WAIT_S)
    assert "ran out of time" not in answered["text"] and "failed" not in answered["text"]
    await human.ws.close()


@pytest.mark.parametrize("workers", [0, 1])
async def test_a_bot_that_takes_should_stop_gets_it_and_keeps_its_memory(
    make_harness, tmp_path, workers
):
    """The anytime interface: ``choose(view, legal, *, should_stop)`` is called with it (the
    bot refuses to play without), in a worker or on the loop; the bot's memory comes back
    from the worker with each answer."""
    h = await make_harness(bots=bots(tmp_path), bot_budget_s=0.2, bot_workers=workers)
    human, code = await bot_room(h, "anytime")
    room = h.server.hub.rooms[code]

    def my_turn() -> bool:  # on the server, and the human has the frame that says so
        game = room.game
        return game is not None and game.to_move == 1 and human.latest[code]["seq"] == room.seq

    for _ in range(3):
        await until(my_turn, "the human's turn")
        frame = human.latest[code]
        move = frame["legal"][0]
        await human.call("move", room=code, ply=frame["view"]["ply"], move=move)
        if room.game is not None and room.game.outcome() is not None:
            break
    await until(lambda: room.game is not None and room.game.to_move == 1, "the bot moved")
    bot = room.players[0].bot
    assert isinstance(bot, AnytimeBot)
    assert len(bot.plies) >= 2 and bot.plies == sorted(set(bot.plies)), bot.plies
    assert all("failed" not in f.get("text", "") for f in human.frames if f["type"] == "state")
    assert h.server.hub.late_bot_answers == 0
    await human.ws.close()


async def test_bot_games_are_capped_per_session_and_per_server(make_harness, tmp_path):
    (tmp_path / "release").touch()  # the slow bot answers at once
    h = await make_harness(bots=bots(tmp_path), max_bot_games_per_session=1, max_bot_games=2)
    a = await outsider(h, "a")
    first = await a.call("create_room", game="stacko", options=SMALL, bot="slow")
    assert first["type"] == "joined", first
    again = await a.call("create_room", game="stacko", options=SMALL, bot="slow")
    assert again["code"] == "too_many_bot_games" and again["fatal"] is False, again
    b = await outsider(h, "b")
    assert (await b.call("create_room", options=SMALL, bot="slow"))["type"] == "joined"
    c = await outsider(h, "c")
    busy = await c.call("create_room", options=SMALL, bot="slow")
    assert busy["code"] == "bots_busy", busy
    # a human game is still fine, and a bot room's end frees its place
    assert (await c.call("create_room", options=SMALL))["type"] == "joined"
    assert (await a.call("leave", room=first["room"]))["type"] == "left"
    assert (await a.call("create_room", options=SMALL, bot="slow"))["type"] == "joined"
    for x in (a, b, c):
        await x.ws.close()


@pytest.mark.parametrize(
    ("game", "level"),
    [("stacko", "easy"), ("stacko", "medium"), ("stacko", "strong"), ("stakko", "random"),
     ("stakko", "search")],
)  # fmt: skip
def test_every_builtin_bot_crosses_to_a_worker_and_back(game, level):
    """What a worker gets: the bot, its view and legal moves, pickled (compiled engine classes
    included: frozen ones are rebuilt through their constructor); the copy decides as the
    original does, and the move comes back as an equal move."""
    import pickle
    import random

    from stacko.bots.registry import make_bot
    from stacko.engine.games import GAMES
    from stacko.server.botpool import _work

    spec = GAMES[game]
    state = spec.new_game(spec.options_type(), random.Random(3))
    for _ in range(6):
        if state.outcome() is not None:
            break
        seat = state.to_move
        view = state.view(seat)
        legal = view.legal_moves()
        bot, twin = make_bot(game, level, random.Random(4)), make_bot(game, level, random.Random(4))
        payload = pickle.dumps((twin, view, legal, float("inf")))
        move, back = pickle.loads(pickle.dumps(_work(payload)))
        assert move == bot.choose(view, legal) and move in legal
        assert type(back) is type(bot)
        state.apply(move, seat)


def test_bot_workers_give_the_cpu_to_the_event_loop_first():
    """On a busy machine a worker thinking at the server's priority takes CPU time from the
    event loop that every room waits on (bench/abuse.py bot_rooms: the pair's p99 8.7 x
    with bots thinking beside it); a decision has its budget and a fallback move, the loop has
    neither, so the workers run at a lower priority (a higher niceness)."""
    import os

    from stacko.server.botpool import PoolThinker

    pool = PoolThinker(1)
    try:
        niceness = pool.executor().submit(os.nice, 0).result(timeout=60)
    finally:
        pool.shutdown()
    assert niceness >= min(19, os.nice(0) + 10)


async def test_a_refused_bot_room_builds_no_bot(make_harness, tmp_path):
    """The caps come before the bot is made: a client asking for bot rooms past its cap
    must not cost the server a strong bot's construction per request."""
    (tmp_path / "release").touch()
    levels, make = bots(tmp_path)
    built: list[str] = []

    def counting(game: str, level: str, rng: Any) -> Any:
        built.append(level)
        return make(game, level, rng)

    h = await make_harness(bots=(levels, counting), max_bot_games_per_session=1, max_bot_games=1)
    a = await outsider(h, "a")
    assert (await a.call("create_room", options=SMALL, bot="slow"))["type"] == "joined"
    assert built == ["slow"]
    again = await a.call("create_room", options=SMALL, bot="slow")
    assert again["code"] == "too_many_bot_games", again
    b = await outsider(h, "b")
    busy = await b.call("create_room", options=SMALL, bot="slow")
    assert busy["code"] == "bots_busy", busy
    unknown = await b.call("create_room", options=SMALL, bot="nobody")
    assert unknown["code"] == "unknown_bot", unknown
    assert built == ["slow"]
    for x in (a, b):
        await x.ws.close()


def gate_the_start(monkeypatch: Any) -> tuple[Any, list[int]]:
    """Hold the pool's start (the executor's making, where the fork server starts) until
    the test sets the event; returns it and the threads the start ran in."""
    import threading

    from stacko.server import botpool

    gate = threading.Event()
    threads: list[int] = []
    real = botpool.PoolThinker.executor

    def gated(self: Any) -> Any:
        threads.append(threading.get_ident())
        assert gate.wait(WAIT_S), "the pool's start waited for the event loop: it ran on it"
        return real(self)

    monkeypatch.setattr(botpool.PoolThinker, "executor", gated)
    return gate, threads


async def test_the_first_decision_waits_for_the_workers_off_the_loop(monkeypatch):
    """Starting the pool blocks while the fork server imports the bots (~100 ms, more on a
    busy machine): on the first decision, on the loop, that stalled every room once. Here
    the start is held until the test, on the loop, lets it go: had the decision waited for
    it on the loop, it would wait forever (the gate gives up, and the test fails)."""
    import random
    import threading

    from stacko.bots.registry import make_bot
    from stacko.engine.games import GAMES
    from stacko.server.botpool import PoolThinker

    gate, threads = gate_the_start(monkeypatch)
    spec = GAMES["stakko"]
    state = spec.new_game(spec.options_type(), random.Random(3))
    view = state.view(state.to_move)
    legal = view.legal_moves()
    pool = PoolThinker(1)
    answers: list[tuple[Any, str | None]] = []
    try:
        bot = make_bot("stakko", "random", random.Random(4))
        pool.think(bot, view, legal, 30.0, lambda move, _bot, error: answers.append((move, error)))
        assert not answers and not pool.ready  # asked, not answered: the pool is starting
        await until(lambda: threads, "the pool started starting")
        assert threading.get_ident() not in threads
        gate.set()
        await until(lambda: answers, "the decision was answered")
        assert pool.ready and answers[0][1] is None and answers[0][0] in legal
    finally:
        gate.set()
        await asyncio.to_thread(pool.shutdown)


async def test_the_server_starts_its_bot_workers_at_start_off_the_loop(
    make_harness, tmp_path, monkeypatch
):
    import threading

    gate, threads = gate_the_start(monkeypatch)
    h = await make_harness(bots=bots(tmp_path), bot_workers=1)
    pool = h.server.bot_pool
    assert pool is not None and pool.starting and not pool.ready  # start returned before it
    await until(lambda: threads, "the pool started starting")
    assert threading.get_ident() not in threads
    gate.set()
    await until(lambda: pool.ready, "the workers are up")
    (tmp_path / "release").touch()
    human, _ = await bot_room(h)  # the first decision goes straight to a worker
    await human.ws.close()


def test_the_workers_end_with_a_server_killed_with_sigkill(tmp_path):
    """A server killed with SIGKILL could not stop its workers, and they lived on, with the
    fork server, holding the server's stdout: whoever read it (a supervisor, the kill -9
    test) never saw its end. Now each worker ends with the server, and the stdout closes."""
    import signal
    import subprocess
    import sys

    script = tmp_path / "server.py"
    script.write_text(
        "import time\n"
        "from stacko.server.botpool import PoolThinker\n"
        "if __name__ == '__main__':\n"
        "    pool = PoolThinker(2)\n"
        "    pool._start()\n"
        "    assert pool.ready\n"
        "    print('up', flush=True)\n"
        "    time.sleep(600)\n"
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, str(script)], cwd=root, stdout=subprocess.PIPE,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"up\n"
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=WAIT_S * 3)  # EOF: nobody holds the stdout
        assert out == b""
    finally:
        proc.kill()
        proc.wait()
