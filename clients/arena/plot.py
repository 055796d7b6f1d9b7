"""The ratings and the pairwise score rates as a PNG (matplotlib)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from stacko.clients.arena.ratings import Rating
from stacko.clients.arena.schedule import ArenaResult
from stacko.clients.arena.stats import pair_stats


def plot(result: ArenaResult, rated: Sequence[Rating], path: Path) -> None:
    """Ratings with intervals, and the matrix of pairwise score rates, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    labels = [e.label for e in result.entrants]
    n = len(labels)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ys = np.arange(len(rated))
    elo = np.array([r.elo for r in rated])
    err = np.array([[r.elo - r.low for r in rated], [r.high - r.elo for r in rated]])
    ax1.errorbar(elo, ys, xerr=err, fmt="o", capsize=4)
    ax1.set_yticks(ys, [r.label for r in rated])
    ax1.invert_yaxis()
    ax1.set_xlabel("Bradley-Terry rating (Elo scale, mean 0), 95% bootstrap interval")
    ax1.set_title(f"{result.game}: ratings")
    ax1.grid(axis="x", alpha=0.3)
    rate = np.full((n, n), np.nan)
    for p in pair_stats(result):
        i, j = labels.index(p.a), labels.index(p.b)
        rate[i, j] = p.score
        rate[j, i] = 1 - p.score
    im = ax2.imshow(rate, vmin=0, vmax=1, cmap="RdBu")
    ax2.set_xticks(range(n), labels)
    ax2.set_yticks(range(n), labels)
    for i in range(n):
        for j in range(n):
            if not np.isnan(rate[i, j]):
                ax2.text(j, i, f"{rate[i, j]:.2f}", ha="center", va="center")
    ax2.set_title("score rate of row vs column")
    fig.colorbar(im, ax=ax2, fraction=0.046)
    fig.suptitle(
        f"{len(result.records)} games, {result.deals_asked}"
        f" {'duplicate deals' if result.duplicate else 'deals'} per pair, seed {result.seed}"
        + ("" if result.server is None else ", live")
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
