"""Stacko bots: easy, medium and strong, all deciding from a seat's ``StackoView`` only.

Every level knows the rules (``docs/rules-stacko.md``): a tower is finished when it strictly
decreases from slot 0 (bottom) to the top; the finisher scores 50, the other player 5 times
the decreasing run from the bottom (rules §6).

- ``EasyStackoBot``: the medium rule, but a fifth of its choices are loose ones (a random
  slot near the brick's band, or a random draw/pass).
- ``MediumStackoBot``: each brick has a band of slots (brick b's ideal slot is about
  ``(bricks - b) * slots / bricks``); it takes the open brick or places a drawn one where
  it suits a slot of its band better than the brick there; a finishing move always.
- ``StrongStackoBot``: remembers what its seat has seen this round (``RoundMemory``),
  values a tower by the expected number of draws still needed to fill its gaps from the
  bricks that can still come (``TowerModel``), and picks by expected value among taking
  the open brick, drawing, and (after a draw) every placement or a pass. When the round may
  be lost it values a long ordered run from the bottom, which is what a round loser scores.

Nothing here reads hidden state: the only inputs are views and the legal moves.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stacko.clients.bots.base import BaseBot
from stacko.engine.stacko import (
    DRAW,
    PASS,
    Drew,
    Move,
    Phase,
    Placed,
    Reshuffled,
    RoundEnded,
    Took,
    is_finished,
    place,
    take,
)
from stacko.engine.stacko_view import StackoView

# -- shared helpers -----------------------------------------------------------------------


def ideal_slot(brick: int, bricks: int, slots: int) -> int:
    """The slot a brick belongs in if the bricks were spread evenly (slot 0: the biggest)."""
    return min(slots - 1, (bricks - brick) * slots // bricks)


def finishing_slot(tower: Sequence[int], brick: int) -> int | None:
    """A slot where ``brick`` finishes the tower, if there is one (rules §1)."""
    t = list(tower)
    for s in range(len(t)):
        old = t[s]
        t[s] = brick
        if is_finished(t):
            return s
        t[s] = old
    return None


def _pick(legal: Sequence[Move], wanted: Move) -> Move:
    """``wanted`` as found in ``legal`` (a bot returns one of the moves it was offered)."""
    for move in legal:
        if move == wanted:
            return move
    raise ValueError(f"{wanted} is not among the legal moves {[str(m) for m in legal]}")


def _my_tower(view: StackoView) -> list[int]:
    if view.seat is None:
        raise ValueError("a spectator's view has no tower to play")
    tower = view.towers[view.seat]
    if any(b is None for b in tower):
        raise ValueError("a seat always sees its own tower")
    return [b for b in tower if b is not None]


# -- easy and medium: slot bands ----------------------------------------------------------


class MediumStackoBot(BaseBot):
    """A clean band rule.

    Each brick has a band: its ideal slot (``ideal_slot``) and the ``width`` slots either
    side. A brick is worth placing in a slot of its band where it fits better than the brick
    there (``_misfit``: distance from the brick's own ideal slot first, then order with the
    neighbours), the best such slot first. The open brick is taken on that rule, otherwise
    it draws; a drawn brick is placed on that rule, otherwise passed. A move that finishes
    the tower is always made.
    """

    name = "medium"
    width = 1

    def choose(self, view: StackoView, legal: Sequence[Move]) -> Move:
        tower = _my_tower(view)
        if view.phase is Phase.TURN:
            slot = self._slot_for(tower, view.open_brick, view)
            return _pick(legal, take(slot) if slot is not None else DRAW)
        brick = view.drawn
        if brick is None:
            raise ValueError("a DRAWN view for the drawer always shows the drawn brick")
        slot = self._slot_for(tower, brick, view)
        return _pick(legal, place(slot) if slot is not None else PASS)

    def _slot_for(self, tower: list[int], brick: int, view: StackoView) -> int | None:
        done = finishing_slot(tower, brick)
        if done is not None:
            return done
        bricks, slots = view.options.bricks, view.options.tower
        ideal = ideal_slot(brick, bricks, slots)
        best, gain = None, 0
        for d in range(self.width + 1):
            for s in (ideal - d, ideal + d) if d else (ideal,):
                if 0 <= s < slots:
                    g = _misfit(tower, s, tower[s], bricks) - _misfit(tower, s, brick, bricks)
                    if g > gain:
                        best, gain = s, g
        return best


def _misfit(tower: Sequence[int], slot: int, brick: int, bricks: int) -> int:
    """How badly ``brick`` suits ``slot``: twice its distance from its band, plus one if it
    is out of order with the slot's neighbours."""
    slots = len(tower)
    far = abs(ideal_slot(brick, bricks, slots) - slot)
    fits = (slot == 0 or tower[slot - 1] > brick) and (slot == slots - 1 or tower[slot + 1] < brick)
    return 2 * far + (0 if fits else 1)


