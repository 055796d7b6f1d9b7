"""``stacko-server`` / ``python -m server``: run until SIGINT or SIGTERM, then close cleanly.

With a store (the default), SIGTERM and SIGINT commit what is pending, close every client
with 1012 (service restart: reconnect and resume) and exit 0. Exit status 1: the store failed
while running (fail-stop); 2: the store could not be opened (a message says why).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import signal
import sys
import time
from collections.abc import Sequence

from stacko.server import compiled
from stacko.server.app import Server
from stacko.server.config import ServerConfig, derived_max_connections, parse_args
from stacko.server.gcpacer import GcPacer
from stacko.server.store import StoreError, make_store

RETENTION_INTERVAL_S = 3600.0
SWITCH_INTERVAL_S = 0.0005
"""How long the event loop may wait for the GIL while another thread of the process runs
Python (a store read; records and replays for ``/api/games`` were built in a thread when this
was measured, and are built in a process of their own now, ``server.recordworker``):
CPython's default is 5 ms,
and every wait delays every game's frames. Measured with ``bench/abuse.py --only replays``
(one address asking for uncached replays of long games at its rate limit; alternating runs on
a loaded machine, 12:25-12:31 UTC): the pair's p95 / p99 in another room went from 4.7 / 6.3
ms alone to 8.6 / 17.2 ms abused, and 1.6 / 1.9 to 6.0 / 10.7, with 5 ms; with 0.5 ms from
5.9 / 9.1 to 5.8 / 8.8, and 4.4 / 6.5 to 3.4 / 7.0. The loop thread does the work of
every game, so a more frequent hand-over costs it nothing when no other thread runs."""


async def _retention(server: Server, days: float) -> None:
    """Delete finished games older than ``days``, now and every hour."""
    log = logging.getLogger("stacko.store")
    while server.store is not None:
        cutoff = int((time.time() - days * 86400) * 1000)
        try:
            gone = await server.store.purge(cutoff)
        except StoreError:
            return  # the store failed: the server is stopping anyway
        if gone:
            log.info("retention: deleted %d finished games older than %g days", gone, days)
        await asyncio.sleep(RETENTION_INTERVAL_S)


async def run(config: ServerConfig) -> int:
    store = make_store(
        config.database, config.data_dir, config.sync, node_id=config.node_id,
        shared=bool(config.redis_url),
    )  # fmt: skip
    if store is None:  # as loud as the other stores' "store: ..." line, and louder
        logging.getLogger("stacko.store").warning(
            "store: none (--database memory): no game survives a restart, no records are kept"
        )
    server = Server(config, store=store)
    try:
        await server.start()
    except StoreError as exc:
        logging.getLogger("stacko.server").error("cannot start: %s", exc)
        if store is not None:
            await store.close()
        return 2
    except BaseException:  # the port is taken, ...: the store's threads stop first
        if store is not None:
            await store.close()
        raise
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
    retention = None
    if store is not None and config.retain_days > 0:
        retention = asyncio.create_task(_retention(server, config.retain_days))
    print(
        f"stacko server on {server.http_url} (open it in a browser; clients and bots connect"
        f" to {server.url}); Ctrl-C stops it",
        flush=True,
    )
    assert server.failure is not None
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait((stopping, server.failure), return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if retention is not None:
        retention.cancel()
    if pacer is not None:
        pacer.stop()
    log = logging.getLogger("stacko.server")
    if server.failure.done():
        log.critical("stopping: the store failed (exit status 1)")
        await server.shutdown()
        return 1
    log.info("shutting down")
    await server.shutdown(restart=True)
    return 0


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
    sys.setswitchinterval(SWITCH_INTERVAL_S)
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

            return int(uvloop.run(run(config)))
        elif config.loop == "asyncio":
            return asyncio.run(run(config))
        else:
            raise SystemExit(f"--loop must be asyncio or uvloop, not {config.loop!r}")
    except OSError as exc:  # the port is taken, the address is not this machine's, ...
        log.error("cannot listen on %s:%d: %s", config.host, config.port, exc.strerror or exc)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
