"""Replay records for the game page's browser tests, in the shape of
``GET /api/games/{id}/replay?seat=0|1|all`` (issue 15's contract), built from a real game:
the engine plays it, and every step's ``view`` is what the protocol's encoder puts in a live
state frame for that seat. ``all`` is seat 0's view with everything revealed (seat 1's tower
and drawn brick taken from seat 1's view), the same shape.

The branch that adds the real endpoints must make the browser tests pass against them too.
"""

from __future__ import annotations

import random
from typing import Any

import orjson

from stacko.engine.games import GAMES
from stacko.protocol.games import CODECS

NAMES = ("Alice", "Bob")


def _wire(game: str, view: Any) -> dict[str, Any]:
    out: dict[str, Any] = orjson.loads(orjson.dumps(CODECS[game].view_to_wire(view)))
    return out


def _everything(game: str, v0: dict[str, Any], v1: dict[str, Any]) -> dict[str, Any]:
    if game != "stacko":
        return v0  # Stakko hides nothing: every seat's view is the whole game
    out = dict(v0)
    out["towers"] = [v0["towers"][0], v1["towers"][1]]
    out["drawn"] = v0["drawn"] if v0["drawn"] is not None else v1["drawn"]
    out["events"] = [
        (e1 if e0.get("seat") == 1 else e0)
        for e0, e1 in zip(v0["events"], v1["events"], strict=True)
    ]
    return out


def play(game: str, options: dict[str, Any], seed: int) -> dict[str, dict[str, Any]]:
    """One game played by random legal moves: its replay record for "0", "1" and "all"."""
    codec = CODECS[game]
    engine_options, _clock = codec.options_from_wire(options)
    state = GAMES[game].new_game(engine_options, random.Random(seed))
    moves = random.Random(seed + 1)
    steps: dict[str, list[dict[str, Any]]] = {"0": [], "1": [], "all": []}

    def record(seat: int | None) -> None:
        v0, v1 = _wire(game, state.view(0)), _wire(game, state.view(1))
        text = codec.describe(state.view(None)) if seat is not None else ""
        for key, view in (("0", v0), ("1", v1), ("all", _everything(game, v0, v1))):
            steps[key].append({"ply": state.ply, "seat": seat, "text": text, "view": view})

    record(None)
    while state.outcome() is None:
        seat = state.to_move
        state.apply(moves.choice(list(state.legal_moves())), seat)
        record(seat)
    outcome = steps["all"][-1]["view"]["outcome"]
    wire_options = codec.options_to_wire(engine_options, None)
    return {
        key: {
            "id": f"{game}-{seed}",
            "game": game,
            "options": wire_options,
            "players": [{"seat": s, "name": NAMES[s], "bot": None} for s in (0, 1)],
            "result": outcome,
            "steps": seat_steps,
        }
        for key, seat_steps in steps.items()
    }


def listing(records: list[dict[str, Any]], code: str = "K7QJ2M") -> dict[str, Any]:
    """``GET /api/games?limit=20`` for these games."""
    return {
        "games": [
            {
                "id": r["id"],
                "game": r["game"],
                "code": code,
                "variant": r["options"].get("variant"),
                "players": r["players"],
                "result": r["result"],
                "started_at": "2026-11-24T01:00:00Z",
                "ended_at": "2026-11-24T01:05:00Z",
                "plies": len(r["steps"]) - 1,
            }
            for r in records
        ],
        "next": None,
    }
