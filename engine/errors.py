"""The engine's error tree.

    EngineError                      anything the rules refuse
    ├── InvalidOptionsError          rules options that make no game (bad size, bad cap)
    └── IllegalMoveError             a well-formed move the rules do not allow now
                                     (``reason`` says why, as a stable ``IllegalReason``)

Malformed input (wrong JSON, wrong types) never reaches the engine: the protocol package
rejects it first. The server maps ``IllegalReason`` values one-to-one onto wire error codes.
"""

from __future__ import annotations

import enum


class IllegalReason(enum.Enum):
    """Why a move was refused; the value is the stable wire code."""

    GAME_OVER = "game_over"
    NOT_YOUR_TURN = "not_your_turn"
    WRONG_PHASE = "wrong_phase"
    BAD_SLOT = "bad_slot"
    UNKNOWN_MOVE = "unknown_move"
    NO_SUCH_STACK = "no_such_stack"
    BAD_COUNT = "bad_count"
    OVERSHOOT = "overshoot"


class EngineError(Exception):
    """Base of everything the rules refuse."""


class InvalidOptionsError(EngineError, ValueError):
    """Rules options that cannot make a game."""


class IllegalMoveError(EngineError):
    """A move the rules do not allow in this position; the state is unchanged."""

    def __init__(self, reason: IllegalReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message

    def __repr__(self) -> str:
        return f"IllegalMoveError({self.reason.value!r}, {self.message!r})"
