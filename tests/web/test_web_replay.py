"""A finished game's page (/games/{id}) and the record links of the lobby and of a game's
end, in Chromium, end to end: real games are played on the test server (over the wire, see
wire_games.py, or by clicking), recorded in its SQLite store, and the page reads them from
the real records API (``GET /api/games``, ``GET /api/games/{id}/replay?seat=0|1|all``).

What each seat's view must show is taken from the state frames that seat received during the
game, not from the records API: the page must show exactly what the seat saw, and with
``seat=all`` both towers whole.
"""

from __future__ import annotations

import random
import sqlite3
import time
from typing import Any
from urllib.parse import parse_qs, urlparse

from stacko.server.app import ServerConfig
from tests.web.conftest import ServerThread
from tests.web.test_web_client import SMALL, start_game
from tests.web.wire_games import Played, WireClient, play

STACKO_OPTIONS = {"tower": 4, "bricks": 12, "rounds": 2, "turn_cap": 8, "clock_ms": None}


def step(page: Any) -> int:
    return int(page.evaluate("() => window.stackoReplay.step"))


def shown(tower: list[dict[str, Any]]) -> list[str]:
    return [s["text"] for s in tower]


def expected(tower: list[int | None]) -> list[str]:
    return ["?" if b is None else str(b) for b in tower]


def slide(page: Any, to: int) -> None:
    page.eval_on_selector(
        "#step-slider",
        f"(el) => {{ el.value = '{to}'; el.dispatchEvent(new Event('input')); }}",
    )


def replay_requests(page: Any) -> list[str]:
    asked: list[str] = []
    page.on(
        "request",
        lambda r: asked.append(r.url) if urlparse(r.url).path.startswith("/api/games/") else None,
    )
    return asked


