"""The web client's files over plain HTTP on the WebSocket port (no browser needed)."""

from __future__ import annotations

import fnmatch
import http.client
import re
import tomllib
from pathlib import Path

import pytest

from stacko.server.static import CONTENT_TYPES, StaticFiles, default_root

ROOT = Path(__file__).resolve().parents[2]

WEB = Path(__file__).resolve().parents[2] / "clients" / "web"


def get(port: int, path: str, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", path, headers=headers or {})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def body(port: int, path: str) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", path)
    data = conn.getresponse().read()
    conn.close()
    return data


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/", "text/html; charset=utf-8"),
        ("/index.html", "text/html; charset=utf-8"),
        ("/?room=K7QJ2MXP", "text/html; charset=utf-8"),
        ("/app.js", "text/javascript; charset=utf-8"),
        ("/net.js", "text/javascript; charset=utf-8"),
        ("/games/stacko.js", "text/javascript; charset=utf-8"),
        ("/style.css", "text/css; charset=utf-8"),
        ("/client.js", "text/javascript; charset=utf-8"),
        ("/replay.js", "text/javascript; charset=utf-8"),
        ("/rules-stacko.html", "text/html; charset=utf-8"),
        ("/rules-stakko.html", "text/html; charset=utf-8"),
        ("/games/42", "text/html; charset=utf-8"),
        ("/games/stacko-5?seat=1", "text/html; charset=utf-8"),
    ],
)
def test_client_files_are_served_with_their_content_type(server, path, content_type) -> None:
    response = get(server.port, path)
    assert response.status == 200
    assert response.getheader("Content-Type") == content_type
    assert response.getheader("Cache-Control") == "no-cache"
    assert response.getheader("X-Content-Type-Options") == "nosniff"
    assert re.fullmatch(r'"[0-9a-f]{24}"', response.getheader("ETag") or "")


def test_index_is_the_client_page_with_a_strict_policy(server) -> None:
    page = body(server.port, "/").decode()
    assert '<script type="module" src="app.js"></script>' in page
    assert "http://" not in page and "https://" not in page  # no CDN: works offline
    policy = get(server.port, "/").getheader("Content-Security-Policy") or ""
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy


def test_a_game_page_is_served_for_every_game_id(server) -> None:
    """``/games/{id}`` is the page of a finished game; its files load by absolute paths (a
    relative ``style.css`` would resolve to /games/style.css); the board files under
    /games/ are still the files."""
    page = body(server.port, "/games/K7QJ2M-17").decode()
    assert page == (WEB / "game.html").read_text()
    assert '<script type="module" src="/replay.js"></script>' in page
    assert 'href="/style.css"' in page
    policy = get(server.port, "/games/17").getheader("Content-Security-Policy") or ""
    assert "default-src 'self'" in policy
    assert body(server.port, "/games/stacko.js") == (WEB / "games" / "stacko.js").read_bytes()
    names = StaticFiles(WEB)
    assert names.name_for("/games/17") == "game.html"
    assert names.name_for("/games/index.js") == "games/index.js"


def test_rules_pages_are_linked_from_the_lobby_and_say_why_spaces_go(server) -> None:
    index = body(server.port, "/").decode()
    assert 'href="rules-stacko.html"' in index and 'href="rules-stakko.html"' in index
    assert 'id="rules-link"' in index  # the game screen's link, pointed at the room's game
    stakko = body(server.port, "/rules-stakko.html").decode()
    for anchor in ('id="basic"', 'id="gray"', 'id="red"'):
        assert anchor in stakko
    assert "the space leaves the line" in stakko  # why spaces disappear (gray, red)
    stacko = body(server.port, "/rules-stacko.html").decode()
    assert "Slot 0 is the bottom" in stacko and "50" in stacko


def test_unchanged_files_answer_not_modified(server) -> None:
    etag = get(server.port, "/app.js").getheader("ETag")
    assert etag
    again = get(server.port, "/app.js", {"If-None-Match": etag})
    assert again.status == 304
    assert again.getheader("ETag") == etag
    assert get(server.port, "/app.js", {"If-None-Match": '"other"'}).status == 200


@pytest.mark.parametrize(
    "path",
    [
        "/../pyproject.toml",
        "/%2e%2e/pyproject.toml",
        "/games/../../server/app.py",
        "/games/%2e%2e/%2e%2e/server/static.py",
        "/..%2fpyproject.toml",
        "/%2fetc%2fpasswd",
        "//etc/passwd",
        "/games/",
        "/games",
        "/.git/config",
        "/app.js%00.css",
        "/app.js/",
        "/missing.js",
        "/C:%5cWindows",
        "/games/a.b",
        "/games/42/replay",
        "/games/%2e%2e",
        "/games/" + "x" * 65,
    ],
)
def test_nothing_outside_the_client_files_is_served(server, path) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.putrequest("GET", path, skip_accept_encoding=True)
    conn.endheaders()
    response = conn.getresponse()
    data = response.read()
    conn.close()
    assert response.status == 404
    assert data == b"not found\n"


def test_other_http_paths_still_answer(server) -> None:
    assert body(server.port, "/healthz") == b"ok\n"


def test_only_known_kinds_of_file_are_listed(tmp_path) -> None:
    (tmp_path / "index.html").write_text("<!doctype html>")
    (tmp_path / "notes.md").write_text("private")
    (tmp_path / ".env").write_text("SECRET=1")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.js").write_text("export {}")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "b.js").write_text("export {}")
    files = StaticFiles(tmp_path)
    assert files.names == {"index.html", "sub/a.js"}
    assert files.name_for("/") == "index.html"
    assert files.name_for("/sub/a.js?v=1") == "sub/a.js"
    assert files.name_for("/notes.md") is None
    assert files.name_for("/.hidden/b.js") is None


def test_an_edited_file_is_served_fresh(tmp_path) -> None:
    page = tmp_path / "index.html"
    page.write_text("one")
    files = StaticFiles(tmp_path)
    first = files.read("index.html")
    page.write_text("two!")
    second = files.read("index.html")
    assert first is not None and second is not None
    assert (first.body, second.body) == (b"one", b"two!")
    assert first.etag != second.etag


def test_the_package_ships_every_client_file() -> None:
    """Every file of clients/web is of a served kind (the package data must include them)."""
    assert default_root().resolve() == WEB.resolve()
    for path in WEB.rglob("*"):
        if path.is_file():
            assert path.suffix in CONTENT_TYPES, path
    assert {"index.html", "app.js", "style.css"} <= StaticFiles(WEB).names


def test_every_web_file_ships_in_the_package() -> None:
    """``pip install .`` (not editable) copies only declared package data: a web file no
    pattern matches would be missing from the installed server (a 404 at ``/``)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["stacko.clients"]
    web = ROOT / "clients" / "web"
    files = [p.relative_to(ROOT / "clients").as_posix() for p in web.rglob("*") if p.is_file()]
    assert "web/index.html" in files
    missing = [f for f in files if not any(fnmatch.fnmatchcase(f, pat) for pat in patterns)]
    assert not missing, f"not in [tool.setuptools.package-data] clients: {missing}"
