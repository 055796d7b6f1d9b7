"""The store's cost and figures: store on (the default) beside store off, and what it keeps.

    python bench/store.py                    # everything, 3 alternating runs per load figure
    python bench/store.py --runs 1 --quick   # a quick look
    python bench/store.py --only disk,recovery

1. saturation: echo round trips/s, then N matches at pace 0 with the store on and with
   ``--database memory``, alternating (runs minutes apart drift; alternation keeps the two
   comparable); moves/s, the ratio to echo, commits/s and changes per commit (batch size)
   from the server's ``/metrics``;
2. light load: echo, then 100 matches at a move per 2 s, store on and off: p50/p99 of the
   move to the opponent's state frame;
3. disk: bytes on disk per finished game (default options; random moves in a recording room
   writing to a real SQLite file): the pages in use once the log is compacted, and the
   file's size (which keeps the log's freed pages for its next rows);
4. recovery: 10,000 games in progress written to a SQLite file, then the time a new hub
   takes to rebuild them all (``server.store.recorder.recover``);
5. writes: the commit's cost and WAL pages per change, 20 changes of 50 games per commit,
   into the event log (schema 3) and keyed per game in ``events`` (schema 2), alternating;
6. path: the store's CPU per move in process (rooms, recorder, commits, rooms' rows and
   rematches; no sockets), on against off, alternating; path_short: the same with the
   scale run's short games, where a game's start and end cost as much as its moves;
   path_cold: path_short with as many rooms as a server of the scale run holds (5,000), so
   that each move finds its game's objects out of the CPU's caches, as there: the store's
   cost per move about three times path_short's, in seconds and to within about 1 us
   (the scale step's own figures need minutes, and move by more than that);
7. held: memory per game in progress (tracemalloc), store on against off, alternating;
8. phases: path_short's cost cut by what a game goes through (a move that ends nothing, the
   move that ends the game, the first rematch ask, the second, which starts the next game),
   on against off, alternating: which part of a game the store's cost is in;
9. listing: ``GET /api/games``'s query for each kind of filter over 500,000 finished games.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path[0:1] = [str(Path(__file__).resolve().parent.parent)]

from bench import echo, loadgen
from bench.wsclient import progress
from stacko.engine.games import GAMES
from stacko.protocol.games import CODECS
from stacko.server.clock import FakeClock
from stacko.server.config import ServerConfig
from stacko.server.hub import Hub, Session
from stacko.server.room import Player, Room, RoomHooks
from stacko.server.store.recorder import EVENT_SQL, LOG_SQL, Recorder, recover
from stacko.server.store.sqlite import SQLiteStore

OFF = "--server-arg=--database=memory"


async def game(argv: list[str]) -> dict[str, Any]:
    args = loadgen.build_parser().parse_args([*argv, "--no-baseline", "--quiet"])
    return await loadgen.run_load(args)


def store_figures(g: dict[str, Any]) -> dict[str, Any]:
    m = (g.get("server") or {}).get("metrics") or {}
    commits = m.get("stacko_store_commits_total")
    changes = m.get("stacko_store_changes_total")
    secs = m.get("stacko_store_commit_seconds_sum")
    window = g.get("window_s") or 0
    return {
        "commits": commits, "changes": changes,
        "batch_mean": round(changes / commits, 2) if commits else None,
        "batch_max": m.get("stacko_store_batch_size_max"),
        "commit_mean_ms": round(1000 * secs / commits, 3) if commits and secs else None,
        "commits_per_s_approx": round(commits / (window + 1.0), 1) if commits else None,
        # the journal's applier (SQLite's default writer): its transactions are the batches
        "applies": m.get("stacko_store_applies_total"),
        "apply_batch_mean": round(m["stacko_store_applied_changes_total"] / applies, 1)
        if (applies := m.get("stacko_store_applies_total")) else None,
        "apply_mean_ms": round(1000 * m["stacko_store_apply_seconds_total"] / applies, 3)
        if applies else None,
    }  # fmt: skip


async def saturation(runs: int, matches: int, duration: float) -> dict[str, Any]:
    out: dict[str, list[Any]] = {"echo": [], "on": [], "off": []}
    for i in range(runs):
        e = await echo.measure(conns=matches, pace=0, duration=duration, warmup=1, quiet=True)
        out["echo"].append(e["round_trips_per_s"])
        for mode in ("on", "off") if i % 2 == 0 else ("off", "on"):
            argv = ["--matches", str(matches), "--duration", str(duration), "--warmup", "1",
                    "--options", "{}"] + ([OFF] if mode == "off" else [])  # fmt: skip
            g = await game(argv)
            out[mode].append({"moves_per_s": g["moves_per_s"], **store_figures(g)})
        progress(
            f"   run {i + 1}: echo {e['round_trips_per_s']:.0f} rt/s, store on "
            f"{out['on'][-1]['moves_per_s']:.0f} moves/s (batch {out['on'][-1]['batch_mean']}), "
            f"off {out['off'][-1]['moves_per_s']:.0f} moves/s"
        )
    echo_m = statistics.median(out["echo"])
    on = statistics.median(r["moves_per_s"] for r in out["on"])
    off = statistics.median(r["moves_per_s"] for r in out["off"])

    # Ratios per run (echo measured minutes apart drifts with the machine), then the median.
    def ratio(mode: str) -> float:
        pairs = zip(out[mode], out["echo"], strict=True)
        return float(statistics.median(r["moves_per_s"] / e for r, e in pairs))

    on_r, off_r = ratio("on"), ratio("off")
    return {
        "runs": out, "echo_rt_per_s": echo_m, "on_moves_per_s": on, "off_moves_per_s": off,
        "on_vs_echo": round(on_r, 3), "off_vs_echo": round(off_r, 3),
    }  # fmt: skip


async def light(runs: int, duration: float) -> dict[str, Any]:
    out: dict[str, list[Any]] = {"echo": [], "on": [], "off": []}
    opts = '{"turn_cap": 10, "rounds": 1}'
    for i in range(runs):
        e = await echo.measure(conns=100, pace=2.0, duration=duration, warmup=1, quiet=True)
        out["echo"].append(e["latency"])
        for mode in ("on", "off") if i % 2 == 0 else ("off", "on"):
            argv = ["--matches", "100", "--pace", "2", "--duration", str(duration),
                    "--warmup", "1", "--options", opts]  # fmt: skip
            argv += [OFF] if mode == "off" else []
            g = await game(argv)
            out[mode].append(g["latency_opponent"])
        progress(
            f"   run {i + 1}: echo p50/p99 {e['latency']['p50_ms']}/{e['latency']['p99_ms']} ms, "
            f"store on {out['on'][-1]['p50_ms']}/{out['on'][-1]['p99_ms']} ms, "
            f"off {out['off'][-1]['p50_ms']}/{out['off'][-1]['p99_ms']} ms"
        )

    def med(rows: list[dict[str, Any]], key: str) -> float:
        return float(statistics.median(r[key] for r in rows))

    res: dict[str, Any] = {"runs": out}
    for mode in ("echo", "on", "off"):
        res[f"{mode}_p50_ms"] = med(out[mode], "p50_ms")
        res[f"{mode}_p99_ms"] = med(out[mode], "p99_ms")
    res["on_p50_vs_echo"] = round(res["on_p50_ms"] / res["echo_p50_ms"], 3)
    return res


# -- what the store keeps ---------------------------------------------------------------------


def _room(
    hooks: RoomHooks, rng: random.Random, code: str, wire: dict[str, Any] | None = None
) -> Room:
    codec = CODECS["stacko"]
    options, clock = codec.options_from_wire(wire or {})
    room = Room(code, GAMES["stacko"], codec, options, clock, False, hooks)
    for name in ("ann", "bo"):
        session = Session(f"token-{rng.getrandbits(64)}", name)
        room.seat(Player(name, session=session))
        session.rooms[code] = room
    return room


def _random_move(room: Room, rng: random.Random) -> tuple[int, int, Any]:
    """A legal move of the game in progress, at random, as ``Room.move`` takes it: the seat
    to move, the ply, and the move's message."""
    codec = room.codec
    game = room.game
    assert game is not None
    seat = game.to_move
    assert seat is not None
    move = rng.choice(list(game.legal_moves()))
    return seat, game.ply, codec.move_model.model_validate(codec.move_to_wire(move))


