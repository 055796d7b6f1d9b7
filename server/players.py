"""Accounts, leaderboards and profiles over HTTP.

    POST /api/accounts?name=NAME&kind=human|bot   register: 201 {name, kind, token}
    POST /api/accounts/rotate    (Authorization: Bearer TOKEN)   a new token, the old one dead
    POST /api/accounts/revoke    (Authorization: Bearer TOKEN)   the token dead for good
    GET  /api/leaderboard?game=stacko&cursor=&limit=             ratings, best first, paged
    GET  /api/players/{name}     rating, deviation, W/D/L per game, recent rated games

Parameters go in the query string: the server reads no request bodies. The token is shown
once, in the registration's (or rotation's) answer. Errors are
``{"error": {"code": ..., "message": ...}}`` like ``/api/games``.
"""

from __future__ import annotations

import http
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from stacko.engine.games import GAMES
from stacko.server.accounts import AccountError, Accounts
from stacko.server.hub import address_key
from stacko.server.ratings import PROVISIONAL_GAMES, Rating, wire_rating
from stacko.server.records import BadRequest, _error, _json, fit_method, iso

PREFIXES = ("/api/accounts", "/api/leaderboard", "/api/players/")
MAX_LIMIT = 100
MAX_OFFSET = 10_000
"""Deepest leaderboard rank a page may start at: an offset costs the store a walk over that
many rows of the index per request."""
RECENT = 20
HISTORY = 200


def handles(path: str) -> bool:
    return path == "/api/accounts" or path.startswith(PREFIXES)


def _query(query: str) -> dict[str, str]:
    try:
        q = parse_qs(query, keep_blank_values=True, max_num_fields=10)
    except ValueError:
        raise BadRequest(
            http.HTTPStatus.BAD_REQUEST, "bad_request", "too many parameters"
        ) from None
    return {k: v[0] for k, v in q.items()}


