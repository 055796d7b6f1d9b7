"""Hostile and odd input to the record endpoints, found by using them as an attacker would:
every answer is a coded 400/404, never a 500 with a traceback in the log."""

from __future__ import annotations

import asyncio
import base64
import re

import pytest
from stacko_wire import Client
from test_store_server import SMALL, finished_ids, get_json, http

from stacko.server.records import BadRequest, parse_filters
from stacko.server.store import make_store
from stacko.server.store.base import encode_cursor


def test_a_limit_of_thousands_of_digits_is_a_bad_filter():
    """``int()`` refuses more than 4300 digits (ValueError): it was a 500."""
    with pytest.raises(BadRequest) as e:
        parse_filters("limit=" + "9" * 5000)
    assert e.value.code == "bad_filter" and e.value.status == 400
    assert parse_filters("limit=007").limit == 7


@pytest.mark.parametrize("name", ["\x00", "a\x00b", "bob\n", "\u202ebob"])
def test_a_player_filter_no_name_can_hold_is_a_bad_filter(name):
    """Names never hold control or format characters (``name_problem``): such a filter
    finds nothing anywhere, and a NUL made PostgreSQL fail the query (a 500)."""
    with pytest.raises(BadRequest) as e:
        parse_filters(f"player={name}")
    assert e.value.code == "bad_filter"


async def test_hostile_queries_over_http_are_coded_errors(make_harness, store_spec):
    """On each store: a NUL in the player filter failed the PostgreSQL query (a 500), a
    long limit failed ``int()`` (a 500), and a query on one record (``?seat=1``, which the
    record does not take) was ignored without a word: the full record came back."""
    h = await make_harness(store=make_store(*store_spec))
    g = await h.game(SMALL, names=("alice", "bob"))
    await g.play_out()
    await h.server.store.flush()
    port = h.server.port
    (gid,) = await finished_ids(h)
    for query in ("player=a%00b", "player=%0A", "limit=" + "9" * 5000):
        status, body = await get_json(port, f"/api/games?{query}")
        assert status == 400 and body["error"]["code"] == "bad_filter", query[:20]
    # forged cursors: a NUL in the id failed the PostgreSQL query (a 500)
    for raw in (
        b"1:\x00",
        b"1:zz",
        b"1:" + b"f" * 17,
        b"-1:" + gid.encode(),
        b"1:" + gid.encode() + b":",
    ):
        cursor = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        status, body = await get_json(port, f"/api/games?cursor={cursor}")
        assert status == 400 and body["error"]["code"] == "bad_cursor", raw
    status, body = await get_json(port, f"/api/games?cursor={encode_cursor(1 << 48, gid)}")
    assert status == 200 and [g["id"] for g in body["games"]] == [gid]
    status, body = await get_json(port, "/api/games?player=al%C3%A9")
    assert status == 200 and body["games"] == []
    for path in (f"/api/games/{gid}?seat=1", f"/api/games/{gid}.txt?x=1"):
        status, body = await get_json(port, path)
        assert status == 400 and body["error"]["code"] == "bad_filter", path
    status, _, _ = await http(port, f"/api/games/{gid}.txt?")
    assert status == 200


TAG = re.compile(r'^\[(\w+) "((?:[^"\\]|\\["\\])*)"\]$')


async def test_names_with_quotes_cannot_forge_tags_of_the_text_notation(make_harness, tmp_path):
    """A name may hold ``"``, ``]`` and ``\\``: written as they were, ``[Seat0 "a"] [Seat1
    "x"]`` read as other tags than the server wrote. Tag values escape them (docs/notation.md)."""
    h = await make_harness(store=make_store("sqlite", str(tmp_path / "data")))
    names = ('Zoë "x"] [Seat1 "me', "back\\slash")
    g = await h.game(SMALL, names=names)
    await g.play_out()
    await h.server.store.flush()
    (gid,) = await finished_ids(h)
    status, _, body = await http(h.server.port, f"/api/games/{gid}.txt")
    assert status == 200
    header = body.decode().split("\n\n", 1)[0].splitlines()
    tags = {}
    for line in header:
        if line.startswith("[Options "):
            continue
        m = TAG.match(line)
        assert m is not None, line
        tags[m[1]] = re.sub(r"\\(.)", r"\1", m[2])
    assert (tags["Seat0"], tags["Seat1"]) == names


async def raw(port: int, request: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request.encode())
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return data


