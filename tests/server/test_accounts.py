"""Accounts, ratings, leaderboards and challenges (issue 17), through a real server.

Every test that touches the store runs on SQLite (both writers) and PostgreSQL."""

from __future__ import annotations

import asyncio
import base64
import sqlite3
from urllib.parse import quote

import orjson
import pytest
from openskill.models import PlackettLuce
from stacko_wire import Client

from stacko.server.accounts import TOKEN_PREFIX, name_problem, new_token, normalize, skeleton
from stacko.server.ratings import MODEL, Rating, rate
from stacko.server.store import make_store
from stacko.server.store.schema import MIGRATIONS, SCHEMA_VERSION

SMALL = {"tower": 3, "bricks": 8, "rounds": 2, "turn_cap": 6}


async def http(
    port: int, path: str, method: str = "GET", token: str | None = None
) -> tuple[int, dict]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    writer.write(
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Connection: close\r\n\r\n".encode()
    )
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), orjson.loads(body)


async def register(port: int, name: str, kind: str = "human") -> tuple[int, dict]:
    return await http(port, f"/api/accounts?name={quote(name)}&kind={kind}", "POST")


async def signed_in(h, token: str, name: str = "x") -> tuple[Client, dict]:
    c = await h.client(name, hello=False)
    welcome = await c.call("hello", protocol=1, name=name, account=token)
    if welcome["type"] == "welcome":
        c.token = welcome["session"]
    return c, welcome


# -- names and tokens, alone ---------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["Easy", "STRONG", "3asy", "\u0435asy", "e.a.s.y", "str0ng", "Medium_", "rand0m",
     "S\u00e9arch", "strongbot", "Admin", "\uff45\uff41\uff53\uff59"],
)  # fmt: skip
def test_built_in_bot_names_and_look_alikes_are_reserved(name):
    problem = name_problem(name)
    assert problem is not None and problem.code == "reserved_name", (name, problem)


@pytest.mark.parametrize(
    ("name", "code"),
    [("ab", "bad_name_length"), ("a" * 21, "bad_name_length"),
     ("bob\u202eevil", "bad_name_characters"), ("zero\u200bwidth", "bad_name_characters"),
     ("tab\tname", "bad_name_characters"),
     ("has space", "bad_name_characters"), ("_lead", "bad_name_characters")],
)  # fmt: skip
def test_names_with_hidden_characters_or_a_bad_length_are_refused(name, code):
    problem = name_problem(name)
    assert problem is not None and problem.code == code


def test_unique_forms_and_tokens():
    assert name_problem("Alice_99") is None and name_problem("J\u00fcrgen") is None
    assert normalize("ALICE") == normalize("alice") == normalize("\uff41lice")
    assert skeleton("B0b") == skeleton("bob")
    token = new_token()
    assert token.startswith(TOKEN_PREFIX)
    raw = token[len(TOKEN_PREFIX) :]
    assert len(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))) * 8 >= 192
    assert new_token() != token


def test_rating_updates_are_the_librarys_own_numbers():
    """Hand-made results, checked against an independently built OpenSkill model."""
    ref = PlackettLuce(mu=1500.0, sigma=500.0, beta=250.0, tau=5.0)
    a, b = Rating(), Rating(mu=1700.0, sigma=300.0)
    for score, ranks in ((1.0, [1, 2]), (0.0, [2, 1]), (0.5, [1, 1])):
        (ma, sa), (mb, sb) = rate(a, b, score)
        [[ra], [rb]] = ref.rate(
            [[ref.rating(mu=a.mu, sigma=a.sigma)], [ref.rating(mu=b.mu, sigma=b.sigma)]],
            ranks=ranks,
        )
        assert (ma, sa, mb, sb) == pytest.approx((ra.mu, ra.sigma, rb.mu, rb.sigma), rel=1e-12)
    (ma, _), (mb, _) = rate(a, b, 1.0)
    assert ma > a.mu and mb < b.mu  # the winner gains
    assert MODEL.mu == 1500.0


# -- the store -----------------------------------------------------------------------------


