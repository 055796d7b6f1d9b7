"""Accounts through the SDK against a real server with a store (SQLite and PostgreSQL):
a rated quick match between two registered bots, a bot sitting online accepting
challenges, and a rated game against a built-in bot on the leaderboard."""

from __future__ import annotations

import asyncio
import io
import re
import urllib.request
from typing import Any

import orjson
import pytest

from stacko.clients import botcli, cli
from stacko.clients.sdk import BotRunner, ChallengeRefused, ServerError, State, register
from stacko.server.app import Server
from stacko.server.config import ServerConfig
from stacko.server.ratings import Rating, rate
from stacko.server.store import make_store

FAST = {"rate_per_second": 1000.0, "burst": 2000, "bot_workers": 0}
SMALL = {"bricks": 12, "tower": 4, "rounds": 1}


def first_legal(state: State) -> dict[str, Any]:
    return state.legal[0]


async def get(server: Server, path: str) -> Any:
    def fetch() -> Any:
        with urllib.request.urlopen(f"{server.http_url.rstrip('/')}{path}", timeout=10) as r:
            return orjson.loads(r.read())

    return await asyncio.to_thread(fetch)


@pytest.fixture
async def server(store_spec):
    srv = Server(
        ServerConfig(host="127.0.0.1", port=0, challenge_timeout_s=20, **FAST),  # type: ignore[arg-type]
        store=make_store(*store_spec),
    )
    await srv.start()
    yield srv
    await srv.shutdown()


async def test_rated_quick_match_between_two_sdk_bots_updates_both_and_the_board(server):
    a = await asyncio.to_thread(register, server.url, "AlphaBot", "bot")
    b = await asyncio.to_thread(register, server.url, "BetaBot", "bot")
    assert a["kind"] == "bot" and a["token"] != b["token"]
    with pytest.raises(ServerError) as refused:
        await asyncio.to_thread(register, server.url, "alphabot", "bot")
    assert refused.value.code == "name_taken"
    async with (
        BotRunner(first_legal, server.url, name="a", account=a["token"]) as ra,
        BotRunner(first_legal, server.url, name="b", account=b["token"]) as rb,
    ):
        assert ra.welcome is not None and ra.welcome["account"] == {
            "name": "AlphaBot",
            "kind": "bot",
        }
        async with asyncio.timeout(120):
            [res_a], [res_b] = await asyncio.gather(ra.quick_match(), rb.quick_match())
    assert res_a.outcome != res_b.outcome or res_a.outcome == "draw"
    assert res_a.rated and res_b.rated  # a quick match between two accounts
    await server.store.flush()
    board = await get(server, "/api/leaderboard?game=stacko")
    rows = {p["name"]: p for p in board["players"]}
    assert rows["AlphaBot"]["games"] == 1 and rows["BetaBot"]["games"] == 1
    assert rows["AlphaBot"]["kind"] == "bot" and rows["AlphaBot"]["provisional"]
    score = {"won": 1.0, "draw": 0.5, "lost": 0.0}[res_a.outcome]
    (mu_a, _), (mu_b, _) = rate(Rating(), Rating(), score)  # the library's numbers
    assert (rows["AlphaBot"]["rating"], rows["BetaBot"]["rating"]) == (round(mu_a), round(mu_b))
    profile = await get(server, "/api/players/BetaBot")
    assert profile["recent"][0]["opponent"] == "AlphaBot"


async def test_a_bot_online_accepts_challenges_and_another_declines(server):
    a = await asyncio.to_thread(register, server.url, "Challenger", "human")
    b = await asyncio.to_thread(register, server.url, "Sitter", "bot")
    c = await asyncio.to_thread(register, server.url, "Picky", "bot")
    seen: list[dict[str, Any]] = []

    def picky(frame: dict[str, Any]) -> bool:
        seen.append(frame)
        return False

    async with (
        BotRunner(first_legal, server.url, account=a["token"]) as ra,
        BotRunner(first_legal, server.url, account=b["token"], accept_challenges=True) as rb,
        BotRunner(first_legal, server.url, account=c["token"], on_challenge=picky),
    ):
        serving = asyncio.create_task(rb.serve_challenges(1))
        async with asyncio.timeout(120):
            [mine] = await ra.challenge("sitter", options=SMALL, rated=True)
            [theirs] = await serving
        assert mine.seat == 0 and theirs.seat == 1
        with pytest.raises(ChallengeRefused, match="declined"):
            await ra.challenge("Picky")
        assert seen and seen[0]["account"] == {"name": "Challenger", "kind": "human"}
        with pytest.raises(ServerError) as offline:
            await ra.challenge("Nobody")
        assert offline.value.code == "not_online"
    await server.store.flush()
    profile = await get(server, "/api/players/Sitter")
    assert profile["ratings"]["stacko"]["games"] == 1


async def test_built_in_bots_have_accounts_and_ratings(store_spec):
    from stacko.bots.registry import available, make_bot

    srv = Server(
        ServerConfig(host="127.0.0.1", port=0, **FAST),  # type: ignore[arg-type]
        store=make_store(*store_spec),
        bots=(available(), make_bot),
    )
    await srv.start()
    try:
        human = await asyncio.to_thread(register, srv.url, "Humble", "human")
        async with BotRunner(first_legal, srv.url, account=human["token"]) as r:
            client = await r._client()
            joined = await client.request(
                {"type": "create_room", "game": "stacko", "options": SMALL, "bot": "easy",
                 "rated": True}
            )  # fmt: skip
            async with asyncio.timeout(120):
                [result] = await r.play_room(joined["room"])
        # A game this short can end before the human's ratings are read back (the read
        # waits for the journal's applier): it is then rated once they are, a moment later.
        for _ in range(200):
            await srv.store.flush()
            board = await get(srv, "/api/leaderboard?game=stacko")
            rows = {p["name"]: p for p in board["players"]}
            if "easy" in rows:
                break
            await asyncio.sleep(0.05)
        assert rows["easy"]["kind"] == "bot" and rows["easy"]["games"] == 1
        assert rows["Humble"]["games"] == 1
        if result.outcome == "won":
            assert rows["Humble"]["rating"] > rows["easy"]["rating"]
        accounts = await srv.store.fetch("SELECT name FROM accounts WHERE builtin = 1")
        assert {"easy", "medium", "strong"} <= {n for (n,) in accounts}
    finally:
        await srv.shutdown()


