"""Quick match by strength: accounts are paired with close ratings first.

Two waiting players may be paired when either is a guest (guest games are not rated: first
come, first served as before), or when their ratings differ by at most the *window* of the
one who has waited longer. The window starts at ``BASE`` rating points and widens by
``GROWTH`` points per second of waiting; after ``MAX_WAIT_S`` seconds it is unbounded, so
everyone waiting is paired within ``MAX_WAIT_S`` seconds (plus the sweep's
``SWEEP_S``) as soon as anyone else waits for the same game. A newcomer takes the closest
acceptable partner (ties: the one waiting longest); a sweep every ``SWEEP_S`` seconds pairs
those whose windows have grown to meet.

With the defaults: 100 points at once, 200 after 5 s, 400 after 15 s, anyone after 30 s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stacko.server.ratings import MU

BASE = 100.0
GROWTH = 20.0
MAX_WAIT_S = 30.0
SWEEP_S = 1.0


def window(waited_s: float) -> float:
    """How far (in rating points) a player who waited ``waited_s`` seconds may be paired."""
    if waited_s >= MAX_WAIT_S:
        return float("inf")
    return BASE + GROWTH * max(0.0, waited_s)


def rating_of(session: Any, game: str) -> float | None:
    """The session's rating in ``game`` (``None``: a guest)."""
    account = getattr(session, "account", None)
    if account is None:
        return None
    r = account.ratings.get(game)
    return float(r.mu) if r is not None else MU


def acceptable(a: Any, b: Any, game: str, waited: float) -> bool:
    """May ``a`` and ``b`` play, the longer waiting of them having waited ``waited`` s?"""
    ra, rb = rating_of(a, game), rating_of(b, game)
    if ra is None or rb is None:
        return True
    if a.account is b.account:
        return False  # one account on two connections does not play itself
    return abs(ra - rb) <= window(waited)


def partner(queue: Sequence[Any], newcomer: Any, game: str, now: float) -> int | None:
    """The index in ``queue`` of the newcomer's partner, or ``None``: it waits."""
    mine = rating_of(newcomer, game)
    best: tuple[float, int] | None = None
    for i, other in enumerate(queue):
        if other is newcomer or not acceptable(other, newcomer, game, now - other.queued_at):
            continue
        theirs = rating_of(other, game)
        gap = 0.0 if mine is None or theirs is None else abs(mine - theirs)
        if best is None or gap < best[0]:
            best = (gap, i)
    return None if best is None else best[1]


def sweep(queue: Sequence[Any], game: str, now: float) -> list[tuple[Any, Any]]:
    """Pairs to make among those waiting, longest waiting first."""
    taken: set[int] = set()
    pairs = []
    for i, a in enumerate(queue):
        if i in taken:
            continue
        for j in range(i + 1, len(queue)):
            b = queue[j]
            waited = now - min(a.queued_at, b.queued_at)
            if j not in taken and acceptable(a, b, game, waited):
                taken |= {i, j}
                pairs.append((a, b))
                break
    return pairs
