"""Profile the nodes of a cluster under cross-node (or same-node) load: ``redis-server`` and
two nodes as ``loadgen.py --redis`` starts them, the matches of ``bench/cluster.py``, and
py-spy sampling each node once every match is set up; then each node's hottest frames
(``bench/collapsed.py``).

    python bench/profile_cluster.py                   # cross-node, 20 matches, 0.05 s pace
    python bench/profile_cluster.py --same            # the same matches, same-node
    python bench/profile_cluster.py --gil             # only samples holding the GIL

``--gil`` leaves out the time a node waits in a system call or for a core, which on a busy
machine otherwise fills the profile with ``select`` and socket writes. Needs ``py-spy``
(``pip install py-spy``; ptrace must be allowed). The raw collapsed stacks stay in
``--out``-node0.txt and -node1.txt for a flame graph; latency printed alongside is disturbed
by the sampling.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path[0:1] = [str(Path(__file__).resolve().parent.parent)]

from bench import collapsed, driver
from bench.wsclient import progress, start_server, stop_process
from stacko.server.cluster.local import free_port, start_redis


async def profile(args: argparse.Namespace, pyspy: str) -> dict[str, Any]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("needs redis-server (apt-get install redis-server)")
    directory = Path(tempfile.mkdtemp(prefix="stacko-profile-cluster-"))
    port = free_port()
    redis = start_redis(binary, port, directory)
    url = f"redis://127.0.0.1:{port}/0"
    started = [start_server(["--redis-url", url, "--node-id", f"bench{i}"]) for i in range(2)]
    spies: list[subprocess.Popen[bytes]] = []
    try:
        await asyncio.sleep(0.5)

        def on_progress(t: float, snap: dict[str, Any]) -> None:
            if t >= 0 or spies:
                return
            progress(f"set up {snap['ready']}/{snap['units']} matches: sampling")
            for i, (proc, _) in enumerate(started):
                cmd = [pyspy, "record", "-p", str(proc.pid), "-o", f"{args.out}-node{i}.txt",
                       "-f", "raw", "-d", str(int(args.duration)), "-r", str(args.rate),
                       "--nonblocking"]  # fmt: skip
                if args.gil:
                    cmd.append("--gil")
                spies.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL))  # fmt: skip

        res = await driver.run(
            "match", [u for _, u in started], args.matches, pace=args.pace,
            duration=args.duration + 2, warmup=1.0, options=json.loads(args.options),
            rematch_delay=args.pace * 5, on_progress=on_progress, cross=not args.same,
        )  # fmt: skip
        for spy in spies:
            spy.wait(args.duration + 30)
        return {"moves": res.summary["moves"], "latency": driver.latency_summary(res.lat)}
    finally:
        for spy in spies:
            if spy.poll() is None:
                spy.kill()
        for proc, _ in started:
            stop_process(proc)
        redis.terminate()
        redis.wait(10)
        shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--matches", type=int, default=20)
    ap.add_argument("--pace", type=float, default=0.05)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of sampling")
    ap.add_argument("--options", default='{"turn_cap": 30, "rounds": 1}')
    ap.add_argument("--same", action="store_true", help="same-node matches instead")
    ap.add_argument("--gil", action="store_true", help="py-spy --gil")
    ap.add_argument("--rate", type=int, default=500, help="py-spy samples per second")
    ap.add_argument("--out", default="/tmp/stacko-profile-cluster")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args(argv)
    pyspy = shutil.which("py-spy")
    if pyspy is None:
        ap.error("py-spy is not installed (pip install py-spy)")
    result = asyncio.run(profile(args, pyspy))
    progress(f"moves {result['moves']}, latency {json.dumps(result['latency'])}")
    status = 0
    for i in range(2):
        path = f"{args.out}-node{i}.txt"
        print(f"\n== node {i} ({path})")
        if not Path(path).exists():
            progress("py-spy wrote no profile (is ptrace allowed?)")
            status = 1
            continue
        collapsed.main([path, "--top", str(args.top)])
    return status


if __name__ == "__main__":
    raise SystemExit(main())
