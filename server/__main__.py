"""``stacko-server`` / ``python -m server``: run until SIGINT or SIGTERM, then close cleanly."""

from __future__ import annotations

import asyncio
import logging
import resource
import signal
from collections.abc import Sequence

from server import compiled
from server.app import Server
from server.config import ServerConfig, derived_max_connections, parse_args
from server.gcpacer import GcPacer


async def run(config: ServerConfig) -> None:
    server = Server(config)
    await server.start()
    loop = asyncio.get_running_loop()
    pacer = None
    if config.gc_interval_s > 0:
        pacer = GcPacer(
            config.gc_interval_s, loop.call_later, server.metrics.gc_paused,
            departures=server.departures,
        )  # fmt: skip
        pacer.start()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"stacko server on {server.url} (Ctrl-C to stop)", flush=True)
    await stop.wait()
    logging.getLogger("stacko.server").info("shutting down")
    await server.shutdown()
    if pacer is not None:
        pacer.stop()


def raise_file_limit() -> int:
    """Every connection is a file descriptor: lift the soft limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            return soft
    return hard


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(argv)
    level = config.log_level.upper()
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if level != "DEBUG":
        # websockets says "connection open" and "connection closed" for every connection and
        # two lines for every /healthz or /metrics request, at INFO: thousands of lines an
        # hour on a busy server. /metrics counts connections; DEBUG shows the lines again.
        logging.getLogger("websockets").setLevel(max(logging.WARNING, logging.getLevelName(level)))
    files = raise_file_limit()
    log = logging.getLogger("stacko.server")
    log.info(
        "open files limit: %d; upgrades refused (503) above %d open connections",
        files,
        config.max_connections or derived_max_connections(files),
    )
    running, stale = compiled.status()
    log.info("%d of %d per-move modules compiled (mypyc)", len(running), len(compiled.MODULES))
    if stale:
        log.warning(
            "changed since they were compiled, running the old compiled code: %s "
            "(build again: pip install -e .)",
            ", ".join(stale),
        )
    try:
        if config.loop == "uvloop":
            import uvloop  # type: ignore[import-not-found,unused-ignore]

            uvloop.run(run(config))
        elif config.loop == "asyncio":
            asyncio.run(run(config))
        else:
            raise SystemExit(f"--loop must be asyncio or uvloop, not {config.loop!r}")
    except OSError as exc:  # the port is taken, the address is not this machine's, ...
        log.error("cannot listen on %s:%d: %s", config.host, config.port, exc.strerror or exc)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
