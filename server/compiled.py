"""Which modules ``setup.py`` compiles with mypyc, and whether they run compiled here.

The per-move path (rules engine, views, frame building, room, hub, connection, and the
store's recorder and journal writer) is compiled when the package is installed on a machine
with a C compiler; the same source runs as plain Python otherwise (``STACKO_PURE_PYTHON=1``
at install time, or no compiler). An editable install builds the compiled files next to the
sources: after editing one of these modules, build again (``pip install -e .``), or Python
keeps importing the old compiled file. The server logs a warning when that happens
(``stale``). Standard library only: ``setup.py`` reads ``MODULES`` from this file before
anything is installed.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os

MODULES = (
    "stacko.engine.errors",
    "stacko.engine.outcome",
    "stacko.engine.stacko",
    "stacko.engine.stacko_view",
    "stacko.protocol.frames",
    "stacko.protocol.games.stacko_encode",
    "stacko.server.batch",
    "stacko.server.cluster.link",
    "stacko.server.connection",
    "stacko.server.hub",
    "stacko.server.metrics",
    "stacko.server.room",
    "stacko.server.store.journal",
    "stacko.server.store.recorder",
)

_COMPILED_SUFFIXES = (".so", ".pyd")


def source_paths() -> list[str]:
    """``MODULES`` as paths relative to the repository, for ``mypycify``."""
    return [name.replace(".", "/") + ".py" for name in MODULES]


SOURCES_FILE = "compiled-sources.json"
"""Written by ``setup.py`` next to itself after a complete in-place (editable) build: each
source's SHA-256 as compiled. An installed wheel has none: nobody edits its sources."""


def source_hashes(root: str) -> dict[str, str]:
    hashes = {}
    for path in source_paths():
        with open(os.path.join(root, path), "rb") as f:
            hashes[path] = hashlib.sha256(f.read()).hexdigest()
    return hashes


def status() -> tuple[list[str], list[str]]:
    """(modules that run compiled, compiled modules whose source has changed since)."""
    compiled = [
        name
        for name in MODULES
        if (importlib.import_module(name).__file__ or "").endswith(_COMPILED_SUFFIXES)
    ]
    # stacko/server/compiled.py: the root holds stacko/ (a checkout, or site-packages)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        with open(os.path.join(root, SOURCES_FILE)) as f:
            built: dict[str, str] = json.load(f)
    except (OSError, ValueError):
        return compiled, []
    now = source_hashes(root)
    stale = [
        n
        for n, p in zip(MODULES, source_paths(), strict=True)
        if n in compiled and built.get(p) != now[p]
    ]
    return compiled, stale