class EasyStackoBot(MediumStackoBot):
    """The medium rule with a share ``noise`` of loose choices.

    A loose choice is still a plausible one: take or place the brick into a random slot
    within ``spread`` of its ideal slot, or draw/pass at random. Finishing moves are still
    always made (even a beginner sees that).
    """

    name = "easy"
    noise = 0.2
    spread = 2

    def choose(self, view: StackoView, legal: Sequence[Move]) -> Move:
        tower = _my_tower(view)
        brick = view.open_brick if view.phase is Phase.TURN else view.drawn
        if brick is None:
            raise ValueError("a DRAWN view for the drawer always shows the drawn brick")
        if finishing_slot(tower, brick) is None and self.rng.random() < self.noise:
            bricks, slots = view.options.bricks, view.options.tower
            ideal = ideal_slot(brick, bricks, slots)
            lo, hi = max(0, ideal - self.spread), min(slots - 1, ideal + self.spread)
            if self.rng.random() < 0.5:
                slot = self.rng.randint(lo, hi)
                return _pick(legal, take(slot) if view.phase is Phase.TURN else place(slot))
            return _pick(legal, DRAW if view.phase is Phase.TURN else PASS)
        return super().choose(view, legal)


# -- strong: memory, a tower model and expected values ------------------------------------


class RoundMemory:
    """What one seat has seen during the current round, rebuilt from views alone.

    The key fact (rules §3-5): a brick can leave everyone's sight only by going into the draw
    stack at a reshuffle, or into the opponent's hand for the moment between their draw and
    their place/pass. So a brick this seat has *seen* this round (in the discard pile, in
    either tower, drawn by itself) that is not visible now is in the draw stack; a brick never
    seen is either in the stack or hidden in the opponent's dealt slots.
    """

    def __init__(self) -> None:
        self.round = 0
        self.ply = -1
        self.seen: set[int] = set()
        """Every brick this seat has seen somewhere this round."""
        self.reshuffles = 0
        self.my_last: tuple[int, int] | None = None
        """(slot, brick removed) of this seat's last take or place this round."""

    def reset(self) -> None:
        """Forget everything (a new game; a new round resets itself)."""
        self.round, self.ply = 0, -1
        self.seen = set()
        self.reshuffles = 0
        self.my_last = None

    def update(self, view: StackoView) -> None:
        """Take in a view (each one once; views may be skipped, at some loss of memory)."""
        if view.round != self.round or view.ply < self.ply:
            self.reset()
            self.round = view.round
        if view.ply == self.ply:
            return
        self.ply = view.ply
        events = view.events
        if any(isinstance(e, RoundEnded) for e in events):
            events = ()  # they were the last round's; this view is the new round's deal
        for event in events:
            if isinstance(event, Reshuffled):
                self.reshuffles += 1
            elif isinstance(event, Took | Placed) and event.seat == view.seat:
                self.my_last = (event.slot, event.removed)
            elif isinstance(event, Drew) and event.brick is not None:
                self.seen.add(event.brick)
        self.seen.update(view.discard)
        for tower in view.towers:
            self.seen.update(b for b in tower if b is not None)
        if view.drawn is not None:
            self.seen.add(view.drawn)


@dataclass(frozen=True, slots=True)
class Knowledge:
    """Where each brick may be, from one seat's view and memory (index: brick value)."""

    draw_prob: list[float]
    """Chance that each brick is the top of the draw stack (sums to 1 over the bricks)."""
    pool: list[float]
    """Weight of each brick as a future draw, for valuing towers: 0 for bricks in my tower."""


def knowledge(
    view: StackoView, memory: RoundMemory | None, discard_weight: float, opponent_weight: float
) -> Knowledge:
    """Combine the view with the memory into draw chances and pool weights."""
    me = view.seat
    assert me is not None
    bricks = view.options.bricks
    mine = set(b for b in view.towers[me] if b is not None)
    opp = set(b for b in view.towers[1 - me] if b is not None)
    discard = set(view.discard)
    visible = mine | opp | discard
    if view.drawn is not None:
        visible.add(view.drawn)
    seen = memory.seen if memory is not None else set()
    known_stack = [b for b in range(1, bricks + 1) if b not in visible and b in seen]
    unknown = [b for b in range(1, bricks + 1) if b not in visible and b not in seen]
    stack = view.stack_size
    draw_prob = [0.0] * (bricks + 2)
    in_stack_unknown = stack - len(known_stack)
    # Each brick of the stack is equally likely on top; a never-seen brick is in the stack
    # with chance ``rho`` (the rest of them are in the opponent's hidden slots).
    rho = min(1.0, max(0.0, in_stack_unknown / len(unknown))) if unknown else 0.0
    total = 0.0
    for b in known_stack:
        draw_prob[b] = 1.0
        total += 1.0
    for b in unknown:
        draw_prob[b] = rho
        total += rho
    if total > 0:
        draw_prob = [p / total for p in draw_prob]
    pool = [0.0] * (bricks + 2)
    for b in range(1, bricks + 1):
        if b in mine:
            continue
        if b in known_stack:
            pool[b] = 1.0
        elif b in unknown:
            pool[b] = rho + (1.0 - rho) * opponent_weight  # or released by the opponent
        elif b in discard:
            pool[b] = discard_weight
        elif b in opp:
            pool[b] = opponent_weight
        else:  # the drawn brick in hand
            pool[b] = discard_weight
    return Knowledge(draw_prob, pool)


