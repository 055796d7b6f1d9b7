"""``loadgen.py --nodes N --redis``: the same matches on a cluster of N nodes on one Redis,
first with both players of each match on one node (same-node), then with the second player
on the next node (cross-node: every move is forwarded to the room's owner and its frames come
back through Redis). Prints both latency distributions, the nodes' CPU per move, and the Redis
commands per move (from ``INFO commandstats``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import driver
from bench.wsclient import proc_cpu, progress, start_server, stop_process
from stacko.server.cluster.local import free_port, start_redis


def redis_calls(port: int) -> int:
    """Commands redis-server has run (all kinds), from ``INFO commandstats``."""
    out = subprocess.run(
        ["redis-cli", "-p", str(port), "INFO", "commandstats"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    total = 0
    for line in out.splitlines():
        if line.startswith("cmdstat_"):
            fields = dict(kv.split("=") for kv in line.split(":", 1)[1].split(","))
            total += int(fields["calls"])
    return total


async def phase(args: argparse.Namespace, urls: list[str], pids: list[int], redis_pid: int,
                redis_port: int, cross: bool) -> dict[str, Any]:  # fmt: skip
    cpu: dict[str, float] = {}
    calls: dict[str, int] = {}

    def on_progress(t: float, snap: dict[str, Any]) -> None:
        if t < 0:
            cpu["start"] = sum(proc_cpu(pid) for pid in pids)
            cpu["redis"] = proc_cpu(redis_pid)
            cpu["t"] = time.perf_counter()
            calls["start"] = redis_calls(redis_port)

    async def before_close() -> None:
        cpu["elapsed"] = time.perf_counter() - cpu["t"]
        cpu["used"] = sum(proc_cpu(pid) for pid in pids) - cpu["start"]
        cpu["redis_used"] = proc_cpu(redis_pid) - cpu["redis"]
        calls["used"] = redis_calls(redis_port) - calls["start"]

    res = await driver.run(
        "match", urls, args.matches, procs=args.procs, pace=args.pace, duration=args.duration,
        warmup=args.warmup, options=json.loads(args.options), seed=args.seed,
        rematch_delay=args.pace * 5 if args.rematch_delay is None else args.rematch_delay,
        on_progress=on_progress, before_close=before_close, cross=cross,
    )  # fmt: skip
    s = res.summary
    window = s["window_s"]
    moves_per_s = s["moves"] / window if window else 0.0
    # the CPU and command counts cover the whole measured run; moves per second, the window
    moves_in_cpu = moves_per_s * cpu["elapsed"]
    return {
        "mode": "cross-node" if cross else "same-node",
        "moves": s["moves"],
        "moves_per_s": round(moves_per_s, 1),
        "latency_opponent": driver.latency_summary(res.lat),
        "errors": s["errors"],
        "error_codes": s["error_codes"],
        "nodes_cpu_util": round(cpu["used"] / cpu["elapsed"], 3),
        "nodes_cpu_us_per_move": round(1e6 * cpu["used"] / moves_in_cpu, 1)
        if moves_in_cpu
        else None,
        "redis_cpu_us_per_move": round(1e6 * cpu["redis_used"] / moves_in_cpu, 1)
        if moves_in_cpu
        else None,
        "redis_commands_per_move": round(calls["used"] / moves_in_cpu, 2) if moves_in_cpu else None,
    }


async def run_cluster(args: argparse.Namespace) -> dict[str, Any]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("--redis needs redis-server (apt-get install redis-server)")
    directory = Path(tempfile.mkdtemp(prefix="stacko-bench-cluster-"))
    port = free_port()
    redis = start_redis(binary, port, directory)
    url = f"redis://127.0.0.1:{port}/0"
    started = []
    try:
        for i in range(args.nodes):
            extra = [*args.server_arg, "--redis-url", url, "--node-id", f"bench{i}"]
            started.append(start_server(extra, None if args.loop == "asyncio" else args.loop))
        urls = [u for _, u in started]
        pids = [p.pid for p, _ in started]
        await asyncio.sleep(0.5)
        result: dict[str, Any] = {
            "config": {"nodes": args.nodes, "matches": args.matches, "pace_s": args.pace,
                       "duration_s": args.duration, "procs": args.procs},
        }  # fmt: skip
        for cross in (False, True):
            progress(f"{'cross' if cross else 'same'}-node matches ...")
            result["cross" if cross else "same"] = await phase(
                args, urls, pids, redis.pid, port, cross
            )
        same, cross_ = result["same"], result["cross"]
        p50s = same["latency_opponent"].get("p50_ms")
        p50c = cross_["latency_opponent"].get("p50_ms")
        if p50s is not None and p50c is not None:
            result["cross_minus_same_p50_ms"] = round(p50c - p50s, 3)
        if same["nodes_cpu_us_per_move"] and cross_["nodes_cpu_us_per_move"]:
            result["cpu_per_move_cross_over_same"] = round(
                cross_["nodes_cpu_us_per_move"] / same["nodes_cpu_us_per_move"], 2
            )
        return result
    finally:
        for p, _ in started:
            stop_process(p)
        redis.terminate()
        redis.wait(10)
        shutil.rmtree(directory, ignore_errors=True)
