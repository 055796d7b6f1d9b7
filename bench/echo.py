"""The echo baseline: a bare ``websockets`` echo server, driven by the load generator's client.

    python bench/echo.py                       # start an echo server, measure, print JSON
    python bench/echo.py --serve --port 0      # only serve (prints its URL)

The server has the game server's transport settings (no compression, the same max_size,
max_queue, write_limit and keepalive) and does nothing but ``send(await recv())``: the cost
of the WebSocket library and the event loop, which the game server pays too. Every figure of
``loadgen.py`` is a ratio to this, measured in the same run with the same client code
(``bench/wsclient.py``, ``bench/driver.py``):

- saturation: N connections, each with one move-sized frame in flight (closed loop):
  round trips per second;
- light load: N connections, one frame every T seconds each: round-trip p50/p95/p99/max.

The same server also answers on ``/relay`` (``measure(kind="relay")``): pairs of connections
take turns like two players, and each frame in sends one state-sized frame to the other side
and one to the sender, exactly the frames a game server sends per move, with no parsing,
rules or views. Its moves/s and move-to-opponent latency are the ceiling of a game server on
this transport, in the same run: how far the game server is from it is what the game's own
work costs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repo, not bench/, goes on sys.path
    sys.path[0:1] = [str(Path(__file__).resolve().parent.parent)]

from bench import driver
from bench.driver import RELAY_FRAME
from bench.wsclient import (
    HelpFormatter,
    proc_cpu,
    proc_status,
    progress,
    raise_nofile,
    start_process,
    stop_process,
)


def transport_settings() -> dict[str, Any]:
    """The game server's WebSocket settings (``server.app.Server.start``)."""
    from stacko.server.config import ServerConfig

    cfg = ServerConfig()
    return {
        "max_size": cfg.hard_frame_bytes,
        "max_queue": getattr(cfg, "max_queue", 16),
        "write_limit": getattr(cfg, "write_limit", 32_768),
        "ping_interval": cfg.ping_interval_s,
        "ping_timeout": cfg.ping_timeout_s,
        "compression": None,
    }


async def serve(host: str, port: int) -> None:
    from websockets.asyncio.server import ServerConnection, broadcast, serve
    from websockets.exceptions import ConnectionClosed

    waiting: dict[str, ServerConnection] = {}

    async def relay(ws: ServerConnection) -> None:
        """``/relay``: the game's frame pattern without the game. The first frame names a
        pair; then every frame from either side sends a state-sized frame to the other side
        and then to the sender, as the game server sends a move's two state frames."""
        key = str(await ws.recv())
        partner = waiting.pop(key, None)
        if partner is None:
            waiting[key] = ws
            await ws.wait_closed()
            return
        for side in (ws, partner):
            await side.send(b'{"type":"paired"}', text=True)
        await asyncio.gather(pump(ws, partner), pump(partner, ws))

    async def pump(ws: ServerConnection, other: ServerConnection) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for _ in ws:
                broadcast([other], RELAY_FRAME)
                broadcast([ws], RELAY_FRAME)

    async def echo(ws: ServerConnection) -> None:
        if ws.request is not None and ws.request.path == "/relay":
            await relay(ws)
            return
        with contextlib.suppress(ConnectionClosed):
            async for message in ws:
                await ws.send(message)

    async with serve(echo, host, port, **transport_settings()) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"echo server on ws://{host}:{port}/", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()


def start_echo(loop: str | None = None) -> tuple[Any, str]:
    argv = [sys.executable, "-m", "bench.echo", "--serve", "--port", "0"]
    if loop:
        argv += ["--loop", loop]
    return start_process(argv, r"(ws://\S+/)")


