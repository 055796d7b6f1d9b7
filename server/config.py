"""Server settings: embedded defaults, overridden by ``STACKO_*`` variables and by flags."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields

from stacko.server.forwarded import TrustedProxies


def redacted_url(url: str) -> str:
    """``url`` (``--database``, ``--redis-url``) for logs and messages: no password, neither
    ``user:PASSWORD@`` (the user may be empty, as in Redis's ``redis://:PASSWORD@host``) nor
    a query string's ``password=`` (libpq's other form, which asyncpg takes too)."""
    url = re.sub(r"//([^:/@]*):[^@/]*@", r"//\1:***@", url)
    return re.sub(r"([?&]password=)[^&#]*", r"\1***", url, flags=re.IGNORECASE)


MAX_RETAIN_DAYS = 100_000
"""About 270 years: its cutoff, in Unix milliseconds, still fits the 64-bit ``ended_ms``."""


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
    bot_workers: int = -1
    """Processes that run bot decisions (``server.botpool``); -1: one fewer than the CPUs,
    at least 1; 0: on the event loop, for tests and debugging only."""
    bot_budget_s: float = 2.0
    """Time per bot decision (at most half its clock left); then the room plays the game's
    timeout moves for it."""
    max_bot_games: int = 500
    max_bot_games_per_session: int = 2
    max_waiting_per_session: int = 3
    """Rooms waiting for an opponent in which one session holds a seat."""
    max_waiting_per_ip: int = 32
    """Rooms waiting for an opponent created from one IP address (IPv6: one /64), whatever
    its sessions; 0: no cap."""
    max_seats_per_session: int = 20
    max_watching_per_session: int = 10
    max_spectators_per_room: int = 100
    hello_rate_per_ip: float = 5.0
    """``hello`` frames per second one IP address may send on average ..."""
    hello_burst_per_ip: int = 50
    """... and at once."""
    quick_match_reserve: float = 0.1
    """Share of ``max_rooms`` only quick match may fill: ``create_room`` stops short of it."""
    list_rooms_page: int = 100
    """Rooms per ``rooms`` answer; ``next`` pages on."""
    # -- per address over HTTP, and behind a proxy (``server.apilimit``, ``server.forwarded``) --
    api_rate_per_ip: float = 10.0
    """``/api/*`` requests one IP address (IPv6: one /64) may make per second on average
    (then HTTP 429 with ``Retry-After``); 0: no limit ..."""
    api_burst_per_ip: int = 50
    """... and at once."""
    forwarded_allow_ips: str = ""
    """Reverse proxies (addresses or networks, comma-separated; ``*``: any peer) whose
    ``X-Forwarded-For`` names the client for every per-address limit; empty: none."""
    # -- durability (``server.store``) --
    database: str = "sqlite"
    """``sqlite`` (a file in ``data_dir``), ``memory`` (nothing kept), or a PostgreSQL URL."""
    data_dir: str = ""
    """Where the SQLite file lives; empty: ``$XDG_DATA_HOME/stacko`` (~/.local/share/stacko)."""
    sync: str = "normal"
    """SQLite ``synchronous``: ``normal`` (survives kill -9) or ``full`` (also power loss)."""
    retain_days: float = 0.0
    """Finished games older than this are deleted (checked hourly); 0: kept forever."""
    record_cache_bytes: int = 16 * 1024 * 1024
    """Bytes of built ``/api/games/{id}`` answers kept in memory (least recently used go)."""
    # -- accounts and ratings (``server.accounts``, ``server.ratings``) --
    registrations_per_hour: float = 5.0
    """Accounts one IP address (IPv6: one /64) may register per hour (a burst of as many)."""
    rated_pair_per_day: int = 10
    """Rated games between the same two accounts per 24 hours; more are played unrated."""
    challenge_timeout_s: float = 60.0
    """Seconds a challenged account has to accept or decline."""

    # -- many nodes (``server.cluster``) --
    redis_url: str = ""
    """``redis://HOST:PORT/0`` joins a cluster of nodes sharing that Redis; empty: one node."""
    node_id: str = ""
    """This node's name in the cluster; empty: ``HOSTNAME-PORT`` (stable across restarts)."""
    lease_s: float = 6.0
    """A node whose lease (renewed every third of this) lapses counts as dead."""

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
    "bot_workers": "processes that run bot decisions; -1: CPUs - 1 (at least 1); "
    "0: on the event loop (tests and debugging only)",
    "bot_budget_s": "seconds a bot may think per decision (at most half its clock left); "
    "then it plays the game's timeout moves",
    "max_bot_games": "rooms with a bot the server holds at most (bots_busy)",
    "max_bot_games_per_session": "rooms with a bot one session may hold (too_many_bot_games)",
    "max_waiting_per_session": "rooms waiting for an opponent one session may hold "
    "(too_many_rooms)",
    "max_waiting_per_ip": "rooms waiting for an opponent created from one IP address (IPv6: "
    "one /64), by all its sessions (too_many_rooms); 0: no cap",
    "max_seats_per_session": "seats one session may hold in all rooms (too_many_seats)",
    "max_watching_per_session": "rooms one session may watch at once (too_many_watched)",
    "max_spectators_per_room": "spectators one room takes (too_many_spectators)",
    "hello_rate_per_ip": "hello frames per second one IP address (IPv6: one /64) may send on "
    "average (too_many_hellos)",
    "hello_burst_per_ip": "hello frames one IP address may send at once",
    "quick_match_reserve": "share of max_rooms that only quick match may fill (server_busy)",
    "api_rate_per_ip": "/api/* requests one IP address (IPv6: one /64) may make per second on "
    "average, then HTTP 429 (rate_limited, with Retry-After); 0: no limit",
    "api_burst_per_ip": "/api/* requests one IP address may make at once",
    "forwarded_allow_ips": "reverse proxies (comma-separated addresses or networks, e.g. "
    "127.0.0.1,10.0.0.0/8; '*': any peer) trusted to name the client in X-Forwarded-For (its "
    "rightmost address not in this list), which every per-address limit then counts; empty: "
    "none, the socket's peer is the client",
    "list_rooms_page": "rooms per list_rooms answer (the next page through its cursor)",
    "database": "where games are kept: sqlite (a file in --data-dir), memory (nothing is "
    "kept: a restart ends every game), or postgresql://user:pass@host/db",
    "data_dir": "directory of the SQLite file (local disk; empty: $XDG_DATA_HOME/stacko, "
    "i.e. ~/.local/share/stacko)",
    "sync": "SQLite sync: normal (commits survive kill -9) or full (also power loss; slower)",
    "registrations_per_hour": "accounts one IP address (IPv6: one /64) may register per hour",
    "rated_pair_per_day": "rated games between the same two accounts per 24 h (then unrated)",
    "challenge_timeout_s": "seconds a challenged account has to accept or decline",
    "retain_days": "delete finished games older than this many days (0: keep them forever; at "
    "most 100000)",
    "record_cache_bytes": "bytes of built /api/games/{id} answers (records, texts, replays) "
    "kept in memory, least recently used dropped first; 0: none kept",
    "redis_url": "redis://HOST:PORT/0 to run as one node of a cluster sharing that Redis "
    "(see README, Many nodes); empty: a single node, no Redis",
    "node_id": "this node's name in the cluster (empty: HOSTNAME-PORT)",
    "lease_s": "seconds after which a node that stopped renewing its lease counts as dead "
    "(with a PostgreSQL store shared by the nodes, another node then takes its games over)",
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
    if ns.sync not in ("normal", "full"):
        parser.error(f"--sync must be normal or full, not {ns.sync!r}")
    db = ns.database
    if not (db in ("sqlite", "memory") or db.startswith(("postgresql://", "postgres://"))):
        parser.error(
            f"--database must be sqlite, memory or a postgresql:// URL, not {redacted_url(db)!r}"
        )
    if ns.redis_url and not ns.redis_url.startswith(("redis://", "rediss://", "unix://")):
        parser.error(f"--redis-url must be a redis:// URL, not {redacted_url(ns.redis_url)!r}")
    if ns.lease_s < 1:
        parser.error("--lease-s must be at least 1")
    if ns.node_id and ("|" in ns.node_id or len(ns.node_id) > 64):
        parser.error("--node-id takes at most 64 characters, no '|'")
    if ns.record_cache_bytes < 0:
        parser.error("--record-cache-bytes must be 0 or more")
    try:
        TrustedProxies(ns.forwarded_allow_ips)
    except ValueError as exc:
        parser.error(f"--forwarded-allow-ips: {exc}")
    if not 0 <= ns.retain_days <= MAX_RETAIN_DAYS:  # also nan, which compares false
        parser.error(f"--retain-days must be 0 (keep forever) to {MAX_RETAIN_DAYS}")
    return ServerConfig(**{f.name: getattr(ns, f.name) for f in fields(ServerConfig)})
