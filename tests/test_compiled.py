"""The compiled modules (``setup.py``, ``server/compiled.py``): present and up to date, or
absent (the same sources run as Python)."""

from __future__ import annotations

import os
from pathlib import Path

from stacko.server import compiled

REPO = Path(__file__).resolve().parent.parent


def test_every_listed_module_has_its_source() -> None:
    for path in compiled.source_paths():
        assert (REPO / path).is_file(), path


def test_no_compiled_module_is_older_than_its_source() -> None:
    running, stale = compiled.status()
    assert stale == [], f"{stale} changed after they were compiled: run pip install -e . again"
    if os.environ.get("STACKO_TEST_PURE"):
        assert running == [], "STACKO_TEST_PURE=1 must run every module from its source"
