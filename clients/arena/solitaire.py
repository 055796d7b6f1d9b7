"""Solitaire: how many turns a bot needs to finish one Stacko tower alone."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stacko.bots.base import checked_choice, reset_bot
from stacko.clients.arena.play import DuplicateRandom, Entrant
from stacko.clients.arena.workers import parallel_map

# -- solitaire ----------------------------------------------------------------------------------


SOLITAIRE_DEALS = ("normal", "one-tower")


def solitaire_turns(bot: Any, seed: str, cap: int = 500, deal: str = "normal") -> int:
    """Turns ``bot`` needs to finish one Stacko tower alone; ``cap`` if it never does.

    The bot plays seat 0 and after each of its turns the turn comes straight back to it
    (the opponent never acts, so the open brick is always the bot's own last discard). A
    turn is a take, or a draw with its place or pass. No turn cap. 40 bricks, 10 slots.

    ``deal="normal"``: a normal one-round deal, so 10 of the 40 bricks sit in the absent
    opponent's tower, out of play, and 20 cycle through the stack and the discard pile.
    ``deal="one-tower"``: only the bot's tower is dealt and the other 30 bricks cycle; the
    opponent's slots show as hidden and empty, and its 10 bricks are shuffled into the stack.

    Not the measure of the published TD-learned Rack-O player's "8.88 moves per game": that
    is the length of a two-player race in self-play (turns per player until someone
    finishes), which the arena reports per pair as ``PairStats.turns_per_player``.
    """
    from stacko.engine.stacko import Phase, Stacko, StackoOptions

    if deal not in SOLITAIRE_DEALS:
        raise ValueError(f"deal must be one of {SOLITAIRE_DEALS}, not {deal!r}")
    rng = DuplicateRandom(seed, 40)
    state = Stacko(StackoOptions(rounds=1, turn_cap=None), rng=rng)
    if deal == "one-tower":
        # No second tower: its bricks join the stack (shuffled in), and its slots hold no
        # brick. They are never shown to seat 0 (hidden slots) and never played.
        state.stack.extend(state.towers[1])
        rng.shuffle(state.stack)
        state.towers[1] = [0] * len(state.towers[1])
    reset_bot(bot)
    turns = 0
    while state.outcome() is None and turns < cap:
        if state.to_move != 0:
            # The engine has no "skip a turn": hand the turn straight back to seat 0.
            state._to_move = 0
        view = state.view(0)
        state.apply(checked_choice(bot, view, view.legal_moves()), 0)
        if state.phase is not Phase.DRAWN:
            turns += 1
    return turns


@dataclass(frozen=True, slots=True)
class SolitaireTask:
    entrant: Entrant
    index: int
    seed: int
    deal: str = "normal"


def _run_solitaire(task: SolitaireTask) -> tuple[str, int]:
    rng = random.Random(f"{task.seed}:solitaire-bot:{task.index}:{task.entrant.level}")
    bot = task.entrant.make(rng)
    seed = f"{task.seed}:solitaire:{task.index}"
    return task.entrant.label, solitaire_turns(bot, seed, deal=task.deal)


def run_solitaire(
    entrants: Sequence[Entrant],
    towers: int,
    seed: int,
    workers: int = 1,
    progress: bool = False,
    deadline: float | None = None,
    deal: str = "normal",
) -> dict[str, list[int]]:
    """``solitaire_turns`` for ``towers`` deals per bot (the same deals for every bot),
    by label; fewer if ``deadline`` (a ``time.monotonic()`` value) passes first."""
    tasks = [SolitaireTask(e, k, seed, deal) for e in entrants for k in range(towers)]
    out: dict[str, list[int]] = {e.label: [] for e in entrants}
    for label, turns in parallel_map(
        _run_solitaire, tasks, workers, "solitaire", progress, deadline
    ):
        out[label].append(turns)
    return out
