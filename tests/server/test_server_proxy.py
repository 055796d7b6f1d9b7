"""Per-address limits over HTTP and behind a reverse proxy (issue 14): ``/api/*`` has a
request rate per address (HTTP 429, ``Retry-After``), and with ``--forwarded-allow-ips`` a
trusted proxy's ``X-Forwarded-For`` names the client that every per-address limit counts,
while anyone else's header is ignored. Real loopback sockets sending the header."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from stacko.server.forwarded import TrustedProxies
from stacko.server.store import make_store


async def http(
    port: int, path: str, forwarded: str | None = None, method: str = "GET"
) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    extra = f"X-Forwarded-For: {forwarded}\r\n" if forwarded is not None else ""
    writer.write(
        f"{method} {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n".encode()
    )
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split(" ", 2)[1]), headers, body


async def upgrade(url: str, forwarded: str | None = None) -> object:
    """A WebSocket connection, or the HTTP status its upgrade got."""
    headers = {"X-Forwarded-For": forwarded} if forwarded is not None else None
    try:
        return await connect(url, additional_headers=headers, open_timeout=5)
    except InvalidStatus as exc:
        return exc.response.status_code


async def test_api_requests_are_rate_limited_per_address(make_harness):
    h = await make_harness(api_rate_per_ip=0.5, api_burst_per_ip=2)
    port = h.server.port
    for _ in range(2):  # no store: 503, still a request
        assert (await http(port, "/api/leaderboard"))[0] == 503
    status, headers, body = await http(port, "/api/games")
    assert status == 429, body
    assert orjson.loads(body)["error"]["code"] == "rate_limited"
    assert headers["Retry-After"] == "2" and headers["Content-Type"] == "application/json"
    assert (await http(port, "/api/players/x"))[0] == 429
    # the rest of the port is not the API: the web client and health checks go on
    assert (await http(port, "/healthz"))[0] == 200
    h.clock.advance(2.0)  # one token back
    assert (await http(port, "/api/games"))[0] == 503
    assert (await http(port, "/api/games"))[0] == 429


async def test_api_limit_off_with_rate_zero(make_harness):
    h = await make_harness(api_rate_per_ip=0.0, api_burst_per_ip=1)
    for _ in range(5):
        assert (await http(h.server.port, "/api/games"))[0] == 503


async def test_a_leaderboard_page_cannot_start_arbitrarily_deep(make_harness, tmp_path):
    """An OFFSET costs the store a walk over that many rows: the cursor is bounded."""
    h = await make_harness(store=make_store("sqlite", str(tmp_path / "data")))
    status, _, body = await http(h.server.port, "/api/leaderboard?cursor=10000")
    assert status == 200, body
    status, _, body = await http(h.server.port, "/api/leaderboard?cursor=10001")
    assert status == 400 and orjson.loads(body)["error"]["code"] == "bad_cursor", body


def test_the_client_is_the_rightmost_address_no_proxy_added():
    proxies = TrustedProxies("127.0.0.1, 10.0.0.0/8")
    assert proxies.client("127.0.0.1", ["198.51.100.1, 10.2.3.4"]) == "198.51.100.1"
    # what the client wrote itself is left of what the proxy appended
    assert proxies.client("127.0.0.1", ["spoofed", "6.6.6.6, 198.51.100.1"]) == "198.51.100.1"
    assert proxies.client("203.0.113.9", ["198.51.100.1"]) == "203.0.113.9"  # not trusted
    assert proxies.client("127.0.0.1", []) == "127.0.0.1"
    assert proxies.client("127.0.0.1", ["not an address"]) == "127.0.0.1"
    assert proxies.client("::ffff:127.0.0.1", ["[2001:db8::1]"]) == "2001:db8::1"
    # '*' trusts every peer, not the hops a client may have written
    assert TrustedProxies("*").client("192.0.2.1", ["1.1.1.1, 2.2.2.2"]) == "2.2.2.2"
    assert not TrustedProxies("") and TrustedProxies("*")
    with pytest.raises(ValueError):
        TrustedProxies("10.0.0.0/33")


async def test_a_trusted_proxy_names_the_client_for_every_per_address_limit(make_harness):
    h = await make_harness(
        forwarded_allow_ips="127.0.0.1", max_connections_per_ip=1, api_rate_per_ip=1.0,
        api_burst_per_ip=1, registrations_per_hour=1,
    )  # fmt: skip
    url = h.url
    # connections: one per client, not one for the proxy
    first = await upgrade(url, "203.0.113.5")
    second = await upgrade(url, "203.0.113.6")
    assert not isinstance(first, int) and not isinstance(second, int)
    assert await upgrade(url, "6.6.6.6, 203.0.113.5") == 429  # its second connection
    assert h.server.sockets.admitted == {"203.0.113.5": 1, "203.0.113.6": 1}
    # hello and waiting rooms count the client too
    await first.send(orjson.dumps({"type": "hello", "protocol": 1, "name": "p"}).decode())
    assert orjson.loads(await first.recv())["type"] == "welcome"
    assert set(h.server.hub.addresses.values()) == {"203.0.113.5"}
    await first.close()
    await second.close()
    # the HTTP API's rate: each client its own bucket
    assert (await http(h.server.port, "/api/games", "203.0.113.7"))[0] == 503
    assert (await http(h.server.port, "/api/games", "203.0.113.7"))[0] == 429
    assert (await http(h.server.port, "/api/games", "203.0.113.8"))[0] == 503


async def test_registrations_behind_a_trusted_proxy_count_the_client(make_harness, tmp_path):
    h = await make_harness(
        store=make_store("sqlite", str(tmp_path / "data")), forwarded_allow_ips="127.0.0.1",
        registrations_per_hour=1,
    )  # fmt: skip
    port = h.server.port
    assert (await http(port, "/api/accounts?name=Alice", "203.0.113.5", "POST"))[0] == 201
    assert (await http(port, "/api/accounts?name=Bobby", "203.0.113.5", "POST"))[0] == 429
    assert (await http(port, "/api/accounts?name=Carol", "203.0.113.6", "POST"))[0] == 201


async def test_an_untrusted_peer_cannot_pick_its_address(make_harness):
    """Without the option (or from a peer not in it) the header is ignored: every limit
    counts the socket's own address, so a client cannot shed them by writing one."""
    for trusted in ("", "10.0.0.0/8"):
        h = await make_harness(
            forwarded_allow_ips=trusted, max_connections_per_ip=1, api_rate_per_ip=1.0,
            api_burst_per_ip=1,
        )  # fmt: skip
        first = await upgrade(h.url, "203.0.113.5")
        assert not isinstance(first, int)
        assert await upgrade(h.url, "203.0.113.6") == 429
        assert h.server.sockets.admitted == {"127.0.0.1": 1}
        await first.close()
        assert (await http(h.server.port, "/api/games", "203.0.113.7"))[0] == 503
        assert (await http(h.server.port, "/api/games", "203.0.113.8"))[0] == 429
