"""The gap model of a tower's value (``bots.tower_gaps``, issue 19): its shipped tables are
what the solver makes, its lone gaps have the times one can work out by hand, and its greedy
player is within the issue's reach of the exact optimum on small towers."""

from __future__ import annotations

import numpy as np
import pytest

from bench.exact_solitaire import (
    backed_up,
    evaluate_values,
    gap_value,
    policy_value,
    solve,
    strong_value,
)
from stacko.bots.tower_gaps import (
    MAX_BRICKS,
    MAX_GAP,
    GapModel,
    build_tables,
    fits,
    gap_tables,
    load_tables,
)


def _lone_gap_time(log_g: np.ndarray, weights: np.ndarray, k: int, m: int) -> float:
    return float((1.0 - np.exp(log_g[k, m].astype(float))) @ weights)


def test_the_shipped_tables_are_what_the_solver_makes() -> None:
    """No training at install or start: the file in the package is data, and this is how
    it was made (``python -m stacko.bots.tower_gaps``)."""
    made = build_tables()
    log_g, weights = load_tables()
    assert log_g.shape == (MAX_GAP + 1, MAX_BRICKS + 1, len(weights))
    assert np.allclose(made["log_g"], log_g, atol=1e-6)
    assert np.allclose(made["weights"], weights)


def test_lone_gaps_take_the_times_worked_out_by_hand() -> None:
    """Time unit: the pool's size in turns (each brick arrives at rate 1).

    One slot, m bricks: the first of them, 1/m. k slots and exactly k bricks: every brick
    must come, so the last of k exponential arrivals, the harmonic number H_k. A gap with
    fewer bricks than slots never fills."""
    s, g = gap_tables(max_gap=4, max_bricks=12, steps=2400)
    mean = [[float(np.trapezoid(1.0 - g[k, m], s)) for m in range(13)] for k in range(5)]
    for m in range(1, 13):
        assert mean[1][m] == pytest.approx(1 / m, rel=1e-3)
    for k in range(1, 5):
        assert mean[k][k] == pytest.approx(sum(1 / i for i in range(1, k + 1)), rel=1e-3)
        assert g[k, k - 1].max() == 0.0
    # More bricks to choose from never makes a gap slower; more slots never faster.
    for k in range(1, 5):
        assert all(mean[k][m + 1] <= mean[k][m] + 1e-9 for m in range(k, 12))
        assert all(mean[k][m] >= mean[k - 1][m] - 1e-9 for m in range(k, 13))
    # The coarse shipped quadrature agrees with the fine grid to a percent.
    log_g, w = load_tables()
    for k, m in [(1, 3), (2, 5), (3, 9), (4, 12)]:
        assert _lone_gap_time(log_g, w, k, m) == pytest.approx(mean[k][m], rel=0.01)


def _uniform_pool(towers: np.ndarray, bricks: int) -> np.ndarray:
    pools = np.ones((len(towers), bricks + 2))
    pools[:, 0] = pools[:, -1] = 0.0
    pools[np.arange(len(towers))[:, None], towers] = 0.0
    return pools


def test_a_fitting_brick_makes_a_tower_sooner_done_and_gaps_fill_in_parallel() -> None:
    model = GapModel(40, 10)
    towers = np.array(
        [
            [40, 36, 32, 28, 24, 20, 16, 12, 8, 4],  # finished
            [40, 36, 32, 28, 24, 20, 16, 12, 8, 39],  # one slot wrong
            [40, 36, 32, 28, 2, 20, 16, 12, 8, 39],  # two slots wrong
            [3, 36, 32, 28, 2, 20, 16, 12, 8, 39],  # three slots wrong
        ]
    )
    v = model.values(towers, _uniform_pool(towers, 40), 30.0)
    assert v[0] < v[1] < v[2] < v[3]
    # Two one-slot gaps fill at the same time from their own bricks: together they take
    # less than one after the other (what a sum of gap costs would say).
    one = v[1] - v[0]
    assert v[2] - v[0] < 2 * one


