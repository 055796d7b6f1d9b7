"""A minimal Stacko client: the model to copy for a client of your own (see PROTOCOL.md).

    async with StackoClient("ws://127.0.0.1:8765/", name="ada") as client:
        await client.quick_match()                       # "queued", or "joined" if paired at once
        async for frame in client:                       # every frame the server sends, in order
            if frame["type"] == "state" and frame["legal"]:
                await client.move(frame["room"], frame["view"]["ply"], frame["legal"][0])

What it does, and where PROTOCOL.md says why:
- one WebSocket, one JSON object per text frame ("Transport");
- ``hello`` first, and keeps the ``session`` token of the ``welcome``: a new client built with
  ``token=`` gets its seats back ("Session", "Presence, reconnection, clock");
- numbers its requests (``id`` 1, 2, 3, ...) and matches each answer by its ``id``; an ``error``
  answering a request is raised as ``ServerError`` by the call that sent it ("Errors");
- stays under the rate limit the ``welcome`` announces in ``limits`` ("Session");
- every other frame, and every non-error answer too, goes to the frame stream
  (``async for frame in client``) so the stream tells the whole story of a game.

It depends on ``websockets`` and ``orjson`` only; nothing from the stacko repository.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

PROTOCOL = 1
Frame = dict[str, Any]
"""A decoded frame: a JSON object with a ``type``."""


def websocket_url(url: str) -> str:
    """The WebSocket address of a server given as the page a browser opens: ``http://HOST:PORT/``
    -> ``ws://HOST:PORT/`` (``https`` -> ``wss``); ``ws://`` and ``wss://`` stay as they are,
    and a bare ``HOST:PORT`` gets ``ws://``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return f"ws://{url}"
    lower = scheme.lower()
    return {"http": "ws", "https": "wss"}.get(lower, lower) + "://" + rest


def http_url(url: str) -> str:
    """The HTTP address of a server given by its WebSocket one (``ws://`` -> ``http://``)."""
    ws = websocket_url(url)
    scheme, _, rest = ws.partition("://")
    return ("https" if scheme == "wss" else "http") + "://" + rest.split("/", 1)[0]


