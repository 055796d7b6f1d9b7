"""The client side shared by every benchmark: a lean WebSocket client and small helpers.

``LeanClient`` is an ``asyncio.Protocol`` that speaks just enough RFC 6455 for a load
generator: an HTTP/1.1 upgrade without extensions (so no compression), unfragmented text
frames out (masked with an all-zero key, which leaves the payload as it is: the server still
unmasks it, the client does no work), text/ping/close frames in, and a pong for every ping
(the server's keepalive). Each received message is handed to a callback synchronously from
``data_received``: no task, no future, no queue per message. That keeps the client several
times cheaper per frame than the server it measures, so one process can load a server, and
the same code drives the echo baseline (``bench/echo.py``) and the game load
(``bench/loadgen.py``), so their figures compare like with like.

Helpers: raising ``RLIMIT_NOFILE``, reading a process's RSS and CPU time from ``/proc``,
fetching an HTTP path (``/metrics``) over a plain socket, starting a server subprocess and
reading its URL, percentiles.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import base64
import contextlib
import hashlib
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from stacko.server.wsconn import read_header

REPO = Path(__file__).resolve().parent.parent
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_ZERO_MASK = b"\x00\x00\x00\x00"
_CLOSE_NORMAL = b"\x88\x82" + _ZERO_MASK + (1000).to_bytes(2, "big")


def frame_header(n: int) -> bytes:
    """FIN + text opcode, MASK bit, length, and the zero masking key."""
    if n < 126:
        return bytes((0x81, 0x80 | n)) + _ZERO_MASK
    if n < 65536:
        return b"\x81\xfe" + n.to_bytes(2, "big") + _ZERO_MASK
    return b"\x81\xff" + n.to_bytes(8, "big") + _ZERO_MASK


class LeanClient(asyncio.Protocol):
    """One WebSocket connection. ``on_message(client, payload: bytes)`` for each text frame;
    ``on_lost(client, by_us: bool)`` once when the TCP connection ends."""

    __slots__ = (
        "_buf", "_frag", "_key", "_on_lost", "by_us", "close_code", "closed", "handshake",
        "host", "on_message", "open", "path", "tag", "transport",
    )  # fmt: skip

    def __init__(
        self,
        host: str,
        on_message: Callable[[LeanClient, bytes], None],
        on_lost: Callable[[LeanClient, bool], None] | None = None,
        tag: Any = None,
        path: str = "/",
    ) -> None:
        self.host = host
        self.path = path
        self.on_message = on_message
        self._on_lost = on_lost
        self.tag = tag
        self.transport: asyncio.Transport | None = None
        self.handshake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.open = False
        self.closed = False
        self.by_us = False
        self.close_code: int | None = None
        """The code of the server's close frame, once one came."""
        self._buf = b""
        self._frag: list[bytes] | None = None
        self._key = base64.b64encode(os.urandom(16))

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(
            b"GET "
            + self.path.encode()
            + b" HTTP/1.1\r\nHost: "
            + self.host.encode()
            + b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: "
            + self._key
            + b"\r\n"
            b"Sec-WebSocket-Version: 13\r\nUser-Agent: stacko-bench\r\n\r\n"
        )

    def data_received(self, data: bytes) -> None:
        buf = self._buf + data if self._buf else data
        if not self.open:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                self._buf = buf
                return
            head, buf = buf[:end], buf[end + 4 :]
            accept = base64.b64encode(hashlib.sha1(self._key + _GUID).digest())
            if not head.startswith(b"HTTP/1.1 101") or accept not in head:
                self._fail_handshake(head.split(b"\r\n", 1)[0].decode("latin-1"))
                return
            self.open = True
            self.handshake.set_result(None)
        pos, n = 0, len(buf)
        while (header := read_header(buf, pos)) is not None:
            hdr, length = header
            end = pos + hdr + length  # server frames are not masked
            if end > n:
                break
            b0 = buf[pos]
            payload = buf[pos + hdr : end]
            pos = end
            opcode = b0 & 0x0F
            if opcode <= 2:  # text, binary, continuation
                if not b0 & 0x80:  # a fragment: keep it until the final one
                    self._frag = (self._frag or []) + [payload]
                    continue
                if opcode == 0 and self._frag is not None:
                    payload = b"".join([*self._frag, payload])
                    self._frag = None
                if not self.closed:
                    self.on_message(self, payload)
            elif opcode == 9:  # ping: answer with the same payload
                self._write_control(0x8A, payload)
            elif opcode == 8 and not self.closed:  # close: answer, then the server ends TCP
                self.closed = True
                self.close_code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else None
                self._write_control(0x88, payload[:2])
        self._buf = buf[pos:] if pos < n else b""

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.open = False
        if not self.handshake.done():
            self.handshake.set_exception(ConnectionError(f"connection lost: {exc}"))
        if self._on_lost is not None:
            self._on_lost(self, self.by_us)

    # -- sending ----------------------------------------------------------------------------

    def send(self, payload: bytes) -> None:
        """One text frame (``payload`` is UTF-8 JSON)."""
        if not self.closed and self.transport is not None:
            self.transport.write(frame_header(len(payload)) + payload)

    def _write_control(self, first: int, payload: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(bytes((first, 0x80 | len(payload))) + _ZERO_MASK + payload)

    def close(self) -> None:
        """Start the closing handshake (1000); the server ends the TCP connection."""
        self.by_us = True
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.write(_CLOSE_NORMAL)
            # In case the server never answers: abort after a while.
            asyncio.get_running_loop().call_later(5.0, self.abort)

    def abort(self) -> None:
        self.by_us = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()

    def _fail_handshake(self, status: str) -> None:
        if not self.handshake.done():
            self.handshake.set_exception(ConnectionError(f"handshake refused: {status}"))
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


async def connect(
    url: str,
    on_message: Callable[[LeanClient, bytes], None],
    on_lost: Callable[[LeanClient, bool], None] | None = None,
    tag: Any = None,
    timeout: float = 30.0,  # noqa: ASYNC109 (covers connect and upgrade together)
    rcvbuf: int | None = None,
    local_addr: str | None = None,
) -> LeanClient:
    """Open a connection and finish the upgrade. ``rcvbuf``: a small socket receive buffer
    (bytes), for a client that stops reading to fill up quickly. ``local_addr``: the source
    address (another loopback address, 127.0.0.2, is another client IP to the server)."""
    host, port = parse_url(url)
    path = "/" + url.split("://", 1)[1].partition("/")[2]
    loop = asyncio.get_running_loop()
    sock = None
    if rcvbuf is not None or local_addr is not None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if local_addr is not None:
            sock.bind((local_addr, 0))
        sock.setblocking(False)
        await loop.sock_connect(sock, (host, port))

    def factory() -> LeanClient:
        return LeanClient(f"{host}:{port}", on_message, on_lost, tag, path)

    if sock is not None:
        conn = loop.create_connection(factory, sock=sock)
    else:
        conn = loop.create_connection(factory, host, port)
    _, client = await asyncio.wait_for(conn, timeout)
    await asyncio.wait_for(client.handshake, timeout)
    return client


def parse_url(url: str) -> tuple[str, int]:
    m = re.match(r"^ws://([^/:]+):(\d+)/?", url)
    if m is None:
        raise ValueError(f"not a ws://HOST:PORT/ URL: {url}")
    host = m.group(1)
    if host not in ("127.0.0.1", "localhost", "::1") and not host.startswith("127."):
        raise ValueError(f"benchmarks target loopback only, not {host}")
    return host, int(m.group(2))


# -- process helpers --------------------------------------------------------------------------


def raise_nofile() -> dict[str, int]:
    """Soft RLIMIT_NOFILE up to the hard limit; returns what the machine allowed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    soft2, hard2 = resource.getrlimit(resource.RLIMIT_NOFILE)
    return {"soft_before": soft, "soft": soft2, "hard": hard2}


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) in kB from /proc/PID/status; {} if the process is gone."""
    out: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


_TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a process (0.0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def self_cpu() -> float:
    t = os.times()
    return t.user + t.system


async def http_get(
    url: str,
    path: str,
    timeout: float = 10.0,  # noqa: ASYNC109
    local_addr: str | None = None,
) -> tuple[int, str]:
    """GET ``path`` on the server at ``url`` (ws://HOST:PORT/) -> (status, body); from
    ``local_addr`` if given (a loopback address the server counts apart)."""
    host, port = parse_url(url)
    local = None if local_addr is None else (local_addr, 0)
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(host, port, local_addr=local), timeout
    )
    try:
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode()
        )
        raw = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, body.decode()