def test_stepping_through_a_finished_stacko_game(server, new_player, screenshots) -> None:
    game = play(server.http_url, "stacko", STACKO_OPTIONS, seed=5)
    seat0, seat1 = game.views(0), game.views(1)
    last = len(seat0) - 1
    viewer = new_player("Viewer")
    page = viewer.page
    asked = replay_requests(page)
    page.goto(f"{server.http_url}games/{game.game_id}")
    page.wait_for_selector("#replay-body:not([hidden])")
    assert page.inner_text("#replay-title") == "Alice vs Bob"
    assert "Start" in page.inner_text("#step-no")
    assert page.get_attribute("#step-slider", "max") == str(last)
    assert parse_qs(urlparse(asked[-1]).query)["seat"] == ["all"]
    # Everything shown: both dealt towers whole from the first position on, each as its own
    # seat saw it (a seat sees its own dealt tower), hidden bricks included.
    assert shown(viewer.tower("seat0")) == expected(seat0[0]["towers"][0])
    assert shown(viewer.tower("seat1")) == expected(seat1[0]["towers"][1])
    assert "?" not in shown(viewer.tower("seat0")) + shown(viewer.tower("seat1"))
    assert page.locator("#move-list li").count() == last

    page.click("#next-btn")
    assert step(page) == 1
    assert page.inner_text("#move-list li.current") == page.inner_text("#step-text")
    assert page.inner_text("#step-text").startswith(("Alice ", "Bob "))  # names, not seats
    page.keyboard.press("ArrowRight")
    assert step(page) == 2 and "Move 2 of" in page.inner_text("#step-no")
    page.keyboard.press("End")
    assert step(page) == last and page.is_disabled("#next-btn")
    outcome = seat0[-1]["outcome"]
    assert page.is_visible("#outcome")
    dash = "\u2013"
    score = f"Alice {outcome['scores'][0]} {dash} {outcome['scores'][1]} Bob"
    assert score in page.inner_text("#outcome")
    page.screenshot(path=screenshots / "replay-end.png", full_page=True)
    page.keyboard.press("Home")
    assert step(page) == 0 and page.is_disabled("#prev-btn")
    slide(page, 5)
    assert step(page) == 5
    for li in (3, 4):
        page.click(f'#move-list li[data-step="{li}"] button')
        assert step(page) == li
    page.click('#move-list li[data-step="5"] button')
    # Alice's bricks Bob never saw: shown with everything shown, hidden in Bob's view.
    hidden = [i for i, b in enumerate(seat1[5]["towers"][0]) if b is None]
    assert hidden, "seat 1 saw every brick of seat 0 by move 5: pick another seed"
    assert shown(viewer.tower("seat0")) == expected(seat0[5]["towers"][0])
    assert all(shown(viewer.tower("seat0"))[i] != "?" for i in hidden)

    # As Bob saw it: the page asks for seat 1's views and shows what his frames showed.
    page.check('input[name="seat"][value="1"]')
    page.wait_for_function("() => window.stackoReplay.record.steps[0].view.seat === 1")
    assert parse_qs(urlparse(asked[-1]).query)["seat"] == ["1"]
    assert step(page) == 5 and page.url.endswith("?seat=1")
    assert page.evaluate("() => window.stackoReplay.record.steps.map((s) => s.view)") == seat1
    assert shown(viewer.tower("opponent")) == expected(seat1[5]["towers"][0])
    assert all(shown(viewer.tower("opponent"))[i] == "?" for i in hidden)
    assert shown(viewer.tower("me")) == expected(seat1[5]["towers"][1])
    assert "Bob" in page.inner_text('[data-tower="me"] .tower-title')  # a name, not "You"
    page.screenshot(path=screenshots / "replay-seat1.png", full_page=True)

    # As Alice saw it: Bob's dealt bricks hidden at the start, hers as she saw them.
    page.check('input[name="seat"][value="0"]')
    page.wait_for_function("() => window.stackoReplay.record.steps[0].view.seat === 0")
    assert page.evaluate("() => window.stackoReplay.record.steps.map((s) => s.view)") == seat0
    page.keyboard.press("Home")
    assert shown(viewer.tower("opponent")) == expected(seat0[0]["towers"][1])
    assert "?" in shown(viewer.tower("opponent"))
    assert shown(viewer.tower("me")) == expected(seat0[0]["towers"][0])
    assert viewer.errors == []


def test_stakko_games_of_every_variant_replay(server, new_player) -> None:
    games: dict[str, Played] = {
        v: play(server.http_url, "stakko", {"variant": v, "ply_cap": 60}, seed=7)
        for v in ("basic", "gray", "red")
    }
    viewer = new_player("Viewer", width=390, height=844)
    page = viewer.page
    for variant, game in games.items():
        views = game.views(0)
        page.goto(f"{server.http_url}games/{game.game_id}")
        page.wait_for_selector("#replay-body:not([hidden])")
        assert page.locator(".stakko-stack").count() == len(views[0]["line"]) == 9
        assert page.locator("#move-list li").count() == len(views) - 1
        # Stakko hides nothing: every seat's view is the whole game, as both seats saw it.
        for seat in ("0", "1"):
            page.check(f'input[name="seat"][value="{seat}"]')
            page.wait_for_function(
                f"() => window.stackoReplay.record.steps[0].view.seat === {seat}"
            )
            got = page.evaluate("() => window.stackoReplay.record.steps.map((s) => s.view)")
            assert got == game.views(int(seat))
        page.check('input[name="seat"][value="all"]')
        page.wait_for_function("() => window.stackoReplay.record.seat === 'all'")
        if variant != "basic":
            assert variant in page.inner_text("#replay-meta")
            assert page.get_attribute("#rules-link", "href") == f"/rules-stakko.html#{variant}"
            # A space that left the line: the board has fewer stacks from that move on.
            shorter = next(i for i, v in enumerate(views) if len(v["line"]) < 9)
            slide(page, shorter)
            assert page.locator(".stakko-stack").count() == len(views[shorter]["line"])
            assert "left the line" in page.inner_text("#step-text")
        page.keyboard.press("End")
        assert page.locator(".stakko-stack").count() == len(views[-1]["line"])
        assert page.is_visible("#outcome")
        assert page.locator("button.disc").count() == 0  # nothing to click in a replay
    assert viewer.errors == []


