"""The JavaScript client module (clients/web/client.js) in Node, against a real server: two
Node clients play whole games of Stacko and Stakko, and a client whose connection
drops reconnects by itself and keeps its session (tests/js/full_game.mjs).

Node 22+ has a WebSocket of its own; before that the module needs the ``ws`` package, which
``npm install`` in tests/js installs (tests/js/package.json). The test skips, saying why,
where node or ws is missing, unless ``STACKO_REQUIRE_NODE=1`` (``.ci/run`` sets it): there a
missing one fails the test, so CI cannot pass without having run it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JS = ROOT / "tests" / "js"


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("STACKO_REQUIRE_NODE") == "1":
        pytest.fail(f"{reason} (STACKO_REQUIRE_NODE=1: this test must run)")
    pytest.skip(reason)


def node() -> str:
    path = shutil.which("node")
    if path is None:
        _skip_or_fail("node is not installed (apt-get install nodejs npm)")
        raise AssertionError("unreachable")
    version = subprocess.run([path, "--version"], capture_output=True, text=True, check=True)
    major = int(version.stdout.strip().lstrip("v").split(".")[0])
    if major < 22 and not (JS / "node_modules" / "ws").is_dir():
        _skip_or_fail(f"node {major} has no WebSocket and tests/js has no ws (npm install there)")
    return path


def test_two_node_clients_play_whole_games(server) -> None:
    exe = node()
    url = f"ws://127.0.0.1:{server.port}/"
    run = subprocess.run(
        [exe, str(JS / "full_game.mjs"), url, "stacko", "stakko", "resume"],
        capture_output=True, text=True, timeout=60, cwd=JS,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    results = [json.loads(line) for line in run.stdout.splitlines()]
    assert [r["game"] for r in results] == ["stacko", "stakko", "resume"]
    resumed = results.pop()
    assert resumed["statuses"] == ["reconnecting", "reconnecting", "online"], resumed
    assert resumed["same"], resumed
    for r in results:
        assert r["session"] and r["same"], r
        assert sorted(r["seats"]) == [0, 1]
        assert r["outcome"]["termination"] in ("completed", "turn_cap"), r
        assert r["ply"] > 0
    stacko = results[0]
    assert len(stacko["outcome"]["scores"]) == 2
