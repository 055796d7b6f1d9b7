"""The web client in a real (headless) Chromium, against an in-process server: players click
and type like people; the tests read what each page shows.

Screenshots of the board land in artifacts/screenshots/ (git-ignored). With
``STACKO_UPDATE_SCREENSHOT=1`` the desktop board of a full-size game (board.png) is copied to
docs/screenshot.png (the README's picture).
"""

from __future__ import annotations

import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from stacko.protocol.games import CODECS
from stacko.server.app import ServerConfig
from tests.web.conftest import ServerThread

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


def move_list(p: Any) -> list[str]:
    return p.page.eval_on_selector_all("#move-list li", "els => els.map(e => e.textContent)")  # type: ignore[no-any-return]


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
    assert "Bob joined" in alice.page.inner_text("#event-text")  # a room message, with the name
    assert alice.page.get_attribute("#rules-link", "href") == "rules-stacko.html"
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
            # Said with names: "Alice took the open 17 into slot 3" (the mover reads "You").
            took = f"took the open {brick} into slot {slot}"
            assert f"{mover.name} {took}" in other.page.inner_text("#event-text")
            assert f"You {took}" in mover.page.inner_text("#event-text")
            assert f"{mover.name} {took}" in other.page.inner_text("#move-list li:last-child")
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
            result = view["results"][0]
            for seat, p in enumerate(players):
                # The end of the round is held on screen: both towers whole, side by side,
                # with the round's score, until the player continues.
                p.page.wait_for_selector("#round-end:not([hidden])")
                assert "Round 1 is over" in p.page.inner_text("#round-end")
                assert p.page.is_hidden("#board")
                shown = p.page.evaluate(
                    """() => [...document.querySelectorAll('#round-end-towers .tower-box')]
                      .map((box) => [...box.querySelectorAll('li.slot')]
                        .sort((a, b) => a.dataset.slot - b.dataset.slot)
                        .map((li) => Number(li.querySelector('.num').textContent)))"""
                )
                assert shown == [result["towers"][seat], result["towers"][1 - seat]]
                score = p.page.inner_text("#round-end-score")
                assert f"You {result['scores'][seat]}" in score
                other_name = players[1 - seat].name
                assert f"{other_name} {result['scores'][1 - seat]}" in score
                if seat == 0:
                    p.page.screenshot(path=screenshots / "round-end.png", full_page=True)
                p.page.click("#continue-btn")
                p.page.wait_for_selector("#round-end", state="hidden")
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
    # The move list: every turn of the game, each with who made it (a draw and its place or
    # pass are one line), the same on both pages.
    lists = [move_list(p) for p in players]
    system = ("The discard", "Round")
    assert len(lists[0]) == len(lists[1])
    for moves, opponent in ((lists[0], "Bob"), (lists[1], "Alice")):
        turns = [t for t in moves if not t.startswith(system)]
        assert len(turns) == turn
        assert all(t.startswith(("You ", f"{opponent} ")) for t in turns), turns
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


PHONE = {"width": 390, "height": 844}

PHONE_JS = """() => {
  const slot0 = document.querySelector('[data-tower="me"] li[data-slot="0"]');
  const targets = [...document.querySelectorAll(
    'button, summary, li.slot, a.rules-link, input, select')]
    .filter((el) => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden');
  return {
    slot0: slot0 ? slot0.getBoundingClientRect().bottom : null,
    height: window.innerHeight,
    width: window.innerWidth,
    scrollWidth: document.documentElement.scrollWidth,
    scrollY: window.scrollY,
    targets: targets.length,
    small: targets.map((el) => ({el: el.id || el.className || el.tagName,
                                 text: el.textContent.slice(0, 20),
                                 h: el.getBoundingClientRect().height}))
                  .filter((x) => x.h < 44),
  };
}"""


def check_phone_layout(p: Any) -> None:
    """Measured in the browser: slot 0 of the player's tower on the first screen (no
    scrolling), nothing wider than the screen, every slot, button and control at least 44
    CSS px tall."""
    p.page.evaluate("() => window.scrollTo(0, 0)")
    m = p.page.evaluate(PHONE_JS)
    assert m["slot0"] is not None and m["scrollY"] == 0
    assert m["slot0"] <= m["height"], m
    assert m["scrollWidth"] <= m["width"], m
    assert m["targets"] > 10
    assert m["small"] == [], m["small"]


def test_a_reloaded_page_resumes_its_game(server, new_player, screenshots) -> None:
    # Names of 30 characters (32 is the most): the phone's layout holds with them in the top
    # bar, the players' row, the tower titles and the texts naming the players.
    alice = new_player("Alexandrina Featherstonehaughs")
    bob = new_player("Bartholomew Wolkenstein-Ramsey", **PHONE)  # a phone: layout measured
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
    check_phone_layout(bob)  # a tower of 10 slots, waiting for Alexandrina
    bob.page.screenshot(path=screenshots / "phone-start.png")

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
    check_phone_layout(bob)  # his turn, a drawn brick in hand: slots are buttons now
    bob.page.screenshot(path=screenshots / "phone-drawn.png")
    bob.place(2)
    wait_synced([alice, bob])
    assert alice.tower("opponent")[2]["text"] == str(drawn)
    alice.page.wait_for_function(
        "() => !document.querySelector('#players').textContent.includes('disconnected')"
    )

    # The server says it restarts (close 1012): the page reconnects by itself, resumes its
    # session and plays on.
    server.drop_connections(1012, "service restart")
    for p in (alice, bob):
        p.page.wait_for_function("() => window.stackoApp.status === 'reconnecting'")
        assert "restarting" in p.page.inner_text("#banner")
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