async def measure(
    *,
    conns: int,
    kind: str = "echo",
    pace: float,
    duration: float,
    warmup: float = 1.0,
    procs: int = 1,
    servers: int = 1,
    loop: str | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """Start ``servers`` echo servers, load them, stop them; the figures as a dict.

    ``kind="relay"``: ``conns`` pairs of connections play the relay (``round_trips`` then
    counts moves, and ``latency`` is move to opponent)."""
    started = [start_echo(loop) for _ in range(servers)]
    urls = [url for _, url in started]
    pids = [p.pid for p, _ in started]
    cpu: dict[str, float] = {}

    def on_progress(t: float, snap: dict[str, Any]) -> None:
        if t < 0:
            cpu["start"] = sum(proc_cpu(pid) for pid in pids)
            cpu["t"] = time.perf_counter()
        elif not quiet:
            progress(
                f"[{kind}{' light' if pace else ''} {t:5.1f}s] conns {snap['conns']} "
                f"round trips {snap['moves']} "
                f"errors {snap['errors']} disconnects {snap['disconnects']}"
            )

    async def before_close() -> None:
        cpu["end"] = sum(proc_cpu(pid) for pid in pids)
        cpu["elapsed"] = time.perf_counter() - cpu["t"]
        cpu["rss_kb"] = sum(proc_status(pid).get("VmRSS", 0) for pid in pids)

    try:
        res = await driver.run(
            kind, urls, conns, procs=procs, pace=pace, duration=duration, warmup=warmup,
            on_progress=on_progress, before_close=before_close,
        )  # fmt: skip
    finally:
        for p, _ in started:
            stop_process(p)
    s = res.summary
    window = s["window_s"]
    return {
        "kind": kind,
        "conns": conns,
        "servers": servers,
        "pace_s": pace,
        "procs": s["procs"],
        "connections_held": s["conns"],
        "round_trips": s["moves"],
        "round_trips_per_s": round(s["moves"] / window, 1),
        "latency": driver.latency_summary(res.lat),
        "latency_own": driver.latency_summary(res.own) if kind == "relay" else None,
        "errors": s["errors"],
        "disconnects": s["disconnects"],
        "setup_failures": s["setup_failures"],
        "window_s": round(window, 2),
        "server_cpu_util": round((cpu["end"] - cpu["start"]) / cpu["elapsed"], 3),
        "server_cpu_us_per_round_trip": round(
            1e6 * (cpu["end"] - cpu["start"]) / cpu["elapsed"] / max(1e-9, s["moves"] / window), 1
        ),
        "client_cpu_util": round(s["client_cpu_s"] / s["play_s"], 3),
        "server_rss_kb": cpu.get("rss_kb"),
        "client_loop_lag_p99_ms": s["client_loop_lag_p99_ms"],
        "client_loop_lag_max_ms": s["client_loop_lag_max_ms"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--serve", action="store_true", help="only run the echo server")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    ap.add_argument("--conns", type=int, default=100, help="saturation: connections (closed loop)")
    ap.add_argument("--light-conns", type=int, default=100, help="light load: connections")
    ap.add_argument("--light-pace", type=float, default=2.0, help="light load: seconds per frame")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per measurement")
    ap.add_argument("--light-duration", type=float, default=20.0, help="light load: seconds")
    ap.add_argument("--procs", type=int, default=1, help="client processes")
    ap.add_argument("--servers", type=int, default=1, help="echo server processes")
    args = ap.parse_args(argv)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        ap.error("loopback only")
    if args.serve:
        if args.loop == "uvloop":
            import uvloop

            uvloop.run(serve(args.host, args.port))
        else:
            asyncio.run(serve(args.host, args.port))
        return 0
    limits = raise_nofile()
    progress(f"RLIMIT_NOFILE: {limits}")
    loop = None if args.loop == "asyncio" else args.loop

    async def both() -> dict[str, Any]:
        sat = await measure(
            conns=args.conns, pace=0, duration=args.duration, procs=args.procs,
            servers=args.servers, loop=loop,
        )  # fmt: skip
        light = await measure(
            conns=args.light_conns, pace=args.light_pace, duration=args.light_duration,
            warmup=0.0, procs=args.procs, servers=args.servers, loop=loop,
        )  # fmt: skip
        relay_sat = await measure(
            conns=args.conns, kind="relay", pace=0, duration=args.duration, procs=args.procs,
            servers=args.servers, loop=loop,
        )  # fmt: skip
        relay_light = await measure(
            conns=args.light_conns, kind="relay", pace=args.light_pace,
            duration=args.light_duration, warmup=0.0, procs=args.procs, servers=args.servers,
            loop=loop,
        )  # fmt: skip
        return {
            "saturation": sat, "light": light, "relay_saturation": relay_sat,
            "relay_light": relay_light, "nofile": limits,
        }  # fmt: skip

    print(json.dumps(asyncio.run(both()), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
