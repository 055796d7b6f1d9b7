"""``STACKO_TEST_PURE=1 pytest``: run the suite on the Python sources of the modules that
``setup.py`` compiles, even where their compiled files are built (CI runs both ways)."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from stacko.server.compiled import MODULES


class _SourceFirst(importlib.abc.MetaPathFinder):
    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name not in MODULES:
            return None
        for entry in path or sys.path:
            source = os.path.join(entry, name.rsplit(".", 1)[1] + ".py")
            if os.path.exists(source):
                return importlib.util.spec_from_file_location(name, source)
        return None


if os.environ.get("STACKO_TEST_PURE"):
    sys.meta_path.insert(0, _SourceFirst())


# Servers the tests start without --data-dir (subprocesses included: they inherit this) keep
# their store in a temporary directory, never in the user's ~/.local/share/stacko.
if "STACKO_DATA_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile

    _data = tempfile.mkdtemp(prefix="stacko-tests-data-")
    os.environ["STACKO_DATA_DIR"] = _data
    atexit.register(shutil.rmtree, _data, True)
