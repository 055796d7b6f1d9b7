"""What the opponent's state frame waits for: the server's time from a move's arrival to the
first byte of its first state frame handed to the kernel, cut at the boundaries where
interpreted code meets the rest, under light load (where every step runs with cold caches).

    python bench/critical_path.py                          # 100 matches, a move per 2 s each, 20 s
    python bench/critical_path.py --options '{"clock_ms": 60000}'   # clocked rooms
    python bench/critical_path.py --matches 5000 --store           # the scale step, store on
    python bench/critical_path.py --matches 5000 --busy-us 9       # store off, 9 us per change

An in-process server (the ``stacko-server`` set-up: paced collector, rate limits lifted) is
timed with ``perf_counter_ns`` marks put around functions it calls through attributes, so the
compiled modules stay as they are: the selector's ``select`` returning, ``data_received`` of
the WebSocket connection, the frame handed to the connection, the parse, the codec's
``move_from_wire`` / ``describe`` / ``view_json`` / ``legal_json``, and the first
``transport.write`` of that turn (with its duration: the send that wakes the receiver).
``bench/loadgen.py --no-baseline`` plays against it in a subprocess; its latency is printed
beside. Each mark costs about half a microsecond. asyncio's default loop only.

The server has no store unless ``--store`` gives it the default one (SQLite and its journal,
in a temporary directory). ``--busy-us N`` instead records every change with a stand-in that
only keeps the loop busy for N microseconds, where the store's recorder works (before the
change's frames): how the latency the load generator sees answers to work on that path,
whatever the work is (``bench/README.md``, "What a microsecond of the store costs at the
scale step").
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repo, not bench/, goes on sys.path
    sys.path[0:1] = [str(Path(__file__).resolve().parent.parent)]

import asyncio.selector_events as selector_events

from bench.patches import Patches
from bench.wsclient import HelpFormatter, percentiles
from stacko.protocol import messages
from stacko.protocol.games import CODECS
from stacko.server import wsconn
from stacko.server.app import Server
from stacko.server.config import ServerConfig
from stacko.server.gcpacer import GcPacer
from stacko.server.store import make_store

MARKS = (
    ("select", "the selector returned"),
    ("data", "data_received"),
    ("frame", "a whole frame handed to the connection"),
    ("parse", "parse_client called"),
    ("parsed", "parse_client returned"),
    ("dispatched", "hub and room checks done: move_from_wire called"),
    ("applied", "move applied, opponent's view built: describe called"),
    ("described", "text built"),
    ("view", "view_json called"),
    ("view_done", "view_json returned"),
    ("legal", "legal_json called"),
    ("encoded", "legal_json returned"),
    ("write", "first transport.write of the turn called"),
    ("written", "it returned (the send that wakes the receiver)"),
)


class Recorder:
    """Marks of the move being handled now; a move's marks are kept once it was written."""

    def __init__(self) -> None:
        self.now = time.perf_counter_ns
        self.select = 0
        self.data = 0
        self.current: dict[str, int] = {}
        self.moves: list[dict[str, int]] = []
        self.patches = Patches()
        """What ``install`` wrapped (``patches.undo()`` puts it back)."""

    def mark(self, name: str) -> None:
        if self.current and name not in self.current:
            self.current[name] = self.now()

    def install(self) -> None:
        """Wrap each boundary (class and module attributes; ``patches.undo()`` puts them back)."""
        rec = self
        probe = selectors.DefaultSelector()
        selector_class: Any = type(probe)
        probe.close()
        select = selector_class.select

        def timed_select(self: Any, timeout: float | None = None) -> Any:
            events = select(self, timeout)
            rec.select = rec.now()
            return events

        self.patches.replace(selector_class, "select", timed_select)
        data_received = wsconn.DirectServerConnection.data_received

        def timed_data(self: Any, data: bytes) -> None:
            rec.data = rec.now()
            data_received(self, data)

        self.patches.replace(wsconn.DirectServerConnection, "data_received", timed_data)
        deliver = wsconn.DirectServerConnection._deliver

        def timed_deliver(self: Any, callback: Callable[[Any], None], data: str | bytes) -> None:
            rec.current = {"select": rec.select, "data": rec.data, "frame": rec.now()}
            try:
                deliver(self, callback, data)
            finally:
                if "written" in rec.current and "dispatched" in rec.current:
                    rec.moves.append(rec.current)
                rec.current = {}

        self.patches.replace(wsconn.DirectServerConnection, "_deliver", timed_deliver)
        parse = messages.parse_client

        def timed_parse(data: str | bytes) -> messages.ClientMessage:
            rec.mark("parse")
            msg = parse(data)
            rec.mark("parsed")
            return msg

        self.patches.replace(messages, "parse_client", timed_parse)
        codec = CODECS["stacko"]
        for attr, before, after in (
            ("move_from_wire", "dispatched", ""),
            ("describe", "applied", "described"),
            ("view_json", "view", "view_done"),
            ("legal_json", "legal", "encoded"),
        ):
            self.patches.replace(codec, attr, self._wrap(getattr(codec, attr), before, after))
        write = selector_events._SelectorSocketTransport.write

        def timed_write(self: Any, data: Any) -> None:
            rec.mark("write")  # marks only the turn's first write (``mark`` keeps the first)
            write(self, data)
            rec.mark("written")

        self.patches.replace(selector_events._SelectorSocketTransport, "write", timed_write)

    def _wrap(self, fn: Callable[..., Any], before: str, after: str) -> Callable[..., Any]:
        def timed(*args: Any) -> Any:
            self.mark(before)
            out = fn(*args)
            if after:
                self.mark(after)
            return out

        return timed

    def segments(self) -> list[dict[str, Any]]:
        """Each step between consecutive marks (microseconds), and the whole path."""
        out = []
        for (a, _), (b, what) in itertools.pairwise(MARKS):
            samples = [(m[b] - m[a]) / 1e9 for m in self.moves if a in m and b in m]
            out.append({"from": a, "to": b, "what": what, **_us(samples)})
        whole = [(m["write"] - m["select"]) / 1e9 for m in self.moves if "write" in m]
        out.append({"from": "select", "to": "write", "what": "the whole wait", **_us(whole)})
        return out