class TowerModel:
    """Values towers by the number of draws they still need, from the bricks that can come.

    The bricks a tower keeps form a strictly decreasing subsequence of its slots (the *keep
    set*). Between two kept bricks ``hi`` (below) and ``lo`` (above) lies a gap of ``k``
    slots, to be filled from the bricks of the open interval ``(lo, hi)``; let ``m`` be their
    weight in the pool of bricks that can still be drawn and ``N`` the pool's whole weight.
    Spread evenly, each of the ``k`` slots accepts ``m / k`` of it, so waits about
    ``N k / m`` draws, and the gap costs ``k`` such waits: ``N k**2 / m``. A tower's value is
    the least total cost over keep sets, found by dynamic programming over the slots, and 0
    for a finished tower. ``values`` does it for a batch of candidate towers at once (numpy).

    Measured against alternatives in solitaire (turns to finish alone, 200-300 towers
    each): the expected maximum of the slots' waits (a coupon collector, 10.2 turns), an
    exactly solved lone-gap cost (10.4), exponents 1.5 / 1.8 / 2.2 / 2.5 for ``k`` (11.7 /
    9.8 / 10.1 / 10.4) and a value fitted by least squares to Bellman backups (10.0-10.9)
    all did worse than this (9.7).
    """

    temperature = 3.0

    def __init__(self, bricks: int, slots: int) -> None:
        self.bricks = bricks
        self.slots = slots

    def values(self, towers: np.ndarray, pools: np.ndarray, total: float) -> np.ndarray:
        """Draws still needed by each tower (rows of ``towers``, slot 0 first) with the pool
        weights in the same row of ``pools`` (indexed by brick value, ``bricks + 2`` wide);
        ``HOPELESS`` where no keep set can be completed from the pool."""
        c, slots = towers.shape
        mass = np.cumsum(pools, axis=1)
        count = np.cumsum(pools > 0, axis=1)
        vals = np.empty((c, slots + 2), dtype=np.int64)
        vals[:, 0] = self.bricks + 1  # a virtual floor under slot 0 ...
        vals[:, 1:-1] = towers
        vals[:, -1] = 0  # ... and a roof over the top slot
        rows = np.arange(c)[:, None]
        below = np.maximum(vals - 1, 0)
        mass_below = mass[rows, below]  # pool weight of the bricks under each value
        count_below = count[rows, below]
        mass_at = mass[rows, vals]
        count_at = count[rows, vals]
        best = np.full((c, slots + 2), np.inf)
        best[:, 0] = 0.0
        with np.errstate(divide="ignore", invalid="ignore"):
            for j in range(1, slots + 2):
                k = np.arange(j - 1, -1, -1)  # slots strictly between i = 0..j-1 and j
                m = mass_below[:, :j] - mass_at[:, j : j + 1]
                ok = (vals[:, :j] > vals[:, j : j + 1]) & (
                    count_below[:, :j] - count_at[:, j : j + 1] >= k
                )
                gap = np.where(k > 0, total * k * k / m, 0.0)
                cost = np.where(ok, best[:, :j] + gap, np.inf)
                low = cost.min(axis=1)
                if self.temperature > 0:
                    finite = np.isfinite(low)
                    shift = np.where(finite, low, 0.0)[:, None]
                    soft = np.exp(-(cost - shift) / self.temperature).sum(axis=1)
                    low = np.where(finite, shift[:, 0] - self.temperature * np.log(soft), np.inf)
                best[:, j] = low
        out: np.ndarray = np.where(np.isfinite(best[:, -1]), best[:, -1], HOPELESS)
        return out


HOPELESS = 1e6