def test_hidden_slots_are_gaps_and_the_value_is_in_turns() -> None:
    """``keepable`` False (an opponent's hidden slot) makes a slot a gap whatever it holds;
    the value scales with the pool's size (its time unit)."""
    model = GapModel(40, 10, temperature=0.0)
    tower = np.array([[40, 36, 32, 28, 24, 20, 16, 12, 8, 4]])
    keep = np.ones((1, 10), dtype=bool)
    keep[0, 9] = False
    pools = _uniform_pool(tower, 40)
    hidden = model.values(tower, pools, 30.0, keep)[0]
    open_ = model.values(tower, pools, 30.0)[0]
    assert open_ == pytest.approx(0.0, abs=1e-9) and hidden > 1.0
    assert model.values(tower, pools, 60.0, keep)[0] == pytest.approx(2 * hidden)


def test_options_beyond_the_tables_fall_back() -> None:
    assert fits(40, 10) and fits(60, 12)
    assert not fits(200, 20) and not fits(61, 10)
    with pytest.raises(ValueError):
        GapModel(200, 20)


@pytest.mark.parametrize(("slots", "limit", "strong_over"), [(4, 1.012, 1.0195)])
def test_the_greedy_player_of_the_gap_model_is_near_the_exact_optimum(
    slots: int, limit: float, strong_over: float
) -> None:
    """4 slots / 16 bricks (the exact model of ``bench/exact_solitaire.py``): the gap
    model's greedy player is 1.0 % over the optimum, the summed gap costs 1.95 %, and the
    gap model looked ahead one draw 0.55 %. (5 / 20, 1.6 % against 3.1 % and 0.77 %, takes
    minutes: ``bench/exact_solitaire.py --policy gaps --policy strong``.)"""
    bricks = 4 * slots
    opt = solve(slots, bricks).mean_all
    model = GapModel(bricks, slots)

    def value(towers: np.ndarray) -> np.ndarray:
        return model.values(towers, _uniform_pool(towers, bricks), float(bricks - slots))

    gaps = evaluate_values(slots, bricks, value, tol=1e-6)
    old = evaluate_values(slots, bricks, strong_value(slots, bricks, run_bonus=0.0), tol=1e-6)
    assert opt < gaps < limit * opt
    assert gaps < old and old == pytest.approx(strong_over * opt, rel=1e-3)
    # strong-v1's rule keeps its run bonus (0.5 of TowerModel's units): +2.20 %.
    v1 = evaluate_values(slots, bricks, strong_value(slots, bricks), tol=1e-6)
    assert v1 == pytest.approx(1.0220 * opt, rel=1e-3)
    # Strong alone looks ahead one draw (``policy_value("strong")``, at the alone
    # temperature 1.25): +0.55 %, within the 1 % (at 5 / 20: +0.77 %, bench/README.md).
    looked = evaluate_values(slots, bricks, policy_value("strong", slots, bricks), tol=1e-6)
    assert looked < gaps and looked == pytest.approx(1.0055 * opt, rel=1e-3)


def test_strong_plays_the_gap_model_alone_and_the_summed_costs_against_an_opponent() -> None:
    import random

    from stacko.bots.stacko_bots import StrongStackoBot, TowerModel

    bot = StrongStackoBot(random.Random(1))
    bot._make_model(40, 10)
    bot._pick_model(alone=True)
    assert isinstance(bot.model, GapModel) and bot.unit == 1.0
    assert bot.model.temperature == bot.alone_temperature
    # The round's first turn: nothing shows yet whether an opponent will move. The gap
    # model, at the opponent's weights.
    bot._pick_model(alone=False)
    assert isinstance(bot.model, GapModel) and bot.model.tower_weight == bot.tower_weight
    assert bot.model.temperature == bot.gap_temperature
    bot.memory.opponent_moved = True
    bot._pick_model(alone=False)
    assert isinstance(bot.model, TowerModel) and bot.unit == 6.0
    bot.memory.opponent_moved, bot.memory.my_turns = False, 1  # played, then it came back
    bot._pick_model(alone=True)
    assert isinstance(bot.model, GapModel)
    bot._make_model(200, 20)  # beyond the tables: the summed costs, alone too
    bot._pick_model(alone=True)
    assert isinstance(bot.model, TowerModel)