def register(url: str, name: str, kind: str = "bot", *, timeout: float = 10.0) -> Frame:
    """Register an account (PROTOCOL.md "Accounts"): ``{"name", "kind", "token"}``. The token
    is shown only now: keep it secret. Raises ``ServerError`` with the server's code
    (``name_taken``, ``reserved_name``, ``too_many_registrations`` ...)."""
    import urllib.error
    import urllib.parse
    import urllib.request

    query = urllib.parse.urlencode({"name": name, "kind": kind})
    req = urllib.request.Request(f"{http_url(url)}/api/accounts?{query}", method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as answer:
            body: Frame = orjson.loads(answer.read())
            return body
    except urllib.error.HTTPError as exc:
        try:
            error = orjson.loads(exc.read())["error"]
        except Exception:
            error = {"code": "http_error", "message": f"HTTP {exc.code}"}
        raise ServerError({**error, "fatal": False}) from None


class ServerError(Exception):
    """The server refused a request: an ``error`` frame (PROTOCOL.md "Errors").

    ``code`` is stable (``not_your_turn``, ``stale_ply``, ...), ``message`` is for humans, and
    ``fatal`` means the server closes the connection next."""

    def __init__(self, frame: Frame) -> None:
        self.frame = frame
        self.code: str = frame.get("code", "")
        self.message: str = frame.get("message", "")
        self.fatal = bool(frame.get("fatal"))
        super().__init__(f"{self.code}: {self.message}")


class Disconnected(Exception):
    """The connection closed while a request was waiting for its answer."""

    def __init__(self, code: int | None, reason: str) -> None:
        self.code, self.reason = code, reason
        super().__init__(f"connection closed ({code} {reason})".strip())


class StackoClient:
    """One connection and session. ``connect`` (or ``async with``) before anything else."""

    def __init__(
        self,
        url: str,
        name: str = "player",
        *,
        token: str | None = None,
        timeout: float = 10.0,
        account: str | None = None,
    ) -> None:
        self.url, self.name, self.timeout = websocket_url(url), name, timeout
        self.account = account
        """An account's API token (``register``): the hello signs in as that account."""
        self.session: str | None = token
        """The session token; keep it secret, pass it as ``token=`` to come back."""
        self.welcome: Frame | None = None
        self.close_code: int | None = None
        self.close_reason = ""
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._frames: asyncio.Queue[Frame | None] = asyncio.Queue()
        self._pending: dict[int, asyncio.Future[Frame]] = {}
        self._last_id = 0
        self._closing = False
        # Token bucket below the server's (PROTOCOL.md "Session": rate limit), until welcome.
        self._rate, self._burst = 18.0, 20.0
        self._tokens, self._refilled = self._burst, 0.0
        self._send_lock = asyncio.Lock()

    # -- the connection -------------------------------------------------------------------

    async def connect(self) -> Frame:
        """Open the WebSocket and say hello; returns the ``welcome`` frame."""
        self._ws = await connect(self.url, compression=None, open_timeout=self.timeout)
        self._refilled = asyncio.get_running_loop().time()
        self._reader = asyncio.create_task(self._read())
        hello: Frame = {"type": "hello", "protocol": PROTOCOL, "name": self.name}
        if self.session is not None:
            hello["token"] = self.session
        if self.account is not None:
            hello["account"] = self.account
        welcome = await self.request(hello)
        self.welcome, self.session = welcome, welcome["session"]
        limits = welcome.get("limits", {})
        # Keep a margin: the server counts frames when they arrive, not when they leave.
        self._rate = 0.9 * float(limits.get("rate_per_second", 20))
        self._burst = max(1.0, float(limits.get("burst", 40)) / 2)
        self._tokens = min(self._tokens, self._burst)
        return welcome

    async def reconnect(self, *, give_up_after: float | None = None) -> StackoClient:
        """A new connection resuming this one's session (PROTOCOL.md "Presence, reconnection
        and forfeit"): tries again with a growing pause (0.05 s doubling up to 2 s: a restarting
        server (close 1012) is back in a few seconds) for ``give_up_after`` seconds (default:
        the ``reconnect_grace_s`` the welcome announced, the time the server holds the seats).
        Returns the connected client, whose ``welcome["resumed"]`` says whether the seats came
        back; raises the last connection error when time is up."""
        if give_up_after is None:
            limits = (self.welcome or {}).get("limits", {})
            give_up_after = float(limits.get("reconnect_grace_s", 60.0))
        loop = asyncio.get_running_loop()
        give_up, delay = loop.time() + give_up_after, 0.05
        while True:
            client = StackoClient(
                self.url, self.name, token=self.session, timeout=self.timeout,
                account=self.account,
            )  # fmt: skip
            try:
                await client.connect()
                return client
            except asyncio.CancelledError:
                await client.close()
                raise
            except Exception:  # refused, reset, timed out, a fatal error frame ...
                with contextlib.suppress(Exception):
                    await client.close()
                if loop.time() + delay >= give_up:
                    raise
                await asyncio.sleep(delay)
                delay = min(2.0, delay * 2)

    async def close(self) -> None:
        """Close normally (1000). A seat stays held for the reconnect grace period."""
        self._closing = True
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            await self._reader

    @property
    def closed_by_us(self) -> bool:
        return self._closing

    async def __aenter__(self) -> StackoClient:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _read(self) -> None:
        assert self._ws is not None
        ws = self._ws
        try:
            async for data in ws:
                frame = orjson.loads(data)
                if not isinstance(frame, dict):
                    continue  # the server only sends objects; ignore anything else
                rid = frame.get("id")
                future = self._pending.pop(rid, None) if isinstance(rid, int) else None
                if future is not None and not future.done():
                    if frame.get("type") == "error":
                        future.set_exception(ServerError(frame))
                        continue  # the caller got it; fatal ones end the stream below
                    future.set_result(frame)
                self._frames.put_nowait(frame)
        except ConnectionClosed:
            pass
        finally:
            self.close_code, self.close_reason = ws.close_code, ws.close_reason or ""
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(Disconnected(self.close_code, self.close_reason))
            self._pending.clear()
            self._frames.put_nowait(None)

    # -- frames in ------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Frame]:
        return self

    async def __anext__(self) -> Frame:
        frame = await self.next_frame()
        if frame is None:
            raise StopAsyncIteration
        return frame

    async def next_frame(self) -> Frame | None:
        """The next frame from the server, or ``None`` once the connection is closed."""
        frame = await self._frames.get()
        if frame is None:
            self._frames.put_nowait(None)  # every later call sees the end too
        return frame

    # -- frames out -----------------------------------------------------------------------

    async def send(self, frame: Frame) -> int:
        """Send a request without waiting for its answer; returns its ``id``. Its answer (or
        error) arrives in the frame stream."""
        self._last_id += 1
        await self._send({**frame, "id": self._last_id})
        return self._last_id

    async def request(self, frame: Frame) -> Frame:
        """Send a request and return the first frame that echoes its ``id``.

        Raises ``ServerError`` if that frame is an ``error``, ``Disconnected`` if the connection
        closes first, ``TimeoutError`` after the client's ``timeout`` seconds."""
        self._last_id += 1
        rid = self._last_id
        future: asyncio.Future[Frame] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            await self._send({**frame, "id": rid})
            async with asyncio.timeout(self.timeout):
                return await future
        finally:
            self._pending.pop(rid, None)

    async def _send(self, frame: Frame) -> None:
        if self._ws is None:
            raise RuntimeError("connect() first")
        loop = asyncio.get_running_loop()
        async with self._send_lock:
            now = loop.time()
            self._tokens = min(self._burst, self._tokens + (now - self._refilled) * self._rate)
            self._refilled = now
            if self._tokens < 1:
                await asyncio.sleep((1 - self._tokens) / self._rate)
                self._tokens, self._refilled = 1.0, loop.time()
            self._tokens -= 1
            try:
                await self._ws.send(orjson.dumps(frame).decode())
            except ConnectionClosed:
                raise Disconnected(self._ws.close_code, self._ws.close_reason or "") from None

    # -- requests (PROTOCOL.md "Requests and answers") ------------------------------------

    async def ping(self) -> Frame:
        """``ping`` -> ``pong``."""
        return await self.request({"type": "ping"})

    async def list_games(self) -> list[Frame]:
        """The games this server hosts, each with the JSON Schema of its options and bots."""
        return list((await self.request({"type": "list_games"}))["games"])

    async def list_rooms(self, game: str | None = None) -> list[Frame]:
        """Public rooms that are waiting or playing."""
        frame: Frame = {"type": "list_rooms"}
        if game is not None:
            frame["game"] = game
        return list((await self.request(frame))["rooms"])

    async def create_room(
        self,
        game: str = "stacko",
        *,
        public: bool = True,
        options: dict[str, Any] | None = None,
        seat: int | None = None,
        bot: str | None = None,
    ) -> Frame:
        """Create a room and sit in it -> ``joined`` (``room`` is the code to share). The game
        starts, with ``state`` frames, when the other seat is taken (at once with ``bot``)."""
        frame: Frame = {"type": "create_room", "game": game, "public": public}
        frame["options"] = options or {}
        if seat is not None:
            frame["seat"] = seat
        if bot is not None:
            frame["bot"] = bot
        return await self.request(frame)

    async def join(self, room: str, role: str = "player") -> Frame:
        """Take the free seat of ``room`` (or watch it: ``role="spectator"``) -> ``joined``."""
        return await self.request({"type": "join", "room": room, "role": role})

    async def quick_match(self, game: str = "stacko") -> Frame:
        """Ask for an opponent -> ``queued``; ``joined`` follows when paired (or answers at
        once if someone was already waiting)."""
        return await self.request({"type": "quick_match", "game": game})

    async def cancel_match(self) -> Frame:
        """Leave the matchmaking queue -> ``unqueued``."""
        return await self.request({"type": "cancel_match"})

    async def move(self, room: str, ply: int, move: dict[str, Any]) -> Frame:
        """Play ``move`` (e.g. ``{"action": "take", "slot": 3}``, or one of the state frame's
        ``legal``) chosen from the state at ``ply`` -> your next ``state`` frame. A ``stale_ply``
        error means the game moved on: the current ``state`` follows in the stream."""
        return await self.request({"type": "move", "room": room, "ply": ply, "move": move})

    async def resign(self, room: str) -> Frame:
        """Give the game up (you lose it) -> the final ``state``."""
        return await self.request({"type": "resign", "room": room})

    async def leave(self, room: str) -> Frame:
        """Leave the room -> ``left``. Leaving a game in progress loses it."""
        return await self.request({"type": "leave", "room": room})

    async def rematch(self, room: str) -> int:
        """Ask for another game in ``room`` once it is over; returns the request ``id``.

        Not awaited: the first player to ask gets no direct answer, only a ``room`` frame
        listing who asked; when both have asked, ``joined`` (with the seats swapped) and a
        new ``state`` come. A refusal (``no_rematch``) arrives in the stream."""
        return await self.send({"type": "rematch", "room": room})
