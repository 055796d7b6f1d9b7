"""``bench/stakko_solve.py`` plays basic Stakko on its own small representation: it must
agree with the engine move for move, and its search must value finished lines right."""

from __future__ import annotations

import random

from bench.stakko_solve import START, Solver, heights, moves, next_to_move, play, result
from stacko.engine.stakko import Stakko, line_str, move


def test_the_solver_plays_the_engine_rules() -> None:
    rng = random.Random(19)
    for _ in range(60):
        game = Stakko(rng=random.Random(0))
        line, seat = START, 0
        while True:
            assert line_str(game.line) == " ".join(line)
            assert game.to_move == seat
            legal = [(m.stack, m.count) for m in game.legal_moves()]
            assert sorted(legal) == sorted(moves(line, seat))
            stack, count = rng.choice(legal)
            game.apply(move(stack, count))
            line = play(line, seat, stack, count)
            nxt = next_to_move(line, seat)
            if nxt is None:
                outcome = game.outcome()
                assert outcome is not None and outcome.scores == heights(line)
                assert {1: 0, -1: 1, 0: None}[result(line)] == outcome.winner
                break
            seat = nxt


def test_search_values_a_position_one_move_from_the_end() -> None:
    """White's only stack beside Black's home: lifting all 5 wins, fewer lose or draw (the
    position of the searcher's test in tests/engine/test_stakko_bots.py)."""
    line = ("RWWBBB", "GBBBBB", "G", "G", "G", "GWWWWW", "GW", "GW", "RB")
    assert Solver(60, 10**6).value(line, 0) == 1
    for count, expected in ((1, -1), (3, -1), (4, 0), (5, 1)):
        after = play(line, 0, 5, count)
        assert next_to_move(after, 0) is None and result(after) == expected
