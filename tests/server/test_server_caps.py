"""What one client may hold (issue 14): caps per session and per address, each with its coded
error, the quick-match reserve, ``list_rooms`` paging from an index, and the smaller defects
(a spectator taking a seat, a replaced connection's queue ticket, names, probing codes)."""

from __future__ import annotations

import random

import pytest
from stacko_wire import SMALL

from stacko.server.clock import FakeClock
from stacko.server.config import ServerConfig
from stacko.server.hub import Hub, address_key


async def refused(c, code: str, kind: str, **fields) -> dict:
    err = await c.call(kind, **fields)
    assert err["type"] == "error" and err["code"] == code, err
    return err


async def test_waiting_rooms_are_capped_per_session_and_survive_a_reconnect(make_harness):
    h = await make_harness(max_waiting_per_session=2)
    a = await h.client("a")
    first = await h.create(a, SMALL)
    await h.create(a, SMALL)
    err = await refused(a, "too_many_rooms", "create_room", options=SMALL)
    assert err["fatal"] is False
    # A reconnect does not reset the budget: it belongs to the session.
    token = a.token
    await a.close()
    again = await h.client("a", hello=False)
    assert (await again.hello("a", token))["resumed"] is True
    await refused(again, "too_many_rooms", "create_room", options=SMALL)
    # A room that gets its opponent is no longer waiting.
    b = await h.client("b")
    assert (await b.call("join", room=first))["type"] == "joined"
    h.snap(first)
    assert (await again.call("create_room", options=SMALL))["type"] == "joined"


async def test_waiting_rooms_are_capped_per_address_whatever_its_sessions(make_harness):
    """256 connections x 3 waiting rooms each would let one address fill the room cap:
    ``max_waiting_per_ip`` counts the waiting rooms created from it, by any session."""
    h = await make_harness(max_waiting_per_ip=4, max_waiting_per_session=3)
    a, b = await h.client("a"), await h.client("b")
    made = [await h.create(a, SMALL) for _ in range(3)]
    last = await h.create(b, SMALL)
    err = await refused(b, "too_many_rooms", "create_room", options=SMALL)
    assert "address" in err["message"] and err["fatal"] is False
    fresh = await h.client("fresh")  # a new session is no way around it
    await refused(fresh, "too_many_rooms", "create_room", options=SMALL)
    assert h.server.hub.waiting_by_address == {"127.0.0.1": {*made, last}}
    # a room that gets its opponent waits no more, nor does one that closes
    assert (await fresh.call("join", room=made[0]))["type"] == "joined"
    h.snap(made[0])
    assert (await b.call("create_room", options=SMALL))["type"] == "joined"
    await refused(fresh, "too_many_rooms", "create_room", options=SMALL, public=False)
    assert (await a.call("leave", room=made[1]))["type"] == "left"
    assert (await fresh.call("create_room", options=SMALL))["type"] == "joined"
    assert len(h.server.hub.waiting_by_address["127.0.0.1"]) == 4


async def test_seats_are_capped_per_session_and_a_queued_match_counts(make_harness):
    h = await make_harness(max_seats_per_session=2, max_waiting_per_session=5)
    a = await h.client("a")
    await h.create(a, SMALL)
    assert (await a.call("quick_match"))["type"] == "queued"
    await refused(a, "too_many_seats", "create_room", options=SMALL)
    assert (await a.call("cancel_match"))["type"] == "unqueued"
    other = await h.create(await h.client("b"), SMALL)
    assert (await a.call("join", room=other))["type"] == "joined"
    h.snap(other)
    await refused(a, "too_many_seats", "quick_match")
    await refused(a, "too_many_seats", "create_room", options=SMALL)


async def test_watching_and_spectators_are_capped(make_harness):
    h = await make_harness(max_watching_per_session=2, max_spectators_per_room=2)
    rooms = [await h.create(await h.client(f"maker{i}"), SMALL) for i in range(3)]
    w = await h.client("w")
    for code in rooms[:2]:
        assert (await w.call("join", room=code, role="spectator"))["type"] == "joined"
    # watching a room again is no new room
    assert (await w.call("join", room=rooms[0], role="spectator"))["type"] == "joined"
    await refused(w, "too_many_watched", "join", room=rooms[2], role="spectator")
    assert (await w.call("leave", room=rooms[1]))["type"] == "left"
    assert (await w.call("join", room=rooms[2], role="spectator"))["type"] == "joined"
    x = await h.client("x")
    assert (await x.call("join", room=rooms[0], role="spectator"))["type"] == "joined"
    y = await h.client("y")
    await refused(y, "too_many_spectators", "join", room=rooms[0], role="spectator")


async def test_hellos_are_capped_per_address_not_reset_by_reconnects(make_harness):
    h = await make_harness(hello_rate_per_ip=1.0, hello_burst_per_ip=3)
    first = await h.client("one")
    await h.client("two")
    await first.close()
    await h.client("one", token=first.token)  # a resume counts too
    late = await h.client("four", hello=False)
    err = await late.call("hello", protocol=1, name="four")
    assert err["code"] == "too_many_hellos" and err["fatal"] is True, err
    assert await late.closed() == (1008, "too_many_hellos")
    h.advance(1.0)  # one more token
    await h.client("five")


