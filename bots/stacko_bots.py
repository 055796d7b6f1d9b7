"""Stacko bots: easy, medium and strong, all deciding from a seat's ``StackoView`` only.

Every level knows the rules (``docs/rules-stacko.md``): a tower is finished when it strictly
decreases from slot 0 (bottom) to the top; the finisher scores 50, the other player 5 times
the decreasing run from the bottom (rules §6).

- ``EasyStackoBot``: the medium rule, but a fifth of its choices are loose ones (a random
  slot near the brick's band, or a random draw/pass).
- ``MediumStackoBot``: each brick has a band of slots (brick b's ideal slot is about
  ``(bricks - b) * slots / bricks``); it takes the open brick or places a drawn one where
  it suits a slot of its band better than the brick there; a finishing move always.
- ``KyleStackoBot``: the range heuristic of the published Rack-O study (the yardstick of
  its TD-learned player), ported from its description.
- ``StrongStackoBot``: remembers what its seat has seen this round (``RoundMemory``),
  values a tower by the expected turns until its gaps, filling in parallel, are full from
  the bricks that can still come (``tower_gaps.GapModel``), and picks by expected value among taking
  the open brick, drawing, and (after a draw) every placement or a pass. When the round may
  be lost it values a long ordered run from the bottom, which is what a round loser scores;
  it does not hand the opponent a brick its visible tower wants, and weighs the run as the
  scores demand (in the last round, ahead, it first secures the run that wins the game).
  ``StrongV1StackoBot`` (``strong-v1``) is it before all that (summed gap costs,
  ``TowerModel``), kept as the arena's fixed reference.

Nothing here reads hidden state: the only inputs are views and the legal moves.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from stacko.bots.base import BaseBot, ShouldStop
from stacko.bots.tower_gaps import GapModel, fits
from stacko.engine.stacko import (
    DRAW,
    PASS,
    Drew,
    Move,
    Passed,
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

    def choose(
        self, view: StackoView, legal: Sequence[Move], *, should_stop: ShouldStop | None = None
    ) -> Move:
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

    def choose(
        self, view: StackoView, legal: Sequence[Move], *, should_stop: ShouldStop | None = None
    ) -> Move:
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


class KyleStackoBot(BaseBot):
    """A port of the range heuristic ("Kyle") that the published TD-learned Rack-O player
    was measured against (BYU CS478: the network won 71-73 % against it).

    Every slot owns an equal range of brick values (``ideal_slot``). A brick is wanted by
    the slot whose range it falls in when that slot's brick is out of its own range; the
    open brick is taken on that rule, otherwise it draws, and a drawn brick is placed on
    the same rule or passed. A finishing move is always made. It keeps no memory and
    ignores the opponent: the yardstick, not a contender.
    """

    name = "kyle"

    def choose(
        self, view: StackoView, legal: Sequence[Move], *, should_stop: ShouldStop | None = None
    ) -> Move:
        tower = _my_tower(view)
        opts = view.options
        if view.phase is Phase.TURN:
            slot = _range_slot(tower, view.open_brick, opts.bricks)
            return _pick(legal, take(slot) if slot is not None else DRAW)
        brick = view.drawn
        if brick is None:
            raise ValueError("a DRAWN view for the drawer always shows the drawn brick")
        slot = _range_slot(tower, brick, opts.bricks)
        return _pick(legal, place(slot) if slot is not None else PASS)


def _range_slot(tower: list[int], brick: int, bricks: int) -> int | None:
    """Where the range heuristic puts ``brick``: a finishing slot, else its range's slot if
    the brick there is out of range, else nowhere."""
    done = finishing_slot(tower, brick)
    if done is not None:
        return done
    slots = len(tower)
    slot = ideal_slot(brick, bricks, slots)
    if ideal_slot(tower[slot], bricks, slots) != slot:
        return slot
    return None


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
        self.my_turns = 0
        self.opponent_moved = False

    def reset(self) -> None:
        """Forget everything (a new game; a new round resets itself)."""
        self.round, self.ply = 0, -1
        self.seen = set()
        self.reshuffles = 0
        self.my_last = None
        self.my_turns = 0
        self.opponent_moved = False

    @property
    def alone(self) -> bool:
        """This seat has played a turn this round and the opponent none since: the brick
        it gives up comes back to it as the open brick (solitaire play, where the turn
        comes straight back), not to an opponent."""
        return self.my_turns > 0 and not self.opponent_moved

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
            if isinstance(event, Took | Placed | Passed):
                if event.seat == view.seat:
                    self.my_turns += 1
                else:
                    self.opponent_moved = True
            elif isinstance(event, Drew) and event.seat != view.seat:
                self.opponent_moved = True
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


@dataclass(frozen=True, slots=True)
class TowerParams:
    """The shape of ``TowerModel``'s gap cost and its soft minimum over keep sets."""

    temperature: float = 3.0
    k_power: float = 2.0
    m_power: float = 1.0
    gap_cost: float = 0.0


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
    k_power = 2.0
    """A gap of ``k`` slots costs ``N k**k_power / m**m_power`` (plus ``gap_cost``)."""
    m_power = 1.0
    gap_cost = 0.0

    def __init__(self, bricks: int, slots: int, params: TowerParams | None = None) -> None:
        self.bricks = bricks
        self.slots = slots
        if params is not None:
            self.temperature = params.temperature
            self.k_power = params.k_power
            self.m_power = params.m_power
            self.gap_cost = params.gap_cost

    def values(
        self,
        towers: np.ndarray,
        pools: np.ndarray,
        total: float,
        keepable: np.ndarray | None = None,
    ) -> np.ndarray:
        """Draws still needed by each tower (rows of ``towers``, slot 0 first) with the pool
        weights in the same row of ``pools`` (indexed by brick value, ``bricks + 2`` wide);
        ``HOPELESS`` where no keep set can be completed from the pool. ``keepable`` (same
        shape as ``towers``, optional) marks the slots whose brick may be kept: a slot whose
        brick is unknown (an opponent's hidden slot) is a gap to fill."""
        c, slots = towers.shape
        width = slots + 2
        mass = np.cumsum(pools, axis=1)
        count = np.cumsum(pools > 0, axis=1)
        # Positions by rows and towers by columns ([position, tower]): every step below
        # works on whole rows, and a minimum over positions is one vector operation (over
        # the towers' own rows numpy reduces each tower apart, slowly).
        vals = np.empty((width, c), dtype=np.int64)
        vals[0] = self.bricks + 1  # a virtual floor under slot 0 ...
        vals[1:-1] = towers.T
        vals[-1] = 0  # ... and a roof over the top slot
        cols = np.arange(c)
        below = np.maximum(vals - 1, 0)
        mass_below = mass[cols, below]  # pool weight of the bricks under each value
        count_below = count[cols, below]
        mass_at = mass[cols, vals]
        count_at = count[cols, vals]
        # Every gap at once: row ``g`` is the pair (i, j) of ``_lower_pairs``, so the gaps
        # into position ``j`` are rows ``j (j - 1) / 2`` onwards, one per i < j.
        lower, upper, k = _lower_pairs(width)
        gap_k = k[:, None]
        ok = (vals[lower] > vals[upper]) & (count_below[lower] - count_at[upper] >= gap_k)
        if keepable is not None:
            keep = np.ones((width, c), dtype=bool)
            keep[1:-1] = keepable.T
            ok &= keep[lower] & keep[upper]
        best = np.full((width, c), np.inf)
        best[0] = 0.0
        with np.errstate(divide="ignore", invalid="ignore"):
            m = mass_below[lower] - mass_at[upper]
            if self.k_power == 2.0 and self.m_power == 1.0 and self.gap_cost == 0.0:
                gap = np.where(gap_k > 0, (total * k * k)[:, None] / m, 0.0)
            else:
                scaled = (total * k.astype(float) ** self.k_power)[:, None] / m**self.m_power
                gap = np.where(gap_k > 0, scaled + self.gap_cost, 0.0)
            gap[~ok] = np.inf  # best + inf is inf: the pairs that cannot both be kept
            first = 0
            for j in range(1, width):
                cost = best[:j] + gap[first : first + j]
                first += j
                low = cost.min(axis=0)
                if self.temperature > 0:
                    finite = np.isfinite(low)
                    shift = np.where(finite, low, 0.0)
                    soft = _column_sums(np.exp((shift - cost) / self.temperature))
                    low = np.where(finite, shift - self.temperature * np.log(soft), np.inf)
                best[j] = low
        out: np.ndarray = np.where(np.isfinite(best[-1]), best[-1], HOPELESS)
        return out


