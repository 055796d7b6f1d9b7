"""Summarise a collapsed-stack profile (``py-spy record -f raw``): self and total time per frame.

python bench/collapsed.py PROFILE.txt [--top 40] [--grep WORD]
"""

from __future__ import annotations

import argparse
import collections
import re
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("path")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--grep", default=None, help="only stacks containing this text")
    args = ap.parse_args(argv)
    self_t: collections.Counter[str] = collections.Counter()
    total_t: collections.Counter[str] = collections.Counter()
    n = 0
    with open(args.path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack or (args.grep and args.grep not in stack):
                continue
            c = int(count)
            n += c
            frames = [
                re.sub(r" \(/.*/(?:site-packages|lib/python3\.\d+|main)/", " (", fr)
                for fr in stack.split(";")
            ]
            self_t[frames[-1]] += c
            for fr in set(frames):
                total_t[fr] += c
    print(f"{n} samples")
    print("\n-- self --")
    for fr, c in self_t.most_common(args.top):
        print(f"{100 * c / n:6.2f}%  {fr}")
    print("\n-- total --")
    for fr, c in total_t.most_common(args.top):
        print(f"{100 * c / n:6.2f}%  {fr}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