async def tables(store) -> list[str]:
    """The store's tables but the schema version's."""
    if store.kind == "sqlite":
        rows = await store.fetch("SELECT name FROM sqlite_master WHERE type = 'table'")
    else:
        rows = await store.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    return [r[0] for r in rows if r[0] != "schema_version"]


async def test_a_version_1_database_is_migrated_and_keeps_its_games(open_store, store_spec):
    """A database as the previous server left it (schema 1, a game in it) gets the
    account tables at the next start; nothing of it is lost."""
    store = await open_store()
    await store.execute(
        [(f"DROP TABLE {t}", ()) for t in await tables(store)]
        + [(sql, ()) for sql in MIGRATIONS[1]]
        + [
            ("UPDATE schema_version SET version = 1", ()),
            (
                "INSERT INTO games (id, code, game, options, rules_version, public, players, "
                "player0, player1, status, started_ms) VALUES ('00000000000000aa', 'ABCDEFGH', "
                "'stacko', '{}', 1, 1, '[]', 'a', 'b', 'playing', 5)",
                (),
            ),
        ]
    )
    await store.close()
    if store_spec[0] == "sqlite":  # the file really is at version 1 now
        path = f"{store_spec[1]}/stacko.sqlite3"
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT version FROM schema_version").fetchone() == (1,)
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            assert "accounts" not in names
    again = await open_store()
    assert await again.fetch("SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    assert await again.fetch("SELECT id, code FROM games") == [("00000000000000aa", "ABCDEFGH")]
    assert await again.fetch("SELECT count(*) FROM accounts") == [(0,)]
    assert await again.fetch("SELECT account0, account1 FROM games") == [(None, None)]
    assert await again.fetch("SELECT count(*) FROM rated_pairs") == [(0,)]
    # every later migration ran too (ownership: a game of no owner, at epoch 0)
    assert await again.fetch("SELECT owner, epoch FROM games") == [(None, 0)]
    assert set(MIGRATIONS) == set(range(1, SCHEMA_VERSION + 1))


# -- registration and tokens, end to end ---------------------------------------------------


async def test_register_sign_in_rotate_and_revoke(make_harness, store_spec):
    h = await make_harness(store=make_store(*store_spec))
    port = h.server.port
    status, body = await register(port, "Alice", "human")
    assert status == 201, body
    assert body["name"] == "Alice" and body["kind"] == "human"
    token = body["token"]
    rows = await h.server.store.fetch(
        "SELECT name, kind, token_hash FROM accounts WHERE name = ?", ("Alice",)
    )
    assert rows and rows[0][2] != token and token not in repr(rows)  # only a hash is kept

    # The same name in another case or width is taken; refusals store nothing.
    before = await h.server.store.fetch("SELECT count(*) FROM accounts")
    refusals = [("alice", "name_taken"), ("\uff21lice", "name_taken"), ("Easy", "reserved_name"),
                ("bad\u202ename", "bad_name_characters")]  # fmt: skip
    for name, code in refusals:
        status, body = await register(port, name)
        assert body["error"]["code"] == code, (name, body)
        assert status in (400, 409)
    assert await h.server.store.fetch("SELECT count(*) FROM accounts") == before

    c, welcome = await signed_in(h, token, "whatever")
    assert welcome["type"] == "welcome" and welcome["account"] == {"name": "Alice", "kind": "human"}
    assert welcome["name"] == "Alice"

    bad, answer = await signed_in(h, TOKEN_PREFIX + "x" * 43)
    assert answer["type"] == "error" and answer["code"] == "bad_account" and answer["fatal"]
    await bad.closed()

    # Rotation: the old token fails at once (and its connection here ends), the new one works.
    status, rotated = await http(port, "/api/accounts/rotate", "POST", token)
    assert status == 200 and rotated["token"] != token
    kicked = await c.expect("error", code="bad_account")
    assert kicked["fatal"]
    _, answer = await signed_in(h, token)
    assert answer["code"] == "bad_account"
    c2, welcome = await signed_in(h, rotated["token"])
    assert welcome["account"]["name"] == "Alice"

    # Revocation: the same answer as an unknown token, at once.
    status, body = await http(port, "/api/accounts/revoke", "POST", rotated["token"])
    assert status == 200 and body["revoked"]
    await c2.expect("error", code="bad_account")
    _, answer = await signed_in(h, rotated["token"])
    assert answer["code"] == "bad_account"
    status, body = await http(port, "/api/accounts/revoke", "POST", rotated["token"])
    assert status == 401 and body["error"]["code"] == "bad_token"
    status, body = await http(port, "/api/accounts/rotate", "POST")
    assert status == 401
    status, body = await http(port, "/api/accounts?name=Zed")
    assert status == 405


async def test_frames_sent_before_the_account_is_checked_wait_for_the_welcome(
    make_harness, store_spec
):
    h = await make_harness(store=make_store(*store_spec))
    _, body = await register(h.server.port, "Pipeliner")
    c = await h.client("p", hello=False)
    await c.request("hello", protocol=1, name="p", account=body["token"])
    rid = await c.request("list_games")
    welcome = await c.expect()
    assert welcome["type"] == "welcome", welcome
    c.token = welcome["session"]
    games = await c.expect(id=rid)
    assert games["type"] == "games"


async def test_registrations_per_address_are_limited(make_harness, tmp_path):
    h = await make_harness(
        store=make_store("sqlite", str(tmp_path / "d")), registrations_per_hour=2
    )
    assert (await register(h.server.port, "first1"))[0] == 201
    assert (await register(h.server.port, "second2"))[0] == 201
    status, body = await register(h.server.port, "third3")
    assert status == 429 and body["error"]["code"] == "too_many_registrations"
    assert await h.server.store.fetch("SELECT count(*) FROM accounts WHERE name = 'third3'") == [
        (0,)
    ]


async def test_a_memory_server_has_no_accounts(make_harness):
    h = await make_harness()
    status, body = await register(h.server.port, "Nobody")
    assert status == 503 and body["error"]["code"] == "no_store"
    c = await h.client("n", hello=False)
    answer = await c.call("hello", protocol=1, name="n", account=new_token())
    assert answer["code"] == "no_accounts" and answer["fatal"]


# -- rated games ---------------------------------------------------------------------------


async def two_accounts(h, a: str = "Alice", b: str = "Bobby") -> tuple[Client, Client]:
    _, ba = await register(h.server.port, a)
    _, bb = await register(h.server.port, b)
    ca, _ = await signed_in(h, ba["token"], a)
    cb, _ = await signed_in(h, bb["token"], b)
    return ca, cb


async def play_rated(h, ca: Client, cb: Client, resign: bool = False) -> tuple[str, dict, dict]:
    reply = await ca.call("create_room", game="stacko", options=SMALL, public=False, rated=True)
    code = reply["room"]
    joined = await cb.call("join", room=code)
    assert [p.get("account") for p in joined["info"]["players"]] == ["human", "human"]
    room = h.server.hub.rooms[code]
    h.snap(code)
    while room.game.outcome() is None:
        if resign:
            await cb.call("resign", room=code)
            h.snap(code)
            break
        mover = (ca, cb)[room.game.to_move]
        await mover.barrier()
        state = mover.latest[code]
        assert state["seq"] == room.seq
        assert "rated" not in state  # only the final state says it
        move = h.rng.choice(state["legal"])
        await mover.call("move", room=code, ply=state["view"]["ply"], move=move)
        h.snap(code)
    ra = await ca.expect("rating", room=code)
    rb = await cb.expect("rating", room=code)
    for c in (ca, cb):  # the final state announced the rating frame that followed it
        final = c.latest[code]
        assert final["view"]["outcome"] is not None and final["rated"] is True
    return code, ra, rb


async def test_a_rated_game_updates_both_ratings_with_its_result(make_harness, store_spec):
    h = await make_harness(store=make_store(*store_spec))
    ca, cb = await two_accounts(h)
    code, ra, rb = await play_rated(h, ca, cb)
    assert ra == rb
    outcome = h.server.hub.rooms[code].game.outcome()
    score = 0.5 if outcome.winner is None else float(outcome.winner == 0)
    (mua, sa), (mub, sb) = rate(Rating(), Rating(), score)
    a, b = ra["changes"]
    assert (a["name"], b["name"]) == ("Alice", "Bobby") and a["kind"] == "human"
    assert (a["before"], a["after"], a["deviation"]) == (1500, round(mua), round(sa))
    assert (b["before"], b["after"], b["deviation"]) == (1500, round(mub), round(sb))
    assert a["provisional"] and a["delta"] == round(mua) - 1500
    # Committed with the result: the record and the ratings are both there.
    await h.server.store.flush()
    status, record = await http(h.server.port, f"/api/games/{ra['game_id']}")
    assert status == 200 and record["id"] == ra["game_id"]
    assert not h.server.hub.rooms[code].public and record["code"] is None  # its code is secret
    status, board = await http(h.server.port, "/api/leaderboard?game=stacko")
    assert status == 200
    names = [p["name"] for p in board["players"]]
    assert {"Alice", "Bobby"} <= set(names)
    ratings = {p["name"]: p["rating"] for p in board["players"]}
    assert ratings["Alice"] == round(mua) and ratings["Bobby"] == round(mub)
    assert [p["rating"] for p in board["players"]] == sorted(ratings.values(), reverse=True)
    status, prof = await http(h.server.port, "/api/players/alice")
    assert status == 200 and prof["name"] == "Alice" and prof["kind"] == "human"
    st = prof["ratings"]["stacko"]
    assert st["games"] == 1 and st["wins"] + st["draws"] + st["losses"] == 1
    assert prof["recent"][0]["record"] == f"/api/games/{ra['game_id']}"
    assert prof["recent"][0]["page"] == f"/games/{ra['game_id']}"
    assert [p[1] for p in prof["history"]["stacko"]] == [1500, round(mua)]  # before, after
    status, body = await http(h.server.port, "/api/players/nobody-here")
    assert status == 404 and body["error"]["code"] == "unknown_player"
    status, body = await http(h.server.port, "/api/players/a%00b")  # was a 500 on PostgreSQL
    assert status == 404 and body["error"]["code"] == "unknown_player"


async def test_resigning_a_rated_game_is_a_loss_and_ratings_survive_a_restart(
    make_harness, store_spec
):
    h = await make_harness(store=make_store(*store_spec))
    ca, cb = await two_accounts(h)
    _, ra, _ = await play_rated(h, ca, cb, resign=True)
    a, b = ra["changes"]
    assert a["delta"] > 0 and b["delta"] < 0
    await h.server.store.flush()
    rows = await h.server.store.fetch(
        "SELECT a.name, r.wins, r.losses, r.games FROM ratings r JOIN accounts a "
        "ON a.id = r.account_id WHERE r.game = 'stacko' ORDER BY a.name"
    )
    assert rows == [("Alice", 1, 0, 1), ("Bobby", 0, 1, 1)]


async def test_rated_games_between_one_pair_are_limited(make_harness, store_spec):
    h = await make_harness(store=make_store(*store_spec), rated_pair_per_day=1)
    ca, cb = await two_accounts(h)
    await play_rated(h, ca, cb, resign=True)
    reply = await ca.call("create_room", game="stacko", options=SMALL, public=False, rated=True)
    code = reply["room"]
    await cb.call("join", room=code)
    update = await not_rated(ca, code)
    assert "played 1 rated games today" in update["text"]
    h.snap(code)
    await cb.call("resign", room=code)
    h.snap(code)
    await ca.barrier()
    assert not ca.pending("rating")
    final = ca.latest[code]  # it says no rating frame follows: a client need not wait
    assert final["view"]["outcome"] is not None and final["rated"] is False


async def not_rated(c: Client, code: str) -> dict:
    """The room's "not rated" update (it follows the start: the count is in the store)."""
    for _ in range(500):
        for f in c.frames:
            if f.get("type") == "room" and f.get("room") == code and "not rated" in f["text"]:
                return f
        await asyncio.sleep(0.01)
    raise AssertionError(f"no 'not rated' update for room {code}: {c.frames[-5:]}")


async def test_the_pair_limit_is_counted_in_the_store_across_restarts(make_harness, store_spec):
    """The count of rated games between two accounts is the store's: a restarted server
    (or another node) goes on from it (it was counted per process)."""
    h1 = await make_harness(store=make_store(*store_spec), rated_pair_per_day=1)
    tokens = [(await register(h1.server.port, n))[1]["token"] for n in ("Alice", "Bobby")]
    ca, _ = await signed_in(h1, tokens[0], "Alice")
    cb, _ = await signed_in(h1, tokens[1], "Bobby")
    await play_rated(h1, ca, cb, resign=True)
    assert await h1.server.store.fetch("SELECT count(*) FROM rated_pairs") == [(1,)]
    await h1.server.shutdown(restart=True)
    for c in (ca, cb):
        await c.closed(5)
    h1.clients.clear()
    h2 = await make_harness(store=make_store(*store_spec), rated_pair_per_day=1)
    ca, _ = await signed_in(h2, tokens[0], "Alice")
    cb, _ = await signed_in(h2, tokens[1], "Bobby")
    code = (await ca.call("create_room", options=SMALL, public=False, rated=True))["room"]
    await cb.call("join", room=code)
    assert "played 1 rated games today" in (await not_rated(ca, code))["text"]
    h2.snap(code)
    await cb.call("resign", room=code)
    h2.snap(code)
    await ca.barrier()
    assert not ca.pending("rating")
    assert await h2.server.store.fetch("SELECT count(*) FROM rated_pairs") == [(1,)]


# -- challenges ----------------------------------------------------------------------------


async def test_challenges_accepted_declined_and_timed_out(make_harness, store_spec):
    h = await make_harness(store=make_store(*store_spec), challenge_timeout_s=30)
    ca, cb = await two_accounts(h)
    # Accepted: a private rated room with the challenger in seat 0.
    sent = await ca.call("challenge", to="bobby", game="stacko", options=SMALL, rated=True)
    assert sent["type"] == "challenge_sent" and sent["to"] == "Bobby"
    seen = await cb.expect("challenged")
    assert seen["challenge"] == sent["challenge"] and seen["account"]["name"] == "Alice"
    assert seen["rated"] and seen["options"] == SMALL
    joined = await cb.call("accept_challenge", challenge=seen["challenge"])
    assert joined["type"] == "joined" and joined["seat"] == 1
    other = await ca.expect("joined", room=joined["room"])
    assert other["seat"] == 0
    code = joined["room"]
    h.snap(code)
    assert h.server.hub.rooms[code].rated and not h.server.hub.rooms[code].public
    await ca.call("resign", room=code)
    h.snap(code)
    rating = await cb.expect("rating", room=code)
    assert rating["changes"][1]["delta"] > 0
    # Declined.
    sent = await ca.call("challenge", to="Bobby", game="stacko")
    seen = await cb.expect("challenged", challenge=sent["challenge"])
    answer = await cb.call("decline_challenge", challenge=seen["challenge"])
    assert answer["type"] == "challenge_over" and answer["reason"] == "declined"
    over = await ca.expect("challenge_over", challenge=sent["challenge"])
    assert over["reason"] == "declined"
    gone = await cb.call("accept_challenge", challenge=seen["challenge"])
    assert gone["type"] == "error" and gone["code"] == "unknown_challenge"
    # Timed out.
    sent = await ca.call("challenge", to="Bobby", game="stacko")
    await cb.expect("challenged", challenge=sent["challenge"])
    h.advance(31)
    assert (await ca.expect("challenge_over", challenge=sent["challenge"]))["reason"] == "expired"
    assert (await cb.expect("challenge_over", challenge=sent["challenge"]))["reason"] == "expired"
    # Nobody online by that name; a challenge to oneself; someone else's challenge.
    assert (await ca.call("challenge", to="Nobody"))["code"] == "not_online"
    assert (await ca.call("challenge", to="alice"))["code"] == "not_online"
    sent = await ca.call("challenge", to="Bobby")
    guest = await h.client("guest")
    wrong = await guest.call("accept_challenge", challenge=sent["challenge"])
    assert wrong["code"] == "unknown_challenge"
    # The challenger goes away: the challenge is cancelled.
    await cb.expect("challenged", challenge=sent["challenge"])
    await ca.close()
    over = await cb.expect("challenge_over", challenge=sent["challenge"])
    assert over["reason"] == "cancelled"


class NoScan(dict):
    """Sessions that may be looked up by token but not walked through."""

    def values(self):
        raise AssertionError("a scan of every session")

    def items(self):
        raise AssertionError("a scan of every session")


async def test_a_challenge_finds_its_account_by_name_not_by_a_scan(make_harness, tmp_path):
    """``challenge`` looks the name up (it walked every session: ~1.5 ms at 10,000)."""
    h = await make_harness(store=make_store("sqlite", str(tmp_path / "data")))
    ca, cb = await two_accounts(h)
    hub = h.server.hub
    for i in range(50):  # guests and other sessions the lookup must not walk
        await h.client(f"guest{i}")
    sessions = hub.sessions
    hub.sessions = NoScan(sessions)
    try:
        sent = await ca.call("challenge", to="BOBBY", game="stacko")
        assert sent["type"] == "challenge_sent" and sent["to"] == "Bobby", sent
        await cb.expect("challenged", challenge=sent["challenge"])
        assert (await ca.call("challenge", to="Nobody"))["code"] == "not_online"
    finally:
        hub.sessions = sessions
    # A session that signed out (here: it went away) is not found by its name any more.
    await cb.close()
    for _ in range(200):
        if hub.accounts.online_count("bobby") == 0:
            break
        await asyncio.sleep(0.01)
    assert (await ca.call("challenge", to="Bobby"))["code"] == "not_online"


# -- matchmaking by strength ---------------------------------------------------------------


def test_the_window_widens_with_waiting_and_everyone_is_paired_in_bounded_time():
    from stacko.server import matchmaking as mm

    assert mm.window(0) == mm.BASE and mm.window(5) == mm.BASE + 5 * mm.GROWTH
    assert mm.window(mm.MAX_WAIT_S) == float("inf")

    class S:
        def __init__(self, mu, at):
            self.account = (
                None if mu is None else type("A", (), {"ratings": {"stacko": Rating(mu)}})()
            )
            self.queued_at = at

    strong, weak, mid, guest = S(2000, 0), S(1000, 0), S(1950, 0), S(None, 0)
    assert mm.partner([strong, weak], mid, "stacko", 0) == 0  # the closest first
    assert mm.partner([weak], mid, "stacko", 0) is None  # 950 apart: wait
    assert mm.partner([weak], guest, "stacko", 0) == 0  # guests: first come
    assert mm.sweep([strong, weak], "stacko", 10) == []
    assert mm.sweep([strong, weak], "stacko", mm.MAX_WAIT_S) == [(strong, weak)]


async def test_quick_match_pairs_close_ratings_first_then_widens(make_harness, tmp_path):
    h = await make_harness(store=make_store("sqlite", str(tmp_path / "d")))
    names = ("Anna", "Boris", "Carla", "Dora")
    tokens = [(await register(h.server.port, n))[1]["token"] for n in names]
    clients = [(await signed_in(h, t, n))[0] for t, n in zip(tokens, names, strict=True)]
    by_name = {s.account.name: s for s in h.server.hub.sessions.values() if s.account}
    by_name["Boris"].account.ratings["stacko"] = Rating(mu=1900.0)
    by_name["Dora"].account.ratings["stacko"] = Rating(mu=1850.0)
    anna, boris, carla, dora = clients
    assert (await anna.call("quick_match", game="stacko"))["type"] == "queued"
    assert (await boris.call("quick_match", game="stacko"))["type"] == "queued"  # 400 apart
    joined = await carla.call("quick_match", game="stacko")  # 1500: Anna, not Boris
    assert joined["type"] == "joined"
    assert {p["name"] for p in joined["info"]["players"]} == {"Anna", "Carla"}
    h.snap(joined["room"])
    # Dora (1850) would pair with Boris at once (50 apart); here Boris waits alone, and a
    # far weaker account does not get him until the window has grown.
    _, weak = await register(h.server.port, "Weakling")
    w, _ = await signed_in(h, weak["token"], "Weakling")
    by_name = {s.account.name: s for s in h.server.hub.sessions.values() if s.account}
    by_name["Weakling"].account.ratings["stacko"] = Rating(mu=1400.0)
    assert (await w.call("quick_match", game="stacko"))["type"] == "queued"  # 500 apart
    h.advance(10)  # windows: 300
    await w.barrier()
    assert not w.pending("joined")
    h.advance(11)  # 21 s: 520 >= 500
    paired = await w.expect("joined")
    assert {p["name"] for p in paired["info"]["players"]} == {"Boris", "Weakling"}
    h.snap(paired["room"])
    await boris.expect("joined", room=paired["room"])
    del dora


async def test_a_rated_game_interrupted_by_a_restart_is_still_rated(make_harness, store_spec):
    h1 = await make_harness(store=make_store(*store_spec))
    _, ba = await register(h1.server.port, "Alice")
    _, bb = await register(h1.server.port, "Bobby")
    ca, _ = await signed_in(h1, ba["token"], "Alice")
    cb, _ = await signed_in(h1, bb["token"], "Bobby")
    code = (await ca.call("create_room", options=SMALL, public=False, rated=True))["room"]
    await cb.call("join", room=code)
    h1.snap(code)
    sessions = [ca.token, cb.token]
    await h1.server.shutdown(restart=True)
    for c in (ca, cb):
        await c.closed(5)
    h1.clients.clear()
    h2 = await make_harness(store=make_store(*store_spec))
    assert h2.server.restored == 1 and h2.server.hub.rooms[code].rated
    h2.snap(code)
    back = []
    for token, session, name in (
        (ba["token"], sessions[0], "Alice"),
        (bb["token"], sessions[1], "Bobby"),
    ):
        c = await h2.client(name, hello=False)
        welcome = await c.call("hello", protocol=1, name=name, token=session, account=token)
        assert welcome["resumed"] and welcome["account"]["name"] == name
        c.token = welcome["session"]
        await c.expect("state", room=code)
        back.append(c)
    await back[1].call("resign", room=code)
    h2.snap(code)
    rating = await back[0].expect("rating", room=code)
    assert rating["changes"][0]["name"] == "Alice" and rating["changes"][0]["delta"] > 0


async def test_a_restored_rated_room_keeps_its_accounts(make_harness, store_spec):
    """After a restart the room still shows which seats are accounts, and the game is
    credited to the accounts that started it, even to players that come back with their
    session token alone; a rated room whose game was not rated (the pair limit) is still a
    rated room."""
    h1 = await make_harness(store=make_store(*store_spec), rated_pair_per_day=1)
    tokens = [(await register(h1.server.port, n))[1]["token"] for n in ("Alice", "Bobby")]
    ca, _ = await signed_in(h1, tokens[0], "Alice")
    cb, _ = await signed_in(h1, tokens[1], "Bobby")
    code = (await ca.call("create_room", options=SMALL, public=False, rated=True))["room"]
    await cb.call("join", room=code)
    h1.snap(code)
    other = (await ca.call("create_room", options=SMALL, public=False, rated=True))["room"]
    await cb.call("join", room=other)
    await not_rated(ca, other)  # the pair's one rated game of the day is the first
    h1.snap(other)
    sessions = [ca.token, cb.token]
    await h1.server.shutdown(restart=True)
    for c in (ca, cb):
        await c.closed(5)
    h1.clients.clear()
    h2 = await make_harness(store=make_store(*store_spec), rated_pair_per_day=1)
    hub = h2.server.hub
    assert h2.server.restored == 2
    assert hub.rooms[code].rated and hub.rooms[other].rated
    back = []
    for session, name in zip(sessions, ("Alice", "Bobby"), strict=True):
        c = await h2.client(name, hello=False)
        welcome = await c.call("hello", protocol=1, name=name, token=session)
        assert welcome["resumed"] and "account" not in welcome
        c.token = welcome["session"]
        for room in (code, other):
            await c.expect("state", room=room)
        back.append(c)
    info = hub.rooms[code].info()
    assert [p.get("account") for p in info["players"]] == ["human", "human"], info
    h2.snap(code)
    h2.snap(other)
    await back[0].call("resign", room=code)
    h2.snap(code)
    rating = await back[1].expect("rating", room=code)
    assert [(c["name"], c["delta"] > 0) for c in rating["changes"]] == [
        ("Alice", False),
        ("Bobby", True),
    ]
    await back[0].call("resign", room=other)
    h2.snap(other)
    await back[1].barrier()
    assert not back[1].pending("rating")


async def test_a_token_revoked_while_its_hello_is_checked_does_not_sign_in(
    make_harness, store_spec
):
    """The ``hello`` read the token before the revocation, and its welcome would come
    after the revocation's sign-out: it must not sign in (it did)."""
    h = await make_harness(store=make_store(*store_spec))
    _, body = await register(h.server.port, "Dave")
    accounts = h.server.accounts
    real = accounts.authenticate
    read, release = asyncio.Event(), asyncio.Event()

    async def slow(token):
        found = await real(token)
        if not read.is_set():  # the hello's read: held until the token is revoked
            read.set()
            await release.wait()
        return found

    accounts.authenticate = slow
    c = await h.client("d", hello=False)
    rid = await c.request("hello", protocol=1, name="d", account=body["token"])
    await read.wait()
    status, _ = await http(h.server.port, "/api/accounts/revoke", "POST", body["token"])
    assert status == 200
    release.set()
    answer = await c.expect(id=rid)
    assert answer["type"] == "error" and answer["code"] == "bad_account", answer


async def test_a_revoked_account_does_not_live_on_in_its_session_token(make_harness, store_spec):
    """Revoking ends the connection, and the session token alone does not sign the account
    in again: the session resumes as a guest (review finding: it kept the account)."""
    h = await make_harness(store=make_store(*store_spec))
    port = h.server.port
    _, body = await register(port, "Dave")
    c, welcome = await signed_in(h, body["token"], "d")
    assert welcome["account"]["name"] == "Dave"
    status, _ = await http(port, "/api/accounts/revoke", "POST", body["token"])
    assert status == 200
    await c.expect("error", code="bad_account")
    again = await h.client("y", hello=False)
    again.token = welcome["session"]  # the same session, resumed: its own token
    resumed = await again.call("hello", protocol=1, name="y", token=welcome["session"])
    assert resumed["type"] == "welcome" and resumed["resumed"]
    assert "account" not in resumed


async def test_concurrent_rotations_give_one_working_token(make_harness, tmp_path):
    """Only a rotation that really changed the token answers 200 (review finding: racing
    rotations each answered 200, with dead tokens)."""
    h = await make_harness(store=make_store("sqlite", str(tmp_path / "data")))
    port = h.server.port
    _, body = await register(port, "Erin")
    answers = await asyncio.gather(
        *(http(port, "/api/accounts/rotate", "POST", body["token"]) for _ in range(6))
    )
    fresh = [b["token"] for status, b in answers if status == 200]
    assert fresh and all(s in (200, 401) for s, _ in answers)
    for token in fresh:
        _, welcome = await signed_in(h, token)
        assert welcome["type"] == "welcome", welcome


@pytest.mark.parametrize(
    "path",
    ["/api/games?limit=%C2%B2", "/api/leaderboard?limit=%C2%B2", "/api/leaderboard?cursor=%C2%B2",
     "/api/games?cursor=" + "OTk5OTk5OTk5OTk5OTk5OTk5OTk5OmFiYw"],  # "99999999999999999999999:abc"
)  # fmt: skip
async def test_odd_numbers_in_queries_are_400_not_500(make_harness, tmp_path, path):
    """Digits that str.isdigit accepts but int() refuses, and a cursor too large for an
    INTEGER column, are bad requests (review finding: 500 with a traceback)."""
    h = await make_harness(store=make_store("sqlite", str(tmp_path / "data")))
    status, body = await http(h.server.port, path)
    assert status == 400, body
    assert "error" in body
