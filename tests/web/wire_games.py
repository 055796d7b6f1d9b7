"""Real games played on a test server over the WebSocket protocol, for the pages that show
finished games (/games/{id}, the lobby's recent games) and for ``stacko-client --replay``.

Two synchronous clients play random legal moves from the ``legal`` of their own state frames
(as any client would) until the game is over; the server records the game in its store, and
the frame that ends it names the record (``game_id``). Playing over the wire, not by clicking,
keeps a 60-move game to a fraction of a second.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field
from typing import Any

import orjson
from websockets.sync.client import ClientConnection, connect

TIMEOUT_S = 10.0


class WireClient:
    """One player's connection: every frame it receives, in order."""

    def __init__(self, url: str, name: str) -> None:
        self._exit = contextlib.ExitStack()
        self.ws: ClientConnection = self._exit.enter_context(connect(url, open_timeout=TIMEOUT_S))
        self.frames: list[dict[str, Any]] = []
        self.send({"type": "hello", "protocol": 1, "name": name})
        self.until(lambda f: f["type"] == "welcome")

    def send(self, msg: dict[str, Any]) -> None:
        self.ws.send(orjson.dumps(msg).decode())

    def until(self, match: Any) -> dict[str, Any]:
        """The next frame ``match`` accepts (frames before it are kept, not returned)."""
        while True:
            frame = orjson.loads(self.ws.recv(timeout=TIMEOUT_S))
            self.frames.append(frame)
            if frame["type"] == "error":
                raise AssertionError(f"the server refused a request: {frame}")
            if match(frame):
                return frame

    def states(self) -> list[dict[str, Any]]:
        return [f for f in self.frames if f["type"] == "state"]

    def close(self) -> None:
        self._exit.close()


@dataclass
class Played:
    """A finished game: its record's id and every state frame each seat received."""

    game_id: str
    code: str
    seen: list[list[dict[str, Any]]] = field(default_factory=list)

    def views(self, seat: int) -> list[dict[str, Any]]:
        return [f["view"] for f in self.seen[seat]]


def play(
    http_url: str,
    game: str,
    options: dict[str, Any],
    seed: int,
    names: tuple[str, str] = ("Alice", "Bob"),
) -> Played:
    """Alice creates a public room, Bob joins, both play random legal moves to the end."""
    url = http_url.replace("http://", "ws://", 1)
    moves = random.Random(seed)
    a, b = WireClient(url, names[0]), WireClient(url, names[1])
    try:
        a.send({"type": "create_room", "game": game, "options": options, "seat": 0, "id": 1})
        code = a.until(lambda f: f["type"] == "joined")["room"]
        b.send({"type": "join", "room": code, "id": 1})
        seq = 1
        while True:
            latest = [
                c.until(lambda f, s=seq: f["type"] == "state" and f["seq"] == s) for c in (a, b)
            ]
            if latest[0]["view"]["outcome"] is not None:
                break
            mover = 0 if latest[0]["legal"] else 1
            state = latest[mover]
            move = moves.choice(state["legal"])
            (a, b)[mover].send(
                {"type": "move", "room": code, "ply": state["view"]["ply"], "move": move}
            )
            seq += 1
        game_id = latest[0]["game_id"]
        assert game_id is not None and latest[1]["game_id"] == game_id, latest
        return Played(game_id, code, [a.states(), b.states()])
    finally:
        a.close()
        b.close()
