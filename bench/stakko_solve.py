"""Try to solve basic Stakko from the start: alpha-beta over win/draw/loss with a table.

    nice -n 10 python bench/stakko_solve.py --time-limit 1200

Stakko has no chance and no hidden information, and in the basic game every move carries
discs forward and no disc ever leaves its side's home (rules), so the game is finite and its
start position has a value: a win for White, a draw, or a win for Black under best play.
This searches for it with a minimax over that value (by who is to move, since a blocked
player passes and the other moves again), alpha-beta on the three values and a transposition
table keyed by the line and the side to move. It plays the rules on its own small
representation (one string per stack, bottom first), which the tests check move for move
against ``engine.stakko``.

Bounded: ``--time-limit`` (CPU seconds, default 1200) and ``--max-table`` entries (about 200
bytes each); on either it stops and reports how far it got (the root moves proven so far,
nodes, table size). ``--store-from N`` keeps only positions whose search took N nodes or
more, so the table lasts longer.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

Line = tuple[str, ...]
"""The stacks, White's end first, each a string bottom first over W, B, G, R."""

START: Line = ("R" + "W" * 9, *("G",) * 7, "R" + "B" * 9)
COLOUR = "WB"


class OutOfBudget(Exception):
    """The time or table limit was reached."""


def owned(line: Line, seat: int) -> int:
    c = COLOUR[seat]
    return sum(1 for s in line if s[-1] == c)


def moves(line: Line, seat: int) -> list[tuple[int, int]]:
    """(stack, count) of every legal move of ``seat`` (basic game: the base never moves)."""
    n = owned(line, seat)
    if n == 0:
        return []
    c = COLOUR[seat]
    step = n if seat == 0 else -n
    size = len(line)
    return [
        (i, k)
        for i, s in enumerate(line)
        if s[-1] == c and 0 <= i + step < size
        for k in range(1, len(s))
    ]


def play(line: Line, seat: int, stack: int, count: int) -> Line:
    """The line after ``seat`` lifts ``count`` discs off ``stack`` and moves them N on."""
    n = owned(line, seat)
    dest = stack + n if seat == 0 else stack - n
    out = list(line)
    src = out[stack]
    out[dest] = out[dest] + src[-count:]
    out[stack] = src[:-count]
    return tuple(out)


def heights(line: Line) -> tuple[int, int]:
    last, first = line[-1], line[0]
    return (len(last) - 1 if last[-1] == "W" else 0, len(first) - 1 if first[-1] == "B" else 0)


def next_to_move(line: Line, mover: int) -> int | None:
    """Who moves after ``mover`` (rule 4: a blocked player passes); None: the game is over."""
    if moves(line, 1 - mover):
        return 1 - mover
    if moves(line, mover):
        return mover
    return None


def result(line: Line) -> int:
    """+1 White wins, 0 draw, -1 Black wins (the higher height at the end)."""
    w, b = heights(line)
    return (w > b) - (w < b)


EXACT, LOWER, UPPER = 0, 1, 2


class Solver:
    def __init__(self, time_limit: float, max_table: int, store_from: int = 0) -> None:
        self.store_from = store_from
        """Only positions whose search took at least this many nodes go into the table."""
        self.deadline = time.process_time() + time_limit
        self.max_table = max_table
        self.table: dict[str, int] = {}
        """Line and side to move, as one string -> value * 3 + bound (small: many millions)."""
        self.nodes = 0

    def ordered(self, line: Line, seat: int) -> Iterator[tuple[int, int]]:
        """Moves onto the opponent's home first, then the longer lifts."""
        goal = len(line) - 1 if seat == 0 else 0
        n = owned(line, seat)
        ms = moves(line, seat)
        ms.sort(key=lambda m: (-(m[0] + (n if seat == 0 else -n) == goal), -m[1]))
        return iter(ms)

    def value(self, line: Line, seat: int, alpha: int = -1, beta: int = 1) -> int:
        """The game value (White's view) with ``seat`` to move, within (alpha, beta)."""
        self.nodes += 1
        if self.nodes & 0x3FFF == 0 and (
            time.process_time() > self.deadline or len(self.table) > self.max_table
        ):
            raise OutOfBudget
        key = " ".join(line) + COLOUR[seat]
        entry = self.table.get(key)
        if entry is not None:
            v, flag = divmod(entry + 3, 3)
            v -= 1
            if flag == EXACT or (flag == LOWER and v >= beta) or (flag == UPPER and v <= alpha):
                return v
            if flag == LOWER:
                alpha = max(alpha, v)
            else:
                beta = min(beta, v)
        a0, b0 = alpha, beta
        first = self.nodes
        maximise = seat == 0
        best = -2 if maximise else 2
        for stack, count in self.ordered(line, seat):
            child = play(line, seat, stack, count)
            nxt = next_to_move(child, seat)
            v = result(child) if nxt is None else self.value(child, nxt, alpha, beta)
            if maximise:
                best = max(best, v)
                alpha = max(alpha, v)
            else:
                best = min(best, v)
                beta = min(beta, v)
            if alpha >= beta:
                break
        if self.nodes - first >= self.store_from:  # small subtrees are cheaper to redo
            flag = UPPER if best <= a0 else LOWER if best >= b0 else EXACT
            self.table[key] = best * 3 + flag
        return best


def solve(time_limit: float, max_table: int, store_from: int = 0) -> dict[str, object]:
    solver = Solver(time_limit, max_table, store_from)
    start = time.process_time()
    roots: dict[str, int] = {}
    report: dict[str, object] = {"solved": False}
    try:
        for stack, count in solver.ordered(START, 0):
            child = play(START, 0, stack, count)
            nxt = next_to_move(child, 0)
            v = result(child) if nxt is None else solver.value(child, nxt)
            roots[f"{stack}x{count}"] = v
            print(f"  {stack}x{count}: {v:+d}  ({solver.nodes:,} nodes)", flush=True)
            if v == 1:
                break  # White can force a win: no better value exists
        value = max(roots.values())
        best = [m for m, v in roots.items() if v == value]
        report.update(solved=True, value=value, winning_or_best=best)
    except OutOfBudget:
        pass
    report.update(
        roots=roots,
        nodes=solver.nodes,
        table=len(solver.table),
        cpu_seconds=round(time.process_time() - start, 1),
    )
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--time-limit", type=float, default=1200.0, metavar="CPU_SECONDS")
    p.add_argument("--max-table", type=int, default=12_000_000)
    p.add_argument("--store-from", type=int, default=0, metavar="NODES")
    args = p.parse_args(argv)
    sys.setrecursionlimit(10_000)
    out = solve(args.time_limit, args.max_table, args.store_from)
    print(json.dumps(out))
    return 0 if out["solved"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
