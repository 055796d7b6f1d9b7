"""A throwaway ``redis-server`` for tests, from its binary, like ``pgcluster`` for PostgreSQL.

On a free loopback port, in a temporary directory, nothing saved (``--save ''
--appendonly no``). ``STACKO_REQUIRE_SERVICES=1`` (set by ``.ci/run``) turns a missing binary
into a failure, so CI cannot pass without running the cluster tests.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from pgcluster import free_port


def skip_or_fail(reason: str) -> None:
    if os.environ.get("STACKO_REQUIRE_SERVICES") == "1":
        pytest.fail(f"redis-server is required here (STACKO_REQUIRE_SERVICES=1): {reason}")
    pytest.skip(reason)


def find_bin() -> str | None:
    for path in ("/usr/bin/redis-server", "/usr/local/bin/redis-server"):
        if Path(path).exists():
            return path
    return shutil.which("redis-server")


class RedisServer:
    def __init__(self) -> None:
        binary = find_bin()
        if binary is None:
            skip_or_fail("no redis-server binary: apt-get install redis-server")
        assert binary is not None
        self.binary = binary
        self.dir = Path(tempfile.mkdtemp(prefix="stacko-redis-"))
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start (or restart, on the same port: with nothing kept, it comes back empty)."""
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir), "--protected-mode", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.dir,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s,
            ):
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        skip_or_fail(f"redis-server did not start on port {self.port}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