def _bearer(request: Request) -> str:
    auth = request.headers.get("Authorization", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise BadRequest(
            http.HTTPStatus.UNAUTHORIZED, "bad_token", "send Authorization: Bearer <token>"
        )
    return token.strip()


POSTS = frozenset({"/api/accounts", "/api/accounts/rotate", "/api/accounts/revoke"})
"""The paths that change an account: POST only; every other path here takes GET or HEAD."""


async def handle(accounts: Accounts | None, ws: ServerConnection, request: Request) -> Response:
    try:
        if accounts is None:
            raise BadRequest(
                http.HTTPStatus.SERVICE_UNAVAILABLE, "no_store",
                "this server keeps no accounts (started with --database memory)",
            )  # fmt: skip
        try:
            response = await _route(accounts, ws, request)
        except AccountError as e:
            raise BadRequest(http.HTTPStatus(e.status), e.code, e.message) from None
    except BadRequest as e:
        response = _error(ws, e)
    path = urlsplit(request.path).path
    return fit_method(response, request.method, "POST" if path in POSTS else "GET, HEAD")


async def _route(accounts: Accounts, ws: ServerConnection, request: Request) -> Response:
    parts = urlsplit(request.path)
    path, method = parts.path, request.method
    if path in POSTS and method != "POST":
        raise BadRequest(http.HTTPStatus.METHOD_NOT_ALLOWED, "use_post", f"{path} takes POST")
    if path not in POSTS and method not in ("GET", "HEAD"):  # a DELETE was answered as a GET
        raise BadRequest(
            http.HTTPStatus.METHOD_NOT_ALLOWED, "use_get", f"{path} takes GET, not {method}"
        )
    if path == "/api/accounts":
        q = _query(parts.query)
        ip = getattr(ws, "ip", "") or (ws.remote_address[0] if ws.remote_address else "")
        account, token = await accounts.register(
            q.get("name", ""), q.get("kind", "human"), address_key(str(ip))
        )
        return _json(
            ws, http.HTTPStatus.CREATED,
            {
                "name": account.name, "kind": account.kind, "token": token,
                "note": "keep the token secret: it is shown only now. Sign in with it "
                "(hello's account field; stacko-client/stacko-bot --account TOKEN).",
            },
        )  # fmt: skip
    if path == "/api/accounts/rotate":
        account, token = await accounts.rotate(_bearer(request))
        return _json(ws, http.HTTPStatus.OK, {"name": account.name, "token": token})
    if path == "/api/accounts/revoke":
        account = await accounts.revoke(_bearer(request))
        return _json(ws, http.HTTPStatus.OK, {"name": account.name, "revoked": True})
    if path == "/api/leaderboard":
        return await _leaderboard(accounts, ws, _query(parts.query))
    if path.startswith("/api/players/"):
        return await _player(accounts, ws, unquote(path[len("/api/players/") :]))
    raise BadRequest(http.HTTPStatus.NOT_FOUND, "not_found", f"no such path {path}")


def _bad(message: str) -> BadRequest:
    return BadRequest(http.HTTPStatus.BAD_REQUEST, "bad_filter", message)


async def _leaderboard(accounts: Accounts, ws: ServerConnection, q: dict[str, str]) -> Response:
    game = q.get("game") or "stacko"
    if game not in GAMES:
        raise _bad(f"game must be one of {', '.join(GAMES)}")
    start = 0
    if q.get("cursor"):
        text = q["cursor"]
        if not (text.isascii() and text.isdigit()) or len(text) > 9 or int(text) > MAX_OFFSET:
            raise BadRequest(
                http.HTTPStatus.BAD_REQUEST, "bad_cursor",
                f"a cursor is a number up to {MAX_OFFSET} (the leaderboard shows that many)",
            )  # fmt: skip
        start = int(text)
    limit = 20
    if q.get("limit"):
        limit_text = q["limit"]
        if not (limit_text.isascii() and limit_text.isdigit()) or len(limit_text) > 9:
            raise _bad(f"limit must be 1..{MAX_LIMIT}")
        if not 1 <= int(limit_text) <= MAX_LIMIT:
            raise _bad(f"limit must be 1..{MAX_LIMIT}")
        limit = int(q["limit"])
    rows = await accounts.store.fetch(
        "SELECT a.name, a.kind, r.mu, r.sigma, r.games, r.wins, r.draws, r.losses "
        "FROM ratings r JOIN accounts a ON a.id = r.account_id "
        "WHERE r.game = ? AND a.revoked_ms IS NULL "
        f"ORDER BY r.mu DESC, a.normalized LIMIT {limit + 1} OFFSET {start}",
        (game,),
    )
    players = []
    for i, (name, kind, mu, sigma, games, w, d, lost) in enumerate(rows[:limit]):
        r = Rating(float(mu), float(sigma), int(games), int(w), int(d), int(lost))
        players.append({"rank": start + i + 1, "name": name, "kind": kind, **wire_rating(r)})
    more = len(rows) > limit and start + limit <= MAX_OFFSET
    nxt = str(start + limit) if more else None
    return _json(
        ws, http.HTTPStatus.OK,
        {"game": game, "provisional_games": PROVISIONAL_GAMES, "players": players, "next": nxt},
    )  # fmt: skip


async def _player(accounts: Accounts, ws: ServerConnection, name: str) -> Response:
    row = await accounts.find(name)
    if row is None:
        raise BadRequest(http.HTTPStatus.NOT_FOUND, "unknown_player", f"no player {name[:40]}")
    account_id, shown, kind, created, revoked = row
    store = accounts.store
    ratings: dict[str, Any] = {}
    for game, mu, sigma, games, w, d, lost in await store.fetch(
        "SELECT game, mu, sigma, games, wins, draws, losses FROM ratings WHERE account_id = ?",
        (account_id,),
    ):
        ratings[game] = wire_rating(
            Rating(float(mu), float(sigma), int(games), int(w), int(d), int(lost))
        )
    recent = [
        {
            "game_id": gid, "game": game, "opponent": opp, "score": float(score),
            "before": round(float(b)), "after": round(float(a)),
            "at": iso(int(at)), "record": f"/api/games/{gid}", "page": f"/games/{gid}",
        }
        for gid, game, opp, score, b, a, at in await store.fetch(
            "SELECT game_id, game, opponent, score, mu_before, mu_after, at_ms FROM rated_games "
            f"WHERE account_id = ? ORDER BY at_ms DESC, game_id DESC LIMIT {RECENT}",
            (account_id,),
        )
    ]  # fmt: skip
    history: dict[str, list[list[float]]] = {}
    rows = await store.fetch(
        "SELECT game, at_ms, mu_before, sigma_before, mu_after, sigma_after FROM rated_games "
        f"WHERE account_id = ? ORDER BY at_ms DESC, game_id DESC LIMIT {HISTORY}",
        (account_id,),
    )
    for game, at, mu0, sigma0, mu, sigma in reversed(rows):  # oldest first
        points = history.setdefault(game, [])
        if not points:  # where the plot starts: the rating before the first game shown
            points.append([int(at), round(float(mu0)), round(float(sigma0))])
        points.append([int(at), round(float(mu)), round(float(sigma))])
    return _json(
        ws, http.HTTPStatus.OK,
        {
            "name": shown, "kind": kind, "created_at": iso(int(created)),
            "closed": revoked is not None, "ratings": ratings, "recent": recent,
            "history": history,
        },
    )  # fmt: skip
