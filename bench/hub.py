"""The server's own work per move, without sockets: parse the frame, dispatch it through the
hub and room, apply it, and build both players' state frames (fake peers collect the bytes).

    python bench/hub.py                  # 30,000 random moves, microseconds per move
    python bench/hub.py --profile        # and the top of a cProfile of the same run

What this leaves out (the WebSocket layer, the event loop, the socket writes) is what
``loadgen.py`` measures against the echo baseline; the difference between the two is the
transport's share.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repo, not bench/, goes on sys.path
    sys.path[0:1] = [str(Path(__file__).resolve().parent.parent)]

import orjson

from stacko.protocol.games import CODECS
from stacko.protocol.messages import parse_client
from stacko.server.clock import FakeClock
from stacko.server.config import ServerConfig
from stacko.server.hub import Hub, Session


class Peer:
    def __init__(self) -> None:
        self.out: list[bytes] = []

    def send(self, frame: bytes) -> None:
        self.out.append(frame)


def measure(moves: int, seed: int) -> float:
    """Microseconds of parse + handle per move, over ``moves`` random legal moves."""
    hub = Hub(
        ServerConfig(), FakeClock(), rng_factory=lambda: random.Random(seed),
        schedule_soon=lambda callback: callback(),
    )  # fmt: skip
    peers = (Peer(), Peer())
    sessions: list[Session] = [
        hub.hello(p, parse_client(orjson.dumps({"type": "hello", "protocol": 1, "name": n})))
        for p, n in zip(peers, ("ann", "bob"), strict=True)
    ]
    rng = random.Random(seed)
    codec = CODECS["stacko"]

    def new_room() -> str:
        hub.handle(peers[0], sessions[0], parse_client(b'{"type":"create_room","id":1}'))
        code = str(orjson.loads(peers[0].out[-1])["room"])
        hub.handle(
            peers[1], sessions[1], parse_client(orjson.dumps({"type": "join", "room": code}))
        )
        return code

    code, spent, done = new_room(), 0.0, 0
    while done < moves:
        game = hub.rooms[code].game
        assert game is not None
        if game.outcome() is not None:
            leave = orjson.dumps({"type": "leave", "room": code})
            for p, s in zip(peers, sessions, strict=True):
                hub.handle(p, s, parse_client(leave))
            code = new_room()
            continue
        seat = game.to_move
        assert seat is not None
        move = codec.move_to_wire(rng.choice(game.legal_moves()))
        data = orjson.dumps({"type": "move", "room": code, "ply": game.ply, "move": move})
        started = time.perf_counter()
        hub.handle(peers[seat], sessions[seat], parse_client(data))
        spent += time.perf_counter() - started
        done += 1
        for p in peers:
            p.out.clear()
    return spent / moves * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--moves", type=int, default=30_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", action="store_true", help="also print a cProfile summary")
    args = ap.parse_args(argv)
    us = measure(args.moves, args.seed)
    print(json.dumps({"bench": "hub", "moves": args.moves, "us_per_move": round(us, 2)}))
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(measure, args.moves, args.seed)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
