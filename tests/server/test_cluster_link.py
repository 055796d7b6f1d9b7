"""The cluster's hot-path connections (``server/cluster/link.py``) against a real
``redis-server``: what they send is what redis-py would, an error reply or a dead or hung
Redis fails the exchange (never a hang), and the next exchange works on a new connection."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError, ResponseError, TimeoutError

from stacko.server.cluster.link import Link, pack


def test_pack_is_resp_of_bulk_strings():
    frame = b'o7 {"a":"\r\n\x00\xff"}'
    assert pack([("XADD", "s", 5, frame)]) == (
        b"*4\r\n$4\r\nXADD\r\n$1\r\ns\r\n$1\r\n5\r\n$%d\r\n%b\r\n" % (len(frame), frame)
    )
    assert (
        pack([("PING",), ("GET", "é")])
        == b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$2\r\n\xc3\xa9\r\n"
    )


async def test_exchange_pipelines_and_reads_raw_replies(redis_server):
    link = Link(redis_server.url, 2.0)
    frame = b'o7 {"a":"\r\n\x00\xff"}'
    try:
        got = await link.exchange(
            [("XADD", "s", "*", "0", frame, "1", b"x"), ("XADD", "s", "*", "0", b"y")]
        )
        assert len(got) == 2 and all(isinstance(i, bytes) for i in got)
        (read,) = await link.exchange([("XREAD", "COUNT", 10, "STREAMS", "s", "0-0")])
        assert read[0][0] == b"s"
        assert [fields for _, fields in read[0][1]] == [[b"0", frame, b"1", b"x"], [b"0", b"y"]]
        # the same as redis-py's own client sees
        r = aioredis.Redis.from_url(redis_server.url)
        entries = await r.xrange("s")
        await r.aclose()
        assert entries[0][1] == {b"0": frame, b"1": b"x"}
        # an error reply fails the exchange; the next one works on a new connection
        with pytest.raises(ResponseError):
            await link.exchange([("XADD", "s", "*"), ("PING",)])
        assert await link.exchange([("PING",)]) == [b"PONG"]
    finally:
        await link.close()


async def test_a_restarted_redis_costs_one_retry_and_a_dead_one_an_error(redis_server):
    link = Link(redis_server.url, 2.0)
    try:
        assert await link.exchange([("PING",)]) == [b"PONG"]
        redis_server.kill()
        redis_server.start()
        assert await link.exchange([("PING",)]) == [b"PONG"]  # the kept connection was closed
        redis_server.kill()
        with pytest.raises(ConnectionError):
            await link.exchange([("PING",)])
        redis_server.start()
        assert await link.exchange([("PING",)]) == [b"PONG"]
    finally:
        await link.close()


async def test_a_hung_redis_times_out_instead_of_hanging(redis_server):
    link = Link(redis_server.url, 0.4)
    assert redis_server.proc is not None
    pid = redis_server.proc.pid
    try:
        assert await link.exchange([("PING",)]) == [b"PONG"]
        os.kill(pid, signal.SIGSTOP)
        try:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(link.exchange([("PING",)]), 10)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert await link.exchange([("PING",)]) == [b"PONG"]
    finally:
        await link.close()
