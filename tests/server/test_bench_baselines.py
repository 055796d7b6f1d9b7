"""The benchmark yardsticks still measure something: the echo server answers round trips and
its relay pairs move (a wrong path once made every relay figure 0 without an error)."""

from __future__ import annotations

import pytest

from bench import critical_path, echo


@pytest.mark.parametrize("kind", ["echo", "relay"])
async def test_baseline_moves_frames(kind: str) -> None:
    res = await echo.measure(conns=2, kind=kind, pace=0, duration=0.6, warmup=0.1, quiet=True)
    assert res["kind"] == kind
    assert res["connections_held"] == (4 if kind == "relay" else 2)
    assert res["round_trips"] > 10
    assert res["errors"] == 0 and res["disconnects"] == 0 and res["setup_failures"] == 0
    assert res["latency"]["p50_ms"] is not None and res["latency"]["p50_ms"] > 0
    if kind == "relay":
        assert res["latency_own"]["count"] == res["round_trips"]


async def test_critical_path_times_every_step_and_puts_everything_back() -> None:
    from stacko.protocol import messages
    from stacko.protocol.games import CODECS
    from stacko.server import wsconn

    before = (
        messages.parse_client,
        CODECS["stacko"].view_json,
        wsconn.DirectServerConnection._deliver,
    )
    # Games long enough (30 turns each, 0.1 s apart) that no match sits between two games in
    # the window: every step sees moves.
    res = await critical_path.measure(
        matches=2, pace=0.1, duration=1.5, options='{"turn_cap": 30, "rounds": 1}',
        warmup=0.3, gc_interval_s=0,
    )  # fmt: skip
    assert res["moves_timed"] > 5
    assert res["client_move_to_opponent"]["count"] > 5
    steps = {(s["from"], s["to"]): s for s in res["segments"]}
    assert len(steps) == len(critical_path.MARKS)  # every step between marks, and the whole
    for step in res["segments"]:
        assert step["count"] > 5, step  # each boundary was crossed by the timed moves
        assert step["p50_us"] >= 0
    whole = steps[("select", "write")]["p50_us"]
    assert whole > steps[("parse", "parsed")]["p50_us"] > 0
    after = (
        messages.parse_client,
        CODECS["stacko"].view_json,
        wsconn.DirectServerConnection._deliver,
    )
    assert after == before


async def test_critical_path_with_the_store_or_a_busy_stand_in() -> None:
    """``--store``: the server records into the default store (its commits counted);
    ``--busy-us``: the stand-in recorder gets every change and keeps nothing."""
    short = {"matches": 2, "pace": 0.1, "duration": 1.5, "warmup": 0.3, "gc_interval_s": 0}
    options = '{"turn_cap": 30, "rounds": 1}'
    stored = await critical_path.measure(options=options, store=True, **short)
    assert stored["store"] is True and stored["moves_timed"] > 5
    # every move a commit of its own at this load, and each game's start one more
    assert stored["store_commits"] >= stored["client_move_to_opponent"]["count"] > 5
    assert stored["busy_changes"] == 0
    busy = await critical_path.measure(options=options, busy_us=50, **short)
    assert busy["store_commits"] == 0 and busy["moves_timed"] > 5
    # the deal of each match's game, and every move (the window's and the warm-up's)
    assert busy["busy_changes"] > busy["client_move_to_opponent"]["count"] > 5


async def test_store_turns_cuts_up_commits_and_puts_everything_back() -> None:
    from bench import store_turns
    from stacko.server.store import base
    from stacko.server.store import sqlite as sqlite_store

    before = (
        base.Store.submit,
        base.Store._committed,
        sqlite_store._transaction,
        sqlite_store.SQLiteStore._commit_pending,
    )
    res = await store_turns.measure(
        2, 1.5, pace=0.1, warmup=0.3, options='{"turn_cap": 30, "rounds": 1}'
    )
    assert res["store"] == "loop"
    assert res["latency_opponent"]["count"] > 5
    commits = res["per_commit_us"]
    assert commits["transaction"]["n"] > 5  # past the set-up's fifth: moves were committed
    assert commits["changes"]["mean"] >= 1
    assert res["transactions_us"]["moves"]["n"] > 5
    statements = res["statements"]
    assert statements["INSERT INTO event_log"]["rows"] > 5
    assert statements["BEGIN"]["calls"] == statements["COMMIT"]["calls"]
    after = (
        base.Store.submit,
        base.Store._committed,
        sqlite_store._transaction,
        sqlite_store.SQLiteStore._commit_pending,
    )
    assert after == before