def _alone_bot(bricks: int, slots: int):  # type: ignore[no-untyped-def]
    """A strong bot set up as when it plays alone, without what the exact model leaves
    out: every slot valued (no screening), no run bonus, a brick given up as good as any."""
    import random

    from stacko.bots.stacko_bots import StrongStackoBot

    bot = StrongStackoBot(random.Random(1))
    bot._make_model(bricks, slots)
    bot._pick_model(alone=True)
    bot.screen = bot.backup_screen = 0
    bot._bonus, bot._need, bot._discard = 0.0, 0, 1.0
    return bot


def test_strong_alone_looks_ahead_one_draw_as_the_exact_yardstick_does() -> None:
    """The bot's ``_backup`` is the exact model's ``backed_up`` of the same gap model (at
    the bot's alone temperature): on every tower of a sample, with the pool the exact model
    has (every brick outside the tower, drawn alike), they agree."""
    from stacko.bots.stacko_bots import StrongStackoBot

    bricks, slots = 16, 4
    bot = _alone_bot(bricks, slots)
    assert bot.gaps is not None and bot.gaps.temperature == StrongStackoBot.alone_temperature
    exact = backed_up(
        slots, bricks, gap_value(slots, bricks, temperature=StrongStackoBot.alone_temperature)
    )
    rng = np.random.default_rng(5)
    towers = np.array([rng.permutation(np.arange(1, bricks + 1))[:slots] for _ in range(40)])
    towers[0] = [16, 9, 12, 1]  # one brick from done: a finished tower counts 0
    pools = _uniform_pool(towers, bricks)
    for tower, pool in zip(towers, pools, strict=True):
        if np.all(tower[1:] < tower[:-1]):
            continue  # finished: the bot makes a finishing move before it looks ahead
        draw = pool / pool.sum()
        mine = bot._backup(tower[None, :], pool[None, :], list(draw), float(bricks - slots))
        assert mine[0] == pytest.approx(float(exact(tower[None, :])[0]), rel=1e-9)