async def bot_online(server: Server, name: str) -> tuple[asyncio.Task[int], io.StringIO]:
    """``stacko-bot --register`` then ``--accept-challenges`` for one game, once it is online."""
    out = io.StringIO()
    assert await botcli.amain([server.url, "--register", name], out) == 0
    found = re.search(r"token: (\S+)", out.getvalue())
    assert found and "--accept-challenges" in out.getvalue(), out.getvalue()
    bot_out = io.StringIO()
    serving = asyncio.create_task(
        botcli.amain(
            [server.url, "--account", found.group(1), "--accept-challenges", "--games", "1",
             "--level", "easy"],
            bot_out,
        )
    )  # fmt: skip
    for _ in range(1000):  # poll: the server has no hook to wait on; fails after 20 s
        if any(
            s.account is not None and s.account.name == name and s.peer is not None
            for s in server.hub.sessions.values()
        ):
            break
        await asyncio.sleep(0.02)
    return serving, bot_out


async def human_token(server: Server, name: str) -> str:
    """``stacko-client --register``: the account's token."""
    out = io.StringIO()
    assert await cli.amain([server.url, "--register", name], out) == 0
    found = re.search(r"token: (\S+)", out.getvalue())
    assert found
    return found.group(1)


async def challenge(
    server: Server,
    token: str,
    bot: str,
    serving: asyncio.Task[int],
    bot_out: io.StringIO,
    *flags: str,
) -> tuple[int, str]:
    """``stacko-client --account TOKEN --challenge BOT --auto`` on a small one-round game,
    until it and the bot (``bot_online``) are done: its exit status and output."""
    human = io.StringIO()
    args = [server.url, "--account", token, "--challenge", bot, *flags, "--auto",
            "--option", "bricks=12", "--option", "tower=4", "--option", "rounds=1"]  # fmt: skip
    async with asyncio.timeout(60):
        status = await cli.amain(args, human)
        assert await serving == 0, bot_out.getvalue()
    return status, human.getvalue()


@pytest.mark.parametrize("rating_delay", [0.0, 0.3])
async def test_the_commands_register_and_play_a_rated_challenge(server, rating_delay, monkeypatch):
    """``rating_delay``: the rating frame comes that much after the final state (on a loaded
    machine it came in a later read, and the client, done at the result, lost it)."""
    from stacko.server.ratings import Ratings

    announce = Ratings.announce

    def later(self: Ratings, room: Any) -> None:
        asyncio.get_running_loop().call_later(rating_delay, announce, self, room)

    if rating_delay:
        monkeypatch.setattr(Ratings, "announce", later)

    serving, bot_out = await bot_online(server, "CmdBot")
    token = await human_token(server, "CmdHuman")
    again = io.StringIO()
    assert await cli.amain([server.url, "--register", "cmdhuman"], again) == 2
    assert "(name_taken)" in again.getvalue()
    status, text = await challenge(server, token, "cmdbot", serving, bot_out, "--rated")
    assert status == 0, text
    assert "challenged CmdBot" in text and "rating: CmdHuman 1500 -> " in text, text
    assert "signed in as the account CmdBot" in bot_out.getvalue()


async def test_a_signed_in_client_does_not_wait_for_the_rating_of_an_unrated_game(
    server, monkeypatch
):
    """The final state says whether a ``rating`` frame follows (``state.rated``): a client
    signed in with an account waited ``RATING_WAIT_S`` after every game for one, rated or
    not. With the wait made an hour, an unrated challenge still ends at once."""
    monkeypatch.setattr(cli, "RATING_WAIT_S", 3600.0)
    serving, bot_out = await bot_online(server, "PlainBot")
    token = await human_token(server, "PlainHuman")
    status, text = await challenge(server, token, "plainbot", serving, bot_out)
    assert status == 0 and "challenged PlainBot" in text and "result: " in text, text
    assert "rating:" not in text


async def test_the_terminal_client_prompts_for_a_challenge(server):
    human = await asyncio.to_thread(register, server.url, "Prompted", "human")
    bot = await asyncio.to_thread(register, server.url, "Asker", "bot")
    out = io.StringIO()
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    args = [server.url, "--account", human["token"], "--wait-challenges"]
    waiting = asyncio.create_task(cli.amain(args, out, lines))
    for _ in range(1000):  # poll: signed in (no hook to wait on); fails after 20 s
        if "waiting for challenges" in out.getvalue():
            break
        await asyncio.sleep(0.02)
    async with BotRunner(first_legal, server.url, account=bot["token"]) as runner:
        asking = asyncio.create_task(runner.challenge("prompted", rated=True))
        for _ in range(1000):
            if "y accepts, n declines" in out.getvalue():
                break
            await asyncio.sleep(0.02)
        assert "Asker challenges you to a game of stacko (rated)" in out.getvalue()
        await lines.put("n")
        with pytest.raises(ChallengeRefused, match="declined"):
            await asyncio.wait_for(asking, 20)
    await lines.put("q")
    assert await asyncio.wait_for(waiting, 20) == 0
    assert "declined" in out.getvalue()
