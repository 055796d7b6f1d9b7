"""``stacko-server`` / ``python -m server``: run until SIGINT or SIGTERM, then close cleanly."""

from __future__ import annotations

import asyncio
import gc
import logging
import resource
import signal
from collections.abc import Sequence

from server.app import Server
from server.config import ServerConfig, parse_args


async def run(config: ServerConfig) -> None:
    server = Server(config)
    await server.start()
    if config.gc_freeze:
        freeze_survivors()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"stacko server on {server.url} (Ctrl-C to stop)", flush=True)
    await stop.wait()
    logging.getLogger("stacko.server").info("shutting down")
    await server.shutdown()


def freeze_survivors() -> None:
    """Shorter garbage-collection pauses with many connections.

    A full collection walks every tracked object: with 20,000 connections that is about a
    million, a pause of 0.3-1 s, and the next one comes as soon as a quarter as many again have
    been promoted (frames, futures and timers that outlive two young collections). Objects
    that survive a full collection are long-lived (connections, sessions, rooms), so they are
    frozen out of the later ones, which then walk only what is new. A frozen object that dies
    in a reference cycle (the transport of a closed connection) is only reclaimed by a real
    full collection: one runs, frozen objects included, whenever the frozen set has doubled
    since the last one, which bounds that memory by the live heap.
    """
    gc.collect()
    gc.freeze()
    state = {"frozen": gc.get_freeze_count(), "pending": False}

    def collect_all() -> None:
        state["pending"] = False
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        state["frozen"] = gc.get_freeze_count()

    def after(phase: str, info: dict[str, int]) -> None:
        if phase != "stop" or info["generation"] != 2:
            return
        gc.freeze()
        if gc.get_freeze_count() > 2 * state["frozen"] and not state["pending"]:
            try:  # not from inside a collection: on the loop, soon
                asyncio.get_running_loop().call_soon(collect_all)
            except RuntimeError:  # no loop (shutting down): the next full collection will
                return
            state["pending"] = True

    gc.callbacks.append(after)


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
    logging.basicConfig(
        level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    files = raise_file_limit()
    log = logging.getLogger("stacko.server")
    log.info("open files limit: %d (about as many connections)", files)
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
