"""Compiles the per-move path with mypyc; the same modules run as plain Python without it.

Every move goes through these modules twice per state frame (the rules engine, its views,
the frame builder, the room, the hub, the connection): compiled, the server's CPU per move
falls by about a third (``bench/README.md``). The list is ``server/compiled.py``'s; the rest
of the project (pydantic models, the websockets subclass, the clients) stays interpreted.

``STACKO_PURE_PYTHON=1 pip install ...`` skips compiling; so does a machine without a C
compiler or mypyc (each extension is optional: a failed build leaves the module as Python).
"""

from __future__ import annotations

import json
import os
import runpy

from setuptools import setup

_compiled = runpy.run_path("server/compiled.py")
COMPILED = _compiled["source_paths"]()


def ext_modules() -> list[object]:
    if os.environ.get("STACKO_PURE_PYTHON"):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        return []
    extensions = mypycify(COMPILED, opt_level="3")
    with open(_compiled["SOURCES_FILE"], "w") as f:  # what was compiled, for stale builds
        json.dump(_compiled["source_hashes"]("."), f, indent=1)
    for extension in extensions:
        extension.optional = True
    return list(extensions)


setup(ext_modules=ext_modules())