@cache
def _lower_pairs(width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(i, j, k)``: every pair of positions ``i < j`` by ``j`` then ``i``, and the
    ``k = j - 1 - i`` slots between them."""
    upper = np.repeat(np.arange(width), np.arange(width))
    lower = np.concatenate([np.arange(j) for j in range(width)])
    k = upper - 1 - lower
    for a in (lower, upper, k):
        a.setflags(write=False)
    return lower, upper, k


def _column_sums(terms: np.ndarray) -> np.ndarray:
    """The sum of each column, added in the order numpy's sum of a row takes (one by one
    up to 7 terms, from 8 in eight partial sums paired up), so that ``TowerModel``'s values
    are the same bits as when it summed each tower's row."""
    n = len(terms)
    if n < 8:
        out: np.ndarray = np.add.reduce(terms, axis=0)
        return out
    pairs = terms[0:8:2] + terms[1:8:2]
    pairs = pairs[0::2] + pairs[1::2]
    out = pairs[0] + pairs[1]
    for i in range(8, n):
        out += terms[i]
    return out


HOPELESS = 1e6

UNFINISHABLE = 1000.0
"""What ``_secure_values`` counts a tower that can no longer finish in the race (about 170
turns of ``TowerModel``'s units, where ``HOPELESS`` would swamp the run it secures)."""

