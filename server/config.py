"""Server settings: embedded defaults, overridden by ``STACKO_*`` variables and by flags."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8765
    max_frame_bytes: int = 4096
    """Larger client frames get a ``too_big`` error; 16x this (at least 64 KiB) closes."""
    rate_per_second: float = 20.0
    burst: int = 40
    hello_timeout_s: float = 10.0
    reconnect_grace_s: float = 60.0
    quick_match_clock_ms: int = 30_000
    max_expiries: int = 3
    """Clock expiries in one game after which a player forfeits."""
    ping_interval_s: float = 20.0
    ping_timeout_s: float = 20.0
    max_outbox_bytes: int = 1_048_576
    """Bytes one connection may hold unsent (its outbox and its socket's write buffer, every
    frame counted, pongs included) before it is dropped as ``slow_consumer``."""
    max_rooms: int = 100_000
    max_connections: int = 0
    """Open sockets above which WebSocket upgrades get HTTP 503; 0: derived from the
    open-files limit at start (``derived_max_connections``)."""
    max_connections_per_ip: int = 256
    new_connections_per_ip_per_s: float = 50.0
    """New sockets one address may open per second, in bursts of ``max_connections_per_ip``
    (HTTP 429, then closed at accept); 0: no limit. Off with ``max_connections_per_ip`` 0."""
    """Open sockets from one address above which its upgrades get HTTP 429 (ten a second;
    further sockets from it are closed at accept); 0: no cap."""
    compression: bool = False
    """Per-message deflate; off by default (frames are small and latency matters)."""
    log_level: str = "INFO"
    loop: str = "asyncio"
    """Event loop: ``asyncio`` or ``uvloop`` (needs ``pip install uvloop``)."""
    gc_interval_s: float = 0.25
    """Seconds between paced garbage collections (``server.gcpacer``); 0: CPython's own."""

    @property
    def hard_frame_bytes(self) -> int:
        return max(16 * self.max_frame_bytes, 65_536)


def derived_max_connections(open_files: int) -> int:
    """The default ``max_connections``: the open-files limit less a reserve (a tenth, at
    least 64) for the listening socket, log files, the HTTP 503 answers themselves, and
    whatever else the process opens, so that ``accept()`` never runs out of descriptors."""
    return max(1, open_files - max(64, open_files // 10))


_HELP = {
    "host": "address to bind (loopback by default)",
    "port": "TCP port for WebSocket and HTTP (0: any free port)",
    "max_frame_bytes": "largest client frame accepted; larger ones get a too_big error",
    "rate_per_second": "frames per second a connection may send on average",
    "burst": "frames a connection may send in a burst above the average",
    "hello_timeout_s": "seconds a new connection has to send hello",
    "reconnect_grace_s": "seconds a dropped player has to come back before forfeiting",
    "quick_match_clock_ms": "per-move clock of quick-match games (ms)",
    "max_expiries": "clock expiries in one game after which the player forfeits",
    "ping_interval_s": "keepalive ping interval (seconds)",
    "ping_timeout_s": "seconds without pong before a connection is dropped",
    "max_outbox_bytes": "bytes a connection may hold unsent (outbox + socket buffer, pongs "
    "included) before it is dropped with 1008 slow_consumer",
    "max_rooms": "rooms the server holds at most",
    "max_connections": "open connections above which WebSocket upgrades get HTTP 503; 0: the "
    "open-files limit less a tenth (at least 64) kept in reserve",
    "max_connections_per_ip": "open connections from one IP address above which its upgrades "
    "get HTTP 429; 0: no cap",
    "new_connections_per_ip_per_s": "new connections one IP address may open per second, in "
    "bursts of max_connections_per_ip, before its upgrades get HTTP 429; 0: no limit",
    "compression": "enable permessage-deflate",
    "log_level": "DEBUG, INFO, WARNING or ERROR",
    "loop": "event loop: asyncio, or uvloop if installed (pip install uvloop)",
    "gc_interval_s": "seconds between paced garbage collections (short pauses); 0: Python's own",
}


def _parse_bool(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


def parse_args(argv: Sequence[str] | None = None) -> ServerConfig:
    """Flags win over environment variables (``STACKO_PORT`` ...), which win over defaults."""
    parser = argparse.ArgumentParser(
        prog="stacko-server",
        description="Stacko game server: WebSocket protocol (see PROTOCOL.md) on one port.",
        epilog="Every option can also be set as an environment variable STACKO_<OPTION>, "
        "e.g. STACKO_PORT=9000.",
    )
    defaults = ServerConfig()
    for f in fields(ServerConfig):
        default = getattr(defaults, f.name)
        env = os.environ.get(f"STACKO_{f.name.upper()}")
        kind = type(default)
        flag = "--" + f.name.replace("_", "-")
        if kind is bool:
            value = _parse_bool(env) if env is not None else default
            parser.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=value, help=_HELP[f.name]
            )
        else:
            try:
                value = kind(env) if env is not None else default
            except ValueError:
                parser.error(f"STACKO_{f.name.upper()}={env!r} is not a valid {kind.__name__}")
            parser.add_argument(
                flag, type=kind, default=value, help=f"{_HELP[f.name]} (default: {default})"
            )
    ns = parser.parse_args(argv)
    if not 0 <= ns.port <= 65535:
        parser.error(f"--port must be 0..65535, not {ns.port}")
    return ServerConfig(**{f.name: getattr(ns, f.name) for f in fields(ServerConfig)})
