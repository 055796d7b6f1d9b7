"""``stacko-cluster --nodes 3``: a whole cluster on this machine, for trying it out.

Starts ``redis-server`` (nothing saved) and N ``stacko-server`` nodes on loopback, each with
its own data directory, prints their addresses, and stops them all on Ctrl-C. Production
runs each node as its own service behind a proxy (``docs/cluster.md``).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process {proc.pid} exited with status {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
                # Nothing listening on a port of the ephemeral range, a connection to it can
                # still succeed: to itself, when the system picks that very port as its
                # source (TCP's simultaneous open). That is not the process listening.
                if s.getsockname() != s.getpeername():
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s")


def free_port(avoid: range = range(0)) -> int:
    """A port free now and outside ``avoid`` (the nodes' ports: the system may hand out a
    port a caller just probed and released, and Redis would then take a node's port)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in avoid:
            return port


def start_redis(
    binary: str, port: int, directory: Path, started: list[subprocess.Popen[bytes]] | None = None
) -> subprocess.Popen[bytes]:
    """``redis-server`` on ``port``, once it listens; in ``started`` from the moment it
    exists (a SIGTERM while it comes up must stop it too)."""
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
         "no", "--dir", str(directory)],
        stdout=subprocess.DEVNULL, cwd=directory,
    )  # fmt: skip
    if started is not None:
        started.append(proc)
    wait_port(port, proc)
    return proc


def start_node(
    redis_url: str,
    index: int,
    port: int,
    directory: Path,
    extra: Sequence[str] = (),
    started: list[subprocess.Popen[bytes]] | None = None,
) -> subprocess.Popen[bytes]:
    """A node, once it listens; in ``started`` from the moment it exists: counted only
    once it listened, a node that a SIGTERM caught coming up was left running, orphaned."""
    data = directory / f"n{index}"
    data.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "stacko.server", "--port", str(port), "--redis-url", redis_url,
         "--node-id", f"n{index}", "--data-dir", str(data), *extra],
    )  # fmt: skip
    if started is not None:
        started.append(proc)
    wait_port(port, proc)
    return proc


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="stacko-cluster",
        description="Run redis-server and N stacko-server nodes on loopback (for trying out "
        "a cluster; see docs/cluster.md for production).",
    )
    parser.add_argument("--nodes", type=int, default=3, help="nodes to start (default: 3)")
    parser.add_argument(
        "--port", type=int, default=8765, help="first node's port; the others follow"
    )
    parser.add_argument("--redis-port", type=int, default=0, help="0: any free port")
    parser.add_argument("--dir", default="", help="data directories (default: a temporary one)")
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "")
    args, extra = parser.parse_known_args(argv)
    if not args.redis_server:
        parser.error("no redis-server found: install it (apt-get install redis-server)")
    if not 1 <= args.nodes <= 64:
        parser.error("--nodes must be 1..64")
    directory = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="stacko-cluster-"))
    directory.mkdir(parents=True, exist_ok=True)
    redis_port = args.redis_port or free_port(avoid=range(args.port, args.port + args.nodes))
    url = f"redis://127.0.0.1:{redis_port}/0"
    procs: list[subprocess.Popen[bytes]] = []
    # From the start, not once the nodes are up: a SIGTERM while they start must stop them too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        start_redis(args.redis_server, redis_port, directory, procs)
        for i in range(args.nodes):
            start_node(url, i, args.port + i, directory, extra, procs)
        print(f"redis-server on {url}; data in {directory}", flush=True)
        for i in range(args.nodes):
            print(f"node n{i}: ws://127.0.0.1:{args.port + i}/", flush=True)
        print("Ctrl-C stops them all", flush=True)
        while all(p.poll() is None for p in procs):
            time.sleep(0.5)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        for proc in reversed(procs):  # nodes first (they commit), Redis last
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        if not args.dir:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
