"""Everything installs under the one import name ``stacko`` (``stacko.server``, ...): no
generic top-level ``engine``, ``server``, ``protocol``, ``clients`` or ``bots`` package in
site-packages for a user's own ``engine.py`` (or another distribution) to collide with."""

from __future__ import annotations

import ast
import gc
import subprocess
import tomllib
from pathlib import Path

import stacko

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("engine", "server", "protocol", "clients", "bots")


def test_each_folder_is_a_subpackage_of_stacko() -> None:
    for name in FOLDERS:
        link = ROOT / "stacko" / name
        assert link.is_symlink() and link.resolve() == ROOT / name, name
    assert Path(stacko.__file__).parent == ROOT / "stacko"


def test_the_distribution_ships_only_the_stacko_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["tool"]["setuptools"]["packages"]["find"]["include"] == ["stacko*"]
    for target in config["project"]["scripts"].values():
        assert target.startswith("stacko."), target


def parse_without_gc(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` with no garbage collection inside it: CPython 3.11's compiler raised
    "SystemError: AST constructor recursion depth mismatch" in CI when a finalizer left by
    an earlier test (an asyncio subprocess transport's ``__del__``) ran during the parse."""
    gc.collect()
    gc.disable()
    try:
        return ast.parse(source, filename)
    finally:
        gc.enable()


def test_no_code_imports_a_folder_by_its_old_top_level_name() -> None:
    """``import server`` would load a second copy of the module next to ``stacko.server``
    (two registries, two hubs' worth of globals): every import goes through ``stacko.``."""
    tracked = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    bad = []
    for rel in tracked:
        path = ROOT / rel
        if rel.startswith("stacko/") or not path.is_file():
            continue
        for node in ast.walk(parse_without_gc(path.read_text(), rel)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            bad += [f"{rel}:{node.lineno} {n}" for n in names if n.split(".")[0] in FOLDERS]
    assert bad == []