async def test_quick_match_has_rooms_of_its_own(make_harness):
    h = await make_harness(max_rooms=10, quick_match_reserve=0.2, max_waiting_per_session=10)
    a = await h.client("a")
    for _ in range(8):
        await h.create(a, SMALL)
    err = await refused(a, "server_busy", "create_room", options=SMALL)
    assert err["fatal"] is False
    q1, q2 = await h.client("q1"), await h.client("q2")
    assert (await q1.call("quick_match"))["type"] == "queued"
    joined = await q2.call("quick_match")
    assert joined["type"] == "joined", joined
    h.snap(joined["room"])


async def test_taking_a_seat_ends_watching(harness):
    h = harness
    code = await h.create(await h.client("alice"), SMALL)
    w = await h.client("watcher")
    assert (await w.call("join", room=code, role="spectator"))["type"] == "joined"
    joined = await w.call("join", room=code)
    assert joined["seat"] == 1 and joined["info"]["spectators"] == 0, joined
    h.snap(code)
    room = h.server.hub.rooms[code]
    assert not room.spectators and code not in h.server.hub.watching.get(w_peer(h, w), set())
    await w.expect("state", room=code, seq=1)
    await w.barrier()
    assert w.pending("state") == []  # one frame per change, not a spectator's too


def w_peer(h, client):
    """The server's connection of ``client`` (matched by its session token)."""
    (conn,) = [c for c in h.server.connections if c.session and c.session.token == client.token]
    return conn


async def test_a_replaced_connection_leaves_the_queue(harness):
    h = harness
    a = await h.client("a")
    assert (await a.call("quick_match"))["type"] == "queued"
    again = await h.client("a", hello=False)
    await again.hello("a", a.token)  # a still open: replaced
    assert await a.closed() == (1008, "session_replaced")
    assert h.server.hub.queues["stacko"] == []
    b = await h.client("b")
    assert (await b.call("quick_match"))["type"] == "queued"


@pytest.mark.parametrize(
    "name", ["\u202eevil", "a\x00b", "tab\tname", "zero\u200bwidth", "   ", "line\u2028break"]
)
async def test_names_that_cannot_be_shown_are_refused(harness, name):
    c = await harness.client("x", hello=False)
    err = await c.call("hello", protocol=1, name=name)
    assert err["code"] == "bad_name" and err["fatal"] is True, err
    assert await c.closed() == (1008, "bad_name")


@pytest.mark.parametrize("name", ["Zoë", "李小龍", "a b", "🦊 fox"])
async def test_visible_names_are_kept(harness, name):
    c = await harness.client("x", hello=False)
    assert (await c.hello(name))["name"] == name


async def test_list_rooms_pages_with_a_cursor(make_harness):
    h = await make_harness(list_rooms_page=3, max_waiting_per_session=20)
    a = await h.client("a")
    made = [await h.create(a, SMALL) for _ in range(7)]
    await h.create(a, SMALL, public=False)
    c = await h.client("c")
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        fields = {"game": "stacko"} if cursor is None else {"game": "stacko", "cursor": cursor}
        page = await c.call("list_rooms", **fields)
        assert page["type"] == "rooms" and len(page["rooms"]) <= 3, page
        seen += [r["room"] for r in page["rooms"]]
        pages += 1
        cursor = page["next"]
        if cursor is None:
            break
    assert seen == made and pages == 3
    # a room that leaves the listing (its only player left) is skipped, paging goes on
    assert (await a.call("leave", room=made[3]))["type"] == "left"
    first = await c.call("list_rooms")
    second = await c.call("list_rooms", cursor=first["next"])
    assert [r["room"] for r in second["rooms"]] == [made[4], made[5], made[6]]
    assert (await c.call("list_rooms", game="stakko"))["rooms"] == []


def test_listing_costs_the_page_not_the_rooms():
    """A hub with thousands of rooms that left the listing keeps only about as many entries
    as listed rooms, and a page visits only the entries after its cursor."""
    hub = Hub(
        ServerConfig(), FakeClock(), schedule_soon=lambda cb: cb(),
        rng_factory=lambda: random.Random(1),
    )  # fmt: skip
    listing = hub.listed[None]
    rooms = [hub._new_room("stacko", dict(SMALL), True) for _ in range(3000)]
    for room in rooms[:-5]:
        hub._close_room(room)
    assert listing.live == 5 and len(listing.rooms) <= 2 * 5 + 64
    page, nxt = listing.page(0, 3)
    assert page == rooms[-5:-2] and nxt == rooms[-3].listed_at
    page, nxt = listing.page(nxt, 3)
    assert page == rooms[-2:] and nxt is None


async def test_list_games_is_built_once(harness):
    c = await harness.client("c")
    first = await c.call("list_games")
    assert (await c.call("list_games"))["games"] == first["games"]
    hub = harness.server.hub
    assert hub._games_info() is hub._games_info()