def parse_prometheus(text: str) -> dict[str, float]:
    """``name{labels}`` -> value, for the samples of a Prometheus text page."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        with contextlib.suppress(ValueError):
            out[key] = float(value)
    return out


def _preexec() -> None:
    raise_nofile()


def start_process(
    argv: Sequence[str], url_pattern: str, timeout: float = 30.0
) -> tuple[subprocess.Popen[str], str]:
    """Start ``argv`` (file limit raised, repo on PYTHONPATH) and wait for the line that
    gives its URL. Returns (process, url)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    proc = subprocess.Popen(
        list(argv), cwd=REPO, env=env, stdout=subprocess.PIPE, text=True,
        preexec_fn=_preexec,
    )  # fmt: skip
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    pattern = re.compile(url_pattern)
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = pattern.search(line)
        if m:
            return proc, m.group(1)
    stop_process(proc)
    raise RuntimeError(f"{argv} did not print its URL")


def start_server(
    extra: Sequence[str] = (), loop: str | None = None
) -> tuple[subprocess.Popen[str], str]:
    """``python -m server --port 0`` with rate limits out of the way of a load test (every
    connection comes from loopback: the per-address ``hello`` limit and connection cap too).
    The store is on (the default) in a fresh temporary data directory, removed at exit,
    unless ``extra`` names one (``--data-dir``) or another database (``--database memory``)."""
    argv = [
        sys.executable, "-m", "stacko.server", "--port", "0", "--log-level", "WARNING",
        "--rate-per-second", "1000000", "--burst", "1000000", "--max-connections-per-ip", "0",
        "--hello-rate-per-ip", "1000000", "--hello-burst-per-ip", "1000000",
        "--max-waiting-per-ip", "0", *extra,
    ]  # fmt: skip
    if not any(a.startswith(("--data-dir", "--database")) for a in extra):
        data = tempfile.mkdtemp(prefix="stacko-bench-")
        atexit.register(shutil.rmtree, data, True)
        argv += ["--data-dir", data]
    if loop:
        argv += ["--loop", loop]
    return start_process(argv, r"(ws://\S+/)")


def stop_process(proc: subprocess.Popen[str], timeout: float = 15.0) -> None:
    """SIGTERM this child (by its PID), then SIGKILL if it does not exit."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(5)
    if proc.stdout is not None:
        proc.stdout.close()


# -- statistics -------------------------------------------------------------------------------


def percentiles(samples: Sequence[float], qs: Sequence[float] = (50, 95, 99)) -> dict[str, Any]:
    """Nearest-rank percentiles of ``samples`` (seconds) as milliseconds, plus max and count."""
    data = sorted(samples)
    out: dict[str, Any] = {"count": len(data)}
    for q in qs:
        key = f"p{q:g}_ms"
        if not data:
            out[key] = None
            continue
        rank = max(0, min(len(data) - 1, int(-(-q * len(data) // 100)) - 1))
        out[key] = round(data[rank] * 1000, 4)
    out["max_ms"] = round(data[-1] * 1000, 4) if data else None
    return out


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` of the bench tools: the module docstring as written, and every default."""


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
