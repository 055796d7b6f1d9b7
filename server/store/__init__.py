"""Durable games: where records go, chosen by ``--database`` (see README, "Data").

    --database sqlite            (default) a SQLite file in --data-dir
    --database memory            nothing is stored: games end with the process
    --database postgresql://...  PostgreSQL, through asyncpg

The default data directory is ``$XDG_DATA_HOME/stacko`` (``~/.local/share/stacko`` when the
variable is unset), the place the XDG base directory rules give per-user application data:
it does not depend on where the server was started from. ``--data-dir`` or
``STACKO_DATA_DIR`` moves it; it must be on a local file system (WAL).
"""

from __future__ import annotations

import os
from pathlib import Path

from stacko.server.store.base import Filters, Op, Store, StoreError

__all__ = ["Filters", "Op", "Store", "StoreError", "default_data_dir", "make_store"]


def default_data_dir() -> Path:
    home = os.path.expanduser("~")
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    return Path(base) / "stacko"


def make_store(
    database: str,
    data_dir: str = "",
    sync: str = "normal",
    writer: str = "",
    node_id: str = "",
    shared: bool = False,
) -> Store | None:
    """The store ``--database`` names (not yet open), or ``None`` for ``memory``.
    ValueError for anything else. ``shared``: a cluster node, whose SQLite file other
    nodes on the machine may read (``server.store.sqlite`` says why that changes the
    writer)."""
    if database == "memory":
        return None
    if database == "sqlite":
        from stacko.server.store.sqlite import SQLiteStore

        if sync not in ("normal", "full"):
            raise ValueError(f"--sync must be normal or full, not {sync!r}")
        if shared and not writer and not os.environ.get("STACKO_STORE_WRITER"):
            writer = "thread" if sync == "full" else "loop"
        return SQLiteStore(data_dir or default_data_dir(), sync, writer, node_id)
    if database.startswith(("postgresql://", "postgres://")):
        from stacko.server.store.postgres import PostgresStore

        return PostgresStore(database)
    raise ValueError(f"--database must be sqlite, memory or a postgresql:// URL, not {database!r}")
