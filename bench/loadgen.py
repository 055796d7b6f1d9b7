"""Load generator: M concurrent Stacko matches (2M WebSocket connections) through the real protocol.

    python bench/loadgen.py --matches 100 --pace 0 --duration 20        # saturation
    python bench/loadgen.py --matches 100 --pace 2 --duration 30        # light load, latency
    python bench/loadgen.py --matches 10000 --pace 2 --procs 2 --duration 60   # scale

Each match: two connections say hello, one creates a room (``--options``, e.g.
'{"turn_cap": 30, "rounds": 1}'), the other joins; each player plays a random move from the
``legal`` list of its state frame with that frame's ply; when a game is over both ask for a
rematch and the next game starts in the same room. ``--pace 0`` moves as soon as a player
may (one move in flight per match: a closed loop); ``--pace T`` makes one move every T
seconds per match (the first at a random offset).

Reported (JSON on stdout; a progress line every 2 s on stderr): connections held, matches
and games completed, moves/s, move-to-opponent latency p50/p95/p99/max (perf_counter from
sending a move to the OPPONENT's connection receiving the resulting state frame; both are in
the same process), the mover's own round trip, errors by code, disconnects, the server's RSS
(idle, loaded, peak) and RSS per connection, the server's and the client's CPU use, the
server's own view from ``/metrics``, and the same figures for the echo baseline and the relay
ceiling (``bench/echo.py``: the game's frame pattern with no game) measured in this run with
the same client code, as ratios (``--no-baseline`` to skip both).

Without ``--url`` the tool starts ``--servers`` server processes itself (rate limits lifted,
file limit raised) and stops them at the end; with ``--url`` (repeatable) give
``--server-pid`` to get RSS and CPU figures. Loopback only. Everything stops by itself after
``--duration`` seconds of play (plus set-up, bounded by a timeout, and a clean close).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repo, not bench/, goes on sys.path
    sys.path[0:1] = [str(Path(__file__).resolve().parent.parent)]

from bench import driver, echo
from bench.wsclient import (
    HelpFormatter,
    http_get,
    parse_prometheus,
    parse_url,
    proc_cpu,
    proc_status,
    progress,
    raise_nofile,
    start_server,
    stop_process,
)


def histogram_quantile(buckets: list[tuple[float, float]], q: float) -> float | None:
    """Upper bound (seconds) of the bucket holding quantile ``q`` of a cumulative histogram."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    target = q * buckets[-1][1]
    for le, count in buckets:
        if count >= target:
            return le
    return buckets[-1][0]


def server_view(pages: list[str]) -> dict[str, Any]:
    """The server's own figures from its /metrics page(s), summed over servers."""
    total: dict[str, float] = {}
    for page in pages:
        for key, value in parse_prometheus(page).items():
            # summed over servers, but a maximum stays a maximum
            merge = max if key.endswith("_max_seconds") else float.__add__
            total[key] = merge(total.get(key, 0.0), value)
    out: dict[str, Any] = {}
    for key, value in total.items():
        if key.startswith("stacko_") and "_bucket" not in key and "_created" not in key:
            out[key] = value
    buckets = sorted(
        (float(key.split('le="')[1].split('"')[0]), value)
        for key, value in total.items()
        if key.startswith("stacko_move_processing_seconds_bucket")
    )
    count = total.get("stacko_move_processing_seconds_count", 0.0)
    if count:
        out["move_processing_mean_ms"] = round(
            1000 * total.get("stacko_move_processing_seconds_sum", 0.0) / count, 4
        )
        for q in (0.5, 0.99):
            v = histogram_quantile(buckets, q)
            out[f"move_processing_p{int(q * 100)}_le_ms"] = None if v is None else v * 1000
    return out


