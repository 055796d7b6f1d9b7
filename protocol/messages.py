"""Every message of protocol version 1, as pydantic models, one discriminated union per direction.

Client frames are parsed straight from the received bytes by ``parse_client`` (one
``TypeAdapter.validate_json`` call); anything that does not fit becomes a ``ProtocolError``
with a precise message, never an exception that escapes. Server frames are written as plain
dicts by ``protocol.frames`` and serialized with orjson; the models below describe them for
``PROTOCOL.md``, the JSON Schema and the tests, which validate every frame a server sends.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated, Any, Literal

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    TypeAdapter,
    ValidationError,
)

from stacko.protocol.errors import ErrorCode, ProtocolError
from stacko.protocol.games.stacko import StackoMove, StackoViewModel
from stacko.protocol.games.stakko import StakkoMoveModel, StakkoViewModel

PROTOCOL_VERSION = 1
SUPPORTED_VERSIONS = frozenset({1})

RequestId = Annotated[int, Field(ge=0, le=2**53)] | Annotated[str, Field(max_length=64)]
"""A client's request id, echoed in the response (and in any error) to that request."""


RoomCode = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9]{4,12}$", to_upper=True)]
"""Any case on the wire, upper case once parsed (pydantic-core does both: a Python
validator here cost 0.4 us on every move)."""
GameName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
Name = Annotated[str, Field(min_length=1, max_length=32)]
"""Also checked by ``name_problem`` (a ``bad_name`` error, not ``bad_message``)."""
Token = Annotated[str, Field(min_length=16, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
AccountToken = Annotated[str, Field(min_length=20, max_length=100, pattern=r"^[A-Za-z0-9_-]+$")]
"""An account's API token (``POST /api/accounts``); a bad or revoked one is ``bad_account``."""
ChallengeId = Annotated[str, Field(pattern=r"^[a-f0-9]{16}$")]
OptionValue = int | bool | str | None
Options = Annotated[dict[Annotated[str, Field(max_length=32)], OptionValue], Field(max_length=16)]
Seat = Annotated[int, Field(ge=0, le=1)]


def _move_kind(value: Any) -> str | None:
    """Which game's move this is, from its keys: ``action`` (Stacko) or ``stack`` (Stakko)."""
    keys = value if isinstance(value, dict) else vars(value) if isinstance(value, BaseModel) else {}
    if "action" in keys:
        return "stacko"
    if "stack" in keys:
        return "stakko"
    return None


Move = Annotated[
    Annotated[StackoMove, Tag("stacko")] | Annotated[StakkoMoveModel, Tag("stakko")],
    Discriminator(
        _move_kind,
        custom_error_type="move_kind",
        custom_error_message='a move is {"action": ...} (Stacko) or {"stack": ..., "count": ...}'
        " (Stakko)",
    ),
]
"""A move of any game; the room checks it is one of its own game (else ``wrong_game``)."""


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_max_length=256)


# -- client -> server ----------------------------------------------------------------------


class Hello(Message):
    """Must be the first frame. ``token`` resumes an earlier session (and its seats).
    ``account`` signs in as a registered account (its name replaces ``name``)."""

    type: Literal["hello"]
    protocol: int
    name: Name
    token: Token | None = None
    account: AccountToken | None = None
    id: RequestId | None = None


class ListGames(Message):
    type: Literal["list_games"]
    id: RequestId | None = None


Cursor = Annotated[str, Field(pattern=r"^[0-9]{1,18}$")]
"""Where a ``list_rooms`` page starts: the ``next`` of the page before (opaque to clients)."""


class ListRooms(Message):
    """Public rooms that are waiting for a player or being played (to watch), a page at a
    time: ``cursor`` is the ``next`` of the page before."""

    type: Literal["list_rooms"]
    game: GameName | None = None
    cursor: Cursor | None = None
    id: RequestId | None = None


class CreateRoom(Message):
    """Create a room and take a seat in it. ``bot`` seats a built-in bot as the opponent."""

    type: Literal["create_room"]
    game: GameName = "stacko"
    public: bool = True
    options: Options = Field(default_factory=dict)
    seat: Seat | None = None
    bot: Annotated[str, Field(max_length=32)] | None = None
    rated: bool = False
    """Rate the games here if both seats are accounts (a built-in bot is one)."""
    id: RequestId | None = None


class Join(Message):
    type: Literal["join"]
    room: RoomCode
    role: Literal["player", "spectator"] = "player"
    id: RequestId | None = None


class QuickMatch(Message):
    """Wait in the matchmaking queue for ``game``; a ``joined`` frame comes when paired."""

    type: Literal["quick_match"]
    game: GameName = "stacko"
    id: RequestId | None = None


class CancelMatch(Message):
    type: Literal["cancel_match"]
    id: RequestId | None = None


class MoveMessage(Message):
    """A move for the seat this connection holds in ``room``. ``ply`` is the state's ``ply``
    the move was chosen from: a move whose ``ply`` is not current is never applied."""

    type: Literal["move"]
    room: RoomCode
    ply: Annotated[int, Field(ge=0, le=2**31)]
    move: Move
    id: RequestId | None = None


class Resign(Message):
    type: Literal["resign"]
    room: RoomCode
    id: RequestId | None = None


class Leave(Message):
    """Leave a room. A player who leaves a game in progress loses it (abandoned)."""

    type: Literal["leave"]
    room: RoomCode
    id: RequestId | None = None


class Rematch(Message):
    """Ask for a new game in the same room once the game is over; both players must ask."""

    type: Literal["rematch"]
    room: RoomCode
    id: RequestId | None = None


class Ping(Message):
    type: Literal["ping"]
    id: RequestId | None = None


class Challenge(Message):
    """Invite the account named ``to`` (online) to a game; it has ``challenge_timeout_s``
    to accept or decline. ``rated`` counts only if both sides are accounts."""

    type: Literal["challenge"]
    to: Name
    game: GameName = "stacko"
    options: Options = Field(default_factory=dict)
    rated: bool = False
    id: RequestId | None = None


class AcceptChallenge(Message):
    type: Literal["accept_challenge"]
    challenge: ChallengeId
    id: RequestId | None = None


class DeclineChallenge(Message):
    type: Literal["decline_challenge"]
    challenge: ChallengeId
    id: RequestId | None = None


ClientMessage = Annotated[
    Hello | ListGames | ListRooms | CreateRoom | Join | QuickMatch | CancelMatch | MoveMessage
    | Resign | Leave | Rematch | Ping | Challenge | AcceptChallenge | DeclineChallenge,
    Field(discriminator="type"),
]  # fmt: skip
CLIENT = TypeAdapter[ClientMessage](ClientMessage)


# -- server -> client ----------------------------------------------------------------------


class Limits(Message):
    max_frame_bytes: int
    rate_per_second: float
    burst: int
    hello_timeout_s: float
    reconnect_grace_s: float


class PlayerInfo(Message):
    seat: Seat
    name: str | None
    connected: bool
    bot: str | None = None
    account: Literal["human", "bot"] | None = None
    """The kind of account the player signed in as (absent: a guest)."""


class RoomInfo(Message):
    room: str
    game: str
    status: Literal["waiting", "playing", "finished"]
    public: bool
    players: list[PlayerInfo]
    spectators: int
    options: dict[str, OptionValue]
    clock_ms: int | None


class AccountInfo(Message):
    name: str
    kind: Literal["human", "bot"]


class Welcome(Message):
    """The answer to ``hello``. Keep ``session``: it is the only way back to your seats.
    ``account``: present when the hello signed in as an account."""

    type: Literal["welcome"]
    protocol: int
    session: str
    name: str
    resumed: bool
    rooms: list[str]
    server: str
    limits: Limits
    id: RequestId | None
    account: AccountInfo | None = None


class Error(Message):
    """A refused request. ``fatal``: the server closes the connection right after this frame."""

    type: Literal["error"]
    code: str
    message: str
    fatal: bool
    id: RequestId | None
    room: str | None


class GameInfo(Message):
    game: str
    title: str
    seats: int
    options: dict[str, Any]
    """The JSON Schema of this game's ``create_room`` options, with defaults and limits."""
    bots: list[str]


class Games(Message):
    type: Literal["games"]
    games: list[GameInfo]
    id: RequestId | None


class Rooms(Message):
    """A page of listed rooms; ``next`` (null on the last page) asks for the one after."""

    type: Literal["rooms"]
    rooms: list[RoomInfo]
    next: str | None
    id: RequestId | None


class Joined(Message):
    """You are in ``room``: as a player (``seat``) or a spectator (``seat`` null)."""

    type: Literal["joined"]
    room: str
    game: str
    role: Literal["player", "spectator"]
    seat: Seat | None
    info: RoomInfo
    id: RequestId | None


class Queued(Message):
    type: Literal["queued"]
    game: str
    waiting: int
    id: RequestId | None


class Unqueued(Message):
    type: Literal["unqueued"]
    id: RequestId | None


class Left(Message):
    type: Literal["left"]
    room: str
    id: RequestId | None


class Pong(Message):
    type: Literal["pong"]
    id: RequestId | None


class RoomUpdate(Message):
    """Who is in the room changed: a player joined, dropped, came back, left, or asked for a
    rematch. ``forfeit_ms`` counts down a disconnected player's grace period."""

    type: Literal["room"]
    room: str
    info: RoomInfo
    rematch: list[Seat]
    forfeit_ms: dict[str, int]
    text: str


GameView = Annotated[StackoViewModel | StakkoViewModel, Field(discriminator="game")]


class State(Message):
    """The game as this receiver may know it, after every change. ``seq`` is the room's
    state version (the same in every receiver's frame for one change); ``deadline_ms`` is the
    seat-to-move's clock."""

    type: Literal["state"]
    room: str
    seq: int
    view: GameView
    text: str
    legal: list[Move] | None
    deadline_ms: int | None
    clock_ms: int | None
    id: RequestId | None
    """Set on the frame that answers this receiver's own request (its move, join, rematch)."""
    game_id: Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")] | None = None
    """Only in a frame whose ``view.outcome`` is set: the finished game's record
    (``GET /api/games/{game_id}``, the web page ``/games/{game_id}``); null from a server
    that keeps no records. Added in version 1 (2026-11-24)."""
    rated: bool | None = None
    """Only in a frame whose ``view.outcome`` is set: the game was rated, so a ``rating``
    frame follows this one (a client may wait for it). Added in version 1 (2026-11-24)."""


class RatingChange(Message):
    seat: Seat
    name: str
    kind: Literal["human", "bot"]
    before: int
    after: int
    delta: int
    deviation: int
    provisional: bool


class Rating(Message):
    """After the final ``state`` of a rated game: both players' new ratings (``game_id``:
    its record at ``/api/games/{game_id}``)."""

    type: Literal["rating"]
    room: str
    game_id: str
    game: str
    changes: list[RatingChange]


class ChallengeSent(Message):
    """The answer to ``challenge``: it waits for the other side until ``expires_ms``."""

    type: Literal["challenge_sent"]
    challenge: str
    to: str
    expires_ms: int
    id: RequestId | None


class Challenged(Message):
    """Someone challenges you: answer ``accept_challenge`` or ``decline_challenge``."""

    type: Literal["challenged"]
    challenge: str
    name: str
    """Who challenges (their display name)."""
    account: AccountInfo | None
    """Their account (``None``: a guest)."""
    game: str
    options: dict[str, OptionValue]
    rated: bool
    expires_ms: int


class ChallengeOver(Message):
    """A challenge ended without a game: ``declined``, ``expired`` or ``cancelled`` (the
    challenger went away). An accepted one ends with ``joined`` frames instead."""

    type: Literal["challenge_over"]
    challenge: str
    reason: Literal["declined", "expired", "cancelled"]
    id: RequestId | None


ServerMessage = Annotated[
    Welcome
    | Error
    | Games
    | Rooms
    | Joined
    | Queued
    | Unqueued
    | Left
    | Pong
    | RoomUpdate
    | State
    | Rating
    | ChallengeSent
    | Challenged
    | ChallengeOver,
    Field(discriminator="type"),
]
SERVER = TypeAdapter[ServerMessage](ServerMessage)


# -- names ----------------------------------------------------------------------------------

_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Control, format (bidirectional overrides, zero-width characters), surrogate, private-use
and unassigned code points, and line and paragraph separators: none of them shows as itself,
and some rearrange or hide what opponents see next to the name."""


def name_problem(name: str) -> str | None:
    """Why ``name`` may not be shown to other players, or ``None`` if it may."""
    for ch in name:
        if unicodedata.category(ch) in _HIDDEN_CATEGORIES:
            return f"names may not hold control or format characters (U+{ord(ch):04X})"
    if not name.strip():
        return "a name needs a visible character"
    return None


# -- the boundary ---------------------------------------------------------------------------


_MEMBER_TAG = re.compile(r"^(constrained-)?(int|str|bool|float|none)$|\[")
"""pydantic's names for the members of a plain union (``constrained-int``) and for wrapped
validators (``function-after[...]``) in an error's location: not fields, so not shown."""


def _error_text(exc: ValidationError) -> tuple[ErrorCode, str]:
    first = exc.errors(include_url=False, include_input=False)[0]
    kind = first["type"]
    where = ".".join(
        str(p) for p in first["loc"] if not (isinstance(p, str) and _MEMBER_TAG.search(p))
    )
    if kind == "json_invalid":
        return ErrorCode.BAD_JSON, f"not valid JSON: {first['msg']}"
    if kind == "union_tag_invalid":
        return ErrorCode.UNKNOWN_TYPE, f"unknown message type; expected one of {_TYPES}"
    if kind == "model_attributes_type" or (kind == "union_tag_not_found" and not first["loc"]):
        return ErrorCode.BAD_MESSAGE, 'a message is a JSON object with a "type" field'
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return ErrorCode.BAD_MESSAGE, f"{where or 'message'}: {first['msg']}{more}"[:300]


_TYPES = ", ".join(sorted(str(t) for t in CLIENT.json_schema()["discriminator"]["mapping"]))


def _request_id(data: str | bytes) -> int | str | None:
    """Best effort: the ``id`` of a frame that failed validation, so the error can echo it."""
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    rid = raw.get("id") if isinstance(raw, dict) else None
    if isinstance(rid, int) and not isinstance(rid, bool) and 0 <= rid <= 2**53:
        return rid
    if isinstance(rid, str) and len(rid) <= 64:
        return rid
    return None


_validate_client = CLIENT.validator.validate_json
"""The core validator itself: ``TypeAdapter.validate_json``'s Python wrapper around it showed
in profiles of the per-move path."""


def parse_client(data: str | bytes) -> ClientMessage:
    """One received text frame -> a typed message, or ``ProtocolError`` saying what is wrong.

    Strict: a field of the wrong JSON type is refused, never converted (``"1"``, ``true`` or
    ``1.0`` where an int belongs), as PROTOCOL.md says."""
    try:
        return _validate_client(data, strict=True)  # type: ignore[no-any-return]
    except ValidationError as exc:
        code, text = _error_text(exc)
        raise ProtocolError(code, text, request_id=_request_id(data)) from None
