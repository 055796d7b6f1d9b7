"""``/api/games``: finished games, listed, as JSON records, as text, and step by step.

    GET /api/games?game=&player=&code=&result=&cursor=&limit=   finished games, newest first
    GET /api/games/{id}                 one finished game's record (JSON)
    GET /api/games/{id}.txt             the same in the text notation of docs/notation.md
    GET /api/games/{id}/replay?seat=0|1|all   every position as that seat saw it

Only finished games are served: a game in progress is ``404`` like an unknown id, so nothing
here can show what a seat or spectator may not see yet (a finished game reveals everything).
Replay views are built by the engine's own ``view(seat)`` and the codec's ``view_to_wire``:
exactly what the live state frames carried. Bad ids and filters are ``400``; a stored record
that cannot be read is ``500`` (``record_unreadable``); every error is
``{"error": {"code": ..., "message": ...}}``.
"""

from __future__ import annotations

import collections
import datetime
import http
import logging
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from stacko.engine.games import GAMES
from stacko.protocol.games import CODECS
from stacko.protocol.messages import name_problem
from stacko.server.hub import ROOM_ALPHABET, ROOM_CODE_LENGTH
from stacko.server.recordworker import RecordWorker
from stacko.server.store import packed
from stacko.server.store.base import (
    RESULTS,
    Filters,
    Store,
    decode_cursor,
    encode_cursor,
    is_game_id,
)
from stacko.server.store.recorder import Event, Replay, events_from_rows, options_of

log = logging.getLogger("stacko.records")

PREFIX = "/api/games"
MAX_LIMIT = 100
DEFAULT_LIMIT = 20
MAX_NAME = 64
TERMINATIONS = ("completed", "turn_cap", "resignation", "abandoned", "timeout")
_PATH = re.compile(r"^/api/games/([^/]*?)(\.txt|/replay)?$")


