"""Commit latency of one move's change on PostgreSQL with the cluster's fence (a
``SELECT ... FOR SHARE`` of the game's owner and epoch in the same transaction) beside the
same change without it, in alternating blocks, on a throwaway PostgreSQL cluster
(``tests/server/pgcluster.py``: ``fsync=off``, so the figures are the statements' cost, not
the disk's). Prints JSON.

    python bench/fence.py [--rounds 10] [--block 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "server")]

from pgcluster import Cluster  # noqa: E402

from stacko.server.store import make_store  # noqa: E402
from stacko.server.store.base import FENCE  # noqa: E402
from stacko.server.store.recorder import EVENT_SQL  # noqa: E402

GAMES = 50


async def run(rounds: int, block: int) -> dict[str, dict[str, float]]:
    pg = Cluster()
    pg.start()
    try:
        store = make_store(pg.fresh_db())
        assert store is not None
        await store.open()
        await store.execute(
            [
                (
                    "INSERT INTO games (id, code, game, options, rules_version, public, "
                    "players, player0, player1, status, started_ms, owner) VALUES "
                    "(?, 'CODE', 'stacko', '{}', 1, 0, '[]', 'a', 'b', 'playing', 1, 'n0')",
                    (f"g{i}",),
                )
                for i in range(GAMES)
            ]
        )
        seqs = dict.fromkeys((f"g{i}" for i in range(GAMES)), 0)
        took: dict[str, list[float]] = {"plain": [], "fenced": []}
        for r in range(rounds):
            for kind in ("plain", "fenced") if r % 2 == 0 else ("fenced", "plain"):
                for n in range(block):
                    game = f"g{n % GAMES}"
                    seqs[game] += 1
                    seq = seqs[game]
                    ops = [(EVENT_SQL, (game, seq, "move", 0, seq, "{}", 1))]
                    if kind == "fenced":
                        ops.insert(0, (FENCE, (game, "n0", 0)))
                    started = time.perf_counter()
                    store.submit(ops)
                    await store.flush()
                    took[kind].append(time.perf_counter() - started)
        await store.close()
    finally:
        pg.stop()
    out = {}
    for kind, values in took.items():
        values.sort()
        out[kind] = {
            "commits": len(values),
            "p50_ms": round(values[len(values) // 2] * 1e3, 3),
            "p99_ms": round(values[int(len(values) * 0.99)] * 1e3, 3),
            "mean_ms": round(statistics.mean(values) * 1e3, 3),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--block", type=int, default=200)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.rounds, args.block)), indent=1))


if __name__ == "__main__":
    main()
