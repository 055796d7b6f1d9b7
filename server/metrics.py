"""Prometheus metrics of one ``Server``, served at ``GET /metrics`` (text format 0.0.4).

The hot path only bumps plain ints (``frames_in += 1``): no lock, no label lookup, no call
into ``prometheus_client`` per frame. A custom collector turns them into metric families when
``/metrics`` is scraped, and reads the gauges (connections, rooms by status, sessions) from
the live server at that moment. Each ``Metrics`` has its own ``CollectorRegistry``, so several
servers in one process (tests) never share or clash.

    stacko_connections                      gauge: open WebSocket connections
    stacko_sessions                         gauge: sessions held (connected or in grace period)
    stacko_rooms{status}                    gauge: rooms waiting / playing / finished
    stacko_moves_applied_total              counter: client moves the engine applied
    stacko_frames_in_total                  counter: frames received from clients
    stacko_frames_out_total                 counter: frames queued for clients
    stacko_errors_total{code}               counter: error frames sent, by error code
    stacko_move_processing_seconds          histogram: a move frame's receipt to its last
                                            state frame queued (server-side, perf_counter)
    stacko_gc_pauses_total{walk}            counter: paced garbage collections
                                            (``server.gcpacer``); walk="full" when the
                                            frozen objects were walked too, else "new"
    stacko_gc_pause_seconds_total{walk}     counter: time the loop spent in them
    stacko_gc_pause_max_seconds             gauge: the longest one
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

MOVE_BUCKETS: tuple[float, ...] = (
    0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25,
)  # fmt: skip
"""Upper bounds (seconds) of the move-processing histogram; one more bucket is +Inf."""

ROOM_STATUSES = ("waiting", "playing", "finished")

_ERROR_PREFIX = b'{"type":"error","code":"'
_ERROR_AT = len(_ERROR_PREFIX)


def error_code(frame: bytes) -> str | None:
    """The code of an outbound error frame (``protocol.frames.error`` writes ``type`` then
    ``code`` first), or ``None`` for any other frame. Cheap enough for every frame."""
    if not frame.startswith(_ERROR_PREFIX):
        return None
    end = frame.find(b'"', _ERROR_AT)
    return frame[_ERROR_AT:end].decode() if end > 0 else None


class Metrics:
    """Counters bumped by the server; read out by ``render`` for ``/metrics``."""

    __slots__ = (
        "_connections", "_rooms", "_sessions", "errors", "frames_in", "frames_out", "gc_count",
        "gc_max", "gc_sum", "move_buckets", "move_count", "move_sum", "moves_applied",
        "registry",
    )  # fmt: skip

    def __init__(
        self,
        *,
        connections: Callable[[], int] = lambda: 0,
        rooms: Callable[[], Iterable[str]] = lambda: (),
        sessions: Callable[[], int] = lambda: 0,
    ) -> None:
        self._connections = connections
        self._rooms = rooms
        self._sessions = sessions
        self.frames_in = 0
        self.frames_out = 0
        self.moves_applied = 0
        self.errors: dict[str, int] = {}
        self.move_buckets = [0] * (len(MOVE_BUCKETS) + 1)
        self.move_count = 0
        self.move_sum = 0.0
        self.gc_count = {"new": 0, "full": 0}
        self.gc_sum = {"new": 0.0, "full": 0.0}
        self.gc_max = 0.0
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(self))

    def sent(self, frame: bytes) -> None:
        """One frame queued for a client (an error frame also counts by its code)."""
        self.frames_out += 1
        if frame.startswith(_ERROR_PREFIX):
            code = error_code(frame)
            if code is not None:
                self.errors[code] = self.errors.get(code, 0) + 1

    def move_applied(self, seconds: float) -> None:
        """A client's move was applied; ``seconds`` from its frame to its last state frame."""
        self.moves_applied += 1
        self.move_count += 1
        self.move_sum += seconds
        self.move_buckets[bisect_left(MOVE_BUCKETS, seconds)] += 1

    def gc_paused(self, seconds: float, full: bool) -> None:
        """One paced garbage collection (``server.gcpacer.GcPacer``'s ``on_pause``)."""
        walk = "full" if full else "new"
        self.gc_count[walk] += 1
        self.gc_sum[walk] += seconds
        self.gc_max = max(self.gc_max, seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _Collector:
    def __init__(self, metrics: Metrics) -> None:
        self.m = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.m
        yield GaugeMetricFamily(
            "stacko_connections", "Open WebSocket connections.", value=m._connections()
        )
        yield GaugeMetricFamily(
            "stacko_sessions", "Sessions held (connected or in their grace period).",
            value=m._sessions(),
        )  # fmt: skip
        rooms = GaugeMetricFamily("stacko_rooms", "Rooms by status.", labels=["status"])
        counts = dict.fromkeys(ROOM_STATUSES, 0)
        for status in m._rooms():
            counts[status] = counts.get(status, 0) + 1
        for status, n in counts.items():
            rooms.add_metric([status], n)
        yield rooms
        yield CounterMetricFamily(
            "stacko_moves_applied", "Client moves applied to a game.", value=m.moves_applied
        )
        yield CounterMetricFamily(
            "stacko_frames_in", "Frames received from clients.", value=m.frames_in
        )
        yield CounterMetricFamily(
            "stacko_frames_out", "Frames queued for clients.", value=m.frames_out
        )
        errors = CounterMetricFamily(
            "stacko_errors", "Error frames sent to clients, by error code.", labels=["code"]
        )
        for code, n in sorted(m.errors.items()):
            errors.add_metric([code], n)
        yield errors
        cumulative = 0
        buckets: list[tuple[str, float]] = []
        for bound, n in zip((*MOVE_BUCKETS, float("inf")), m.move_buckets, strict=True):
            cumulative += n
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        yield HistogramMetricFamily(
            "stacko_move_processing_seconds",
            "Server-side move processing: the move frame received to its last state frame "
            "queued.",
            buckets=buckets, sum_value=m.move_sum,
        )  # fmt: skip
        pauses = CounterMetricFamily(
            "stacko_gc_pauses", "Paced garbage collections, by what they walked.",
            labels=["walk"],
        )  # fmt: skip
        spent = CounterMetricFamily(
            "stacko_gc_pause_seconds", "Time spent in paced garbage collections.",
            labels=["walk"],
        )  # fmt: skip
        for walk in ("new", "full"):
            pauses.add_metric([walk], m.gc_count[walk])
            spent.add_metric([walk], m.gc_sum[walk])
        yield pauses
        yield spent
        yield GaugeMetricFamily(
            "stacko_gc_pause_max_seconds", "The longest paced garbage collection.",
            value=m.gc_max,
        )  # fmt: skip
