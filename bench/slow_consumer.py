"""Slow consumers: clients that never read are dropped, and the server's memory stays bounded.

    python bench/slow_consumer.py [--matches 20] [--slow 20] [--timeout 60]

Fast matches (pace 0, public rooms) keep state frames flowing; ``--slow`` spectators join
those rooms and then never read a byte (their socket's receive buffer is a few KB, so it
fills at once). Each slow connection can hold at most ``max_outbox_bytes`` on the server
(its outbox and its socket's write buffer); then the server drops it (close 1008 "slow_consumer",
and the TCP connection is aborted if the client does not take the close frame).

Reported (JSON): how many slow connections the server dropped and how long it took (from
``/metrics``: ``stacko_connections``), the server's RSS before, at its peak and after, the
bound the settings give (``bound_kb``; the check allows ``slack_kb`` more for the
allocator), and the errors and disconnects the fast players saw (as of the load's last
progress snapshot, taken every 2 s, after the drops). ``pass`` needs every slow connection
dropped, the RSS growth within the bound and no error or disconnect among the fast players.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import orjson

if __package__ in (None, ""):  # run as a script: the repo, not bench/, goes on sys.path
    sys.path[0:1] = [str(Path(__file__).resolve().parent.parent)]

from bench import driver
from bench.wsclient import (
    HelpFormatter,
    LeanClient,
    connect,
    http_get,
    parse_prometheus,
    proc_status,
    progress,
    raise_nofile,
    start_server,
    stop_process,
)

SLACK_KB = 20_000
"""RSS growth allowed beyond the queues' bound: the allocator keeps freed memory."""


async def scenario(args: argparse.Namespace) -> dict[str, Any]:
    from stacko.server.config import ServerConfig

    cfg = ServerConfig()
    proc, url = start_server(["--max-outbox-bytes", str(args.max_outbox_bytes)])
    pid = proc.pid
    out: dict[str, Any] = {"matches": args.matches, "slow": args.slow}
    try:
        await asyncio.sleep(0.5)
        out["rss_idle_kb"] = proc_status(pid).get("VmRSS", 0)

        async def gauge() -> float:
            status, body = await http_get(url, "/metrics")
            return parse_prometheus(body).get("stacko_connections", -1.0) if status == 200 else -1

        snapshot: dict[str, Any] = {}

        def on_progress(t: float, snap: dict[str, Any]) -> None:
            snapshot.update(snap, at=time.perf_counter())

        load = asyncio.create_task(
            driver.run(
                "match",
                [url],
                args.matches,
                pace=0,
                duration=args.timeout + 5,
                warmup=0,
                options={},
                public=True,
                on_progress=on_progress,
            )
        )
        deadline = time.monotonic() + 60
        while await gauge() < 2 * args.matches:
            if time.monotonic() > deadline:
                raise RuntimeError("the fast matches did not connect within 60 s")
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)
        out["rss_loaded_kb"] = proc_status(pid).get("VmRSS", 0)

        rooms: list[str] = []
        got = asyncio.get_running_loop().create_future()

        def on_list(client: LeanClient, payload: bytes) -> None:
            msg = orjson.loads(payload)
            if msg["type"] == "rooms" and not got.done():
                got.set_result([r["room"] for r in msg["rooms"]])

        lister = await connect(url, on_list)
        lister.send(orjson.dumps({"type": "hello", "protocol": 1, "name": "lister"}))
        lister.send(orjson.dumps({"type": "list_rooms", "id": 1}))
        rooms = await asyncio.wait_for(got, 10)
        lister.close()

        slow: list[LeanClient] = []
        for i in range(args.slow):
            client = await connect(url, lambda c, p: None, rcvbuf=4096)
            assert client.transport is not None
            client.transport.pause_reading()  # never read again
            client.send(orjson.dumps({"type": "hello", "protocol": 1, "name": f"slow{i}"}))
            room = rooms[i % len(rooms)]
            client.send(orjson.dumps({"type": "join", "room": room, "role": "spectator"}))
            slow.append(client)
        t0 = time.perf_counter()
        progress(f"[slow] {len(slow)} spectators that never read joined {len(rooms)} rooms")
        peak = 0
        dropped_at = None
        while time.perf_counter() - t0 < args.timeout:
            await asyncio.sleep(0.5)
            peak = max(peak, proc_status(pid).get("VmRSS", 0))
            conns = await gauge()
            progress(
                f"[slow {time.perf_counter() - t0:5.1f}s] server connections {conns:.0f} "
                f"(fast players {2 * args.matches}), rss {peak / 1024:.0f} MB"
            )
            if conns <= 2 * args.matches:
                dropped_at = time.perf_counter() - t0
                break
        conns = await gauge()
        out["slow_dropped"] = int(2 * args.matches + args.slow - conns)
        out["seconds_to_drop_all"] = None if dropped_at is None else round(dropped_at, 2)
        out["rss_peak_kb"] = peak
        await asyncio.sleep(1.0)
        out["rss_after_kb"] = proc_status(pid).get("VmRSS", 0)
        out["rss_growth_kb"] = out["rss_peak_kb"] - out["rss_loaded_kb"]
        settled = time.perf_counter()
        for _ in range(30):  # a snapshot of the fast players taken after the drops
            if snapshot.get("at", 0.0) > settled:
                break
            await asyncio.sleep(0.1)
        out["fast_errors"] = snapshot.get("errors")
        out["fast_disconnects"] = snapshot.get("disconnects")
        frame = 1200  # a Stacko state frame is about 1 KB: the last one may pass the bound
        out["bound_kb"] = round(args.slow * (args.max_outbox_bytes + frame) / 1024)
        for client in slow:
            client.abort()
        load.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await load
    finally:
        stop_process(proc)
    out["max_outbox_bytes"] = args.max_outbox_bytes
    out["default_max_outbox_bytes"] = cfg.max_outbox_bytes
    out["slack_kb"] = SLACK_KB
    out["pass"] = bool(
        out["slow_dropped"] == args.slow
        and out["rss_growth_kb"] <= out["bound_kb"] + SLACK_KB
        and out["fast_errors"] == 0
        and out["fast_disconnects"] == 0
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--matches", type=int, default=20, help="fast matches (pace 0)")
    ap.add_argument("--slow", type=int, default=20, help="spectators that never read")
    ap.add_argument("--max-outbox-bytes", type=int, default=1_048_576,
                    help="server --max-outbox-bytes")  # fmt: skip
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the drops")
    args = ap.parse_args(argv)
    raise_nofile()
    result = asyncio.run(scenario(args))
    print(json.dumps(result, indent=2))
    return 0 if result["pass"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