def test_strong_alone_places_by_the_backup_and_passes_when_it_says_so() -> None:
    """With a drawn brick, alone: the move is whichever of the ``lookahead`` best
    placements (by the value now) and the pass is worth least one turn later, by a draw
    (``_backup``) or by taking back the brick it gives up (not into the slot it left). On
    these deals the lookahead both places and passes, and sometimes differs from the value
    now."""
    from stacko.bots.stacko_bots import Knowledge, finishing_slot
    from stacko.engine.stacko import PASS, place

    bricks, slots = 40, 10
    bot = _alone_bot(bricks, slots)
    rng = np.random.default_rng(11)
    moves, differs = set(), 0
    for k in range(24):
        deal = [int(b) for b in rng.permutation(np.arange(1, bricks + 1))]
        tower, drawn = deal[:slots], deal[slots]
        if k % 2:  # nearly done (two neighbours out of order): most bricks are of no use
            tower = sorted(tower, reverse=True)
            j = k % (slots - 1)
            tower[j], tower[j + 1] = tower[j + 1], tower[j]
        if finishing_slot(tower, drawn) is not None:
            continue
        pool = [0.0 if b in tower else 1.0 for b in range(bricks + 2)]
        pool[0] = pool[-1] = 0.0
        draw = [p for p in pool]
        draw[drawn] = 0.0  # in hand: passed, it is the next open brick, not a draw
        know = Knowledge([p / sum(draw) for p in draw], pool)
        total = float(sum(pool))
        move = bot._look_ahead(tower, drawn, know, total)
        towers, pools = bot._placements(tower, drawn, pool)
        now = bot._values(towers, pools, total)
        top = [int(s) for s in np.argsort(now, kind="stable")[: bot.lookahead]]
        later = []
        for s in [*top, None]:
            after = towers[s] if s is not None else np.array(tower)
            after_pool = pools[s] if s is not None else np.array(pool)
            by_draw = bot._backup(after[None, :], after_pool[None, :], know.draw_prob, total)
            given_up = tower[s] if s is not None else drawn
            back, back_pools = bot._placements(list(after), given_up, list(after_pool))
            taken = [
                0.0 if list(t) == sorted(t, reverse=True) else float(v)
                for t, v in zip(back, bot._values(back, back_pools, total), strict=True)
            ]
            if s is not None:
                taken[s] = np.inf  # back where it came from: no move
            later.append(min(float(by_draw[0]), 1.0 + min(taken)))
        best = int(np.argmin(later))
        assert move == (PASS if best == len(top) else place(top[best]))
        moves.add(move == PASS)
        greedy = place(top[0]) if now.min() < bot._value(tower, pool, total) else PASS
        differs += move != greedy
    assert moves == {True, False} and differs > 0


class _Played:
    """A bot that records its moves; with ``stop``, each choice with a drawn brick gets a
    ``should_stop`` that is True from the start (the server's workers' budget used up)."""

    def __init__(self, bot, stop: bool) -> None:  # type: ignore[no-untyped-def]
        self.bot, self.stop, self.name = bot, stop, bot.name
        self.moves: list[object] = []
        self.asked = 0

    def reset(self) -> None:
        self.bot.reset()

    def choose(self, view, legal):  # type: ignore[no-untyped-def]
        from stacko.engine.stacko import Phase

        def stop() -> bool:
            self.asked += 1
            return True

        if self.stop and view.phase is Phase.DRAWN:
            move = self.bot.choose(view, legal, should_stop=stop)
        else:
            move = self.bot.choose(view, legal)
        self.moves.append(move)
        return move


def test_strong_alone_answers_at_once_when_asked_to_stop() -> None:
    """Alone, with a drawn brick and ``should_stop`` True from the start, the bot answers
    at once by the value now: its moves are those of the bot that does not look ahead,
    legal (``solitaire_turns`` checks), and it finishes its towers; with no budget the
    lookahead plays other moves on some of these towers."""
    import random

    from stacko.bots.stacko_bots import StrongStackoBot
    from stacko.clients.arena import solitaire_turns

    def played(lookahead: int, stop: bool, k: int) -> _Played:
        bot = StrongStackoBot(random.Random(k))
        bot.lookahead = lookahead
        player = _Played(bot, stop)
        assert solitaire_turns(player, f"stop:{k}") < 500
        return player

    differs = 0
    for k in range(6):  # the lookahead changes a move on 2 of these towers
        budgeted = played(StrongStackoBot.lookahead, True, k)
        greedy = played(0, False, k)
        assert budgeted.asked > 0 and budgeted.moves == greedy.moves
        differs += played(StrongStackoBot.lookahead, False, k).moves != greedy.moves
    assert differs > 0