async def run_load(args: argparse.Namespace) -> dict[str, Any]:
    options = json.loads(args.options)
    loop = None if args.loop == "asyncio" else args.loop
    result: dict[str, Any] = {
        "config": {
            "matches": args.matches, "connections": 2 * args.matches, "pace_s": args.pace,
            "duration_s": args.duration, "warmup_s": args.warmup, "procs": args.procs,
            "servers": len(args.url) or args.servers, "options": options, "loop": args.loop,
        },
    }  # fmt: skip
    result["nofile"] = raise_nofile()
    progress(f"client RLIMIT_NOFILE: {result['nofile']}")

    if args.baseline:
        progress("echo baseline ...")
        result["echo"] = await echo.measure(
            conns=args.matches, pace=args.pace, duration=args.baseline_duration,
            warmup=min(args.warmup, args.baseline_duration / 4), procs=args.procs,
            servers=len(args.url) or args.servers, loop=loop, quiet=args.quiet,
        )  # fmt: skip
        progress("relay ceiling (the game's frames, no game) ...")
        result["relay"] = await echo.measure(
            conns=args.matches, kind="relay", pace=args.pace,
            duration=args.baseline_duration, warmup=min(args.warmup, args.baseline_duration / 4),
            procs=args.procs, servers=len(args.url) or args.servers, loop=loop,
            quiet=args.quiet,
        )  # fmt: skip

    started = []
    if args.url:
        urls = list(args.url)
        pids = list(args.server_pid)
        for url in urls:
            parse_url(url)
    else:
        extra = list(args.server_arg)
        started = [start_server(extra, loop) for _ in range(args.servers)]
        urls = [url for _, url in started]
        pids = [p.pid for p, _ in started]
    try:
        await asyncio.sleep(0.5)
        idle = [proc_status(pid).get("VmRSS", 0) for pid in pids]
        cpu: dict[str, float] = {}
        t_start = time.monotonic()

        def on_progress(t: float, snap: dict[str, Any]) -> None:
            if t < 0:
                cpu["start"] = sum(proc_cpu(pid) for pid in pids)
                cpu["t"] = time.perf_counter()
                progress(
                    f"[loadgen] set up {snap['ready']}/{snap['units']} matches, "
                    f"{snap['conns']} connections in {time.monotonic() - t_start:.1f}s; "
                    f"setup failures {snap['setup_failures']}"
                )
                return
            if args.quiet:
                return
            rss = sum(proc_status(pid).get("VmRSS", 0) for pid in pids)
            progress(
                f"[loadgen {t:5.1f}s] conns {snap['conns']} moves {snap['moves']} "
                f"games {snap['games']} errors {snap['errors']} "
                f"disconnects {snap['disconnects']} server rss {rss / 1024:.0f} MB"
            )

        server: dict[str, Any] = {"pids": pids, "urls": urls, "rss_idle_kb": sum(idle)}

        async def before_close() -> None:
            elapsed = time.perf_counter() - cpu["t"]
            cpu_s = sum(proc_cpu(pid) for pid in pids) - cpu["start"]
            status = [proc_status(pid) for pid in pids]
            server["rss_kb"] = sum(s.get("VmRSS", 0) for s in status)
            server["rss_peak_kb"] = sum(s.get("VmHWM", 0) for s in status)
            server["cpu_s"] = round(cpu_s, 2)
            server["cpu_util"] = round(cpu_s / elapsed, 3)
            pages = []
            for url in urls:
                try:
                    status_code, body = await http_get(url, "/metrics")
                    if status_code == 200:
                        pages.append(body)
                except OSError as exc:
                    progress(f"could not read {url}metrics: {exc}")
            server["metrics"] = server_view(pages) if pages else None

        res = await driver.run(
            "match", urls, args.matches, procs=args.procs, pace=args.pace,
            duration=args.duration, warmup=args.warmup, options=options, games=args.games,
            rematch_delay=args.pace * 5 if args.rematch_delay is None else args.rematch_delay,
            seed=args.seed, on_progress=on_progress, before_close=before_close,
        )  # fmt: skip
    finally:
        for p, _ in started:
            stop_process(p)

    s = res.summary
    window = s["window_s"]
    conns = s["conns"]
    server["rss_per_conn_kb"] = (
        round((server["rss_kb"] - server["rss_idle_kb"]) / conns, 2) if conns else None
    )
    server["rss_total_per_conn_kb"] = round(server["rss_kb"] / conns, 2) if conns else None
    moves_per_s = s["moves"] / window
    server["cpu_us_per_move"] = (
        round(1e6 * server["cpu_util"] / moves_per_s, 1) if moves_per_s > 0 else None
    )
    result.update(
        {
            "connections_held": conns,
            "matches_ready": s["ready"],
            "games_completed": s["games"],
            "moves": s["moves"],
            "moves_per_s": round(s["moves"] / window, 1),
            "latency_opponent": driver.latency_summary(res.lat),
            "latency_own": driver.latency_summary(res.own),
            "errors": s["errors"],
            "error_codes": s["error_codes"],
            "disconnects": s["disconnects"],
            "setup_failures": s["setup_failures"],
            "setup_s": round(s["setup_s"], 2),
            "window_s": round(window, 2),
            "client_cpu_util": round(s["client_cpu_s"] / s["play_s"], 3),
            "client_loop_lag_p99_ms": s["client_loop_lag_p99_ms"],
            "client_loop_lag_max_ms": s["client_loop_lag_max_ms"],
            "server": server,
        }
    )
    if args.timeline:
        result["timeline"] = driver.timeline(res.lat, res.lat_t)
    if "echo" in result:
        result["vs_echo"] = ratios(result, result["echo"], "echo")
    if "relay" in result:
        result["vs_relay"] = ratios(result, result["relay"], "relay")
    return result