def test_missing_unfinished_and_bad_games_say_so(server, new_player, tmp_path) -> None:
    # A game in progress has a record, but the page (the API) does not show it yet.
    a, b = WireClient(server.http_url.replace("http", "ws", 1), "Ann"), None
    try:
        a.send({"type": "create_room", "game": "stacko", "options": STACKO_OPTIONS, "id": 1})
        code = a.until(lambda f: f["type"] == "joined")["room"]
        b = WireClient(server.http_url.replace("http", "ws", 1), "Ben")
        b.send({"type": "join", "room": code, "id": 1})
        a.until(lambda f: f["type"] == "state")
        live = None
        for _ in range(100):  # another process: it sees the change once the journal's
            db = sqlite3.connect(tmp_path / "data" / "stacko.sqlite3")  # applier has it
            try:
                row = db.execute("SELECT id FROM games WHERE status = 'playing'").fetchone()
            finally:
                db.close()
            if row is not None:
                (live,) = row
                break
            time.sleep(0.02)
        assert live is not None
        viewer = new_player("Viewer")
        page = viewer.page
        for gid in (live, "0000000000000000"):
            page.goto(f"{server.http_url}games/{gid}")
            page.wait_for_selector("#replay-error:not([hidden])")
            assert f'no finished game "{gid}"' in page.inner_text("#replay-error")
            assert page.is_hidden("#replay-body")
        assert "Ann" not in page.content()  # nothing of the game in progress
        page.goto(f"{server.http_url}games/no-such-game")
        page.wait_for_selector("#replay-error:not([hidden])")
        assert '"no-such-game" is not a game this server can show: a game id is 16' in (
            page.inner_text("#replay-error")
        )
        # The page's own 404/400 answers are logged by the browser; nothing else went wrong.
        assert all("404" in e or "400" in e for e in viewer.errors), viewer.errors
    finally:
        a.close()
        if b is not None:
            b.close()


def test_recent_games_and_the_link_at_the_end_of_a_game(server, new_player, screenshots) -> None:
    alice = new_player("Alice")
    bob = new_player("Bob")
    # Another game on the server, finished after this one starts: the link must not depend
    # on which game is newest.
    code = start_game(alice, bob, server.http_url, **SMALL)
    other = play(server.http_url, "stakko", {"variant": "gray", "ply_cap": 60}, seed=3,
                 names=("Alice", "Bob"))  # fmt: skip
    bob.page.click("#resign-btn")
    bob.page.click("#resign-btn")
    alice.page.wait_for_selector("#outcome:not([hidden])")
    alice.page.wait_for_selector("#game-link-line:not([hidden])")
    href = alice.page.get_attribute("#game-link", "href")
    listed = alice.page.evaluate(
        "async (code) => (await (await fetch(`/api/games?code=${code}`)).json()).games", code
    )
    assert [g["id"] for g in listed] != [other.game_id]
    assert [f"/games/{g['id']}" for g in listed] == [href]  # the room's game, by its id
    bob.page.wait_for_selector("#game-link-line:not([hidden])")
    assert bob.page.get_attribute("#game-link", "href") == href

    # The lobby lists both recent games (from the real /api/games), each linking to its page.
    alice.page.click("#leave-btn")
    alice.in_lobby()
    alice.page.wait_for_selector("#recent:not([hidden])")
    alice.page.screenshot(path=screenshots / "lobby-recent.png", full_page=True)
    gid = href.removeprefix("/games/")
    assert alice.page.locator("#recent-list li").count() == 2
    assert alice.page.locator(f'#recent-list li[data-game="{other.game_id}"]').count() == 1
    link = alice.page.locator(f'#recent-list li[data-game="{gid}"] a')
    assert link.inner_text() == "Alice vs Bob"
    entry = alice.page.inner_text(f'#recent-list li[data-game="{gid}"]')
    assert "Alice won by resignation" in entry and "stakko" not in entry
    link.click()
    alice.page.wait_for_selector("#replay-body:not([hidden])")
    assert alice.page.url.endswith(f"/games/{gid}")
    # The room's game, ended by Bob's resignation: Alice won.
    record = alice.page.evaluate("() => window.stackoReplay.record")
    assert record["result"]["termination"] == "resignation"
    winner = record["players"][record["result"]["winner"]]
    assert winner["name"] == "Alice"
    assert record["steps"][-1]["view"]["outcome"] == record["result"]
    assert alice.errors == [] and bob.errors == []


