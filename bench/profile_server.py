"""Profile the game server under load: py-spy samples a server process while ``loadgen.py``
drives it (sampling starts once every match is set up), then the hottest frames are printed
(``bench/collapsed.py``).

    python bench/profile_server.py                              # saturation, 50 matches
    python bench/profile_server.py --matches 5000 --pace 2 --procs 2   # many connections

Needs ``py-spy`` (``pip install py-spy``; it reads the server process with ptrace, so it
must be allowed to: root or ptrace_scope 0). The raw collapsed stacks are kept in ``--out``
(default /tmp/stacko-profile.txt) for a flame graph. Latency figures printed alongside are
disturbed by the sampling; throughput and the profile are what this is for.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path[0:1] = [str(Path(__file__).resolve().parent.parent)]

from bench import collapsed
from bench.wsclient import REPO, progress, start_server, stop_process


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--matches", type=int, default=50)
    ap.add_argument("--pace", type=float, default=0.0)
    ap.add_argument("--procs", type=int, default=1, help="client processes")
    ap.add_argument("--duration", type=float, default=12.0, help="seconds of sampling")
    ap.add_argument("--options", default="{}", help="room options (JSON)")
    ap.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    ap.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    ap.add_argument("--out", default="/tmp/stacko-profile.txt")
    ap.add_argument("--top", type=int, default=35)
    ap.add_argument(
        "--server-arg",
        action="append",
        default=[],
        help="extra server argument (repeatable), e.g. --server-arg=--database=memory",
    )
    ap.add_argument("--native", action="store_true", help="py-spy --native (C frames too)")
    args = ap.parse_args(argv)
    pyspy = shutil.which("py-spy")
    if pyspy is None:
        ap.error("py-spy is not installed (pip install py-spy)")
    proc, url = start_server(args.server_arg, loop=None if args.loop == "asyncio" else args.loop)
    load = None
    try:
        load = subprocess.Popen(
            [sys.executable, str(REPO / "bench" / "loadgen.py"), "--url", url, "--server-pid",
             str(proc.pid), "--no-baseline", "--matches", str(args.matches), "--pace",
             str(args.pace), "--procs", str(args.procs), "--duration", str(args.duration + 4),
             "--warmup", "1", "--options", args.options],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        )  # fmt: skip
        assert load.stderr is not None
        for line in load.stderr:
            if "set up" in line:
                progress(line.rstrip())
                break
        cmd = [pyspy, "record", "-p", str(proc.pid), "-o", args.out, "-f", "raw",
               "-d", str(int(args.duration)), "-r", str(args.rate)]  # fmt: skip
        # --native must pause the process to unwind C stacks; otherwise sample without pausing
        cmd.append("--native" if args.native else "--nonblocking")
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        out, _ = load.communicate(timeout=args.duration + 600)
        result = json.loads(out)
    finally:
        if load is not None and load.poll() is None:
            load.kill()
        stop_process(proc)
    progress(
        f"moves/s {result['moves_per_s']}, server cpu {result['server']['cpu_util']} "
        f"({result['server']['cpu_us_per_move']} us/move), "
        f"latency {json.dumps(result['latency_opponent'])}"
    )
    if not Path(args.out).exists():
        progress("py-spy wrote no profile (is ptrace allowed?)")
        return 1
    return collapsed.main([args.out, "--top", str(args.top)])


if __name__ == "__main__":
    raise SystemExit(main())
