"""Replay equality: random games of every game and variant, recorded as the server records
them, replayed from the record alone, must reach the same final state and outcome.

    python bench/replay_equality.py                 # 10,000 games (the issue's count)
    python bench/replay_equality.py --games 500 --seed 7

Each game runs in a real ``Room`` whose ``Recorder`` writes to an in-memory capture of the
statements it would commit (no database: this checks the record, not the store). The room
gets a FakeClock and a seeded RNG; moves are random legal moves, with now and then a clock
expiry (the clock runs out: timeout moves, or a forfeit after too many), a resignation, or a
player leaving (abandonment). The suite runs a few hundred (tests/server/test_store_replay.py);
this script runs the full count and prints how long it took.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path[0:1] = [str(Path(__file__).resolve().parent.parent)]

from stacko.engine.games import GAMES
from stacko.engine.stakko import VARIANTS
from stacko.protocol.games import CODECS
from stacko.server.clock import FakeClock
from stacko.server.room import Player, Room, RoomHooks
from stacko.server.store import packed
from stacko.server.store.base import Op, Store
from stacko.server.store.recorder import (
    FINISH_SQL,
    Recorder,
    events_from_rows,
    options_of,
    replay,
)


class CaptureStore(Store):
    """Keeps what would be committed, in order; commits nothing (no frame waits on it here:
    the room's players have no connection). ``lines``: moves come as their lines, as the
    journal writer takes them (``Store.submit_line``), kept as the statements they stand for."""

    def __init__(self, lines: bool = False) -> None:
        super().__init__()
        self.ops: list[Op] = []
        self.takes_lines = lines

    def _enqueue(self, ticket: int, ops: list[Op]) -> None:
        self.ops.extend(ops)


def random_options(game: str, rng: random.Random) -> dict[str, Any]:
    if game == "stacko":
        tower = rng.randint(2, 5)
        return {
            "tower": tower, "bricks": rng.randint(2 * tower + 2, 2 * tower + 10),
            "rounds": rng.randint(1, 3), "turn_cap": rng.choice([None, rng.randint(2, 40)]),
        }  # fmt: skip
    return {"variant": rng.choice(VARIANTS), "ply_cap": rng.randint(2, 80)}


def record_one(
    game: str, seed: int, lines: bool | None = None
) -> tuple[Any, Any, list[tuple[Any, ...]]]:
    """One random game in a recording room: (live game, its options, its event rows)."""
    live, store = record_ops(game, seed, lines)
    (stored_options,) = [p[4] for sql, p in store.ops if sql.startswith("INSERT INTO games")]
    finished = [p for sql, p in store.ops if sql == FINISH_SQL]
    assert len(finished) == 1, "the record does not say the game ended exactly once"
    rows = packed.unpack(finished[0][6])  # the record, as stored (``games.record``)
    return live, options_of(CODECS[game], stored_options)[0], rows


def record_ops(game: str, seed: int, lines: bool | None = None) -> tuple[Any, CaptureStore]:
    """One random game in a recording room: (live game, what it stored).
    ``lines``: whether moves go to the store as lines (by default, in every other seed)."""
    rng = random.Random(seed)
    codec = CODECS[game]
    options, _ = codec.options_from_wire(random_options(game, rng))
    clock = FakeClock()
    store = CaptureStore(seed % 2 == 1 if lines is None else lines)
    hooks = RoomHooks(
        clock=clock, rng_factory=lambda: random.Random(rng.getrandbits(64)),
        schedule_soon=lambda cb: None, on_empty=lambda room: None, max_expiries=3,
        recorder=Recorder(store, clock),
    )  # fmt: skip
    clock_ms = 1000 if rng.random() < 0.5 else None
    room = Room("ABCDEF", GAMES[game], codec, options, clock_ms, False, hooks)
    room.seat(Player("ann"))
    room.seat(Player("bo"))
    room.start()
    live = room.game
    assert live is not None
    while live.outcome() is None:
        seat = live.to_move
        assert seat is not None
        r = rng.random()
        if r < 0.01:
            room.resign(rng.randint(0, 1), None)
        elif r < 0.015:
            room.leave(rng.randint(0, 1))
        elif r < 0.05 and clock_ms is not None:
            clock.advance(clock_ms / 1000)  # the clock runs out
        else:
            move = rng.choice(list(live.legal_moves()))
            wire = codec.move_model.model_validate(codec.move_to_wire(move))
            room.move(seat, live.ply, wire, None)
    return live, store


def play_one(game: str, seed: int) -> tuple[Any, Any, int]:
    """One random game recorded, then replayed: (live game, replayed game, events)."""
    live, options, rows = record_one(game, seed)
    return live, replay(game, options, events_from_rows(rows)).game, len(rows)


def check(games: int, seed: int) -> dict[str, Any]:
    started = time.perf_counter()
    events = 0
    names = list(GAMES)
    for i in range(games):
        game = names[i % len(names)]
        live, again, n = play_one(game, seed * 1_000_003 + i)
        events += n
        if again.key() != live.key() or again.outcome() != live.outcome():
            raise AssertionError(f"{game} game {i} (seed {seed}): the replay differs")
    return {"games": games, "events": events, "seconds": round(time.perf_counter() - started, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--games", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    out = check(args.games, args.seed)
    print(f"{out['games']} games ({out['events']} events) replayed equal in {out['seconds']} s")


if __name__ == "__main__":
    main()
