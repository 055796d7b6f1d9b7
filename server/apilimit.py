"""A request rate per address for the HTTP API (``/api/*``): records, leaderboards,
profiles and registrations each cost a store query, so a client asking in a loop would
take the store (and, for replays, the CPU) from everyone else. Over its bucket an address
gets HTTP 429 with ``Retry-After`` and the API's JSON error, code ``rate_limited``."""

from __future__ import annotations

import http
import math
from collections.abc import Callable

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Response

from stacko.server.hub import address_key
from stacko.server.records import _json

PREFIX = "/api/"


class ApiLimit:
    """A token bucket per address (IPv6: per /64): ``rate`` requests a second on average,
    ``burst`` at once; ``rate`` 0: no limit. Buckets that refilled are forgotten now and
    then, so the table holds only addresses seen lately."""

    def __init__(self, rate: float, burst: int, now: Callable[[], float]) -> None:
        self.rate = rate
        self.burst = float(max(1, burst))
        self._now = now
        self._buckets: dict[str, tuple[float, float]] = {}
        self._kept = 0

    def wait(self, ip: str) -> float:
        """0 if ``ip`` may make a request now (its token is taken), else the seconds until
        it may."""
        if self.rate <= 0:
            return 0.0
        now = self._now()
        key = address_key(ip)
        tokens, then = self._buckets.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            self._prune(now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / self.rate

    def _prune(self, now: float) -> None:
        if len(self._buckets) > 2 * self._kept + 1024:
            rate, burst = self.rate, self.burst
            self._buckets = {
                k: (t, w) for k, (t, w) in self._buckets.items() if t + (now - w) * rate < burst
            }
            self._kept = len(self._buckets)


def too_many(ws: ServerConnection, wait: float) -> Response:
    seconds = max(1, math.ceil(wait))
    response = _json(
        ws, http.HTTPStatus.TOO_MANY_REQUESTS,
        {"error": {"code": "rate_limited",
                   "message": f"too many requests from your address; retry in {seconds} s"}},
    )  # fmt: skip
    response.headers["Retry-After"] = str(seconds)
    return response
