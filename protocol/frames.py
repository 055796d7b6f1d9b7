"""Outbound frames, built as plain dicts and serialized once with orjson.

The shapes are those of the ``protocol.messages`` server models (the tests validate every
frame a server sends against them); plain dicts keep the per-move path cheap.
A state frame is built from a receiver's engine view and nothing else.
"""

from __future__ import annotations

from typing import Any

import orjson

from stacko.protocol.errors import ErrorCode, ProtocolError
from stacko.protocol.games import GameCodec

RequestId = int | str | None


def encode(frame: dict[str, Any]) -> bytes:
    return orjson.dumps(frame)


def error(
    code: ErrorCode,
    message: str,
    *,
    id: RequestId = None,
    room: str | None = None,
    fatal: bool = False,
) -> bytes:
    return encode(
        {
            "type": "error",
            "code": code.value,
            "message": message,
            "fatal": fatal,
            "id": id,
            "room": room,
        }
    )


def from_exception(exc: ProtocolError, *, room: str | None = None) -> bytes:
    return error(exc.code, exc.message, id=exc.request_id, room=room, fatal=exc.fatal)


def reply(kind: str, id: RequestId, **fields: Any) -> bytes:
    """A direct answer to a request (``pong``, ``games``, ``rooms``, ``joined``, ...)."""
    return encode({"type": kind, **fields, "id": id})


def reply_head(kind: str, **fields: Any) -> bytes:
    """``reply`` without its request id: an answer encoded once and sent to many requests
    (``reply_with_id`` completes it, byte for byte what ``reply`` would have made)."""
    return encode({"type": kind, **fields, "id": None})[: -len(b"null}")]


def reply_with_id(head: bytes, id: RequestId) -> bytes:
    return head + orjson.dumps(id) + b"}"


def state(
    codec: GameCodec,
    view: Any,
    *,
    room: str,
    seq: int,
    deadline_ms: int | None,
    clock_ms: int | None,
    id: RequestId = None,
    note: str = "",
    names: tuple[str, ...] = (),
    ended: bool = False,
    game_id: str | None = None,
    rated: bool = False,
) -> bytes:
    """One receiver's state frame, from that receiver's view only; ``names`` (by seat) go
    into its ``text``. ``ended``: the game is over, and the frame names its record
    (``game_id``, null without a store) and says whether a ``rating`` frame follows
    (``rated``); frames of a game in progress carry neither field."""
    text = codec.describe(view, names)
    if note:
        text = f"{note}; {text}" if text else note
    frame: dict[str, Any] = {
        "type": "state",
        "room": room,
        "seq": seq,
        "view": (codec.view_json or codec.view_to_wire)(view),
        "text": text,
        "legal": (codec.legal_json or codec.legal_to_wire)(view),
        "deadline_ms": deadline_ms,
        "clock_ms": clock_ms,
        "id": id,
    }
    if ended:
        frame["game_id"] = game_id
        frame["rated"] = rated
    return orjson.dumps(frame)