def _us(samples: list[float]) -> dict[str, Any]:
    p = percentiles(samples, (50, 90))
    return {
        "count": p["count"],
        **{f"p{q}_us": round(1000 * p[f"p{q}_ms"], 1) if p["count"] else None for q in (50, 90)},
    }


class Busy:
    """A recorder (``server.room.Recorder``) that keeps nothing and only keeps the loop busy
    for ``seconds`` per change, where the store's recorder works."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.changes = 0

    def begin(self, room: Any, rng: Any) -> Any:
        return rng

    def room(self, room: Any, open_: bool = True) -> None:
        pass

    def record(self, room: Any, kind: str, seat: Any, move: Any, termination: Any) -> None:
        self.changes += 1
        end = time.perf_counter() + self.seconds
        while time.perf_counter() < end:
            pass


async def measure(
    matches: int,
    pace: float,
    duration: float,
    options: str,
    *,
    warmup: float = 1.0,
    gc_interval_s: float = 0.25,
    store: bool = False,
    busy_us: float = 0.0,
) -> dict[str, Any]:
    """``gc_interval_s`` 0: CPython's own collector instead of the server's paced one."""
    rec = Recorder()
    try:
        rec.install()
        return await _measure(
            rec, matches, pace, duration, options, warmup, gc_interval_s, store, busy_us
        )
    finally:
        rec.patches.undo()


async def _measure(
    rec: Recorder,
    matches: int,
    pace: float,
    duration: float,
    options: str,
    warmup: float,
    gc_interval_s: float,
    with_store: bool,
    busy_us: float,
) -> dict[str, Any]:
    data = tempfile.TemporaryDirectory(prefix="stacko-critical-") if with_store else None
    store = make_store("sqlite", data.name) if data is not None else None
    server = Server(
        ServerConfig(
            host="127.0.0.1", port=0, rate_per_second=1_000_000, burst=1_000_000,
            hello_rate_per_ip=1_000_000, hello_burst_per_ip=1_000_000, max_connections_per_ip=0,
            max_waiting_per_ip=0,
        ),
        store=store,
    )  # fmt: skip
    busy = Busy(busy_us / 1e6)
    if busy_us > 0:
        server.hub._hooks.recorder = busy
    commits = 0
    pacer = None
    proc = None
    try:
        await server.start()
        if gc_interval_s > 0:
            pacer = GcPacer(
                gc_interval_s, asyncio.get_running_loop().call_later,
                departures=server.departures,
            )  # fmt: skip
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
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=duration + 120)
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()  # timed out: the load generator goes too
            await proc.wait()
        if pacer is not None:
            pacer.stop()
        if store is not None:
            commits = store.stats.commits
        await server.shutdown()  # (closes the store)
        if data is not None:
            data.cleanup()
    client = json.loads(out)
    lat = client["latency_opponent"]
    return {
        "bench": "critical_path",
        "matches": matches,
        "pace_s": pace,
        "store": with_store,
        "store_commits": commits,
        "busy_us": busy_us,
        "busy_changes": busy.changes,
        "moves_timed": len(rec.moves),
        "client_move_to_opponent": {k: lat[k] for k in ("count", "p50_ms", "p99_ms")},
        "segments": rec.segments(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--matches", type=int, default=100)
    ap.add_argument("--pace", type=float, default=2.0, help="seconds between a match's moves")
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--options", default='{"turn_cap": 10, "rounds": 1}', help="room options")
    ap.add_argument(
        "--store", action="store_true",
        help="the default store (SQLite and its journal, in a temporary directory), not none",
    )  # fmt: skip
    ap.add_argument(
        "--busy-us", type=float, default=0.0,
        help="no store: a stand-in that keeps the loop busy this long per change, where the "
        "store's recorder works",
    )  # fmt: skip
    args = ap.parse_args(argv)
    if args.store and args.busy_us:
        ap.error("--store and --busy-us exclude each other")
    run = measure(
        args.matches, args.pace, args.duration, args.options,
        store=args.store, busy_us=args.busy_us,
    )  # fmt: skip
    res = asyncio.run(run)
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
