"""The benchmark yardsticks still measure something: the echo server answers round trips and
its relay pairs move (a wrong path once made every relay figure 0 without an error)."""

from __future__ import annotations

import pytest

from bench import echo


@pytest.mark.parametrize("kind", ["echo", "relay"])
async def test_baseline_moves_frames(kind: str) -> None:
    res = await echo.measure(conns=2, kind=kind, pace=0, duration=0.6, warmup=0.1, quiet=True)
    assert res["kind"] == kind
    assert res["connections_held"] == (4 if kind == "relay" else 2)
    assert res["round_trips"] > 10
    assert res["errors"] == 0 and res["disconnects"] == 0 and res["setup_failures"] == 0
    assert res["latency"]["p50_ms"] is not None and res["latency"]["p50_ms"] > 0
    if kind == "relay":
        assert res["latency_own"]["count"] == res["round_trips"]