def dave_queued(server, new_player):  # type: ignore[no-untyped-def]
    """Dave and Erin in the lobby, Dave waiting for a quick match."""
    dave = new_player("Dave")
    erin = new_player("Erin")
    for p in (dave, erin):
        p.open(server.http_url)
        p.in_lobby()
    dave.page.click("#quick-btn")
    dave.page.wait_for_selector("#queue-status:not([hidden])")
    return dave, erin


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
    assert f"Alice took the open {brick} into slot 1" in carol.page.inner_text("#event-text")
    assert move_list(carol)[-1].startswith(f"Alice took the open {brick} into slot 1")
    assert carol.page.evaluate("document.documentElement.scrollWidth") <= 375

    # Quick match: two players who asked are paired, with a move clock.
    dave, erin = dave_queued(server, new_player)
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
    held = 0
    while True:
        alice.wait_my_turn_or_over()
        view = alice.view()
        end = alice.page.evaluate(
            "() => { const a = window.stackoApp; return a.rooms.get(a.current).roundEnd; }"
        )
        if end is not None and not view["outcome"]:
            # Round 1 ended and the bot already opened round 2 (seat 1 starts it), but the
            # page still shows the round's end; against a bot it goes on by itself.
            held += 1
            assert view["ply"] > end["ply"] and view["round"] == 2
            assert alice.page.is_visible("#round-end") and alice.page.is_hidden("#board")
            assert "Round 1 is over" in alice.page.inner_text("#round-end")
            alice.page.wait_for_selector("#round-end", state="hidden")
            assert alice.page.is_visible("#board")
        if view["outcome"]:
            break
        if moves % 2 == 0:
            alice.take(moves % 4)
        else:
            alice.draw()
            alice.pass_()
        moves += 1
        assert moves < 60
    assert held == 1
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
    bob = new_player("Bob", **PHONE)  # on a phone: stack buttons and count buttons
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
    # Stakko's own keyboard help and rules link (not Stacko's).
    for p in players:
        help_text = p.page.text_content("#key-help") or ""
        assert "number of one of your stacks" in help_text and "open brick" not in help_text
        assert p.page.get_attribute("#rules-link", "href") == "rules-stakko.html"
    # By keyboard: the stack, then how many discs; the hint goes once the move is made.
    alice.key("0")
    alice.page.wait_for_selector("#room-error.hint:has-text('how many discs')")
    alice.key("3")
    alice.wait_ply_after(0)
    assert alice.page.is_hidden("#room-error")
    wait_synced(players)
    assert "You moved 3 discs from stack 0 onto stack 1" in alice.page.inner_text("#event-text")
    assert "Alice moved 3 discs from stack 0 onto stack 1" in bob.page.inner_text("#event-text")
    assert move_list(bob) == ["Alice moved 3 discs from stack 0 onto stack 1"]
    moves = 1
    phone_checked = False
    while not alice.view()["outcome"] and moves < 40:
        mover = alice if alice.room()["legal"] else bob  # type: ignore[index]
        ply = mover.view()["ply"]
        if mover is alice:
            discs = mover.page.locator("button.disc")
            assert discs.count() > 0
            discs.nth(moves % discs.count()).click()  # lift that disc and all above it
        else:  # the phone: no disc buttons (too thin to tap); a stack, then how many
            assert mover.page.locator("button.disc").count() == 0
            stacks = mover.page.locator("button.stack-btn")
            stacks.nth(moves % stacks.count()).click()
            counts = mover.page.locator(".count-picker button[data-count]")
            if mover.view()["ply"] == ply and counts.count():
                if not phone_checked:
                    phone_checked = True
                    small = mover.page.evaluate(PHONE_JS)["small"]
                    assert small == [], small  # every button a finger's size
                    bob.page.screenshot(path=screenshots / "stakko-phone.png")
                counts.nth(moves % counts.count()).click()
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