def _brute_force(model: GapModel, tower: list[int], pool: np.ndarray, total: float) -> float:
    """The gap model's value of one tower from every keep set, one by one: those within
    ``margin`` of a longest one (the lowest position first among equals) enter the soft
    minimum."""
    from itertools import combinations, pairwise

    weight = pool.astype(float).copy()
    weight[tower] += model.tower_weight
    mass = np.cumsum(weight)
    vals = [model.bricks + 1, *tower, 0]
    width = len(vals)

    def turns(at: list[int]) -> float:
        acc = np.zeros(model.log_g.shape[2])
        for a, b in pairwise(at):
            m = min(max(mass[vals[a] - 1] - mass[vals[b]], 0.0), model.top)
            m0 = min(int(m), model.top - 1)
            f = m - m0
            acc += model.log_g[b - a - 1, m0] * (1 - f) + model.log_g[b - a - 1, m0 + 1] * f
        return float((1.0 - np.exp(acc)) @ (model.weights * total))

    length, parent = [1] * width, [0] * width
    for j in range(1, width):
        can = [length[i] if vals[i] > vals[j] else 0 for i in range(j)]
        parent[j], length[j] = can.index(max(can)), max(can) + 1
    longest = [width - 1]
    while longest[0]:
        longest.insert(0, parent[longest[0]])
    bound = turns(longest) + model.margin
    times = []
    for size in range(len(tower) + 1):
        for kept in combinations(range(1, width - 1), size):
            at = [0, *kept, width - 1]
            if all(vals[a] > vals[b] for a, b in pairwise(at)):
                times.append(turns(at))
    t = np.array([x for x in times if x <= bound])
    low = t.min()
    return float(low - model.temperature * np.log(np.exp(-(t - low) / model.temperature).sum()))


def test_the_pruned_search_values_towers_as_every_keep_set_does() -> None:
    """``values`` follows keep sets slot by slot and drops a chain once it is slower than a
    longest keep set by ``margin``: the value is the soft minimum over the keep sets within
    that bound, one by one (with no margin, over every keep set). The same tower twice in a
    batch is valued once, as it is alone."""
    bricks, slots = 24, 7
    rng = np.random.default_rng(3)
    towers = np.array([rng.permutation(np.arange(1, bricks + 1))[:slots] for _ in range(12)])
    towers[1] = sorted(towers[1], reverse=True)
    towers[2] = towers[1]
    towers[2][[3, 4]] = towers[2][[4, 3]]  # nearly sorted: the most keep sets
    towers[3][2] = 0  # a kept slot of no brick: no keep set ends there
    pools = _uniform_pool(towers, bricks)
    total = float(bricks - slots)
    for margin in (1e9, 6.0, 2.0):
        model = GapModel(bricks, slots, temperature=1.0, margin=margin)
        brute = [_brute_force(model, list(t), p, total) for t, p in zip(towers, pools, strict=True)]
        assert model.values(towers, pools, total) == pytest.approx(brute, rel=1e-9)
    twice = np.vstack([towers] * 2)  # 24 rows: the batch is searched for repeats
    keep = np.ones(twice.shape, dtype=bool)
    keep[::5, 4] = False  # hidden slots: gaps whatever they hold
    again = model.values(twice, np.vstack([pools] * 2), total, keep)
    alone = [
        model.values(t[None, :], p[None, :], total, k[None, :])[0]
        for t, p, k in zip(twice, np.vstack([pools] * 2), keep, strict=True)
    ]
    assert again == pytest.approx(alone, rel=1e-12)


def test_a_gap_model_travels_without_its_tables() -> None:
    """A server's bot worker gets the bot with every decision (``server.botpool``): the
    gap model pickles without its tables (150 KB; the worker has them) and values alike."""
    import pickle

    model = GapModel(40, 10, temperature=1.0, margin=5.0)
    sent = pickle.dumps(model)
    assert len(sent) < 2_000
    back = pickle.loads(sent)
    assert (back.temperature, back.margin, back.bricks) == (1.0, 5.0, 40)
    towers = np.array(
        [[40, 36, 32, 28, 2, 20, 16, 12, 8, 39], [3, 36, 32, 28, 2, 20, 16, 12, 8, 39]]
    )
    pools = _uniform_pool(towers, 40)
    assert np.array_equal(back.values(towers, pools, 30.0), model.values(towers, pools, 30.0))
