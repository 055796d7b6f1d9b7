"""Wire error codes and the protocol's error tree.

    ProtocolError                  the one exception that becomes an ``error`` frame
      .code   ErrorCode            stable, documented in PROTOCOL.md (the table is tested)
      .fatal  bool                 the server closes the connection after sending it

``to_error_code`` is the single place where an engine refusal becomes a wire code.
"""

from __future__ import annotations

import enum

from stacko.engine.errors import IllegalReason


class ErrorCode(enum.Enum):
    """Every code a server may send. Values never change meaning; new ones may be added."""

    # the frame itself
    BAD_JSON = "bad_json"
    BINARY_FRAME = "binary_frame"
    TOO_BIG = "too_big"
    UNKNOWN_TYPE = "unknown_type"
    BAD_MESSAGE = "bad_message"
    # the session
    HELLO_REQUIRED = "hello_required"
    ALREADY_WELCOMED = "already_welcomed"
    UNSUPPORTED_VERSION = "unsupported_version"
    SESSION_REPLACED = "session_replaced"
    RATE_LIMITED = "rate_limited"
    IDLE_TIMEOUT = "idle_timeout"
    SHUTTING_DOWN = "shutting_down"
    INTERNAL_ERROR = "internal_error"
    SERVER_BUSY = "server_busy"
    BAD_NAME = "bad_name"
    TOO_MANY_HELLOS = "too_many_hellos"
    # rooms
    UNKNOWN_GAME = "unknown_game"
    BAD_OPTIONS = "bad_options"
    UNKNOWN_BOT = "unknown_bot"
    UNKNOWN_ROOM = "unknown_room"
    ROOM_FULL = "room_full"
    NOT_IN_ROOM = "not_in_room"
    NOT_A_PLAYER = "not_a_player"
    ALREADY_IN_ROOM = "already_in_room"
    ALREADY_QUEUED = "already_queued"
    NOT_QUEUED = "not_queued"
    NO_REMATCH = "no_rematch"
    BOTS_BUSY = "bots_busy"
    TOO_MANY_BOT_GAMES = "too_many_bot_games"
    TOO_MANY_ROOMS = "too_many_rooms"
    TOO_MANY_SEATS = "too_many_seats"
    TOO_MANY_WATCHED = "too_many_watched"
    TOO_MANY_SPECTATORS = "too_many_spectators"
    # moves
    STALE_PLY = "stale_ply"
    GAME_OVER = "game_over"
    NOT_STARTED = "not_started"
    NOT_YOUR_TURN = "not_your_turn"
    WRONG_GAME = "wrong_game"
    WRONG_PHASE = "wrong_phase"
    BAD_SLOT = "bad_slot"
    UNKNOWN_MOVE = "unknown_move"
    NO_SUCH_STACK = "no_such_stack"
    BAD_COUNT = "bad_count"
    OVERSHOOT = "overshoot"


class ProtocolError(Exception):
    """Something a client sent that the server refuses; becomes one ``error`` frame."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        fatal: bool = False,
        request_id: int | str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.fatal = fatal
        self.request_id = request_id

    def __repr__(self) -> str:
        return f"ProtocolError({self.code.value!r}, {self.message!r})"


def to_error_code(reason: IllegalReason) -> ErrorCode:
    """Engine refusal -> wire code (the values are the same words by design)."""
    return ErrorCode(reason.value)