TURN_UNITS = 6.0
"""About this many of ``TowerModel``'s units make a turn (a dealt tower is worth about 62 and
takes about 10 turns): the strong bot's bonuses, set in turns, are scaled by it when the
gap model's tables do not reach the options."""


class StrongStackoBot(BaseBot):
    """Expected-value play on a tower's value over what ``RoundMemory`` says can still come.

    The value (issue 19) is ``tower_gaps.GapModel``: the expected turns until the gaps of
    the tower fill, in parallel, from the bricks that can come, soft-minimised over keep
    sets; ``TowerModel`` (summed gap costs, what ``strong-v1`` plays) where the gap model's
    tables do not reach the options, and to pick the ``screen`` slots per drawable brick
    that the gap model values (a decision stays within the time a server's worker pool
    allows). A brick the bot gives up counts as half available (the opponent sees it
    first), fully when the turn comes straight back (``RoundMemory.alone``).

    On its turn it compares taking the open brick into its best slot with drawing, valued as
    the average over the bricks it may draw (``Knowledge.draw_prob``) of the better of
    placing that brick in its best slot or passing it; with a drawn brick it places it where
    the tower's value is best, or passes if no slot improves it; alone, it places or
    passes it by the value one turn later instead (``_look_ahead``: a draw, or taking back
    the brick it gives up). Values are draws still
    needed, minus ``run_bonus`` per brick of the ordered run from the bottom (what a round
    loser scores, rules §6). The pool weight ``N`` stays that of the position, so moving a
    brick between the tower and the discard pile changes only the intervals it falls in.

    Head to head (issue 19; ``strong-v1`` is the level without this): every brick a move
    gives up becomes the opponent's open brick, so it is charged ``gift_weight`` times the
    turns the opponent's visible tower would save with it (``_gifts``); and the run is
    weighed as the scores demand (``_plan``): more as the round grows long, and in the last
    round, ahead, the run that wins the game whoever finishes is secured before the race
    (``_secure_values``; 0.542 -> 0.567 against ``strong-v1`` over 2,000 deals). Measured
    against ``strong-v1`` over 300 duplicate deals while tuning: gifts alone 0.512, with
    the score plan 0.542, with the late run bonus 0.557 (about +-0.03); the 2,000-deal
    figures are in bench/README.md. Retuned
    (session 2, paired over the same duplicate deals against ``strong-v1``): a gift counted
    at a quarter of its value instead of a half gained 0.027 +- 0.020 (600 deals, seed 11)
    and 0.004 +- 0.011 (2,000 deals, seed 1; a whole one lost 0.056), so ``gift_weight``
    is 0.25. The gifts are valued with ``TowerModel`` (converted to turns at
    ``TURN_UNITS``), the bonuses are set in turns.
    """

    name = "strong"
    discard_weight = 0.5
    """Pool weight of a brick on the discard pile: it comes back at the next reshuffle."""
    opponent_weight = 0.1
    """Pool weight of a brick seen in the opponent's tower: it may be swapped out."""
    gap_model = True
    """Value towers with ``GapModel`` (turns) where its tables reach, when the turn comes
    straight back (``RoundMemory.alone``); else, and against an opponent, ``TowerModel``."""
    gap_model_against = False
    """Use the gap model against an opponent too (measured weaker there: ``_pick_model``)."""
    gap_temperature = 1.5
    """Of the gap model's soft minimum over keep sets, in turns."""
    tower_weight = 0.5
    """Pool weight, in the gap model, of a brick of the tower a keep set does not keep: it
    will be given up, and the opponent sees it first."""
    alone_tower_weight = 1.0
    alone_discard_weight = 0.75
    """Those weights when the turn comes straight back (``RoundMemory.alone``)."""
    alone_temperature = 1.25
    """The gap model's temperature when the turn comes straight back, where it is looked
    ahead with (``lookahead``). 1.25 rather than 1.0 (with the first turn on the gap model,
    ``_pick_model``): solitaire -0.107 / -0.121 / -0.066 turns over the 2,000 towers of
    seeds 1 / 2 / 3, and +0.55 % / +0.77 % over the exact optimum at 4 / 16 and 5 / 20
    instead of +0.43 % / +0.65 % (bench/README.md, issue 19, fifth session)."""
    lookahead = 2
    """Alone, the drawn brick goes into the best of its ``lookahead`` best slots by the gap
    model, or is passed, by the value one turn later (``_look_ahead``); 0: by the value now.
    Alone the gap model's player is 0.55 % / 0.77 % over the exact optimum at 4 / 16 and
    5 / 20 this way, 1.01 % / 1.57 % without (bench/README.md, issue 19)."""
    backup_screen = 1
    """Slots per brick that the gap model values in ``_backup`` (``screen`` elsewhere)."""
    margin = 6.0
    """Keep sets slower than a longest one by this many turns are not followed."""
    screen = 2
    """Slots per drawable brick that the gap model values (the best by ``TowerModel``)."""
    run_bonus = 0.5 / TURN_UNITS
    """Turns a brick of the ordered run from the bottom is worth (what a round loser
    scores); this and the bonuses below are in turns."""
    gift_weight = 0.25
    gift_cap = 10.0 / TURN_UNITS
    """At most this many turns saved are charged for one brick (the opponent's value of a
    tower it hardly shows is rough)."""
    play_the_score = True
    """Weigh the run as the scores demand in the last round (``_plan``)."""
    secure_race_share = 0.5
    """In the last round, ahead, while securing the run that wins the game: the share of
    the tower's value in the race added to the draws the run still needs
    (``_secure_values``)."""
    late_bonus = 0.5 / TURN_UNITS
    behind_block = 1.0
    """Turns of mine a turn saved by the opponent is worth, for the brick a move leaves
    them as the open brick (0: ignore the opponent, as ``strong-v1`` does)."""

    def __init__(self, rng: random.Random, params: TowerParams | None = None) -> None:
        super().__init__(rng)
        self.memory = RoundMemory()
        self.model: TowerModel | GapModel | None = None
        self.screen_model: TowerModel | None = None
        self.secure_model: TowerModel | None = None
        self._secured = False
        self.gaps: GapModel | None = None
        self.unit = 1.0
        self.params = params if params is not None else TowerParams()
        self._gift: np.ndarray | None = None
        self._bonus, self._need = self.run_bonus, 0
        self._discard = self.discard_weight

    def reset(self) -> None:
        self.memory.reset()

    def observe(self, view: StackoView) -> None:
        if view.seat is not None:
            self.memory.update(view)

    def choose(
        self, view: StackoView, legal: Sequence[Move], *, should_stop: ShouldStop | None = None
    ) -> Move:
        self.memory.update(view)
        tower = _my_tower(view)
        opts = view.options
        if self.model is None or (self.model.bricks, self.model.slots) != (opts.bricks, opts.tower):
            self._make_model(opts.bricks, opts.tower)
        # Where a brick given up goes: to the opponent as its open brick, or (alone, see
        # ``RoundMemory.alone``) back to this seat, which makes it as good as any to come.
        alone = self.gap_model and self.memory.alone
        self._discard = self.alone_discard_weight if alone else self.discard_weight
        self._pick_model(alone)
        know = knowledge(view, self.memory, self._discard, self.opponent_weight)
        total = sum(know.pool)
        brick = view.open_brick if view.phase is Phase.TURN else view.drawn
        if brick is None:
            raise ValueError("a DRAWN view for the drawer always shows the drawn brick")
        slot = finishing_slot(tower, brick)
        if slot is not None:
            return _pick(legal, take(slot) if view.phase is Phase.TURN else place(slot))
        self._gift = self._gifts(view) if self.gift_weight else None
        self._plan(view)
        if view.phase is Phase.TURN:
            # Putting back the brick just removed, where it was, would only undo that turn.
            undo = self.memory.my_last
            forbid = undo[0] if undo is not None and undo[1] == brick else None
            take_slot, take_value = self._best_place(tower, brick, know.pool, total, forbid)
            draw_value = self._draw_value(tower, know, total, should_stop)
            if take_slot is not None and take_value < draw_value:
                return _pick(legal, take(take_slot))
            return _pick(legal, DRAW)
        if alone and self.lookahead > 0 and self.model is self.gaps:
            return _pick(legal, self._look_ahead(tower, brick, know, total, should_stop))
        place_slot, place_value = self._best_place(tower, brick, know.pool, total)
        if place_slot is not None and place_value < self._pass_value(tower, brick, know, total):
            return _pick(legal, place(place_slot))
        return _pick(legal, PASS)

    def _make_model(self, bricks: int, slots: int) -> None:
        """The summed costs (``TowerModel``, about ``TURN_UNITS`` units a turn) and, where its
        tables reach (``tower_gaps.fits``), the gap model (turns); ``_pick_model`` chooses
        per decision. The bonuses are set in turns and scaled by ``unit`` (so
        ``strong-v1``'s are exactly what they always were)."""
        self.screen_model = TowerModel(bricks, slots, self.params)
        self.secure_model = TowerModel(bricks, slots, TowerParams(temperature=0.0))
        self.gaps = None
        if self.gap_model and fits(bricks, slots):
            self.gaps = GapModel(
                bricks, slots, self.gap_temperature, self.tower_weight, self.margin
            )
        self.model, self.unit = self.screen_model, TURN_UNITS

    def _pick_model(self, alone: bool) -> None:
        """The gap model alone, and on the round's first turn (at the opponent's weights:
        nothing shows yet whether an opponent will move; against one, it is a turn like the
        others), and against an opponent if ``gap_model_against``; else the summed costs.
        Over 2,000 duplicate deals against ``strong-v1`` the gap model throughout scored
        0.512 +- 0.013 where the summed costs score 0.542 +- 0.011, while alone it finished
        towers in 9.51 turns against 10.00. The first turn on the gap model (and the alone
        temperature 1.25): solitaire 9.59 -> 9.48 turns, and 0.566 against ``strong-v1``,
        80.5 % of the rounds against ``kyle``, as the summed costs there (0.567, 80.7 %;
        bench/README.md, issue 19, fifth session)."""
        self.model, self.unit = self.screen_model, TURN_UNITS
        memory = self.memory
        first = memory.my_turns == 0 and not memory.opponent_moved
        if self.gaps is not None and (alone or first or self.gap_model_against):
            self.model, self.unit = self.gaps, 1.0
            self.gaps.tower_weight = self.alone_tower_weight if alone else self.tower_weight
            self.gaps.temperature = self.alone_temperature if alone else self.gap_temperature

    def _look_ahead(
        self,
        tower: list[int],
        drawn: int,
        know: Knowledge,
        total: float,
        should_stop: ShouldStop | None = None,
    ) -> Move:
        """Alone, with a drawn brick: the ``lookahead`` best placements by the gap model and
        the pass, compared by their value one turn later (``_backup``); by the value now if
        ``should_stop`` says so first.

        Next turn the brick given up is the open brick (alone, the turn comes straight
        back), so a candidate is also worth a turn plus taking that brick back into its
        best slot, but not into the slot it came from, which would undo the move. Both are
        valued in one batch (``_after_placing``): one call of each model."""
        towers, pools = self._placements(tower, drawn, know.pool)
        v = self._values(towers, pools, total)
        top = np.argsort(v, kind="stable")[: self.lookahead]
        if should_stop is not None and should_stop():
            return place(int(top[0])) if v[top[0]] < self._value(tower, know.pool, total) else PASS
        cand = np.vstack([towers[top], np.array([tower], dtype=np.int64)])
        cand_pools = np.vstack([pools[top], np.array([know.pool], dtype=float)])
        bs = _drawable(know.draw_prob)
        given_up = np.array([tower[s] for s in top] + [drawn], dtype=np.int64)
        bricks = np.column_stack([np.tile(bs, (len(cand), 1)), given_up])
        forbid = np.full(bricks.shape, -1)
        forbid[:, -1] = np.append(top, -1)
        w = self._after_placing(cand, cand_pools, bricks, total, forbid)
        after = _wait_value(w[:, :-1], bs, know.draw_prob)
        retake = 1.0 + w[:, -1]
        best = int(np.argmin(np.minimum(after, retake)))
        return PASS if best == len(top) else place(int(top[best]))

    def _backup(
        self, towers: np.ndarray, pools: np.ndarray, draw_prob: Sequence[float], total: float
    ) -> np.ndarray:
        """The value of each tower one draw later: each brick that may be drawn goes into its
        best slot (``_after_placing``), then ``_wait_value``."""
        bs = _drawable(draw_prob)
        w = self._after_placing(towers, pools, np.tile(bs, (len(towers), 1)), total)
        return _wait_value(w, bs, draw_prob)

    def _after_placing(
        self,
        towers: np.ndarray,
        pools: np.ndarray,
        bricks: np.ndarray,
        total: float,
        forbid: np.ndarray | None = None,
    ) -> np.ndarray:
        """``(towers, bricks per row)``: the value of each tower (rows) with each brick of
        its row of ``bricks`` in its best slot (not the slot in ``forbid``, of the same shape
        as ``bricks``, if any; -1: none), the slot's brick given up (``_placements``); valued
        by ``_screened``, a finished tower 0 (turns to go)."""
        c, n = towers.shape
        nb, width = bricks.shape[1], pools.shape[1]
        ci, bi, si = np.ix_(np.arange(c), np.arange(nb), np.arange(n))
        t = np.broadcast_to(towers[:, None, None, :], (c, nb, n, n)).copy()
        t[ci, bi, si, si] = bricks[ci, bi]
        p = np.broadcast_to(pools[:, None, None, :], (c, nb, n, width)).copy()
        p[ci, bi, si, bricks[ci, bi]] = 0.0
        p[ci, bi, si, towers[ci, si]] = self._discard
        flat = t.reshape(-1, n)
        v = self._screened(flat, p.reshape(-1, width), total, self.backup_screen)
        v[np.all(flat[:, 1:] < flat[:, :-1], axis=1)] = 0.0
        v = v.reshape(c, nb, n)
        if forbid is not None:
            rows, cols = np.nonzero(forbid >= 0)
            v[rows, cols, forbid[rows, cols]] = np.inf
        out: np.ndarray = v.min(axis=2)
        return out

    def _gifts(self, view: StackoView) -> np.ndarray | None:
        """Per brick value: the turns the opponent would save with it as the open brick,
        valued on what its tower shows (hidden slots are gaps), times ``gift_weight``.

        Valued with ``TowerModel`` whatever the bot's own model: what a tower that mostly
        hides itself wants is rough anyway, and 400 such towers would cost the gap model
        several milliseconds a decision."""
        assert view.seat is not None and self.screen_model is not None
        opp = view.towers[1 - view.seat]
        if not any(b is not None and b > 0 for b in opp):
            return None  # nothing shows: no brick is a better gift than another
        bricks, slots = self.screen_model.bricks, len(opp)
        tower = np.array([b if b is not None else 0 for b in opp], dtype=np.int64)
        keep = np.array([b is not None and b > 0 for b in opp])
        pool = np.ones(bricks + 2)
        pool[0] = pool[-1] = 0.0
        pool[tower[keep]] = 0.0
        total = float(pool.sum())
        cand = np.tile(tower, (bricks * slots + 1, 1))
        keeps = np.tile(keep, (bricks * slots + 1, 1))
        pools = np.tile(pool, (bricks * slots + 1, 1))
        rows = np.arange(1, bricks * slots + 1)
        b = (rows - 1) // slots + 1
        s = (rows - 1) % slots
        cand[rows, s] = b
        keeps[rows, s] = True
        pools[rows, b] = 0.0
        v = self.screen_model.values(cand, pools, total, keeps) / TURN_UNITS  # in turns
        best = v[1:].reshape(bricks, slots).min(axis=1)
        gift = np.zeros(bricks + 2)
        gift[1 : bricks + 1] = np.maximum(0.0, v[0] - best)
        gift[tower[keep]] = 0.0  # a brick it holds does not come to it
        out: np.ndarray = self.gift_weight * np.minimum(gift, self.gift_cap) * self.unit
        return out

    def _pass_value(self, tower: list[int], drawn: int, know: Knowledge, total: float) -> float:
        gift = 0.0 if self._gift is None else float(self._gift[drawn])
        return self._value(tower, know.pool, total) + gift

    def _values(self, towers: np.ndarray, pools: np.ndarray, total: float) -> np.ndarray:
        if self._need:
            return self._secure_values(towers, pools, total)
        return self._race_values(towers, pools, total)

    def _race_values(self, towers: np.ndarray, pools: np.ndarray, total: float) -> np.ndarray:
        assert self.model is not None
        v = self.model.values(towers, pools, total)
        if self._bonus:
            v = v - self._bonus * self.unit * _runs(towers)
        return v

    def _secure_values(self, towers: np.ndarray, pools: np.ndarray, total: float) -> np.ndarray:
        """The last round, ahead (``_plan``): a run of ``need`` bricks from the bottom wins
        the game whoever finishes the round, and the bottom ``need`` slots sort sooner than
        the whole tower. So until the tower holds that run, a tower is worth the draws its
        bottom ``need`` slots still need (``secure_model``: the summed costs of that
        sub-tower, a hard minimum over its keep sets, since the soft one goes below 0 on so
        few slots; 0 with the run), plus ``secure_race_share`` of its value in the race
        (finishing wins too, and a run of small bricks can leave the tower unable to finish:
        that counts as ``UNFINISHABLE``). Once it holds the run, the race as usual, and a
        tower that breaks the run is ``HOPELESS`` (it would throw the won game away).

        Measured against ``strong-v1`` over 300 duplicate deals (seed 11), paired, and its
        rounds against ``kyle`` over 400 (bench/README.md, issue 19, fifth session): the
        bonus this replaces (``need_bonus``: a quarter of a turn for each brick of the run up
        to ``need``, which neither reached the run nor kept it) 0.537 and 83.5 % of the
        rounds (200 deals); the sub-tower alone 0.620 and 73.6 % (200); with the race at
        0.3 / 0.5 / 1.0: 0.590 / 0.588 / 0.566 and 79.9 / 81.1 / 82.4 % (the last 200)."""
        assert self.secure_model is not None
        held = _runs(towers) >= self._need
        race = self._race_values(towers, pools, total)
        if self._secured:
            return np.where(held, race, race + HOPELESS)
        unit = self.unit / TURN_UNITS  # the summed costs' units in the model's
        sub = np.maximum(self.secure_model.values(towers[:, : self._need], pools, total), 0.0)
        race = np.minimum(race, UNFINISHABLE * unit)
        out: np.ndarray = np.where(held, 0.0, sub * unit) + self.secure_race_share * race
        return out

    def _screened(
        self, towers: np.ndarray, pools: np.ndarray, total: float, screen: int | None = None
    ) -> np.ndarray:
        """``_values`` of candidate towers in rows of ``slots`` (one brick in every slot),
        the gap model valuing only the ``screen`` (default: ``self.screen``) best slots of
        each row by ``TowerModel`` (the rest ``inf``): the slow model is spent where the
        choice lies."""
        rough_model = self.screen_model
        if rough_model is None or self.model is rough_model:
            return self._values(towers, pools, total)
        slots = rough_model.slots
        keep = self.screen if screen is None else screen
        if not 0 < keep < slots:
            return self._values(towers, pools, total)
        rough = rough_model.values(towers, pools, total).reshape(-1, slots)
        best = np.argsort(rough, axis=1, kind="stable")[:, :keep]
        pick = (np.arange(len(rough))[:, None] * slots + best).ravel()
        out = np.full(len(towers), np.inf)
        out[pick] = self._values(towers[pick], pools[pick], total)
        return out

    def _plan(self, view: StackoView) -> None:
        """What the run is worth this turn, as the scores demand (rules §6).

        Before the last round: ``run_bonus`` a brick. In the last round, ahead: if the
        opponent finishes, a run of ``need`` bricks still wins the game, so the bot plays to
        secure that run first and races only once it holds it (``_secure_values``). Behind
        by more than a run can make up: only finishing can win, and the run is worth
        nothing."""
        self._bonus, self._need, self._secured = self.run_bonus, 0, False
        if not self.play_the_score or view.seat is None:
            return
        # The longer the round, the likelier the opponent finishes first: the run counts more.
        self._bonus = self.run_bonus + self.late_bonus * view.turns / 20
        opts = view.options
        if view.round < opts.rounds:
            return
        mine, theirs = view.totals[view.seat], view.totals[1 - view.seat]
        # Losing this round: mine + 5 run against theirs + 50; more than that wins.
        need = (theirs + 50 - mine) // 5 + 1
        if need <= 1:
            return  # won whatever happens: nothing to secure
        if need > opts.tower:
            self._bonus = 0.0  # no run is enough: only finishing wins, and so does theirs
            if self._gift is not None:
                self._gift = self._gift * self.behind_block
            return
        self._need = need
        self._secured = bool(_runs(np.array([_my_tower(view)], dtype=np.int64))[0] >= need)

    def _placements(
        self, tower: list[int], brick: int, pool: Sequence[float]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Candidate towers and pools: ``brick`` into each slot in turn (the removed brick
        goes to the discard pile)."""
        slots = len(tower)
        row = np.array(tower, dtype=np.int64)
        towers = np.repeat(row[None, :], slots, axis=0)
        towers.ravel()[:: slots + 1] = brick  # the diagonal
        pools = np.repeat(np.array(pool, dtype=float)[None, :], slots, axis=0)
        pools[:, brick] = 0.0
        pools[np.arange(slots), row] = self._discard
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
        if self._gift is not None:
            v = v + self._gift[tower]  # the brick each slot gives up becomes the open brick
        if forbid is not None:
            v[forbid] = np.inf
        s = int(np.argmin(v))
        return s, float(v[s])

    def _draw_value(
        self,
        tower: list[int],
        know: Knowledge,
        total: float,
        should_stop: ShouldStop | None = None,
    ) -> float:
        """Expected value of drawing: each possible brick at its best slot, or passed.

        Anytime: the bricks are valued ``DRAW_CHUNK`` candidate towers at a time, and once
        ``should_stop()`` is True the bricks not yet valued count as passed (the tower as
        it stands), an underestimate of drawing: the bot then prefers a good take."""
        stay = self._value(tower, know.pool, total)
        bricks = [b for b, p in enumerate(know.draw_prob) if p > 0]
        if not bricks:
            return stay
        slots = len(tower)
        per_chunk = max(1, DRAW_CHUNK // slots)
        expected = 0.0
        for k in range(0, len(bricks), per_chunk):
            if should_stop is not None and should_stop():
                rest = sum(know.draw_prob[b] for b in bricks[k:])
                return expected + rest * stay
            chunk = bricks[k : k + per_chunk]
            parts = [self._placements(tower, b, know.pool) for b in chunk]
            towers = np.concatenate([t for t, _ in parts])
            pools = np.concatenate([p for _, p in parts])
            v = self._screened(towers, pools, total).reshape(len(chunk), slots)
            passed = np.full(len(chunk), stay)
            if self._gift is not None:
                v = v + self._gift[tower][None, :]
                passed = passed + self._gift[chunk]
            probs = np.array([know.draw_prob[b] for b in chunk])
            expected += float(np.dot(probs, np.minimum(v.min(axis=1), passed)))
        return expected


def _drawable(draw_prob: Sequence[float]) -> np.ndarray:
    """The bricks that may be drawn."""
    return np.array([b for b, p in enumerate(draw_prob) if p > 0], dtype=np.int64)


def _wait_value(w: np.ndarray, bs: np.ndarray, draw_prob: Sequence[float]) -> np.ndarray:
    """Per row of ``w`` (the value after each brick of ``bs`` is drawn and placed): the
    player passes, a turn each, until one of the bricks worth the most comes, as many of
    them as is best (the exact solver's Bellman step, ``wait_value`` in
    bench/exact_solitaire.py; ``draw_prob`` sums to 1); ``inf`` if no brick may come."""
    if not len(bs):
        return np.full(len(w), np.inf)
    order = np.argsort(w, axis=1)
    w = np.take_along_axis(w, order, axis=1)
    q = np.array([draw_prob[b] for b in bs])[order]
    out: np.ndarray = ((1.0 + np.cumsum(q * w, axis=1)) / np.cumsum(q, axis=1)).min(axis=1)
    return out


DRAW_CHUNK = 512
"""Candidate towers valued per step of ``_draw_value`` (between two ``should_stop`` calls);
at the default options (10 slots, up to 39 bricks to draw) one step holds them all."""


def _runs(towers: np.ndarray) -> np.ndarray:
    """The strictly decreasing run from the bottom of each row (rules §6)."""
    down = towers[:, 1:] < towers[:, :-1]
    runs: np.ndarray = 1 + np.cumprod(down, axis=1).sum(axis=1)
    return runs


class StrongV1StackoBot(StrongStackoBot):
    """The strong level as it was before the learned tower value (issue 19): kept fixed as
    the arena's reference, so progress is measured against the same opponent."""

    name = "strong-v1"
    gap_model = False
    gift_weight = 0.0
    play_the_score = False
