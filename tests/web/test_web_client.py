"""The web client in a real (headless) Chromium, against an in-process server: players click
and type like people; the tests read what each page shows.

Screenshots of the board land in artifacts/screenshots/ (git-ignored). With
``STACKO_UPDATE_SCREENSHOT=1`` the desktop board of a full-size game (board.png) is copied to
docs/screenshot.png (the README's picture).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from protocol.games import CODECS

ROOT = Path(__file__).resolve().parents[2]

SMALL = {"tower": 4, "bricks": 12, "rounds": 2, "turn_cap": 4, "clock_ms": None}


def start_game(alice: Any, bob: Any, url: str, **options: Any) -> str:
    """Alice creates a room with ``options`` through the form, Bob follows the share link."""
    alice.open(url)
    alice.in_lobby()
    alice.set_options(**options)
    alice.page.click("#create-btn")
    alice.page.wait_for_selector("#share:not([hidden])")
    room = alice.room()
    assert room is not None
    code = room["code"]
    link = alice.page.input_value("#share-link")
    assert link == f"{url}#room={code}"
    assert "Waiting for an opponent" in alice.page.inner_text("#turn")
    bob.open(link)
    alice.wait_board()
    bob.wait_board()
    return str(code)


def texts(slots: list[dict[str, Any]]) -> list[str]:
    return [s["text"] for s in slots]


def open_brick(p: Any) -> int:
    return int(p.page.get_attribute("#open-brick .brick", "data-brick") or 0)


def wait_synced(players: list[Any]) -> None:
    """Every page shows the same (latest) ply."""
    ply = max(p.view()["ply"] for p in players)
    for p in players:
        p.page.wait_for_function(
            """(ply) => { const a = window.stackoApp; const r = a.rooms.get(a.current);
                          return r && r.view && !r.busy && r.view.ply >= ply; }""",
            arg=ply,
        )


def test_two_players_play_a_full_game_by_clicking(server, new_player, screenshots) -> None:
    alice = new_player("Alice")
    bob = new_player("Bob", width=375, height=812)  # a phone
    start_game(alice, bob, server.http_url, **SMALL)
    players = [alice, bob]

    # Own bricks as numbers (the server's view, bottom first), the opponent's dealt bricks "?".
    for seat, p in enumerate(players):
        me, opp = p.tower("me"), p.tower("opponent")
        assert [int(t) for t in texts(me)] == p.view()["towers"][seat]
        assert texts(opp) == ["?"] * 4
        assert not any(s["eye"] for s in me + opp)
    assert "Alice" in bob.page.inner_text("#players")
    assert bob.page.evaluate("document.documentElement.scrollWidth") <= 375
    alice.page.screenshot(path=screenshots / "start.png", full_page=True)
    bob.page.screenshot(path=screenshots / "start-phone.png", full_page=True)

    # Only legal moves are clickable: nothing for Bob; for Alice the stacks, and her slots
    # only once she picked the open brick.
    assert alice.my_turn() and not bob.my_turn()
    assert bob.page.is_disabled("#draw-stack") and bob.page.is_disabled("#open-brick")
    assert not any(s["button"] for s in bob.tower("me") + alice.tower("me"))
    assert alice.page.is_enabled("#draw-stack") and alice.page.is_enabled("#open-brick")

    turn = 0
    round_seen = 1
    mid_shot = False
    while not alice.view()["outcome"]:
        mover, other = (alice, bob) if alice.room()["legal"] else (bob, alice)  # type: ignore[index]
        assert mover.my_turn()
        slot = turn % 4
        style = turn % 5 if turn != 2 else 1  # Alice draws on turn 2: the mid-game picture
        if style == 0:  # click the open brick, then a slot
            brick = open_brick(mover)
            mover.take(slot)
            wait_synced(players)
            if not other.view()["outcome"] and other.view()["round"] == round_seen:
                # The opponent sees the brick where it went, marked seen; so does the mover.
                assert other.tower("opponent")[slot]["text"] == str(brick)
                assert other.tower("opponent")[slot]["eye"]
                assert mover.tower("me")[slot]["eye"]
        elif style == 1:  # click the draw stack, then pass
            drawn = mover.draw()
            assert other.page.locator("#drawn-brick").count() == 0  # only the drawer sees it
            assert mover.page.inner_text("#drawn-brick .num") == str(drawn)
            if mover is alice and not mid_shot:
                mid_shot = True
                alice.page.screenshot(path=screenshots / "mid.png", full_page=True)
                bob.page.screenshot(path=screenshots / "mid-phone.png", full_page=True)
            mover.pass_()
        elif style == 2:  # keyboard: o, then the slot digit
            ply = mover.view()["ply"]
            mover.key("o")
            mover.page.wait_for_selector("#open-brick.selected")
            mover.key(str(slot))
            mover.wait_ply_after(ply)
        elif style == 3:  # keyboard: d, then the slot digit
            ply = mover.view()["ply"]
            mover.key("d")
            mover.wait_ply_after(ply)
            mover.page.wait_for_selector("#drawn-brick")
            mover.key(str(slot))
            mover.wait_ply_after(ply + 1)
        else:  # keyboard: d, then p
            ply = mover.view()["ply"]
            mover.key("d")
            mover.wait_ply_after(ply)
            mover.key("p")
            mover.wait_ply_after(ply + 1)
        wait_synced(players)
        turn += 1
        view = alice.view()
        if view["round"] != round_seen and not view["outcome"]:
            # Round 2: scores of round 1 shown, new deal, the opponent's tower hidden again.
            round_seen = view["round"]
            for p in players:
                assert "Round 1" in p.page.inner_text("#scores")
                assert texts(p.tower("opponent")) == ["?"] * 4
            assert bob.my_turn()  # seat 1 starts round 2
        assert turn < 40, "the game should end by the turn cap"

    for p in players:
        p.page.wait_for_selector("#outcome:not([hidden])")
    outcome = alice.view()["outcome"]
    expected = {None: ("Draw", "Draw"), 0: ("You won!", "You lost"), 1: ("You lost", "You won!")}
    a_text, b_text = expected[outcome["winner"]]
    assert alice.page.inner_text("#outcome").startswith(a_text)
    assert bob.page.inner_text("#outcome").startswith(b_text)
    scores = alice.page.inner_text("#scores")
    assert "Round 1" in scores and "Round 2" in scores and "Total" in scores
    assert str(outcome["scores"][0]) in scores
    assert alice.page.is_disabled("#draw-stack")
    alice.page.screenshot(path=screenshots / "game-over.png", full_page=True)
    bob.page.screenshot(path=screenshots / "game-over-phone.png", full_page=True)

    # Rematch: Alice asks, Bob accepts; seats swap so Bob moves first.
    alice.page.click("#rematch-btn")
    bob.page.wait_for_selector("#rematch-btn:has-text('Accept rematch')")
    assert "wants a rematch" in bob.page.inner_text("#players")
    bob.page.click("#rematch-btn")
    for p in players:
        p.page.wait_for_function(
            "() => { const a = window.stackoApp; const r = a.rooms.get(a.current);"
            " return r && r.view && r.view.ply === 0 && !r.view.outcome; }"
        )
    assert bob.room()["seat"] == 0 and bob.my_turn()  # type: ignore[index]
    assert alice.page.is_hidden("#outcome")
    assert alice.errors == [] and bob.errors == []


def test_a_reloaded_page_resumes_its_game(server, new_player, screenshots) -> None:
    alice = new_player("Alice")
    bob = new_player("Bob")
    alice.open(server.http_url)
    alice.in_lobby()
    alice.page.uncheck("#public-check")  # a private room: joined by typing its code
    alice.set_options(turn_cap=None)  # the published game: towers of 10, bricks 1..40
    alice.page.click("#create-btn")
    alice.page.wait_for_selector("#share:not([hidden])")
    code = alice.room()["code"]  # type: ignore[index]
    bob.open(server.http_url)
    bob.in_lobby()
    assert code not in bob.page.inner_text("#rooms-table")  # private: not listed
    bob.page.fill("#join-code", code.lower())
    bob.page.click("#join-form button[type=submit]")
    alice.wait_board()
    bob.wait_board()

    brick = open_brick(alice)
    alice.take(0)
    wait_synced([alice, bob])
    drawn = bob.draw()
    before = texts(bob.tower("me"))

    bob.page.reload()  # same tab: the session token survives in sessionStorage
    bob.page.wait_for_selector("#drawn-brick")
    assert bob.page.url.endswith(f"#room={code}")
    assert bob.page.is_hidden("#screen-name")  # no new name, no new session
    assert texts(bob.tower("me")) == before
    assert bob.page.inner_text("#drawn-brick .num") == str(drawn)
    assert bob.tower("opponent")[0]["text"] == str(brick)
    bob.place(2)
    wait_synced([alice, bob])
    assert alice.tower("opponent")[2]["text"] == str(drawn)
    alice.page.wait_for_function(
        "() => !document.querySelector('#players').textContent.includes('disconnected')"
    )

    # A dropped connection (no reload): the page reconnects by itself and plays on.
    server.drop_connections()
    for p in (alice, bob):
        p.page.wait_for_function("() => window.stackoApp.status === 'reconnecting'")
    for p in (alice, bob):
        p.page.wait_for_function("() => window.stackoApp.status === 'online'")
    wait_synced([alice, bob])
    assert alice.my_turn()
    assert len(alice.tower("me")) == 10
    alice.key("o")  # the open brick picked: her slots become the targets
    alice.page.wait_for_selector("#open-brick.selected")
    assert all(s["button"] for s in alice.tower("me"))
    alice.page.screenshot(path=screenshots / "board.png")
    if os.environ.get("STACKO_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(screenshots / "board.png", ROOT / "docs" / "screenshot.png")
    alice.key("Escape")
    alice.page.wait_for_selector("#open-brick:not(.selected)")
    assert not any(s["button"] for s in alice.tower("me"))
    alice.draw()
    alice.pass_()
    wait_synced([alice, bob])
    assert bob.my_turn()
    assert alice.errors == []


def test_lobby_rooms_spectators_quick_match_and_errors(server, new_player) -> None:
    alice = new_player("Alice")
    bob = new_player("Bob")
    carol = new_player("Carol", width=375, height=700)

    # An unknown room code: the server's refusal in words.
    carol.open(server.http_url)
    carol.in_lobby()
    carol.page.fill("#join-code", "ZZZZZZ")
    carol.page.click("#join-form button[type=submit]")
    carol.page.wait_for_selector("#lobby-error:not([hidden])")
    assert "no such room" in carol.page.inner_text("#lobby-error")

    code = start_game(alice, bob, server.http_url, **SMALL)

    # Carol sees the public room in the list and watches it: both towers hidden, nothing to click.
    carol.page.click("#refresh-btn")
    row = carol.page.locator(f'#rooms-table tr[data-room="{code}"]')
    row.wait_for()
    assert "Alice vs Bob" in row.inner_text()
    row.get_by_role("button", name=f"Watch room {code}").click()
    carol.wait_board()
    assert carol.room()["role"] == "spectator"  # type: ignore[index]
    assert carol.page.url.endswith(f"#room={code}&watch=1")
    for which in ("seat0", "seat1"):
        assert texts(carol.tower(which)) == ["?"] * 4
    assert carol.page.is_disabled("#draw-stack") and carol.page.is_disabled("#open-brick")
    assert "Alice to move" in carol.page.inner_text("#turn")
    brick = open_brick(alice)
    alice.take(1)
    wait_synced([alice, bob, carol])
    assert carol.tower("seat0")[1]["text"] == str(brick)
    assert f"took the open {brick} into slot 1" in carol.page.inner_text("#event-text")
    assert carol.page.evaluate("document.documentElement.scrollWidth") <= 375

    # Quick match: two players who asked are paired, with a move clock.
    dave = new_player("Dave")
    erin = new_player("Erin")
    for p in (dave, erin):
        p.open(server.http_url)
        p.in_lobby()
    dave.page.click("#quick-btn")
    dave.page.wait_for_selector("#queue-status:not([hidden])")
    erin.page.click("#quick-btn")
    for p in (dave, erin):
        p.wait_board()
        p.page.wait_for_selector("#clock:not([hidden])")
    assert re.search(r"clock 0:[0-3]\d", dave.page.inner_text("#clock"))
    assert dave.my_turn() != erin.my_turn()

    # Leaving a game in progress asks twice, then loses it.
    dave.page.click("#leave-btn")
    assert "lose" in dave.page.inner_text("#leave-btn")
    dave.page.click("#leave-btn")
    dave.in_lobby()
    erin.page.wait_for_selector("#outcome:not([hidden])")
    assert "You won" in erin.page.inner_text("#outcome")
    for p in (alice, bob, carol, dave, erin):
        assert p.errors == []


def test_play_against_a_bot_to_the_end(server, new_player, screenshots) -> None:
    levels = server.bot_levels("stacko")
    if not levels:
        pytest.skip("the server offers no bot levels for stacko (no bots registry yet)")
    alice = new_player("Alice")
    alice.open(server.http_url)
    alice.in_lobby()
    assert alice.page.is_enabled("#bot-btn")
    alice.set_options(tower=4, bricks=12, rounds=2, turn_cap=6, clock_ms=None)
    alice.page.select_option("#bot-select", levels[0])
    alice.page.click("#bot-btn")
    alice.wait_board()
    assert "bot" in alice.page.inner_text("#players")
    moves = 0
    while True:
        alice.wait_my_turn_or_over()
        view = alice.view()
        if view["outcome"]:
            break
        if moves % 2 == 0:
            alice.take(moves % 4)
        else:
            alice.draw()
            alice.pass_()
        moves += 1
        assert moves < 60
    alice.page.wait_for_selector("#outcome:not([hidden])")
    assert re.match(r"(You won!|You lost|Draw)", alice.page.inner_text("#outcome"))
    alice.page.screenshot(path=screenshots / "vs-bot-over.png", full_page=True)
    alice.page.click("#rematch-btn")  # a bot always agrees: the seats swap, the bot starts
    alice.page.wait_for_function(
        "() => { const a = window.stackoApp; const r = a.rooms.get(a.current);"
        " return r && r.seat === 1 && r.view && !r.view.outcome; }"
    )
    alice.wait_my_turn_or_over()
    assert alice.page.is_hidden("#outcome")
    assert alice.errors == []


def test_two_players_play_stakko_by_clicking_discs(server, new_player, screenshots) -> None:
    if "stakko" not in CODECS:
        pytest.skip("the server has no Stakko codec yet (protocol/games/stakko.py)")
    alice = new_player("Alice")
    bob = new_player("Bob", width=375, height=812)
    alice.open(server.http_url)
    alice.in_lobby()
    alice.page.select_option("#game-select", "stakko")
    if alice.page.locator("#opt-ply_cap").count():
        alice.set_options(ply_cap=16)
    alice.page.click("#create-btn")
    alice.page.wait_for_selector("#share:not([hidden])")
    bob.open(alice.page.input_value("#share-link"))
    for p in (alice, bob):
        p.page.wait_for_selector(".stakko")
        # The opening line: White's 9 discs on space 0, Black's 9 on space 8, gray between.
        assert p.page.locator(".stakko-stack").count() == 9
        assert p.page.locator('.stakko-stack[data-stack="0"] .disc.white').count() == 9
        assert p.page.locator('.stakko-stack[data-stack="8"] .disc.black').count() == 9
    assert bob.page.locator("button.disc").count() == 0  # White (Alice) moves first
    alice.page.screenshot(path=screenshots / "stakko-start.png", full_page=True)
    players = [alice, bob]
    moves = 0
    while not alice.view()["outcome"] and moves < 40:
        mover = alice if alice.room()["legal"] else bob  # type: ignore[index]
        ply = mover.view()["ply"]
        discs = mover.page.locator("button.disc")
        assert discs.count() > 0
        discs.nth(moves % discs.count()).click()  # lift that disc and all above it
        mover.wait_ply_after(ply)
        wait_synced(players)
        moves += 1
        if moves == 4:
            alice.page.screenshot(path=screenshots / "stakko-mid.png", full_page=True)
    if not alice.view()["outcome"]:
        alice.page.click("#resign-btn")
        alice.page.click("#resign-btn")
    for p in players:
        p.page.wait_for_selector("#outcome:not([hidden])")
    alice.page.screenshot(path=screenshots / "stakko-over.png", full_page=True)
    assert alice.errors == [] and bob.errors == []
