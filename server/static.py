"""The browser client's static files, served on the WebSocket port by plain GET requests.

    response = static.serve(ws, request)   # a Response, or None: not a static file

Only files found under ``clients/web`` when the server first serves one can ever be sent
(a whitelist of relative names: no path from a request reaches the file system, so there
is no directory traversal). ``/`` is ``index.html``; ``/games/{id}`` (a finished game's
page, ``id`` letters, digits, ``-`` and ``_``) is ``game.html``, which loads the record from
``/api/games/{id}/replay`` itself. Every answer has a content type, an
ETag and ``Cache-Control: no-cache`` (the files carry no version in their names, so the
browser revalidates each time and gets ``304 Not Modified`` while they are unchanged).
A file edited on disk is re-read on its next request (its size or mtime changed).
"""

from __future__ import annotations

import hashlib
import http
import logging
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from urllib.parse import unquote

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

log = logging.getLogger("stacko.static")

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".txt": "text/plain; charset=utf-8",
    ".webmanifest": "application/manifest+json",
}
"""The only kinds of file served; anything else in the folder stays private."""

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
PAGE_POLICY = (
    "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; "
    "style-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)
"""Content-Security-Policy of the HTML page: its own files and its own WebSocket only."""


GAME_PAGE = "game.html"
"""The page of one finished game, served for every ``/games/{id}``."""
_GAME_PATH = re.compile(r"/games/[A-Za-z0-9_-]{1,64}")


def default_root() -> Path:
    """``clients/web`` inside the installed ``clients`` package."""
    return Path(str(resources.files("stacko.clients").joinpath("web")))


@dataclass(frozen=True, slots=True)
class _Cached:
    stamp: tuple[int, int]
    body: bytes
    etag: str


class StaticFiles:
    """The files of one folder, by the relative names found when it is first used."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else default_root()
        self._names: frozenset[str] | None = None
        self._cache: dict[str, _Cached] = {}

    @property
    def names(self) -> frozenset[str]:
        """Relative names (``index.html``, ``games/stacko.js``) of the servable files."""
        if self._names is None:
            self._names = frozenset(self._scan())
        return self._names

    def _scan(self) -> list[str]:
        if not self.root.is_dir():
            log.warning("no web client files in %s", self.root)
            return []
        found = []
        for path in self.root.rglob("*"):
            rel = path.relative_to(self.root)
            if any(part.startswith(".") for part in rel.parts):
                continue
            if path.is_file() and path.suffix in CONTENT_TYPES:
                found.append(rel.as_posix())
        return found

    def name_for(self, target: str) -> str | None:
        """The file a request target names, or None. ``/`` is ``index.html``."""
        path = unquote(target.split("?", 1)[0].split("#", 1)[0])
        if path == "/":
            return "index.html" if "index.html" in self.names else None
        if not path.startswith("/") or "\\" in path or "\0" in path:
            return None
        if _GAME_PATH.fullmatch(path) and GAME_PAGE in self.names:
            return GAME_PAGE
        parts = path[1:].split("/")
        if any(part in ("", ".", "..") or part.startswith(".") for part in parts):
            return None
        name = "/".join(parts)
        return name if name in self.names else None

    def read(self, name: str) -> _Cached | None:
        """The file's bytes and ETag, re-read when it changed on disk; None if it is gone."""
        path = self.root / name
        try:
            st = path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
            cached = self._cache.get(name)
            if cached is not None and cached.stamp == stamp:
                return cached
            body = path.read_bytes()
        except OSError:
            self._cache.pop(name, None)
            return None
        etag = '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'
        cached = _Cached(stamp, body, etag)
        self._cache[name] = cached
        return cached

    def serve(self, ws: ServerConnection, request: Request) -> Response | None:
        """The answer to a plain GET of a static file, or None if ``request`` names none."""
        name = self.name_for(request.path)
        if name is None:
            return None
        file = self.read(name)
        if file is None:
            return None
        suffix = Path(name).suffix
        if request.headers.get("If-None-Match") == file.etag:
            response = ws.respond(http.HTTPStatus.NOT_MODIFIED, "")
            del response.headers["Content-Type"]
            del response.headers["Content-Length"]
        else:
            response = ws.respond(http.HTTPStatus.OK, "")
            response.body = file.body
            del response.headers["Content-Type"]
            del response.headers["Content-Length"]
            response.headers["Content-Type"] = CONTENT_TYPES[suffix]
            response.headers["Content-Length"] = str(len(file.body))
        response.headers["ETag"] = file.etag
        response.headers["Cache-Control"] = "no-cache"
        for key, value in SECURITY_HEADERS.items():
            response.headers[key] = value
        if suffix == ".html":
            response.headers["Content-Security-Policy"] = PAGE_POLICY
        return response


_default: StaticFiles | None = None


def serve(ws: ServerConnection, request: Request) -> Response | None:
    """``StaticFiles.serve`` for the client shipped in the ``clients`` package."""
    global _default
    if _default is None:
        _default = StaticFiles()
    return _default.serve(ws, request)
