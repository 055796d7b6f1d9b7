"""Where a move's frames wait with the SQLite store under many connections: each loop turn's
commit, cut into its parts, and what each kind of transaction and statement costs.

    python bench/store_turns.py                                 # 5,000 matches, 25 s
    python bench/store_turns.py --writer thread                 # the writer thread instead
    python bench/store_turns.py --no-store                      # the same load, no store

An in-process server (the ``stacko-server`` set-up, rate limits lifted, a fresh data
directory) plays ``bench/loadgen.py`` in a subprocess at one move per match every 2 s with
the scale run's short games. Marks (``perf_counter_ns``, put around the store's pure-Python
methods, so the compiled modules stay as they are):

- per commit (the loop writer only): from the first change of the turn (``Store.submit``)
  to the commit's start (the rest of the turn, which that change's frames wait through),
  the transaction, and the release of the held frames (their socket writes);
- per transaction, by what it holds: moves only, a game's end, a game's start, both, other;
- per statement: calls, rows and time (``BEGIN`` and ``COMMIT`` apart);
- the server thread's user and system CPU (``/proc/self/task``), and the client's
  move-to-opponent latency and the server's CPU per move, as ``loadgen.py`` reports them.

The marks cost about a microsecond per commit, so compare store on and off in alternating
runs, not against figures from other tools. Loopback only; stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repo, not bench/, goes on sys.path
    sys.path[0:1] = [str(Path(__file__).resolve().parent.parent)]

from bench.patches import Patches
from bench.wsclient import HelpFormatter
from stacko.server.app import Server
from stacko.server.config import ServerConfig
from stacko.server.gcpacer import GcPacer
from stacko.server.store import base, make_store
from stacko.server.store import sqlite as sqlite_store

SHORT_GAMES = '{"turn_cap": 10, "rounds": 1}'


class Marks:
    """What the wrapped methods saw (microseconds)."""

    def __init__(self) -> None:
        self.now = time.perf_counter_ns
        self.first = 0
        self.commits: list[tuple[float, float, float, int]] = []
        """(first change -> commit start, transaction, release, changes) per commit."""
        self.tx_by_kind: dict[str, list[tuple[float, int]]] = {}
        self.statements: dict[str, list[float]] = {}
        self.rows: dict[str, int] = {}
        self.release = 0.0
        self.pending: tuple[float, float, int] | None = None
        self.patches = Patches()
        """What ``install`` wrapped (``patches.undo()`` puts it back)."""

    def install(self) -> None:
        marks = self
        submit = base.Store.submit

        def timed_submit(store: base.Store, ops: Any) -> None:
            if not marks.first:
                marks.first = marks.now()
            submit(store, ops)

        committed = base.Store._committed

        def timed_committed(store: base.Store, *args: Any) -> None:
            started = marks.now()
            committed(store, *args)
            marks.release = (marks.now() - started) / 1e3

        def timed_transaction(conn: Any, batch: Any) -> int:
            started = marks.now()
            first, marks.first = marks.first or started, 0
            statements = marks.transaction(conn, batch)
            took = (marks.now() - started) / 1e3
            marks.tx_by_kind.setdefault(_kind(batch), []).append((took, len(batch)))
            marks.pending = ((started - first) / 1e3, took, len(batch))
            return statements

        commit_pending = sqlite_store.SQLiteStore._commit_pending

        def timed_commit_pending(store: sqlite_store.SQLiteStore) -> None:
            marks.pending = None
            marks.release = 0.0
            commit_pending(store)
            if marks.pending is not None:
                wait, took, changes = marks.pending
                marks.commits.append((wait, took, marks.release, changes))

        self.patches.replace(base.Store, "submit", timed_submit)
        self.patches.replace(base.Store, "_committed", timed_committed)
        self.patches.replace(sqlite_store, "_transaction", timed_transaction)
        self.patches.replace(sqlite_store.SQLiteStore, "_commit_pending", timed_commit_pending)

    def transaction(self, conn: Any, batch: Any) -> int:
        """``sqlite._transaction`` with each statement timed."""
        n = 0
        self._timed("BEGIN", 1, conn.execute, "BEGIN")
        for sql, rows in base.runs(batch):
            self._timed(" ".join(sql.split()[:3]), len(rows), conn.executemany, sql, rows)
            n += len(rows)
        self._timed("COMMIT", 1, conn.execute, "COMMIT")
        return n

    def _timed(self, name: str, rows: int, fn: Any, *args: Any) -> None:
        started = self.now()
        fn(*args)
        self.statements.setdefault(name, []).append((self.now() - started) / 1e3)
        self.rows[name] = self.rows.get(name, 0) + rows


def _kind(batch: Any) -> str:
    sqls = [sql for _, ops in batch for sql, _ in ops]
    end = any(s.startswith("UPDATE games SET status = 'finished'") for s in sqls)
    start = any(s.startswith("INSERT INTO games ") for s in sqls)
    if end or start:
        return "end+start" if end and start else "end" if end else "start"
    return "moves" if all(s.startswith("INSERT INTO event_log") for s in sqls) else "other"


def _summary(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    if not xs:
        return {"n": 0}
    return {
        "n": len(xs),
        "mean": round(sum(xs) / len(xs), 1),
        "p50": round(xs[len(xs) // 2], 1),
        "p90": round(xs[int(len(xs) * 0.9)], 1),
        "p99": round(xs[int(len(xs) * 0.99)], 1),
    }


def _mean(xs: list[int]) -> float:
    return round(sum(xs) / len(xs), 1)


def _thread_cpu() -> list[dict[str, float]]:
    tick = os.sysconf("SC_CLK_TCK")
    out = []
    for task in sorted(Path("/proc/self/task").iterdir()):
        try:
            stat = (task / "stat").read_text()
        except FileNotFoundError:  # a thread (a pool's, say) that ended meanwhile
            continue
        fields = stat.rsplit(")", 1)[1].split()
        out.append({"user_s": int(fields[11]) / tick, "sys_s": int(fields[12]) / tick})
    return [t for t in out if t["user_s"] + t["sys_s"] > 0]


async def measure(
    matches: int = 5000,
    duration: float = 25.0,
    *,
    pace: float = 2.0,
    warmup: float = 5.0,
    options: str = SHORT_GAMES,
    writer: str = "loop",
    no_store: bool = False,
) -> dict[str, Any]:
    marks = Marks()
    data = tempfile.mkdtemp(prefix="stacko-store-turns-")
    store = None if no_store else make_store("sqlite", data, "normal", writer)
    server = Server(
        ServerConfig(
            host="127.0.0.1", port=0, rate_per_second=1_000_000, burst=1_000_000,
            hello_rate_per_ip=1_000_000, hello_burst_per_ip=1_000_000, max_connections_per_ip=0,
            max_waiting_per_ip=0, data_dir=data,
        ),
        store=store,
    )  # fmt: skip
    marks.install()
    pacer = None
    proc = None
    try:
        await server.start()
        pacer = GcPacer(0.25, asyncio.get_running_loop().call_later, departures=server.departures)
        pacer.start()
        argv = [
            sys.executable, str(Path(__file__).with_name("loadgen.py")), "--url", server.url,
            "--server-pid", str(os.getpid()), "--matches", str(matches), "--pace", str(pace),
            "--duration", str(duration), "--warmup", str(warmup), "--options", options,
            "--no-baseline", "--quiet",
        ]  # fmt: skip
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=duration + 180)
        threads = _thread_cpu()
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        if pacer is not None:
            pacer.stop()
        await server.shutdown()
        marks.patches.undo()
        shutil.rmtree(data, ignore_errors=True)
    client = json.loads(out)
    commits = marks.commits[len(marks.commits) // 5 :]  # past the set-up's big batches
    return {
        "bench": "store_turns",
        "store": "off" if no_store else writer,
        "latency_opponent": client["latency_opponent"],
        "server_cpu_us_per_move": client["server"].get("cpu_us_per_move"),
        "threads_cpu": threads,
        "per_commit_us": {
            "rest_of_turn": _summary([c[0] for c in commits]),
            "transaction": _summary([c[1] for c in commits]),
            "release": _summary([c[2] for c in commits]),
            "changes": _summary([float(c[3]) for c in commits]),
        },
        "transactions_us": {
            kind: {**_summary([t for t, _ in v]), "changes_per_tx": _mean([n for _, n in v])}
            for kind, v in sorted(marks.tx_by_kind.items())
        },
        "statements": {
            name: {
                "calls": len(v),
                "rows": marks.rows[name],
                "total_ms": round(sum(v) / 1e3, 1),
                "us_per_row": round(sum(v) / marks.rows[name], 1),
            }
            for name, v in sorted(marks.statements.items(), key=lambda kv: -sum(kv[1]))
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--matches", type=int, default=5000)
    ap.add_argument("--duration", type=float, default=25.0, help="seconds of play")
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--pace", type=float, default=2.0, help="seconds between a match's moves")
    ap.add_argument("--options", default=SHORT_GAMES, help="room options (JSON)")
    ap.add_argument("--writer", choices=["loop", "thread"], default="loop")
    ap.add_argument("--no-store", action="store_true", help="the same load without a store")
    args = ap.parse_args(argv)
    res = measure(
        args.matches, args.duration, pace=args.pace, warmup=args.warmup, options=args.options,
        writer=args.writer, no_store=args.no_store,
    )  # fmt: skip
    print(json.dumps(asyncio.run(res), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
