"""Compiles the per-move path with mypyc; the same modules run as plain Python without it.

Every move goes through these modules twice per state frame (the rules engine, its views,
the frame builder, the room, the hub, the connection): compiled, the server's CPU per move
falls by about a third (``bench/README.md``). The store's recorder and journal writer, once
per move, are compiled too: a quarter less of the store's own cost per move. The list is
``server/compiled.py``'s; the rest of the project (pydantic models, the websockets subclass,
the clients, the rest of the store) stays interpreted.

``STACKO_PURE_PYTHON=1 pip install ...`` skips compiling. So does a machine where it cannot
be done (no C compiler, no mypyc, or mypyc refusing the code): the install then goes on as
plain Python and says why. A build is all or nothing: compiled modules share one library.

An editable install builds in place, next to the sources; there this also removes compiled
files of modules no longer on the list and records what it compiled (``SOURCES_FILE``), so
the server can tell when a source changed after its build.

Build time (a fresh install used to spend most of its time here, in silence): mypyc writes
one C file per module (``multi_file``) plus its runtime's, and they compile in parallel, one
per CPU; the shims build alongside. The modules still share one library, so calls between
them stay native, and ``-O3`` stays: on 2 cores the compile fell from about 20 s to 13 s with
the server's cost per move unchanged within noise (``bench/hub.py``; the figures are in the
commit that made the change). A rebuild in the same tree (``pip install ".[arena]"`` after
``pip install .``) reuses the objects in ``build/``: mypyc rewrites only C files that changed.
"""

from __future__ import annotations

import glob
import json
import os
import runpy
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
_compiled = runpy.run_path(os.path.join(ROOT, "server", "compiled.py"))
COMPILED: list[str] = _compiled["source_paths"]()
GROUP = "stacko"
"""The shared library's name (``stacko__mypyc``): fixed, so a changed list replaces it."""


def _say(message: str) -> None:
    print(f"stacko setup.py: {message}", file=sys.stderr)


def ext_modules() -> list[Any]:
    if os.environ.get("STACKO_PURE_PYTHON"):
        return []
    try:
        from mypyc.build import mypycify

        extensions = mypycify(COMPILED, opt_level="3", group_name=GROUP, multi_file=True)
    except SystemExit:  # mypy found errors in the code, and has printed them
        _say("not compiling (mypyc refused the code, see above): the modules stay Python")
        return []
    except Exception as exc:  # no mypyc, or it failed in another way
        _say(f"not compiling ({type(exc).__name__}: {exc}): the modules stay Python")
        return []
    for extension in extensions:
        extension.optional = True
    return list(extensions)


def _jobs() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))  # the CPUs this process may use
    return os.cpu_count() or 1


class BuildAllOrNothing(build_ext):
    """Optional extensions, all or none: a shim without its shared library cannot import.

    Builds in parallel: the extensions (the shared library and the shims) side by side, and
    the C files of one extension (``multi_file``) each in its own compiler process."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:
            self.parallel = _jobs()

    def build_extensions(self) -> None:
        jobs = _jobs()
        compiler = self.compiler
        one_by_one = compiler.compile

        def compile(sources: list[str], *args: Any, **kwargs: Any) -> list[str]:
            if jobs < 2 or len(sources) < 2:
                return list(one_by_one(sources, *args, **kwargs))
            # The biggest first, so that no long compile starts last.
            order = sorted(sources, key=lambda path: -os.path.getsize(path))
            with ThreadPoolExecutor(jobs) as pool:
                built = pool.map(lambda source: one_by_one([source], *args, **kwargs), order)
                objects = dict(zip(order, built, strict=True))
            return [obj for source in sources for obj in objects[source]]

        compiler.compile = compile  # set once, before the extensions' threads start
        try:
            super().build_extensions()
        finally:
            del compiler.compile

    def run(self) -> None:
        hashes = _compiled["source_hashes"](ROOT)  # the sources mypyc just read
        super().run()
        built = [self.get_ext_fullpath(ext.name) for ext in self.extensions]
        if any(not os.path.exists(path) for path in built):
            for path in built:
                if os.path.exists(path):
                    os.remove(path)
            _say("a compiled module failed to build: every module stays Python")
            hashes = {}
        if self.inplace:
            self._tidy_in_place(built)
            record = os.path.join(ROOT, _compiled["SOURCES_FILE"])
            if hashes:
                with open(record, "w") as f:
                    json.dump(hashes, f, indent=1)
            elif os.path.exists(record):
                os.remove(record)

    def _tidy_in_place(self, built: list[str]) -> None:
        """Compiled files in the tree that this build did not make (a module taken off the
        list, an older shared library) would still be imported: remove them."""
        keep = {os.path.abspath(path) for path in built}
        patterns = ["*__mypyc*.so", "*__mypyc*.pyd"]
        for package in {path.split("/")[0] for path in COMPILED}:
            patterns += [f"{package}/**/*.so", f"{package}/**/*.pyd"]
        for pattern in patterns:
            for path in glob.glob(os.path.join(ROOT, pattern), recursive=True):
                if os.path.abspath(path) not in keep:
                    os.remove(path)
                    _say(f"removed {path}: not part of this build")


setup(ext_modules=ext_modules(), cmdclass={"build_ext": BuildAllOrNothing})