async def test_records_answer_get_and_head_only(make_harness, tmp_path):
    """Any method was answered as a GET: ``DELETE /api/games/{id}`` said 200 (with the record
    it kept), and a HEAD got the whole body after its headers."""
    h = await make_harness(store=make_store("sqlite", str(tmp_path / "data")))
    g = await h.game(SMALL, names=("alice", "bob"))
    await g.play_out()
    await h.server.store.flush()
    (gid,) = await finished_ids(h)
    port = h.server.port
    for method in ("DELETE", "POST", "PUT"):
        for path in (f"/api/games/{gid}", "/api/games"):
            data = await raw(port, f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n")
            head, _, body = data.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 405 "), (method, path, head[:40])
            assert b"\r\nAllow: GET, HEAD" in head and b'"use_get"' in body
    get = await raw(port, f"GET /api/games/{gid}.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    head = await raw(port, f"HEAD /api/games/{gid}.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    get_head, _, get_body = get.partition(b"\r\n\r\n")
    assert get_body and head.endswith(b"\r\n\r\n") and head.count(b"\r\n\r\n") == 1
    length = f"Content-Length: {len(get_body)}".encode()
    assert length in get_head and length in head


async def test_records_do_not_give_away_the_code_of_a_private_room(make_harness, store_spec):
    """A private room is found only by its code (PROTOCOL.md: "the code is the secret"), but
    ``GET /api/games`` listed its finished games with the code, so anyone could watch the
    room's next game: a quick match, a challenge, a room made private. Its records now carry
    no code (``[Room "private"]`` in the text); the ``code`` filter still finds them for
    whoever knows it."""
    h = await make_harness(store=make_store(*store_spec))
    g = await h.game(SMALL, names=("alice", "bob"), public=False)
    await g.play_out()
    await h.server.store.flush()
    port = h.server.port
    (gid,) = await finished_ids(h)
    for query in ("", "?player=alice"):
        status, listing = await get_json(port, f"/api/games{query}")
        assert status == 200 and [x["id"] for x in listing["games"]] == [gid]
        assert listing["games"][0]["code"] is None
    status, listing = await get_json(port, f"/api/games?code={g.code}")
    assert [x["id"] for x in listing["games"]] == [gid]
    status, record = await get_json(port, f"/api/games/{gid}")
    assert status == 200 and record["code"] is None and record["public"] is False
    for suffix in ("", ".txt", "/replay?seat=all"):
        _, _, body = await http(port, f"/api/games/{gid}{suffix}")
        assert g.code.encode() not in body, suffix
    _, _, text = await http(port, f"/api/games/{gid}.txt")
    assert '[Room "private"]' in text.decode()


async def test_every_plain_http_path_answers_get_and_head_only(make_harness, tmp_path):
    """``/healthz``, ``/metrics``, the web client's files and the accounts API's reads
    answered any method as a GET (a ``DELETE /metrics`` said 200 with the metrics); a path
    that does not exist stays a 404 whatever the method."""
    h = await make_harness(store=make_store("sqlite", str(tmp_path / "data")))
    port = h.server.port
    reads = ("/healthz", "/metrics", "/", "/app.js", "/api/leaderboard", "/api/players/alice")
    for method in ("DELETE", "POST", "PUT", "PATCH"):
        for path in reads:
            data = await raw(port, f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n")
            head, _, body = data.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 405 "), (method, path, head[:40])
            assert b"\r\nAllow: GET, HEAD" in head, (method, path)
            if path.startswith("/api/"):
                assert b'"use_get"' in body
        data = await raw(port, f"{method} /no/such/path HTTP/1.1\r\nHost: x\r\n\r\n")
        assert data.startswith(b"HTTP/1.1 404 ")
    data = await raw(port, "GET /api/accounts/rotate HTTP/1.1\r\nHost: x\r\n\r\n")
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 405 ") and b"\r\nAllow: POST" in head
    assert b'"use_post"' in body
    for path in ("/healthz", "/", "/api/leaderboard"):
        get = await raw(port, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await raw(port, f"HEAD {path} HTTP/1.1\r\nHost: x\r\n\r\n")
        get_head, _, get_body = get.partition(b"\r\n\r\n")
        assert get_head.startswith(b"HTTP/1.1 200 ") and head.startswith(b"HTTP/1.1 200 ")
        assert get_body and head.endswith(b"\r\n\r\n") and head.count(b"\r\n\r\n") == 1, path
        length = f"Content-Length: {len(get_body)}".encode()
        assert length in get_head and length in head, path


async def test_a_built_in_bot_is_named_once_in_the_text(make_harness, tmp_path):
    """The room names a built-in bot ``easy (bot)``; the text added its level again and wrote
    ``[Seat0 "easy (bot) (bot easy)"]``."""
    from stacko.bots.registry import available, make_bot

    h = await make_harness(
        store=make_store("sqlite", str(tmp_path / "data")), bots=(available(), make_bot)
    )
    c = await Client.open(h.url, "human")  # outside the harness's leak checker (bot rooms)
    await c.hello("human")
    joined = await c.call("create_room", game="stacko", options=SMALL, seat=1, bot="easy")
    assert joined["type"] == "joined", joined
    code = joined["room"]
    assert [p["name"] for p in joined["info"]["players"]] == ["easy (bot)", "human"]
    await c.expect("state", room=code, seq=1)
    await c.call("resign", room=code)
    await h.server.store.flush()
    (gid,) = await finished_ids(h)
    status, _, text = await http(h.server.port, f"/api/games/{gid}.txt")
    assert status == 200
    assert '[Seat0 "easy (bot)"]' in text.decode() and '[Seat1 "human"]' in text.decode()
    await c.ws.close()
