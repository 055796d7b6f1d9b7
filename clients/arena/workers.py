"""Running many games: an ordered map over at most two processes, a progress bar, a time limit."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

# -- running many games -----------------------------------------------------------------------


def parallel_map(
    fn: Callable[[Any], Any],
    tasks: list[Any],
    workers: int,
    desc: str,
    progress: bool,
    deadline: float | None,
) -> Iterator[Any]:
    """Ordered map over ``tasks`` with up to 2 processes, a tqdm bar and a time limit."""
    from tqdm import tqdm  # type: ignore[import-untyped,unused-ignore]

    bar = tqdm(
        total=len(tasks),
        desc=desc,
        disable=not progress,
        unit="task",
        file=sys.stderr,
        smoothing=0.05,
    )
    try:
        if workers <= 1 or len(tasks) < 4:
            for task in tasks:
                if deadline is not None and time.monotonic() > deadline:
                    break
                yield fn(task)
                bar.update()
            return
        import multiprocessing

        ctx = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
        with ctx.Pool(min(workers, 2)) as pool:
            for result in pool.imap(fn, tasks, chunksize=max(1, min(16, len(tasks) // 64))):
                yield result
                bar.update()
                if deadline is not None and time.monotonic() > deadline:
                    pool.terminate()
                    break
    finally:
        bar.close()