def test_a_server_restarted_without_the_room_sends_the_page_to_the_lobby(new_player) -> None:
    """The server goes away for good and a new one (which never heard of the room) comes up
    on the same port: the pages reconnect by themselves and end in the lobby, saying the room
    is gone, instead of staying on "Joining..."."""
    seeds = iter(range(1000, 100_000))
    config = ServerConfig(host="127.0.0.1", port=0, reconnect_grace_s=30.0)
    first = ServerThread(config, lambda: random.Random(next(seeds)))
    first.__enter__()
    try:
        alice = new_player("Alice")
        bob = new_player("Bob")
        code = start_game(alice, bob, first.http_url, **SMALL)
    finally:
        first.__exit__(None, None, None)
    for p in (alice, bob):
        p.page.wait_for_function("() => window.stackoApp.status === 'reconnecting'")
    again = ServerConfig(host="127.0.0.1", port=first.port, reconnect_grace_s=30.0)
    with ServerThread(again, lambda: random.Random(next(seeds))):
        for p in (alice, bob):
            p.in_lobby()
            p.page.wait_for_selector("#lobby-error:not([hidden])")
            message = p.page.inner_text("#lobby-error")
            assert f"Room {code} is gone" in message
            assert p.page.is_hidden("#screen-room")
            assert p.page.evaluate("() => window.stackoApp.status") == "online"
            assert "#room=" not in p.page.url
        # The lobby works on the new server: a new room can be created.
        alice.page.click("#create-btn")
        alice.page.wait_for_selector("#share:not([hidden])")
    assert alice.errors == [] and bob.errors == []


STAKKO_KEYS_JS = """async () => {
  const { stakko } = await import('/games/stakko.js');
  const moves = [], hints = [];
  const legal = [1, 2, 10, 12].map((count) => ({stack: 2, count})).concat([{stack: 4, count: 1}]);
  const ctx = {legal, busy: false, ui: {}, move: (m) => moves.push(m),
               hint: (t) => { hints.push(t); return true; }, rerender: () => {}};
  for (const k of ['2', '1', '2',  '2', '1', 'Enter',  '2', '1', '0',  '4',  '2', '5']) {
    stakko.key(k, ctx);
  }
  return {moves, hints};
}"""


def test_stakko_keys_lift_ten_or_more_discs(server, new_player) -> None:
    """Stakko's key handler in the browser, on a position with a stack of 12 liftable discs
    (a real game takes many moves to build one): counts of two digits, Enter for a count that
    a longer one could continue, a stack with one possible count at once."""
    alice = new_player("Alice")
    alice.page.goto(server.http_url)
    result = alice.page.evaluate(STAKKO_KEYS_JS)
    assert result["moves"] == [
        {"stack": 2, "count": 12},
        {"stack": 2, "count": 1},
        {"stack": 2, "count": 10},
        {"stack": 4, "count": 1},
    ]
    assert result["hints"][-1] == "You cannot lift 5 from stack 2."
    assert alice.page.text_content("#conn-status") == ""  # a new visitor: nothing tried yet
    assert "Not connected" not in alice.page.inner_text("body")
    assert alice.errors == []


def test_a_clock_that_runs_out_is_said_with_the_name(server, new_player) -> None:
    alice = new_player("Alice")
    bob = new_player("Bob")
    start_game(alice, bob, server.http_url, **{**SMALL, "clock_ms": 1})  # 1 s per move
    bob.page.wait_for_function(
        "() => document.querySelector('#event-text').textContent"
        '  .includes("Alice\'s clock ran out")'
    )
    alice.page.wait_for_function(
        "() => document.querySelector('#event-text').textContent.includes('Your clock ran out')"
    )
    assert "seat 0" not in bob.page.inner_text("#event-text")
    assert alice.errors == [] and bob.errors == []


def test_a_name_is_shown_as_its_player_wrote_it(server, new_player) -> None:
    """Texts that start with a name had their first letter raised: "ann took ..." read
    "Ann took ...", another player's name (names are case-sensitive: both may play)."""
    ann = new_player("ann")
    bob = new_player("bob")
    start_game(ann, bob, server.http_url, **SMALL)
    brick = open_brick(ann)
    ann.take(0)
    wait_synced([ann, bob])
    took = f"ann took the open {brick} into slot 0"
    assert took in bob.page.inner_text("#event-text")
    assert took in bob.page.inner_text("#move-list li:last-child")
    assert f"You took the open {brick}" in ann.page.inner_text("#event-text")


def test_a_page_waiting_for_a_quick_match_queues_again_after_a_restart(server, new_player) -> None:
    """Queueing belongs to the connection and a restart starts with empty queues: the page
    showed an idle lobby after reconnecting (quick-match button enabled, nobody waiting)
    while its player still thought they were waiting. It now queues again by itself."""
    dave, erin = dave_queued(server, new_player)
    server.drop_connections(1012, "service restart")
    dave.page.wait_for_function("() => window.stackoApp.status === 'reconnecting'")
    dave.page.wait_for_function("() => window.stackoApp.status === 'online'")
    dave.page.wait_for_function("() => window.stackoApp.queued !== null")
    dave.page.wait_for_selector("#queue-status:not([hidden])")
    assert dave.page.is_disabled("#quick-btn")
    erin.page.wait_for_function("() => window.stackoApp.status === 'online'")
    erin.page.click("#quick-btn")  # the server pairs them: Dave was in its queue again
    for p in (dave, erin):
        p.wait_board()
    assert dave.my_turn() != erin.my_turn()
    assert dave.errors == [] and erin.errors == []