def test_protocol_md_and_readme_give_the_defaults():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    doc = (root / "PROTOCOL.md").read_text(encoding="utf-8")
    readme = (root / "README.md").read_text(encoding="utf-8")
    cfg = ServerConfig()
    for value, code in [
        (cfg.max_waiting_per_session, "too_many_rooms"),
        (cfg.max_waiting_per_ip, "too_many_rooms"),
        (cfg.max_seats_per_session, "too_many_seats"),
        (cfg.max_bot_games_per_session, "too_many_bot_games"),
        (cfg.max_watching_per_session, "too_many_watched"),
        (cfg.max_spectators_per_room, "too_many_spectators"),
        (cfg.max_bot_games, "bots_busy"),
    ]:
        assert f"| {value} | `{code}` |" in doc, code
    rate, burst = cfg.hello_rate_per_ip, cfg.hello_burst_per_ip
    assert f"| {rate:g} per second, bursts of {burst} | `too_many_hellos` (fatal) |" in doc
    rate, burst = cfg.api_rate_per_ip, cfg.api_burst_per_ip
    assert f"| {rate:g} per second, bursts of {burst} | `rate_limited` (HTTP 429" in doc
    for flag in ("--forwarded-allow-ips", "X-Forwarded-For"):
        assert flag in readme and flag in doc, flag
    for option in (
        "max_waiting_per_session", "max_waiting_per_ip", "max_seats_per_session",
        "max_bot_games_per_session",
        "max_watching_per_session", "max_spectators_per_room", "max_bot_games",
        "hello_rate_per_ip", "hello_burst_per_ip", "quick_match_reserve", "list_rooms_page",
        "bot_workers", "bot_budget_s", "api_rate_per_ip", "api_burst_per_ip",
    ):  # fmt: skip
        flag = "--" + option.replace("_", "-")
        assert flag in readme, flag
        value = getattr(cfg, option)
        assert (
            f"{flag}` {value:g}" in readme
            or f"{flag}` (default {value:g}" in readme
            or (option in ("bot_workers", "bot_budget_s"))
        ), flag


def test_addresses_count_by_ipv4_address_or_ipv6_network():
    assert address_key("203.0.113.7") == "203.0.113.7"
    assert address_key("::ffff:203.0.113.7") == "203.0.113.7"
    assert address_key("2001:db8:1:2:aaaa::1") == address_key("2001:db8:1:2:bbbb::9")
    assert address_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:3::1") != address_key("2001:db8:1:2::1")


def test_a_reply_head_completes_to_the_reply_byte_for_byte():
    from stacko.protocol import frames

    for rid in (None, 0, 7, "a-b", 'q"\\'):
        head = frames.reply_head("rooms", rooms=[{"room": "X"}], next="3")
        assert frames.reply_with_id(head, rid) == frames.reply(
            "rooms", rid, rooms=[{"room": "X"}], next="3"
        )


async def test_list_rooms_pages_are_encoded_once_until_a_listed_room_changes(make_harness):
    """Five clients at the rate limit asking for a page of 100 rooms spent the loop on
    building and encoding it per request: a page is cached until its listing changes, and
    every change a page shows (a seat taken, a spectator, a connection lost, a game started,
    a room gone) makes the next request build it again."""
    h = await make_harness(list_rooms_page=1)
    a = await h.client("a")
    first = await h.create(a, SMALL)
    second = await h.create(a, SMALL)
    c = await h.client("c")

    async def page(cursor: str | None = None) -> tuple[dict, str | None]:
        fields = {} if cursor is None else {"cursor": cursor}
        answer = await c.call("list_rooms", **fields)
        assert answer["type"] == "rooms" and len(answer["rooms"]) == 1, answer
        return answer["rooms"][0], answer["next"]

    info, nxt = await page()
    assert info["room"] == first and [p["name"] for p in info["players"]] == ["a"]
    assert nxt is not None and (await page(nxt))[0]["room"] == second
    # Changed behind the hub's back (no hook): a cached page does not show it ...
    room = h.server.hub.rooms[first]
    room.players[0].name = "renamed"
    assert (await page())[0]["players"][0]["name"] == "a"
    assert (await page(nxt))[0]["room"] == second  # the next page is cached on its own
    # ... and every change the hub hears of makes the page anew.
    w = await h.client("w")
    assert (await w.call("join", room=first, role="spectator"))["type"] == "joined"
    info, _ = await page()
    assert info["players"][0]["name"] == "renamed" and info["spectators"] == 1
    assert (await w.call("leave", room=first))["type"] == "left"
    assert (await page())[0]["spectators"] == 0
    b = await h.client("b")
    assert (await b.call("join", room=first))["type"] == "joined"
    h.snap(first)
    info, _ = await page()
    assert info["status"] == "playing" and len(info["players"]) == 2
    await b.close()
    await a.barrier()
    info, _ = await page()
    assert [p["connected"] for p in info["players"]] == [True, False]
    assert (await a.call("leave", room=second))["type"] == "left"
    answer = await c.call("list_rooms", cursor=nxt)
    assert answer["rooms"] == [] and answer["next"] is None
    assert len(h.server.hub.listed[None].pages) <= 16