def test_a_server_without_records_links_to_none(new_player) -> None:
    """``--database memory``: the final frame's ``game_id`` is null, /api/games is 503."""
    seeds = iter(range(1000, 100_000))
    config = ServerConfig(host="127.0.0.1", port=0, reconnect_grace_s=30.0)
    with ServerThread(config, lambda: random.Random(next(seeds))) as memory:
        alice, bob = new_player("Alice"), new_player("Bob")
        start_game(alice, bob, memory.http_url, **SMALL)
        bob.page.click("#resign-btn")
        bob.page.click("#resign-btn")
        alice.page.wait_for_selector("#outcome:not([hidden])")
        bob.page.wait_for_selector("#outcome:not([hidden])")
        for p in (alice, bob):
            assert p.page.is_hidden("#game-link-line")
        alice.page.click("#leave-btn")
        alice.in_lobby()
        status = alice.page.evaluate("async () => (await fetch('/api/games')).status")
        assert status == 503 and alice.page.is_hidden("#recent")
        assert alice.errors == [] and bob.errors == []


def test_a_built_in_bot_is_named_once(server, new_player) -> None:
    """The server names a built-in bot "random (bot)" already: the page added "(bot)" again
    ("Ann vs random (bot) (bot)"), unlike the lobby and the game page."""
    ann = WireClient(server.http_url.replace("http://", "ws://", 1), "Ann")
    try:
        create = {"type": "create_room", "game": "stakko", "options": {"ply_cap": 40}}
        ann.send({**create, "bot": "random", "seat": 0, "id": 1})
        code = ann.until(lambda f: f["type"] == "joined")["room"]
        moves = random.Random(3)
        while True:
            state = ann.until(lambda f: f["type"] == "state" and f["room"] == code)
            if state["view"]["outcome"] is not None:
                break
            if state["legal"]:
                move = {"type": "move", "room": code, "ply": state["view"]["ply"]}
                ann.send({**move, "move": moves.choice(state["legal"])})
    finally:
        ann.close()
    viewer = new_player("Viewer")
    page = viewer.page
    page.goto(f"{server.http_url}games/{state['game_id']}")
    page.wait_for_selector("#replay-body:not([hidden])")
    assert page.inner_text("#replay-title") == "Ann vs random (bot)"
    assert "(bot) (bot)" not in page.inner_text("body")
    assert viewer.errors == []


def test_a_name_is_shown_as_its_player_wrote_it(server, new_player) -> None:
    """Step texts that start with a name had their first letter raised ("Ok moved ...")."""
    game = play(server.http_url, "stakko", {"ply_cap": 6}, seed=2, names=("ann", "bob"))
    viewer = new_player("Viewer")
    page = viewer.page
    page.goto(f"{server.http_url}games/{game.game_id}")
    page.wait_for_selector("#replay-body:not([hidden])")
    moves = page.eval_on_selector_all("#move-list li", "els => els.map(e => e.textContent)")
    assert any("ann moved" in m for m in moves) and not any("Ann" in m for m in moves), moves
    slide(page, 1)
    assert page.inner_text("#step-text").startswith("ann moved")
