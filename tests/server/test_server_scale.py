"""Hundreds of rooms at once, each a full game between two real connections."""

from __future__ import annotations

import asyncio
import time

from stacko_wire import SMALL

ROOMS = 250


async def test_many_concurrent_rooms(make_harness):
    h = await make_harness(seed=11, max_connections_per_ip=0, max_waiting_per_ip=0)  # 500 sockets
    started = time.perf_counter()
    games = await asyncio.gather(*(h.game(SMALL, names=(f"a{i}", f"b{i}")) for i in range(ROOMS)))
    assert len({g.code for g in games}) == ROOMS
    assert len(h.server.connections) == 2 * ROOMS
    outcomes = await asyncio.gather(*(g.play_out() for g in games))
    elapsed = time.perf_counter() - started
    for g, outcome in zip(games, outcomes, strict=True):
        a, b = (c.latest[g.code] for c in g.seats)
        assert a["view"]["outcome"] == b["view"]["outcome"] == outcome
        assert a["seq"] == b["seq"] == g.room.seq
        assert g.room.status == "finished"
        # every move was applied once: the room saw one state version per ply, plus the start
        assert g.room.seq == g.engine.ply + 1
    terminations = {o["termination"] for o in outcomes}
    assert terminations == {"completed"}
    assert sum(g.engine.ply for g in games) > 5 * ROOMS
    assert elapsed < 20, f"{ROOMS} rooms took {elapsed:.1f} s"
