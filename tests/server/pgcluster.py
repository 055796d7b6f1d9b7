"""A throwaway PostgreSQL cluster for tests, from the Debian binaries (``initdb``, ``pg_ctl``).

On a free loopback port, in a temporary directory, with its socket there too (``-k``). As
root (CI containers), the cluster runs as the ``postgres`` user (``initdb`` refuses root).
``skip_reason()`` says why it cannot start here; ``STACKO_REQUIRE_SERVICES=1`` (set by
``.ci/run``) turns that skip into a failure, so CI cannot pass without running these tests.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

_counter = itertools.count(1)

BIN_DIRS = [Path(f"/usr/lib/postgresql/{v}/bin") for v in ("17", "16", "15", "14", "13")]


def find_bin() -> Path | None:
    for d in BIN_DIRS:
        if (d / "initdb").exists() and (d / "pg_ctl").exists():
            return d
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    return None


def _user() -> str | None:
    """The user to run the cluster as: ourselves, or ``postgres`` when we are root."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
        return "postgres"
    except KeyError:
        return "nobody"


def skip_or_fail(reason: str) -> None:
    if os.environ.get("STACKO_REQUIRE_SERVICES") == "1":
        pytest.fail(f"PostgreSQL is required here (STACKO_REQUIRE_SERVICES=1): {reason}")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    def __init__(self) -> None:
        bindir = find_bin()
        if bindir is None:
            skip_or_fail(
                "no PostgreSQL server binaries (initdb, pg_ctl): apt-get install postgresql"
            )
        assert bindir is not None
        self.bindir = bindir
        self.user = _user()
        self.dir = Path(tempfile.mkdtemp(prefix="stacko-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        self.dir.chmod(0o700)

    def _run(self, *argv: str) -> None:
        cmd = list(argv)
        if self.user is not None:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120, cwd=self.dir)

    def start(self) -> None:
        try:
            self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "stacko",
                      "-A", "trust", "--no-sync", "-E", "UTF8")  # fmt: skip
            opts = f"-k {self.dir} -h 127.0.0.1 -p {self.port} -F -c fsync=off"
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", opts,
                      "-l", str(self.dir / "log"), "-w", "-t", "60", "start")  # fmt: skip
        except (subprocess.CalledProcessError, OSError, subprocess.TimeoutExpired) as exc:
            out = getattr(exc, "stderr", b"") or b""
            self.cleanup()
            skip_or_fail(f"the PostgreSQL cluster did not start: {exc} {out.decode()[-500:]}")

    def dsn(self, db: str = "postgres") -> str:
        return f"postgresql://stacko@127.0.0.1:{self.port}/{db}"

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                      "-w", "stop")  # fmt: skip
        self.cleanup()

    def cleanup(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def fresh_db(self) -> str:
        """A new empty database: each test gets its own."""
        name = f"t{next(_counter)}"
        self._run(str(self.bindir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                  "-U", "stacko", name)  # fmt: skip
        return self.dsn(name)
