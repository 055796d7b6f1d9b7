"""Accounts in the browser (real Chromium): registration from the page, a challenge accepted
by clicking its notification, the rating change at the end of the rated game, the
leaderboard and a profile with its rating-history plot."""

from __future__ import annotations

import random
from typing import Any

import pytest

from stacko.server.app import ServerConfig
from tests.web.conftest import ServerThread


@pytest.fixture
def store_server(tmp_path: Any) -> Any:
    seeds = iter(range(1000, 100_000))
    config = ServerConfig(host="127.0.0.1", port=0, reconnect_grace_s=30.0)
    with ServerThread(config, lambda: random.Random(next(seeds)), tmp_path / "data") as s:
        yield s


def register(p: Any, url: str, name: str) -> str:
    p.page.goto(url)
    p.page.fill("#register-name", name)
    p.page.click("#register-form button[type=submit]")
    p.page.wait_for_selector("#register-done:not([hidden])")
    token = p.page.text_content("#register-token") or ""
    assert token.startswith("stk_")
    assert p.page.evaluate("() => localStorage.getItem('stacko.account')") == token
    p.page.click("#register-continue")
    p.page.wait_for_function("() => window.stackoApp && window.stackoApp.status === 'online'")
    p.page.wait_for_selector("#who-account:text('human account')")
    return token


def test_register_challenge_by_click_rating_leaderboard_and_profile(
    store_server, new_player, screenshots
) -> None:
    url = store_server.http_url
    ann, ben = new_player("Ann"), new_player("Ben")
    register(ann, url, "WebAnn")
    register(ben, url, "WebBen")
    assert ann.page.text_content("#who-name") == "WebAnn"

    # A name already taken (in another case) is refused on the page, nothing stored.
    other = new_player("Other")
    other.page.goto(url)
    other.page.fill("#register-name", "webann")
    other.page.click("#register-form button[type=submit]")
    other.page.wait_for_selector("#register-error:not([hidden])")
    assert "taken" in (other.page.text_content("#register-error") or "")

    # Ann challenges Ben from his profile's link; Ben accepts by clicking the notification.
    ann.page.goto(f"{url}?challenge=WebBen")
    ann.page.wait_for_selector("#challenge-status:not([hidden])")
    ben.page.wait_for_selector("#challenges:not([hidden]) button.accept")
    assert "WebAnn (human) challenges you to stacko, rated" in (
        ben.page.text_content("#challenge-list") or ""
    )
    ben.page.screenshot(path=str(screenshots / "challenge-notification.png"))
    ben.page.click("#challenges button.accept")
    for p in (ann, ben):
        p.page.wait_for_selector("#screen-room:not([hidden])")
        p.wait_board()
        assert p.page.locator("#players .tag.account").count() == 2  # both marked
    ann.page.click("#resign-btn")
    ann.page.click("#resign-btn")  # armed: a second click confirms
    for p in (ann, ben):
        p.page.wait_for_selector("#rating-line:not([hidden])")
    line = ben.page.text_content("#rating-line") or ""
    assert line.startswith("Rating: WebAnn 1500 → ") and "WebBen 1500 → " in line, line
    assert "(+" in line.split("WebBen")[1]

    # The leaderboard and Ben's profile with its plot.
    ben.page.goto(f"{url}players.html")
    ben.page.wait_for_selector("#board-table tbody tr")
    names = ben.page.eval_on_selector_all(
        "#board-table tbody tr", "rows => rows.map(r => r.dataset.name)"
    )
    assert names[:2] == ["WebBen", "WebAnn"], names
    ben.page.click("#board-table a:text('WebBen')")
    ben.page.wait_for_selector("#profile:not([hidden]) #profile-plot svg polyline")
    assert ben.page.text_content("#profile-name") == "WebBen"
    assert ben.page.eval_on_selector_all("#profile-plot circle", "c => c.length") == 2
    link = ben.page.get_attribute("#profile-recent a.record", "href") or ""
    assert link.startswith("/games/")
    ben.page.screenshot(path=str(screenshots / "profile.png"))
    for p in (ann, ben):
        assert not p.errors, p.errors
    assert all("409 (Conflict)" in e for e in other.errors), other.errors  # the refusal
