"""The README's two set-up commands where ``python3 -m pip install`` refuses with
``externally-managed-environment`` (PEP 668, as on a fresh Debian or Ubuntu), and where it
does not: both make and use their own virtual environment, so both work either way.

The refusing Python is the system's own where it refuses already (Debian, Ubuntu); elsewhere
it is this machine's interpreter run with ``PYTHONHOME`` pointing at a copy of its standard
library folder (links) that holds an ``EXTERNALLY-MANAGED`` file: that file is how PEP 668
makes pip refuse, and nothing of the real interpreter is touched. The
fast tests check the refusal and the commands' first step; the whole server command (an
install with compiling, then ``/healthz``) runs where ``STACKO_FULL_INSTALL_CHECK=1`` (set by
``.ci/run``), since it takes a minute.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pytest

from stacko.server import compiled

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> tuple[str, str]:
    """(the server command, the test command) of README.md's "Set up on a fresh machine"."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Set up on a fresh machine\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)\n```", section, re.DOTALL)
    assert len(blocks) >= 2, "README.md: the set-up section needs its two sh blocks"
    test = text.split("<!-- test-command -->\n```sh\n", 1)[1].split("\n```", 1)[0]
    assert test == blocks[1], "the test command is the second block of the set-up section"
    return blocks[0], test


def system_python() -> Path:
    """This machine's interpreter itself (not a virtual environment's)."""
    base = Path(sys.base_prefix) / "bin"
    for name in (f"python{sys.version_info[0]}.{sys.version_info[1]}", "python3"):
        if (base / name).exists():
            return base / name
    pytest.skip(f"no base interpreter in {base}")


def refusing_python(tmp: Path) -> Path:
    """A folder with a ``python3`` that pip treats as externally managed (PEP 668)."""
    stdlib = Path(sysconfig.get_paths(vars={"installed_base": sys.base_prefix})["stdlib"])
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    if (stdlib / "EXTERNALLY-MANAGED").exists():  # Debian, Ubuntu: this python3 refuses
        (bin_dir / "python3").symlink_to(system_python())
        return bin_dir
    home = tmp / "home"
    lib = home / stdlib.relative_to(sys.base_prefix)
    lib.mkdir(parents=True)
    for entry in stdlib.iterdir():
        (lib / entry.name).symlink_to(entry)
    (lib / "EXTERNALLY-MANAGED").write_text(
        "[externally-managed]\nError=managed by the system: use a virtual environment\n"
    )
    wrapper = bin_dir / "python3"
    wrapper.write_text(f"#!/bin/sh\nPYTHONHOME={shlex.quote(str(home))} "
                       f"exec {shlex.quote(str(system_python()))} \"$@\"\n")  # fmt: skip
    wrapper.chmod(0o755)
    return bin_dir


def env_with(bin_dir: Path) -> dict[str, str]:
    """``python3`` is the refusing one; no variable of the test run leaks into the commands."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("STACKO_", "PYTHON", "VIRTUAL_ENV"))
    }
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def steps(command: str) -> list[str]:
    return [step.strip() for step in command.split("&&")]


def test_both_commands_make_and_use_their_own_environment() -> None:
    for command in readme_commands():
        first, *rest = steps(command)
        assert first == "python3 -m venv .venv", command
        assert rest, command
        for step in rest:  # nothing after the first step runs the system's python3 or pip
            assert step.startswith(".venv/bin/"), step
        assert any(" -m pip install " in step for step in rest), command


def test_the_refusing_python_refuses_and_the_first_step_gets_around_it(tmp_path: Path) -> None:
    bin_dir = refusing_python(tmp_path)
    env = env_with(bin_dir)
    refused = subprocess.run(
        ["python3", "-m", "pip", "install", "--no-index", "stacko-no-such-package"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode != 0
    assert "externally-managed-environment" in refused.stdout + refused.stderr
    first = steps(readme_commands()[0])[0]
    work = tmp_path / "checkout"
    work.mkdir()
    subprocess.run(["bash", "-c", first], cwd=work, env=env, check=True, timeout=120)
    allowed = subprocess.run(
        [".venv/bin/python", "-m", "pip", "install", "--no-index", "stacko-no-such-package"],
        cwd=work, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    out = allowed.stdout + allowed.stderr
    assert "externally-managed-environment" not in out
    assert "No matching distribution found for stacko-no-such-package" in out


def _copy_of_the_repository(dest: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, files):
        source = ROOT / name.decode()
        target = dest / name.decode()
        if source.is_symlink():  # stacko/engine -> ../engine ...: links stay links
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(source), target)
        elif source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


@pytest.mark.skipif(
    os.environ.get("STACKO_FULL_INSTALL_CHECK") != "1",
    reason="the whole install takes a minute: .ci/run sets STACKO_FULL_INSTALL_CHECK=1",
)
@pytest.mark.parametrize("refusing", [True, False], ids=["pep668-python", "plain-python"])
def test_the_server_command_installs_and_serves(tmp_path: Path, refusing: bool) -> None:
    """The README's server command as written, in a fresh copy: the server answers /healthz."""
    work = tmp_path / "checkout"
    _copy_of_the_repository(work)
    bin_dir = refusing_python(tmp_path) if refusing else tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if not refusing:
        (bin_dir / "python3").symlink_to(system_python())
    env = {**env_with(bin_dir), "STACKO_HOST": "127.0.0.1", "STACKO_PORT": "0"}
    started = time.monotonic()
    errors = (tmp_path / "stderr.txt").open("w")  # a file: a full pipe would stall pip
    proc = subprocess.Popen(
        ["bash", "-c", readme_commands()[0]], cwd=work, env=env, stdout=subprocess.PIPE,
        stderr=errors, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        found = None
        for line in proc.stdout:  # pip's lines, then the server's start-up line
            found = re.match(r"stacko server on (http://127\.0\.0\.1:\d+/)", line)
            if found:
                break
        assert found, "the command ended without starting the server"
        with urllib.request.urlopen(found[1] + "healthz", timeout=10) as answer:
            assert answer.read() == b"ok\n"
        seconds = time.monotonic() - started
        # The installed package serves its web client (package data under stacko.clients)
        with urllib.request.urlopen(found[1], timeout=10) as answer:
            assert b"<html" in answer.read().lower()
        with urllib.request.urlopen(found[1] + "app.js", timeout=10) as answer:
            assert answer.status == 200
        which = "PEP 668" if refusing else "plain"
        print(f"README server command to /healthz: {seconds:.1f} s ({which} python3)")
        assert (work / ".venv").is_dir()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
        errors.close()
    log = (tmp_path / "stderr.txt").read_text()
    n = len(compiled.MODULES)
    assert f"{n} of {n} per-move modules compiled" in log, log[-2000:]
