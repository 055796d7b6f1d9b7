"""Fixtures for the web client tests: an in-process server on a free port (in a thread with
its own event loop, so the synchronous Playwright API can drive a real headless Chromium
from the test thread) and browser pages that act as players.

The browser tests skip (with the reason) only when Playwright or Chromium is missing; CI
installs both (see tests/web/README.md). Chromium is found at ``$STACKO_CHROMIUM``, else
``/usr/bin/chromium`` or ``chromium`` / ``chromium-browser`` on PATH. Playwright never
downloads a browser here (no ``playwright install``).
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from stacko.server.app import Server, ServerConfig
from stacko.server.store import make_store

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 15_000


class ServerThread:
    """A ``Server`` on 127.0.0.1, port 0, running its own event loop in a daemon thread."""

    def __init__(
        self,
        config: ServerConfig,
        rng_factory: Callable[[], random.Random],
        data_dir: Path | None = None,
    ) -> None:
        """``data_dir``: keep the games in a SQLite store there (records, replays), as the
        server does by default; ``None``: memory only."""
        self.config = config
        self.rng_factory = rng_factory
        self.data_dir = data_dir
        self.server: Server | None = None
        self.port = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="stacko-server", daemon=True)

    def __enter__(self) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the server did not start in 10 s")
        if self._error is not None:
            raise RuntimeError("the server failed to start") from self._error
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported to the test thread by __enter__
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        store = make_store("sqlite", str(self.data_dir)) if self.data_dir is not None else None
        async with Server(self.config, rng_factory=self.rng_factory, store=store) as server:
            self.server = server
            self.port = server.port
            self._ready.set()
            await self._stop.wait()

    def drop_connections(self, code: int = 1011, reason: str = "test: connection dropped") -> None:
        """Close every client connection from the server side, as a network failure would."""
        assert self._loop is not None and self.server is not None
        server = self.server
        done = threading.Event()

        def close_all() -> None:
            for conn in list(server.connections):
                conn.close(code, reason)
            done.set()

        self._loop.call_soon_threadsafe(close_all)
        done.wait(5)

    def bot_levels(self, game: str = "stacko") -> list[str]:
        assert self.server is not None
        return list(self.server.hub.bots.get(game, []))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerThread]:
    """A fresh server per test, with its own store (as ``stacko-server`` has by default).
    Deals are seeded, so boards (and screenshots) repeat."""
    seeds = iter(range(1000, 100_000))
    config = ServerConfig(host="127.0.0.1", port=0, reconnect_grace_s=30.0)
    with ServerThread(config, lambda: random.Random(next(seeds)), tmp_path / "data") as running:
        yield running


def chromium_path() -> str | None:
    for candidate in (
        os.environ.get("STACKO_CHROMIUM"),
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per module; each player gets its own context. Not per session:
    Playwright's sync API keeps an event loop running in this thread while it is started,
    which would break every asyncio test collected after the browser tests."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
    )
    executable = chromium_path()
    if executable is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    with sync_api.sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()


@pytest.fixture
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


# -- a player: one browser context (its own storage) and one page -------------------------

ROOM_JS = """() => {
  const app = window.stackoApp;
  const room = app && app.current ? app.rooms.get(app.current) : null;
  if (!room) return null;
  return {code: room.code, role: room.role, seat: room.seat, view: room.view,
          legal: room.legal, busy: room.busy, info: room.info};
}"""

TOWER_JS = """(which) => [...document.querySelectorAll(`[data-tower="${which}"] li.slot`)]
  .map((li) => ({slot: Number(li.dataset.slot),
                 text: (li.querySelector('.num') || li.querySelector('.brick')).textContent,
                 eye: Boolean(li.querySelector('.eye')),
                 button: Boolean(li.querySelector('button'))}))
  .sort((a, b) => a.slot - b.slot)"""


class Player:
    """A person at a browser: clicks and keys only; reads the page's DOM (and, to wait for
    the next frame, the page's own state object ``window.stackoApp``)."""

    def __init__(self, page: Any, name: str) -> None:
        self.page = page
        self.name = name
        self.errors: list[str] = []
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.on("console", self._console)

    def _console(self, msg: Any) -> None:
        if msg.type != "error":
            return
        # A memory-only server (--database memory) answers /api/games with 503 no_store, and
        # an unknown or unfinished game is a 404: the page then shows no record links, which
        # is not an error of the page (the browser logs any such answer all the same).
        url = (msg.location or {}).get("url", "")
        if "/api/games" in url and ("404" in msg.text or "503" in msg.text):
            return
        self.errors.append(f"{msg.text} ({(msg.location or {}).get('url', '')})")

    # navigation
    def open(self, url: str) -> None:
        self.page.goto(url)
        self.page.fill("#name-input", self.name)
        self.page.click("#name-form button[type=submit]")
        self.page.wait_for_function(
            "() => window.stackoApp && window.stackoApp.status === 'online'"
        )

    def in_lobby(self) -> None:
        self.page.wait_for_selector("#screen-lobby:not([hidden])")

    def set_options(self, **options: object) -> None:
        for key, value in options.items():
            field = self.page.locator(f"#opt-{key}")
            if isinstance(value, bool):
                field.set_checked(value)
            else:
                field.fill("" if value is None else str(value))

    # what the page shows
    def room(self) -> dict[str, Any] | None:
        return self.page.evaluate(ROOM_JS)  # type: ignore[no-any-return]

    def view(self) -> dict[str, Any]:
        room = self.room()
        assert room is not None and room["view"] is not None
        return room["view"]  # type: ignore[no-any-return]

    def tower(self, which: str) -> list[dict[str, Any]]:
        """Slots bottom first: text on the brick, eye mark, clickable."""
        return self.page.evaluate(TOWER_JS, which)  # type: ignore[no-any-return]

    def wait_board(self) -> None:
        self.page.wait_for_selector(".stacko")

    def my_turn(self) -> bool:
        return bool(
            self.page.evaluate("() => document.querySelector('#turn').classList.contains('mine')")
        )

    def wait_ply_after(self, ply: int) -> None:
        self.page.wait_for_function(
            """(ply) => { const a = window.stackoApp; const r = a.rooms.get(a.current);
                          return r && r.view && !r.busy
                                 && (r.view.ply > ply || r.view.outcome); }""",
            arg=ply,
        )

    def wait_my_turn_or_over(self) -> None:
        self.page.wait_for_function(
            """() => { const a = window.stackoApp; const r = a.rooms.get(a.current);
                       return r && r.view && !r.busy && (r.legal || r.view.outcome); }"""
        )

    # moves, by clicking
    def take(self, slot: int) -> None:
        ply = self.view()["ply"]
        self.page.click("#open-brick")
        self.page.click(f'[data-tower="me"] li[data-slot="{slot}"] button')
        self.wait_ply_after(ply)

    def draw(self) -> int:
        ply = self.view()["ply"]
        self.page.click("#draw-stack")
        self.wait_ply_after(ply)
        return int(self.page.get_attribute("#drawn-brick .brick", "data-brick") or 0)

    def place(self, slot: int) -> None:
        ply = self.view()["ply"]
        self.page.click(f'[data-tower="me"] li[data-slot="{slot}"] button')
        self.wait_ply_after(ply)

    def pass_(self) -> None:
        ply = self.view()["ply"]
        self.page.click("#pass-btn")
        self.wait_ply_after(ply)

    def key(self, key: str) -> None:
        self.page.keyboard.press(key)


@pytest.fixture
def new_player(browser: Any) -> Iterator[Callable[..., Player]]:
    """``new_player("Alice", width=375)``: a fresh context (own sessionStorage) and page."""
    contexts: list[Any] = []

    def make(name: str, width: int = 1100, height: int = 900) -> Player:
        context = browser.new_context(viewport={"width": width, "height": height})
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        return Player(context.new_page(), name)

    yield make
    for context in contexts:
        context.close()