def ratios(game: dict[str, Any], echo_res: dict[str, Any], name: str) -> dict[str, Any]:
    """The game's figures over a baseline's (``name``: ``echo`` or ``relay``; a relay "round
    trip" is one move: a frame in, two out)."""

    def div(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a is not None and b else None

    lat, elat = game["latency_opponent"], echo_res["latency"]
    return {
        f"{name}_cpu_per_round_trip / server_cpu_per_move": div(
            echo_res["server_cpu_us_per_round_trip"], game["server"]["cpu_us_per_move"]
        ),
        f"moves_per_s / {name}_round_trips_per_s": div(
            game["moves_per_s"], echo_res["round_trips_per_s"]
        ),
        f"p50 / {name}_p50": div(lat["p50_ms"], elat["p50_ms"]),
        f"p99 / {name}_p99": div(lat["p99_ms"], elat["p99_ms"]),
    }


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--matches", type=int, default=100, help="concurrent matches (2 conns each)")
    ap.add_argument("--pace", type=float, default=0.0,
                    help="seconds between moves per match; 0: as fast as possible")  # fmt: skip
    ap.add_argument("--duration", type=float, default=20.0, help="seconds of play")
    ap.add_argument("--warmup", type=float, default=2.0,
                    help="seconds of play not counted in moves/s and latency")  # fmt: skip
    ap.add_argument("--games", type=int, default=0, help="games per match at most (0: no limit)")
    ap.add_argument("--rematch-delay", type=float, default=None,
                    help="a match asks for its rematch 0..this many seconds after a game "
                         "(None: 5 x pace)")  # fmt: skip
    ap.add_argument("--options", default='{"turn_cap": 30, "rounds": 1}',
                    help="room options (JSON) for create_room")  # fmt: skip
    ap.add_argument("--procs", type=int, default=1, help="client processes")
    ap.add_argument("--servers", type=int, default=1,
                    help="server processes to start (matches spread round-robin)")  # fmt: skip
    ap.add_argument("--url", action="append", default=[], help="use a running server (repeatable)")
    ap.add_argument("--server-pid", type=int, action="append", default=[],
                    help="PID of a --url server, for RSS and CPU")  # fmt: skip
    ap.add_argument("--server-arg", action="append", default=[],
                    help="extra argument for started servers (repeatable)")  # fmt: skip
    ap.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio",
                    help="event loop of the started servers (and the echo baseline)")  # fmt: skip
    ap.add_argument("--baseline", action=argparse.BooleanOptionalAction, default=True,
                    help="measure the echo baseline with the same shape first")  # fmt: skip
    ap.add_argument("--baseline-duration", type=float, default=10.0,
                    help="seconds of play of each baseline (echo, relay)")  # fmt: skip
    ap.add_argument(
        "--nodes",
        type=int,
        default=0,
        help="with --redis: start a cluster of this many nodes (default 2)",
    )
    ap.add_argument(
        "--redis",
        action="store_true",
        help="start redis-server and --nodes nodes; measure same-node and "
        "cross-node matches apart (bench/cluster.py)",
    )
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    ap.add_argument("--timeline", action="store_true",
                    help="add [second, moves, p99 ms, max ms] per second of the run")  # fmt: skip
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.url and len(args.server_pid) not in (0, len(args.url)):
        build_parser().error("give one --server-pid per --url")
    if args.redis:
        from bench.cluster import run_cluster

        args.nodes = args.nodes or 2
        print(json.dumps(asyncio.run(run_cluster(args)), indent=2))
        return 0
    result = asyncio.run(run_load(args))
    print(json.dumps(result, indent=2))
    if "rate_limited" in result["error_codes"]:
        progress(
            "the server rate-limited the clients: a server given with --url needs its limit "
            "lifted for --pace 0 (python -m server --rate-per-second 1000000 --burst 1000000)"
        )
    if result["moves"] == 0:
        progress("no move was counted: see errors and error_codes above")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