class BadRequest(Exception):
    def __init__(self, status: http.HTTPStatus, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _json(ws: ServerConnection, status: http.HTTPStatus, body: Any) -> Response:
    response = ws.respond(status, "")
    data = orjson.dumps(body)
    response.body = data
    del response.headers["Content-Type"]
    del response.headers["Content-Length"]
    response.headers["Content-Type"] = "application/json"
    response.headers["Content-Length"] = str(len(data))
    response.headers["Cache-Control"] = "no-cache"
    return response


def _error(ws: ServerConnection, e: BadRequest) -> Response:
    return _json(ws, e.status, {"error": {"code": e.code, "message": e.message}})


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    t = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _bad(code: str, message: str) -> BadRequest:
    return BadRequest(http.HTTPStatus.BAD_REQUEST, code, message)


def parse_filters(query: str) -> Filters:
    """The query string of ``GET /api/games``; BadRequest for anything unexpected."""
    try:
        q = parse_qs(query, keep_blank_values=True, strict_parsing=False, max_num_fields=20)
    except ValueError:
        raise _bad("bad_filter", "too many query parameters") from None
    known = {"game", "player", "code", "result", "cursor", "limit"}
    for key, values in q.items():
        if key not in known:
            raise _bad("bad_filter", f"unknown filter {key!r} (known: {', '.join(sorted(known))})")
        if len(values) > 1:
            raise _bad("bad_filter", f"{key} given {len(values)} times")
    one = {k: v[0] for k, v in q.items()}
    game = one.get("game") or None
    if game is not None and game not in GAMES:
        raise _bad("bad_filter", f"game must be one of {', '.join(GAMES)}, not {game!r}")
    player = one.get("player") or None
    if player is not None and len(player) > MAX_NAME:
        raise _bad("bad_filter", f"player names are at most {MAX_NAME} characters")
    if player is not None and (problem := name_problem(player)) is not None:
        # no name holds one (so it finds nothing), and PostgreSQL refuses a NUL (a 500)
        raise _bad("bad_filter", f"no player has such a name: {problem}")
    code = one.get("code") or None
    if code is not None:
        code = code.upper()
        if len(code) != ROOM_CODE_LENGTH or any(c not in ROOM_ALPHABET for c in code):
            raise _bad("bad_filter", f"a room code is {ROOM_CODE_LENGTH} of {ROOM_ALPHABET}")
    result = one.get("result") or None
    if result is not None and result not in RESULTS and result not in TERMINATIONS:
        choices = ", ".join([*RESULTS, *TERMINATIONS])
        raise _bad("bad_filter", f"result must be one of {choices}, not {result!r}")
    cursor = None
    if one.get("cursor"):
        try:
            cursor = decode_cursor(one["cursor"])
        except ValueError:
            raise _bad("bad_cursor", "the cursor is not one this server gave out") from None
    limit = DEFAULT_LIMIT
    if one.get("limit"):
        text = one["limit"]
        digits = text.isascii() and text.isdigit() and len(text) <= 6  # int(): <= 4300
        if not digits or not 1 <= int(text) <= MAX_LIMIT:
            raise _bad("bad_filter", f"limit must be 1..{MAX_LIMIT}, not {text!r}")
        limit = int(text)
    return Filters(game, player, code, result, cursor, limit)


def summary(row: tuple[Any, ...]) -> dict[str, Any]:
    (gid, code, game, variant, _options, _rules, public, players, _status, result,
     started, ended, plies, _last) = row  # fmt: skip
    return {
        "id": gid,
        "game": game,
        # a private room is found only by its code: served, it let anyone watch the room's
        # next game (a quick match, a challenge); whoever knows it can still filter on it
        "code": code if public else None,
        "variant": variant,
        "players": orjson.loads(players),
        "result": orjson.loads(result) if result is not None else None,
        "started_at": iso(int(started)),
        "ended_at": iso(int(ended)) if ended is not None else None,
        "plies": int(plies),
    }


# -- one game, replayed ---------------------------------------------------------------------


def _reveal_stacko(state: Any) -> Any:
    """Seat 0's view with everything shown: both towers, a drawn brick, the draw events."""
    v = state.view(0)
    drawn = state.drawn if v.holding else None
    towers = (tuple(state.towers[0]), tuple(state.towers[1]))
    return v._replace(towers=towers, drawn=drawn, events=tuple(state.events))


REVEAL = {"stacko": _reveal_stacko}
"""Per game, the seat-0 view with nothing hidden; a game of perfect information (Stakko)
needs none: its seat-0 view already shows everything."""


def _position_stacko(state: Any) -> str:
    t0, t1 = state.towers
    return f"towers {t0} / {t1}; open {state.discard[-1]}; stack {len(state.stack)}"


def _position_stakko(state: Any) -> str:
    from stacko.engine.stakko import line_str

    return f"line {line_str(state.line)}"


POSITION = {"stacko": _position_stacko, "stakko": _position_stakko}


def _tag(value: str) -> str:
    """A tag's value between its quotes: a name may hold ``"`` and ``\\``, which would
    otherwise end the tag early and let a name forge others (``a"] [Seat1 "b``)."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


class GameReplay:
    """A finished game's record, replayed once, for the JSON, text and replay answers."""

    def __init__(self, row: tuple[Any, ...], rows: list[tuple[Any, ...]]) -> None:
        self.row = row
        self.info = summary(row)
        self.game = self.info["game"]
        self.codec = CODECS[self.game]
        self.options_wire = orjson.loads(row[4])
        self.options, _ = options_of(self.codec, self.options_wire)
        self.events = events_from_rows(rows)
        self.names = {p["seat"]: p["name"] for p in self.info["players"]}

    def name(self, seat: int | None) -> str:
        return "-" if seat is None else self.names.get(seat, f"seat {seat}")

    def _text(self, state: Any) -> str:
        names = tuple(self.name(seat) for seat in range(len(self.names)))
        return self.codec.describe(state.view(None), names)

    def walk(self) -> Any:
        """``(event, replay)`` after the deal and after each event (the same replay object)."""
        r = Replay(GAMES[self.game], self.codec, self.options, self.events[0])
        yield self.events[0], r
        for e in self.events[1:]:
            r.apply(e)
            yield e, r

    def record(self) -> dict[str, Any]:
        events = []
        final: Any = None
        for e, r in self.walk():
            item: dict[str, Any] = {
                "seq": e.seq, "kind": e.kind, "seat": e.seat, "ply": e.ply,
                "at": iso(e.at_ms), "at_ms": e.at_ms,
                "clock_ms": e.payload.get("clock_ms"), "deadline_ms": e.payload.get("deadline_ms"),
            }  # fmt: skip
            for key in ("move", "termination", "perms"):
                if key in e.payload:
                    item[key] = e.payload[key]
            events.append(item)
            final = r.game
        out = dict(self.info)
        out["options"] = self.options_wire
        out["rules_version"] = int(self.row[5])
        out["public"] = bool(self.row[6])
        out["events"] = events
        results = getattr(final, "results", None)
        if results is not None:  # Stacko: both towers at every round end
            out["rounds"] = [
                {"round": x.round, "finisher": x.finisher,
                 "towers": [list(x.towers[0]), list(x.towers[1])], "scores": list(x.scores)}
                for x in results
            ]  # fmt: skip
        return out

    def steps(self, seat: int | None) -> list[dict[str, Any]]:
        """``seat`` 0 or 1: that seat's views; ``None``: everything revealed."""
        reveal = REVEAL.get(self.game)
        out = []
        for e, r in self.walk():
            state = r.game
            if seat is not None:
                view = state.view(seat)
            else:
                view = reveal(state) if reveal is not None else state.view(0)
            if e.kind == "deal":
                text = "dealt" if self.game == "stacko" else "the game starts"
            elif e.kind == "timeout":
                text = f"{self.name(e.seat)}'s clock ran out; {self._text(state)}"
            else:
                text = self._text(state)
            out.append({
                "ply": state.ply, "seat": e.seat if e.kind != "deal" else None, "kind": e.kind,
                "text": text, "view": orjson.loads(orjson.dumps(self.codec.view_to_wire(view))),
                "at": iso(e.at_ms),
            })  # fmt: skip
        return out

    def notation(self) -> str:
        info = self.info
        lines = [
            f'[Game "{info["game"]}"]',
            f'[Id "{info["id"]}"]',
            f'[Room "{info["code"] or "private"}"]',
        ]
        if info["variant"] is not None:
            lines.append(f'[Variant "{info["variant"]}"]')
        for p in info["players"]:
            name, level = p["name"], p["bot"]
            if level and name != f"{level} (bot)":  # as the room names it: not "x (bot) (bot x)"
                name = f"{name} (bot {level})"
            lines.append(f'[Seat{p["seat"]} "{_tag(name)}"]')
        lines.append(f"[Options {orjson.dumps(self.options_wire).decode()}]")
        lines.append(f'[Started "{info["started_at"]}"]')
        lines.append(f'[Ended "{info["ended_at"]}"]')
        res = info["result"]
        winner = "draw" if res["winner"] is None else f"seat{res['winner']}"
        scores = "-".join(str(s) for s in res["scores"])
        lines.append(f'[Result "{winner} {res["termination"]} {scores}"]')
        lines.append("")
        position = POSITION.get(self.game)
        for e, r in self.walk():
            state = r.game
            if e.kind == "deal":
                lines.append(f"deal: {position(state) if position else ''}".rstrip())
                continue
            who = self.name(e.seat)
            if e.kind == "move":
                model = self.codec.move_model.model_validate(e.payload["move"])
                what = str(self.codec.move_from_wire(model))
            elif e.kind == "timeout":
                what = "timeout"
            else:
                what = f"loses ({e.payload['termination']})"
            clock = e.payload.get("clock_ms")
            clock_text = f" {{{clock / 1000:.1f}s}}" if clock is not None else ""
            lines.append(f"{e.ply}. {who} {what}{clock_text} ; {self._text(state)}")
            if "perms" in e.payload and state.outcome() is None and position is not None:
                lines.append(f"  shuffle: {position(state)}")
        lines.append("")
        return "\n".join(lines)


# -- HTTP -----------------------------------------------------------------------------------


MAX_REPLAY_EVENTS = 20_000
"""Longest game the replay endpoint steps through (a view per step: about 12 MB of JSON at
this size); longer ones (possible with large ``turn_cap`` and ``rounds``) get 413. The record
and its text have no such limit."""


class RecordCache:
    """Built answers for finished games (which never change), least recently used first,
    bounded in bytes (``record_cache_bytes``): a replay of a long game is megabytes, so a
    count of entries alone let a few hundred requests for long games hold gigabytes."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: collections.OrderedDict[tuple[str, str], bytes] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: tuple[str, str]) -> bytes | None:
        body = self._entries.get(key)
        if body is not None:
            self._entries.move_to_end(key)
        return body

    def put(self, key: tuple[str, str], body: bytes) -> None:
        """Keep ``body`` (unless it alone is over the bound), dropping the least recently
        used answers until the total fits."""
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= len(old)
        if len(body) > self.max_bytes:
            return
        self._entries[key] = body
        self.bytes += len(body)
        while self.bytes > self.max_bytes:
            _, gone = self._entries.popitem(last=False)
            self.bytes -= len(gone)


def build(row: tuple[Any, ...], stored: bytes | list[tuple[Any, ...]], what: str) -> bytes:
    """One answer for a finished game (``stored``: ``Store.stored_events``), in the record
    worker's process (``server.recordworker``): replaying a long game must not hold the
    server's event loop, its GIL or its collector."""
    rec = GameReplay(row, packed.events_of(stored))
    if what == "json":
        return orjson.dumps(rec.record())
    if what == "txt":
        return rec.notation().encode()
    seat = None if what == "all" else int(what)
    info = rec.info
    return orjson.dumps({
        "id": info["id"], "game": info["game"], "options": rec.options_wire,
        "players": info["players"], "result": info["result"], "seat": what,
        "steps": rec.steps(seat),
    })  # fmt: skip


def _body(ws: ServerConnection, body: bytes, content_type: str) -> Response:
    response = ws.respond(http.HTTPStatus.OK, "")
    response.body = body
    del response.headers["Content-Type"]
    del response.headers["Content-Length"]
    response.headers["Content-Type"] = content_type
    response.headers["Content-Length"] = str(len(body))
    response.headers["Cache-Control"] = "max-age=3600"  # a finished game never changes
    return response


async def handle(
    store: Store | None,
    ws: ServerConnection,
    request: Request,
    cache: RecordCache,
    worker: RecordWorker,
) -> Response:
    method = request.method
    try:
        if method not in ("GET", "HEAD"):  # a DELETE answered 200 with the record it kept
            raise BadRequest(
                http.HTTPStatus.METHOD_NOT_ALLOWED, "use_get", f"{PREFIX} takes GET, not {method}"
            )
        response = await _route(store, ws, request, cache, worker)
    except BadRequest as e:
        response = _error(ws, e)
    return fit_method(response, method, "GET, HEAD")


def fit_method(response: Response, method: str, allow: str) -> Response:
    """``Allow`` on a 405 (RFC 9110 requires it); for HEAD, the GET's headers (its
    Content-Length too) without the body."""
    if response.status_code == http.HTTPStatus.METHOD_NOT_ALLOWED:
        response.headers["Allow"] = allow
    if method == "HEAD":
        response.body = b""
    return response


async def _route(
    store: Store | None,
    ws: ServerConnection,
    request: Request,
    cache: RecordCache,
    worker: RecordWorker,
) -> Response:
    parts = urlsplit(request.path)
    path = parts.path
    if store is None:
        raise BadRequest(
            http.HTTPStatus.SERVICE_UNAVAILABLE, "no_store",
            "this server keeps no records (started with --database memory)",
        )  # fmt: skip
    if path in (PREFIX, PREFIX + "/"):
        filters = parse_filters(parts.query)
        rows = await store.list_finished(filters)
        more = len(rows) > filters.limit
        rows = rows[: filters.limit]
        nxt = encode_cursor(int(rows[-1][11]), rows[-1][0]) if more and rows else None
        return _json(ws, http.HTTPStatus.OK, {"games": [summary(r) for r in rows], "next": nxt})
    m = _PATH.match(path)
    if m is None:
        raise BadRequest(http.HTTPStatus.NOT_FOUND, "not_found", f"no such path {path}")
    game_id, suffix = m.group(1), m.group(2)
    if not is_game_id(game_id):
        raise _bad("bad_id", "a game id is 16 lowercase hexadecimal digits")
    row = await store.game(game_id)
    if row is None or row[8] != "finished":  # in progress: as unknown as a missing one
        raise BadRequest(http.HTTPStatus.NOT_FOUND, "unknown_game", f"no finished game {game_id}")
    if suffix != "/replay" and parts.query:  # it was ignored: ?seat=1 gave the full record
        raise _bad("bad_filter", "a record takes no query parameters (seat= is for /replay)")
    if suffix is None:
        what, ctype = "json", "application/json"
    elif suffix == ".txt":
        what, ctype = "txt", "text/plain; charset=utf-8"
    else:
        q = parse_qs(parts.query, keep_blank_values=True)
        seat_text = q.get("seat", ["all"])
        if len(seat_text) != 1 or seat_text[0] not in ("0", "1", "all") or set(q) - {"seat"}:
            raise _bad("bad_filter", "seat must be 0, 1 or all")
        what, ctype = seat_text[0], "application/json"
        if int(row[13]) > MAX_REPLAY_EVENTS:
            raise BadRequest(
                http.HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "too_long",
                f"the game has more than {MAX_REPLAY_EVENTS} events: read its record instead",
            )  # fmt: skip
    key = (game_id, what)
    body = cache.get(key)
    if body is None:
        stored = await store.stored_events(game_id)
        try:
            body = await worker.run(build, row, stored, what)
        except Exception:  # a stored record that cannot be read or replayed (or a bug)
            log.exception("the record of game %s could not be built (%s)", game_id, what)
            raise BadRequest(
                http.HTTPStatus.INTERNAL_SERVER_ERROR, "record_unreadable",
                f"the record of game {game_id} could not be read; the server's log says why",
            ) from None  # fmt: skip
        cache.put(key, body)
    return _body(ws, body, ctype)


__all__ = ["Event", "GameReplay", "RecordCache", "handle", "parse_filters"]
