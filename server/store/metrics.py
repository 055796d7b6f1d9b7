"""The store's figures on ``/metrics`` (a collector added to the server's registry).

    stacko_store_commits_total              counter: transactions committed by the writer
    stacko_store_changes_total              counter: changes (moves, deals, endings) committed
    stacko_store_commit_seconds             histogram: one transaction, BEGIN to COMMIT
    stacko_store_batch_size_max             gauge: most changes in one transaction so far
    stacko_store_errors_total               counter: failed commits (the first one stops the server)
    stacko_store_held_frames_total          counter: frames that waited for a commit
    stacko_store_pending_changes            gauge: changes submitted and not yet committed
    stacko_store_applies_total              counter: SQLite transactions of the journal's applier
    stacko_store_applied_changes_total      counter: changes the applier put into SQLite
    stacko_store_apply_seconds_total        counter: time in those transactions
    stacko_store_unapplied_changes          gauge: committed (in the journal), not yet in SQLite

With the journal writer (the SQLite default) a commit is one change's record copied into
the journal (batch size 1), and the applier's transactions are the SQLite batches.

The mean batch size is ``changes_total / commits_total``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from stacko.server.store.base import COMMIT_BUCKETS, Store


class StoreCollector:
    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        store = self.store
        s = store.stats
        yield CounterMetricFamily(
            "stacko_store_commits", "Store transactions committed.", value=s.commits
        )
        yield CounterMetricFamily(
            "stacko_store_changes", "Game changes committed to the store.", value=s.changes
        )
        cumulative = 0
        buckets: list[tuple[str, float]] = []
        for bound, n in zip((*COMMIT_BUCKETS, float("inf")), s.commit_buckets, strict=True):
            cumulative += n
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        yield HistogramMetricFamily(
            "stacko_store_commit_seconds", "One store transaction, begin to commit.",
            buckets=buckets, sum_value=s.commit_seconds,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "stacko_store_batch_size_max", "Most changes committed in one transaction.",
            value=s.batch_max,
        )  # fmt: skip
        yield CounterMetricFamily(
            "stacko_store_errors", "Failed store commits (the first stops the server).",
            value=s.errors,
        )  # fmt: skip
        yield CounterMetricFamily(
            "stacko_store_held_frames", "Frames that waited for a commit.", value=s.held_frames
        )
        yield GaugeMetricFamily(
            "stacko_store_pending_changes", "Changes submitted, not yet committed.",
            value=store.appended - store.committed,
        )  # fmt: skip
        if getattr(store, "writer", "") != "journal":
            return
        for name, text, value in (
            ("applies", "SQLite transactions of the journal's applier.", s.applies),
            ("applied_changes", "Changes the journal's applier put into SQLite.",
             s.applied_changes),
            ("apply_seconds", "Seconds in the applier's SQLite transactions.", s.apply_seconds),
        ):  # fmt: skip
            yield CounterMetricFamily(f"stacko_store_{name}", text, value=value)
        yield GaugeMetricFamily(
            "stacko_store_unapplied_changes", "Changes in the journal, not yet in SQLite.",
            value=max(0, store.committed - store.applied),  # type: ignore[attr-defined]
        )  # fmt: skip
