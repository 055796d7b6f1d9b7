"""The process: ``python -m server`` flags, SIGTERM shutdown, and plain HTTP on the same port."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from stacko_wire import Client

ROOT = Path(__file__).resolve().parents[2]


_DATA = tempfile.TemporaryDirectory(prefix="stacko-cli-")  # never the user's default data


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKO_")}
    env["PYTHONPATH"] = str(ROOT)
    env["STACKO_DATA_DIR"] = _DATA.name
    return env


async def http_get(port: int, path: str) -> tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1].decode()


def test_help_lists_host_port_and_limits():
    out = subprocess.run(
        [sys.executable, "-m", "stacko.server", "--help"], cwd=ROOT, env=_env(),
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    for flag in ("--host", "--port", "--max-frame-bytes", "--rate-per-second", "--burst",
                 "--hello-timeout-s", "--reconnect-grace-s", "--max-rooms"):  # fmt: skip
        assert flag in out, flag


def test_common_mistakes_get_one_line_not_a_traceback():
    """A taken port, a port out of range, a bad environment value: a message and exit != 0."""
    import socket

    def run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "stacko.server", *args], cwd=ROOT, env={**_env(), **env},
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = run(["--host", "127.0.0.1", "--port", str(port)])
    assert busy.returncode == 1 and "Traceback" not in busy.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in busy.stderr
    out_of_range = run(["--port", "99999"])
    assert out_of_range.returncode == 2 and "--port must be 0..65535" in out_of_range.stderr
    bad_env = run(["--host", "127.0.0.1"], STACKO_PORT="abc")
    assert bad_env.returncode == 2 and "STACKO_PORT='abc'" in bad_env.stderr
    assert "Traceback" not in out_of_range.stderr + bad_env.stderr


async def test_sigterm_closes_clients_with_1012_after_committing(tmp_path):
    stderr = (tmp_path / "stderr.txt").open("wb")  # the child writes to it
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "stacko.server", "--port", "0", cwd=ROOT, env=_env(),
        stdout=asyncio.subprocess.PIPE, stderr=stderr,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
        match = re.fullmatch(
            r"stacko server on http://127\.0\.0\.1:(\d+)/ \(open it in a browser; clients and"
            r" bots connect to (ws://127\.0\.0\.1:(\d+)/)\); Ctrl-C stops it\n",
            line,
        )
        assert match and match.group(1) == match.group(3), line  # the browser's address too
        url, port = match.group(2), int(match.group(1))
        assert port != 0
        assert await http_get(port, "/healthz") == (200, "ok\n")
        clients = [await Client.open(url, f"c{i}") for i in range(2)]
        for c in clients:
            await c.hello()
        created = await clients[0].call("create_room", options={"tower": 3, "bricks": 8})
        assert created["type"] == "joined"
        proc.send_signal(signal.SIGTERM)
        for c in clients:  # with a store (the default): restart, come back and resume
            assert await c.closed(10) == (1012, "service restart")
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        stderr.close()
    log = (tmp_path / "stderr.txt").read_text()
    assert f"stacko server listening on {url}; web client at http://127.0.0.1:{port}/" in log
    assert "shutting down" in log
    # At the default level (INFO) no line per connection or per HTTP request.
    assert "connection open" not in log and "HTTP response sent" not in log, log


async def test_http_paths_on_the_websocket_port(harness):
    port = harness.server.port
    assert await http_get(port, "/healthz") == (200, "ok\n")
    assert (await http_get(port, "/"))[0] == 200
    assert (await http_get(port, "/nope"))[0] == 404
    c = await harness.client("after-http")  # WebSocket upgrades still work on the same port
    await c.barrier()


async def test_in_process_shutdown(make_harness):
    h = await make_harness()
    game = await h.game({"tower": 3, "bricks": 8})
    await h.server.shutdown()
    for c in game.seats:
        assert await c.closed() == (1001, "server shutting down")


async def test_memory_only_server_closes_with_1001_and_keeps_no_records(tmp_path):
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "stacko.server", "--port", "0", "--database", "memory",
        "--data-dir", str(tmp_path / "unused"), cwd=ROOT, env=_env(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
        match = re.search(r"connect to (ws://127\.0\.0\.1:(\d+)/)", line)
        assert match, line
        status, body = await http_get(int(match.group(2)), "/api/games")
        assert status == 503 and '"no_store"' in body
        c = await Client.open(match.group(1), "c")
        await c.hello()
        proc.send_signal(signal.SIGTERM)
        assert await c.closed(10) == (1001, "server shutting down")
        assert await asyncio.wait_for(proc.wait(), 10) == 0
        assert not (tmp_path / "unused").exists()
        # said at start (it said nothing: STACKO_DATABASE=memory left in an environment ran
        # a server that loses every game at its next restart without a word)
        assert proc.stderr is not None
        log = (await proc.stderr.read()).decode()
        assert "WARNING stacko.store: store: none (--database memory)" in log, log
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def test_a_corrupt_data_file_stops_the_server_with_a_message(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "stacko.sqlite3").write_bytes(b"garbage" * 1000)
    out = subprocess.run(
        [sys.executable, "-m", "stacko.server", "--port", "0", "--data-dir", str(data)],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2, out
    assert "cannot use the data file" in out.stderr and "Traceback" not in out.stderr


def test_a_full_disk_stops_the_server_loudly(tmp_path):
    """The file may not grow past 64 KiB (RLIMIT_FSIZE: writes fail as on a full disk):
    the first commit that needs more fails, and the server exits 1 rather than run on."""
    import resource

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    script = (
        "import asyncio, sys\n"
        "from stacko_wire import Client\n"
        "async def main(url):\n"
        "    for i in range(400):\n"
        "        c = await Client.open(url, 'c')\n"
        "        await c.hello('x' * 30)\n"
        "        r = await c.call('create_room', options={'tower': 3, 'bricks': 8})\n"
        "        d = await Client.open(url, 'd')\n"
        "        await d.hello('y' * 30)\n"
        "        j = await d.call('join', room=r['room'])\n"
        "asyncio.run(main(sys.argv[1]))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "stacko.server", "--port", "0", "--data-dir", str(tmp_path / "d")],
        cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=limit,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = re.search(r"(ws://\S+/)", proc.stdout.readline())
        assert url
        subprocess.run(
            [sys.executable, "-c", script, url.group(1)], cwd=Path(__file__).parent,
            env={**_env(), "PYTHONPATH": f"{ROOT}:{Path(__file__).parent}"},
            capture_output=True, timeout=60,
        )  # fmt: skip
        assert proc.wait(30) == 1
        err = proc.stderr.read() if proc.stderr else ""
        assert "failed" in err and "full" in err.lower(), err[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_retain_days_that_no_cutoff_can_hold_are_refused(capsys):
    """``--retain-days inf`` or ``1e12`` made a cutoff that is no integer (OverflowError) or
    does not fit a 64-bit column, and ``nan`` none at all: the retention task died at its
    first run, or never ran, without a word, and old games were kept forever."""
    import pytest

    from stacko.server.config import MAX_RETAIN_DAYS, parse_args

    for bad in ("nan", "inf", "1e12", str(MAX_RETAIN_DAYS + 1)):
        with pytest.raises(SystemExit) as e:
            parse_args(["--retain-days", bad])
        assert e.value.code == 2
        assert "--retain-days must be" in capsys.readouterr().err, bad
    assert parse_args(["--retain-days", str(MAX_RETAIN_DAYS)]).retain_days == MAX_RETAIN_DAYS
    assert parse_args(["--retain-days", "0.5"]).retain_days == 0.5


def test_the_server_command_hands_the_gil_to_the_loop_within_half_a_millisecond(
    monkeypatch, tmp_path
):
    """A replay built in a thread held the GIL for CPython's 5 ms at a time while the event
    loop, which sends every game's frames, waited (``server.__main__.SWITCH_INTERVAL_S``)."""
    from stacko.server import __main__ as entry

    asked: list[float] = []
    monkeypatch.setattr(sys, "setswitchinterval", asked.append)
    monkeypatch.setattr(entry.asyncio, "run", lambda coro: coro.close() or 0)
    assert entry.main(["--port", "0", "--data-dir", str(tmp_path)]) == 0
    assert asked == [entry.SWITCH_INTERVAL_S] and entry.SWITCH_INTERVAL_S <= 0.0005
