"""Replay equality (the record alone rebuilds the game) and what records hold of hidden
information. ``bench/replay_equality.py`` runs the issue's 10,000 games; the suite runs
fewer (seeded), across every game and Stakko variant."""

from __future__ import annotations

import gc
import random
import sys

import pytest

from bench.replay_equality import check, record_one, record_ops
from stacko.server.store.recorder import (
    LOG_SQL,
    RecordingRng,
    ReplayRng,
    events_from_rows,
    replay,
)


def test_random_games_replay_to_the_same_state_and_outcome():
    out = check(10_000, seed=15)  # about 4 s here (pure Python)
    assert out["games"] == 10_000 and out["events"] > 10_000


def test_the_deal_comes_from_the_record_alone():
    """Swap two bricks in the recorded deal: the replay is another game (so the equality
    above is not the engine dealing the same bricks again by itself)."""
    live, options, rows = record_one("stacko", 3)
    events = events_from_rows(rows)
    assert replay("stacko", options, events).game.key() == live.key()
    perm = events[0].payload["perms"][-1]
    perm[0], perm[1] = perm[1], perm[0]
    try:
        again = replay("stacko", options, events).game
    except Exception:  # a move the changed deal makes illegal, or a ply that no longer fits
        return
    assert again.key() != live.key()


def test_stakko_records_hold_no_chance():
    live, options, rows = record_one("stakko", 4)
    assert all("perms" not in r[4] for r in rows)
    assert replay("stakko", options, events_from_rows(rows)).game.key() == live.key()


def test_recorded_permutations_replay_the_same_shuffles():
    rec = RecordingRng(random.Random(5))
    a = list(range(40))
    b = ["x", "y", "z"]
    rec.shuffle(a)
    rec.shuffle(b)
    rep = ReplayRng(rec.take())
    a2, b2 = list(range(40)), ["x", "y", "z"]
    rep.shuffle(a2)
    rep.shuffle(b2)
    assert (a2, b2) == (a, b)
    with pytest.raises(ValueError):
        rep.shuffle([1, 2])  # nothing left to replay
    with pytest.raises(ValueError):
        ReplayRng([[0, 1]]).shuffle([1, 2, 3])  # a permutation of another size


def test_the_recording_source_is_small_and_draws_only_shuffles():
    """One per game in progress: no ``random.Random`` (2.9 KB each, its Mersenne Twister's
    state); and nothing but ``shuffle``, the one draw a record can hold."""
    rec = RecordingRng(random.Random(5))
    assert sys.getsizeof(rec) < 100
    assert not hasattr(rec, "random") and not hasattr(rec, "choice")


def deep_size(obj: object) -> int:
    """Bytes ``obj`` and everything it refers to take (each object once)."""
    seen: set[int] = set()
    todo = [obj]
    total = 0
    while todo:
        o = todo.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        todo += gc.get_referents(o)
    return total


def test_a_game_in_progress_holds_its_events_packed():
    """The recorder holds every event of every game in progress (for the record written at
    the end, and the log's compaction): packed, about its JSON's bytes an event (a tuple of SQL
    parameters per event took 3 x more). And what it holds is what the log and the record get."""
    from bench.replay_equality import CaptureStore
    from stacko.engine.games import GAMES
    from stacko.protocol.games import CODECS
    from stacko.server.clock import FakeClock
    from stacko.server.room import Player, Room, RoomHooks
    from stacko.server.store import packed
    from stacko.server.store.recorder import FINISH_SQL, Recorder

    rng = random.Random(8)
    clock = FakeClock()
    store = CaptureStore()
    hooks = RoomHooks(
        clock=clock, rng_factory=lambda: random.Random(rng.getrandbits(64)),
        schedule_soon=lambda cb: None, on_empty=lambda room: None,
        recorder=Recorder(store, clock),
    )  # fmt: skip
    codec = CODECS["stacko"]
    options, _ = codec.options_from_wire({"tower": 8, "bricks": 40, "rounds": 3})
    room = Room("ABCDEF", GAMES["stacko"], codec, options, 60_000, False, hooks)
    room.seat(Player("ann"))
    room.seat(Player("bo"))
    room.start()
    game, rec = room.game, room.record
    assert game is not None and rec is not None
    while rec.held < 200 and game.outcome() is None:
        move = rng.choice(list(game.legal_moves()))
        wire = codec.move_model.model_validate(codec.move_to_wire(move))
        room.move(game.to_move, game.ply, wire, None)
        clock.advance(0.25)
    assert rec.held >= 100
    per_event = (deep_size(rec.events) - deep_size(bytearray())) / rec.held
    # 122 here (events of 112 bytes of JSON, with their clocks); as tuples of SQL
    # parameters, 346
    assert per_event < 150, per_event
    held = packed.rows(rec.events)
    logged = [p[1:] for sql, p in store.ops if sql.startswith("INSERT INTO event_log")]
    assert held == logged
    room.resign(0, None)
    (end,) = [p for sql, p in store.ops if sql == FINISH_SQL]
    assert [r[0] for r in packed.unpack(end[6])] == list(range(1, rec.held + 1))


def test_a_stored_record_that_is_not_one_is_refused():
    import zlib

    from stacko.server.store import packed

    buf = bytearray()
    packed.append(buf, 1, "deal", None, 0, b'{"perms":[[1,0],[0,1]]}', 5)
    packed.append(buf, 2, "move", 0, 1, b'{"move":{"action":"take","slot":0}}', 6)
    assert packed.unpack(packed.pack(buf)) == [
        (1, "deal", None, 0, {"perms": [[1, 0], [0, 1]]}, 5),
        (2, "move", 0, 1, {"move": {"action": "take", "slot": 0}}, 6),
    ]
    for bad in (
        b"not zlib",
        packed.pack(buf)[:-3],  # cut short
        zlib.compress(b'{"a": 1}'),  # not a list
        zlib.compress(b"[[1, 2]]"),  # not an event
        zlib.compress(b" " * (packed.MAX_UNPACKED + 1)),  # unpacks to too much
    ):
        with pytest.raises(ValueError):
            packed.unpack(bad)


@pytest.mark.parametrize("game", ["stacko", "stakko"])
def test_a_move_handed_over_as_its_line_stores_what_its_statement_did(game):
    """The journal takes a move as its line, made by a path of its own
    (``Recorder.record``): the same seeds store the same statements, byte for byte, with
    clocks and without, as when every move goes as a statement."""
    for seed in range(40):
        runs = []
        for lines in (True, False):
            _, store = record_ops(game, seed, lines)
            gid = next(p[0] for sql, p in store.ops if sql.startswith("INSERT INTO games"))
            runs.append([(sql, tuple("G" if v == gid else v for v in p)) for sql, p in store.ops])
        assert runs[0] == runs[1], seed
        assert sum(sql == LOG_SQL for sql, _ in runs[0]) > 0