def _play(room: Room, rng: random.Random, moves: int | None) -> None:
    game = room.game
    assert game is not None
    n = 0
    while game.outcome() is None and (moves is None or n < moves):
        room.move(*_random_move(room, rng), None)
        n += 1


async def disk(games: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        rng = random.Random(1)
        store, hooks = await _alternating_hooks(d, "on", lambda: random.Random(rng.getrandbits(64)))
        assert store is not None and isinstance(hooks.recorder, Recorder)
        recorder = hooks.recorder
        plies = 0
        for i in range(games):
            room = _room(hooks, rng, f"G{i:05d}")
            room.start()
            _play(room, rng, None)
            assert room.game is not None
            plies += room.game.ply
            recorder.room(room, False)  # its players leave: the room's row goes, as the hub's
            if i % 50 == 0:
                await store.flush()
        await store.flush()
        await recorder.compact()  # the log holds finished games until its next compaction
        # Pages in use: the log's freed pages stay in the file for the log's next rows.
        ((pages,),) = await store.fetch("PRAGMA page_count")
        ((free,),) = await store.fetch("PRAGMA freelist_count")
        ((page,),) = await store.fetch("PRAGMA page_size")
        await store.close()  # a final checkpoint: everything in the main file
        size = store.file_bytes()
    used = (pages - free) * page
    return {
        "games": games, "plies_per_game": round(plies / games, 1),
        "bytes_per_game": round(used / games), "bytes_per_ply": round(used / plies, 1),
        "file_bytes_per_game": round(size / games),
    }  # fmt: skip


async def _alternating_hooks(
    d: str, mode: str, rng_factory: Any
) -> tuple[SQLiteStore | None, RoomHooks]:
    """A round's room hooks: recorded into a SQLite file in ``d`` (``mode`` "on", with the
    server's writer, the journal's; each room's row written when its status changes, as the
    hub does: ``Hub._status_changed``) or not recorded at all ("off")."""
    store = SQLiteStore(d) if mode == "on" else None
    clock = FakeClock()
    if store is not None:
        await store.open()
    recorder = Recorder(store, clock) if store else None
    hooks = RoomHooks(clock=clock, schedule_soon=lambda cb: None, rng_factory=rng_factory,
                      on_empty=lambda r: None, recorder=recorder)  # fmt: skip
    if recorder is not None:
        hooks.on_status = recorder.room
    return store, hooks


async def held(games: int, moves: int, rounds: int) -> dict[str, Any]:
    """Memory per game in progress (tracemalloc, Python's allocations only): ``games`` rooms
    of the scale run's short games, each ``moves`` moves in, with the store on (a SQLite
    file, committed) and off, alternating; the rooms' players have sessions, no sockets.
    What the store adds per game: its ``GameRecord``, the game's events held packed, the
    ``RecordingRng``. The server's production RNG factory (one shared source)."""
    import gc
    import tracemalloc

    from stacko.server.rng import system_shuffle

    out: dict[str, list[float]] = {"on": [], "off": []}
    for r in range(rounds):
        for mode in ("on", "off") if r % 2 == 0 else ("off", "on"):
            rng = random.Random(7)
            with tempfile.TemporaryDirectory() as d:
                store, hooks = await _alternating_hooks(d, mode, system_shuffle)
                gc.collect()
                tracemalloc.start()
                before = tracemalloc.get_traced_memory()[0]
                rooms = [_room(hooks, rng, f"H{i:05d}", SHORT) for i in range(games)]
                for room in rooms:
                    room.start()
                    _play(room, rng, moves)
                if store is not None:
                    await store.flush()
                gc.collect()
                after = tracemalloc.get_traced_memory()[0]
                tracemalloc.stop()
                out[mode].append(round((after - before) / games))
                del rooms
                if store is not None:
                    await store.close()
    on, off = statistics.median(out["on"]), statistics.median(out["off"])
    return {"games": games, "moves": moves, "runs_bytes_per_game": out,
            "on_bytes_per_game": on, "off_bytes_per_game": off,
            "store_bytes_per_game": on - off}  # fmt: skip


async def recovery(games: int, moves: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        store = SQLiteStore(d)
        await store.open()
        clock = FakeClock()
        rng = random.Random(2)
        hooks = RoomHooks(clock=clock, rng_factory=lambda: random.Random(rng.getrandbits(64)),
                          schedule_soon=lambda cb: None, on_empty=lambda r: None,
                          recorder=Recorder(store, clock))  # fmt: skip
        started = time.perf_counter()
        for i in range(games):
            room = _room(hooks, rng, f"R{i:05d}")
            room.start()
            _play(room, rng, moves)
            if i % 200 == 0:
                await store.flush()
        await store.flush()
        write_s = time.perf_counter() - started
        await store.close()
        size = store.file_bytes()
        again = SQLiteStore(d)
        hub = Hub(ServerConfig(), FakeClock(), schedule_soon=lambda cb: None)
        started = time.perf_counter()
        await again.open()
        hub._hooks.recorder = Recorder(again, hub.clock)
        restored = await recover(hub, again, hub._hooks.recorder)
        took = time.perf_counter() - started
        await again.close()
    return {"games": restored, "moves_each": moves, "recover_s": round(took, 2),
            "per_game_ms": round(1000 * took / max(1, restored), 3),
            "write_s": round(write_s, 2), "file_bytes": size}  # fmt: skip


def _raw(path: Path) -> sqlite3.Connection:
    """The store's file, as the loop writer opens it, with no checkpoint but ours."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    return conn


async def writes(games: int, batch: int, commits: int, rounds: int) -> dict[str, Any]:
    """The commit's cost per change and WAL pages written per change, for changes of
    ``games`` games in progress, ``batch`` of them per commit (as at saturation): each into
    the log (schema 3) and each keyed by ``(game_id, seq)`` in ``events`` (schema 2's
    way), alternating, in the same file. Pages are the WAL frames of each round (the WAL
    truncated before it)."""
    with tempfile.TemporaryDirectory() as d:
        store = SQLiteStore(d)
        await store.open()
        await store.close()
        conn = _raw(store.path)
        rng = random.Random(3)
        ids = [f"{rng.getrandbits(64):016x}" for _ in range(games)]
        seq = dict.fromkeys(ids, 0)
        payload = '{"move":{"kind":"take","index":3},"deadline_ms":1764000000000}'
        out: dict[str, list[dict[str, float]]] = {"log": [], "keyed": []}
        for r in range(rounds):
            for mode in ("log", "keyed") if r % 2 == 0 else ("keyed", "log"):
                sql = LOG_SQL if mode == "log" else EVENT_SQL
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                took = 0.0
                for _ in range(commits):
                    rows = []
                    for gid in rng.sample(ids, batch):
                        seq[gid] += 1
                        rows.append((gid, seq[gid], "move", 0, seq[gid], payload, 1764000000000))
                    t = time.perf_counter()
                    conn.execute("BEGIN")
                    conn.executemany(sql, rows)
                    conn.execute("COMMIT")
                    took += time.perf_counter() - t
                frames = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
                n = commits * batch
                out[mode].append({"us_per_change": round(1e6 * took / n, 2),
                                  "pages_per_change": round(frames / n, 3)})  # fmt: skip
        conn.close()
    res: dict[str, Any] = {"games": games, "batch": batch, "commits": commits, "runs": out}
    for mode in out:
        for key in ("us_per_change", "pages_per_change"):
            res[f"{mode}_{key}"] = statistics.median(x[key] for x in out[mode])
    return res


async def _alternating_rooms(
    runs: int, rng: random.Random, games: int, prefix: str, options: dict[str, Any] | None
) -> AsyncIterator[tuple[str, list[Room]]]:
    """``runs`` rounds of store on and off (which goes first alternating): each mode with
    ``games`` rooms begun (``_room``), recorded into a SQLite file in a temporary directory
    or not at all; the store is flushed and closed once the caller is done with them."""
    for r in range(runs):
        for mode in ("on", "off") if r % 2 == 0 else ("off", "on"):
            with tempfile.TemporaryDirectory() as d:
                store, hooks = await _alternating_hooks(
                    d, mode, lambda: random.Random(rng.getrandbits(64))
                )
                rooms = [_room(hooks, rng, f"{prefix}{i:05d}", options) for i in range(games)]
                for room in rooms:
                    room.start()
                yield mode, rooms
                if store is not None:
                    await store.flush()
                    await store.close()


async def path(
    games: int, batch: int, moves: int, rounds: int, options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The store's CPU per move in process, without sockets (a shared machine's network
    noise out of the way): ``games`` rooms, ``batch`` moves of as many of them per loop
    turn, recorded into a SQLite file or not recorded at all, alternating; CPU time of the
    moves and their commits, and of the rematch where a game ended (both players ask, as
    in the scale run: the first ask is a change, the second starts the next game).
    ``options`` of short games, as the scale run's, make game ends and starts a large part
    of it."""
    out: dict[str, list[float]] = {"on": [], "off": []}
    rng = random.Random(5)
    async for mode, rooms in _alternating_rooms(rounds, rng, games, "P", options):
        done = 0
        cpu = 0.0
        while done < moves:
            t = time.process_time()
            for room in rng.sample(rooms, batch):
                game = room.game
                assert game is not None
                if game.outcome() is not None:
                    room.ask_rematch(0, None)
                    room.ask_rematch(1, None)
                    continue
                _play(room, rng, 1)
                done += 1
            await asyncio.sleep(0)  # the loop writer's commit
            cpu += time.process_time() - t
        out[mode].append(round(1e6 * cpu / done, 2))
    on, off = statistics.median(out["on"]), statistics.median(out["off"])
    return {"games": games, "batch": batch, "moves": moves, "runs_us_per_move": out,
            "on_us_per_move": on, "off_us_per_move": off,
            "store_us_per_move": round(on - off, 2)}  # fmt: skip


PHASES = ("move", "last_move", "rematch_ask", "next_game")


async def phases(games: int, rounds: int, runs: int) -> dict[str, Any]:
    """``games`` rooms of short games (``SHORT``), each played to its end and rematched
    ``rounds`` times; the wall time of each ``Room`` call by what it does (``PHASES``), per
    call, store on against off (alternating ``runs`` times each, medians). Warm caches, no
    sockets: the scale step's own figures are larger (``bench/README.md``)."""
    out: dict[str, dict[str, list[float]]] = {m: {p: [] for p in PHASES} for m in ("on", "off")}
    rng = random.Random(7)
    now = time.perf_counter_ns
    async for mode, rooms in _alternating_rooms(runs, rng, games, "Q", SHORT):
        ns = dict.fromkeys(PHASES, 0)
        calls = dict.fromkeys(PHASES, 0)
        for _ in range(rounds):
            for room in rooms:
                game = room.game
                assert game is not None
                while game.outcome() is None:
                    seat, ply, msg = _random_move(room, rng)
                    t = now()
                    room.move(seat, ply, msg, None)
                    dt = now() - t
                    phase = "move" if game.outcome() is None else "last_move"
                    ns[phase] += dt
                    calls[phase] += 1
                for seat, phase in ((0, "rematch_ask"), (1, "next_game")):
                    t = now()
                    room.ask_rematch(seat, None)
                    ns[phase] += now() - t
                    calls[phase] += 1
            await asyncio.sleep(0)
        for phase in PHASES:
            out[mode][phase].append(round(ns[phase] / calls[phase] / 1000, 2))
    res: dict[str, Any] = {"games": games, "rounds": rounds, "runs_us": out}
    for phase in PHASES:
        on = round(statistics.median(out["on"][phase]), 2)
        off = round(statistics.median(out["off"][phase]), 2)
        res[phase] = {"on_us": on, "off_us": off, "store_us": round(on - off, 2)}
    return res


LISTINGS = {
    "none": {},
    "player=UNKNOWN": {"player": "nobody-by-that-name"},
    "player=busy": {"player": "easy (bot)"},
    "player=rare": {"player": "p77"},
    "game=stakko": {"game": "stakko"},
    "result=draw": {"result": "draw"},
    "code": {"code": "R0000042"},
    "game+player=UNKNOWN": {"game": "stacko", "player": "nobody-by-that-name"},
    "player=busy+result=resignation": {"player": "easy (bot)", "result": "resignation"},
}


async def listing(games: int, repeat: int = 5) -> dict[str, Any]:
    """``GET /api/games``'s query for each filter, best of ``repeat``, over ``games``
    finished games (a third played by one bot, the rest between 1,000 names; one game in
    ten of Stakko, one in twenty a draw, one in ten resigned)."""
    from stacko.server.store.base import Filters

    with tempfile.TemporaryDirectory() as d:
        store = SQLiteStore(d)
        await store.open()
        await store.close()
        conn = _raw(store.path)
        rng = random.Random(4)
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO games (id, code, game, variant, options, rules_version, public, "
            "players, player0, player1, status, result, winner, termination, started_ms, "
            "ended_ms, plies) VALUES (?, ?, ?, NULL, '{}', 1, 1, '[]', ?, ?, 'finished', "
            "'{}', ?, ?, 0, ?, 40)",
            (
                (
                    f"{i:016x}", f"R{i % 100_000:07d}", "stakko" if i % 10 == 0 else "stacko",
                    "easy (bot)" if i % 3 == 0 else f"p{rng.randrange(1000)}",
                    f"p{rng.randrange(1000)}", None if i % 20 == 0 else i % 2,
                    "resignation" if i % 10 == 1 else "completed", 1_700_000_000_000 + i,
                )
                for i in range(games)
            ),
        )  # fmt: skip
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        store = SQLiteStore(d)
        await store.open()
        res: dict[str, Any] = {"games": games}
        for name, f in LISTINGS.items():
            best = float("inf")
            for _ in range(repeat):
                t = time.perf_counter()
                await store.list_finished(Filters(**f))
                best = min(best, time.perf_counter() - t)
            res[f"{name}_ms"] = round(1000 * best, 3)
        # Schema 2's query and index for an unknown player, on the same file, for comparison.
        await store.execute(
            [(f"DROP INDEX {name}", ()) for name in ("games_by_player0", "games_by_player1")]
            + [("CREATE INDEX games_finished ON games (status, ended_ms, id)", ())]
        )
        old = (
            f"SELECT {store.GAME_COLUMNS} FROM games WHERE status = 'finished' AND "
            "(player0 = ? OR player1 = ?) ORDER BY ended_ms DESC, id DESC LIMIT 21"
        )
        best = float("inf")
        for _ in range(repeat):
            t = time.perf_counter()
            await store.fetch(old, ("nobody-by-that-name", "nobody-by-that-name"))
            best = min(best, time.perf_counter() - t)
        res["schema2_player=UNKNOWN_ms"] = round(1000 * best, 3)
        await store.close()
    return res


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    only = set(args.only.split(",")) if args.only else set(ALL)
    res: dict[str, Any] = {"started": time.strftime("%F %T")}
    d = 4.0 if args.quick else 10.0
    if "saturation" in only:
        progress(f"== saturation, {args.matches} matches, store on vs off, {args.runs} runs")
        res["saturation"] = await saturation(args.runs, args.matches, d)
    if "light" in only:
        progress(f"== light load, 100 matches at pace 2, store on vs off, {args.runs} runs")
        res["light"] = await light(args.runs, 8.0 if args.quick else 20.0)
    if "disk" in only:
        progress("== bytes on disk per finished game")
        res["disk"] = await disk(100 if args.quick else 1000)
    if "recovery" in only:
        n = 1000 if args.quick else 10_000
        progress(f"== recovery of {n} games in progress")
        res["recovery"] = await recovery(n, 20)
    if "writes" in only:
        progress("== the commit's cost per change: the log against a key per game")
        res["writes"] = await writes(50, 20, 200 if args.quick else 1000, 2 if args.quick else 6)
    if "path" in only:
        progress("== the store's CPU per move in process (no sockets), on vs off")
        res["path"] = await path(50, 20, 4000 if args.quick else 20_000, 3 if args.quick else 6)
    if "held" in only:
        progress("== memory per game in progress (short games, 6 moves in), store on vs off")
        res["held"] = await held(500 if args.quick else 2000, 6, 2 if args.quick else 4)
    if "path_short" in only:
        progress(f"== the same with short games ({SHORT}), as in the scale run")
        n = 4000 if args.quick else 20_000
        res["path_short"] = await path(50, 20, n, 3 if args.quick else 6, SHORT)
    if "path_cold" in only:
        games = 1000 if args.quick else 5000
        progress(f"== the same with {games} rooms (each move's game out of the caches)")
        n = 12_000 if args.quick else 60_000
        res["path_cold"] = await path(games, 20, n, 2 if args.quick else 4, SHORT)
    if "phases" in only:
        progress(f"== the store's cost by a game's phase ({SHORT}), on vs off")
        res["phases"] = await phases(
            100 if args.quick else 300, 5 if args.quick else 20, 2 if args.quick else 6
        )
    if "listing" in only:
        n = 50_000 if args.quick else 500_000
        progress(f"== GET /api/games's query per filter, {n:,} finished games")
        res["listing"] = await listing(n)
    return res


ALL = (
    "saturation", "light", "disk", "recovery", "writes", "path", "path_short", "path_cold",
    "held", "phases", "listing",
)  # fmt: skip
SHORT = {"turn_cap": 10, "rounds": 1}
"""``bench/run_all.py``'s scale run plays these (``SHORT_GAMES``): about 13 events a game."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--matches", type=int, default=50)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="", help="comma list of: " + ",".join(ALL))
    args = ap.parse_args()
    res = asyncio.run(main_async(args))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
