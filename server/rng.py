"""The production source of randomness for games: the OS's, with a shuffle in one read.

``random.SystemRandom`` asks the kernel for every number, through a Python ``getrandbits``:
the 40-brick shuffle of a deal takes 40 syscalls and 31 us on this VM, against 5.4 us for a
seeded ``random.Random``. ``SystemShuffle.shuffle`` reads all the randomness one shuffle needs
in one ``os.urandom`` call (a 64-bit word per swap) and runs Fisher-Yates on it: 5.9 us.
Every other method is ``random.SystemRandom``'s own. There is no state to seed or to
predict, and nothing is kept between calls (so nothing for a forked child to repeat).
"""

from __future__ import annotations

import array
import os
import random
from collections.abc import MutableSequence
from typing import Any

_WORD = 2**64


class SystemShuffle(random.SystemRandom):
    """``random.SystemRandom`` whose ``shuffle`` makes one syscall instead of one per item."""

    def shuffle(self, x: MutableSequence[Any]) -> None:
        n = len(x)
        if n < 2:
            return
        words = array.array("Q", os.urandom(8 * (n - 1)))
        for k, i in enumerate(range(n - 1, 0, -1)):
            bound = i + 1
            r = words[k]
            # Unbiased: a word in the last, partial run of ``bound`` values is drawn again.
            while r >= _WORD - _WORD % bound:
                r = int.from_bytes(os.urandom(8))
            j = r % bound
            x[i], x[j] = x[j], x[i]


_SHARED = SystemShuffle()


def system_shuffle() -> random.Random:
    """The servers' ``rng_factory``: one ``SystemShuffle`` for every game. It keeps no state,
    so one serves them all; one per game held 2.5 KB each (every ``random.Random`` carries a
    Mersenne Twister's state, which ``SystemRandom`` never uses) for every game in progress."""
    return _SHARED