def test_the_full_runs_scale_rows_judge_the_store_against_the_off_runs_spread():
    """``bench/run_all.py`` alternates the scale run with the store on and off; its row says
    whether every store-on figure stays within the store-off runs' spread."""
    from bench.run_all import scale_noise_rows

    def rows(on: list[float], off: list[float]) -> list[tuple[str, str, bool | None]]:
        runs = [{"store": True, "p50_ms": v, "p99_ms": 10 * v} for v in on]
        runs += [{"store": False, "p50_ms": v, "p99_ms": 10 * v} for v in off]
        out: list[tuple[str, str, bool | None]] = []
        scale_noise_rows(runs, lambda name, value, e, r, target, ok: out.append((name, value, ok)))
        return out

    over = rows([0.87, 0.95], [0.55, 0.68])
    assert [ok for _, _, ok in over] == [False, False]
    assert over[0][1] == "0.87 0.95 | 0.55 0.68"
    assert [ok for _, _, ok in rows([0.6, 0.66], [0.55, 0.68])] == [True, True]
    assert rows([0.6], [0.55]) == []  # a single pair (the quick run) says nothing


def test_the_scale_rows_leave_out_an_off_run_that_something_else_disturbed():
    """An off run whose servers used as much CPU as its pair's on run did not run alone (the
    same load without the store is less work): its figures cannot vouch for the store."""
    from bench.run_all import scale_noise_rows

    # The fourteenth session's full run: the second off run's servers used 0.934 cores.
    runs = [
        {"store": True, "cpu_util": 0.902, "p50_ms": 1.5229, "p99_ms": 7.698},
        {"store": False, "cpu_util": 0.775, "p50_ms": 1.0562, "p99_ms": 4.5168},
        {"store": True, "cpu_util": 0.896, "p50_ms": 1.5227, "p99_ms": 11.186},
        {"store": False, "cpu_util": 0.934, "p50_ms": 1.9235, "p99_ms": 25.1069},
    ]
    out: list[tuple[str, str, bool | None]] = []
    scale_noise_rows(runs, lambda name, value, e, r, target, ok: out.append((name, value, ok)))
    assert [ok for _, _, ok in out] == [False, False]  # against the first off run alone
    assert "off run 2 left out: server CPU 0.934 >= on 0.896" in out[0][1]
    runs[1]["cpu_util"] = 0.95  # both disturbed: no verdict either way
    out.clear()
    scale_noise_rows(runs, lambda name, value, e, r, target, ok: out.append((name, value, ok)))
    assert [ok for _, _, ok in out] == [None, None]


async def test_store_phases_times_each_phase_of_a_game_both_ways() -> None:
    from bench import store as store_bench

    res = await store_bench.phases(games=3, rounds=2, runs=2)
    for phase in store_bench.PHASES:
        for mode in ("on", "off"):
            runs = res["runs_us"][mode][phase]
            assert len(runs) == 2 and all(v > 0 for v in runs), (phase, mode, runs)
        assert res[phase]["store_us"] == round(res[phase]["on_us"] - res[phase]["off_us"], 2)


async def test_store_path_measures_the_store_per_move_both_ways() -> None:
    """``bench/store.py``'s path rows (path, path_short, path_cold: only the rooms differ)."""
    from bench import store as store_bench

    res = await store_bench.path(games=30, batch=5, moves=60, rounds=2, options=store_bench.SHORT)
    for mode in ("on", "off"):
        runs = res["runs_us_per_move"][mode]
        assert len(runs) == 2 and all(v > 0 for v in runs), (mode, runs)
    assert res["store_us_per_move"] == round(res["on_us_per_move"] - res["off_us_per_move"], 2)