class StrongStackoBot(BaseBot):
    """Expected-value play on ``TowerModel`` over what ``RoundMemory`` says can still come.

    On its turn it compares taking the open brick into its best slot with drawing, valued as
    the average over the bricks it may draw (``Knowledge.draw_prob``) of the better of
    placing that brick in its best slot or passing it; with a drawn brick it places it where
    the tower's value is best, or passes if no slot improves it. Values are draws still
    needed, minus ``run_bonus`` per brick of the ordered run from the bottom (what a round
    loser scores, rules §6). The pool weight ``N`` stays that of the position, so moving a
    brick between the tower and the discard pile changes only the intervals it falls in.
    """

    name = "strong"
    discard_weight = 0.5
    """Pool weight of a brick on the discard pile: it comes back at the next reshuffle."""
    opponent_weight = 0.1
    """Pool weight of a brick seen in the opponent's tower: it may be swapped out."""
    run_bonus = 0.5

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self.memory = RoundMemory()
        self.model: TowerModel | None = None

    def reset(self) -> None:
        self.memory.reset()

    def observe(self, view: StackoView) -> None:
        if view.seat is not None:
            self.memory.update(view)

    def choose(self, view: StackoView, legal: Sequence[Move]) -> Move:
        self.memory.update(view)
        tower = _my_tower(view)
        opts = view.options
        if self.model is None or (self.model.bricks, self.model.slots) != (opts.bricks, opts.tower):
            self.model = TowerModel(opts.bricks, opts.tower)
        know = knowledge(view, self.memory, self.discard_weight, self.opponent_weight)
        total = sum(know.pool)
        if view.phase is Phase.TURN:
            brick = view.open_brick
            slot = finishing_slot(tower, brick)
            if slot is not None:
                return _pick(legal, take(slot))
            # Putting back the brick just removed, where it was, would only undo that turn.
            undo = self.memory.my_last
            forbid = undo[0] if undo is not None and undo[1] == brick else None
            take_slot, take_value = self._best_place(tower, brick, know.pool, total, forbid)
            if take_slot is not None and take_value < self._draw_value(tower, know, total):
                return _pick(legal, take(take_slot))
            return _pick(legal, DRAW)
        drawn = view.drawn
        if drawn is None:
            raise ValueError("a DRAWN view for the drawer always shows the drawn brick")
        slot = finishing_slot(tower, drawn)
        if slot is not None:
            return _pick(legal, place(slot))
        place_slot, place_value = self._best_place(tower, drawn, know.pool, total)
        if place_slot is not None and place_value < self._value(tower, know.pool, total):
            return _pick(legal, place(place_slot))
        return _pick(legal, PASS)

    def _values(self, towers: np.ndarray, pools: np.ndarray, total: float) -> np.ndarray:
        assert self.model is not None
        v = self.model.values(towers, pools, total)
        if self.run_bonus:
            v = v - self.run_bonus * _runs(towers)
        return v

    def _placements(
        self, tower: list[int], brick: int, pool: Sequence[float]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Candidate towers and pools: ``brick`` into each slot in turn (the removed brick
        goes to the discard pile)."""
        slots = len(tower)
        towers = np.tile(np.array(tower, dtype=np.int64), (slots, 1))
        idx = np.arange(slots)
        towers[idx, idx] = brick
        pools = np.tile(np.array(pool, dtype=float), (slots, 1))
        pools[:, brick] = 0.0
        pools[idx, tower] = self.discard_weight
        return towers, pools

    def _value(self, tower: list[int], pool: list[float], total: float) -> float:
        towers = np.array([tower], dtype=np.int64)
        return float(self._values(towers, np.array([pool], dtype=float), total)[0])

    def _best_place(
        self,
        tower: list[int],
        brick: int,
        pool: list[float],
        total: float,
        forbid: int | None = None,
    ) -> tuple[int | None, float]:
        """The best slot for ``brick`` (not ``forbid``) and the tower's value with it there."""
        towers, pools = self._placements(tower, brick, pool)
        v = self._values(towers, pools, total)
        if forbid is not None:
            v[forbid] = np.inf
        s = int(np.argmin(v))
        return s, float(v[s])

    def _draw_value(self, tower: list[int], know: Knowledge, total: float) -> float:
        """Expected value of drawing: each possible brick at its best slot, or passed."""
        stay = self._value(tower, know.pool, total)
        bricks = [b for b, p in enumerate(know.draw_prob) if p > 0]
        if not bricks:
            return stay
        parts = [self._placements(tower, b, know.pool) for b in bricks]
        towers = np.concatenate([t for t, _ in parts])
        pools = np.concatenate([p for _, p in parts])
        v = self._values(towers, pools, total).reshape(len(bricks), len(tower)).min(axis=1)
        probs = np.array([know.draw_prob[b] for b in bricks])
        return float(np.dot(probs, np.minimum(v, stay)))


def _runs(towers: np.ndarray) -> np.ndarray:
    """The strictly decreasing run from the bottom of each row (rules §6)."""
    down = towers[:, 1:] < towers[:, :-1]
    runs: np.ndarray = 1 + np.cumprod(down, axis=1).sum(axis=1)
    return runs
