"""Playing one game in-process, and the duplicate deals that make both games of a deal alike."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from stacko.bots.base import checked_choice, observe_view, reset_bot
from stacko.bots.registry import UnknownBotError, make_bot

# -- games and their randomness -------------------------------------------------------------


class DuplicateRandom(random.Random):
    """A game RNG that deals the same way however the game went.

    A shuffle of a list of ``deal_size`` items (a Stacko deal: all the bricks) draws from
    the deal stream, anything else (a reshuffle of the discard pile) from this generator
    itself. Two games with the same seed thus get the same deal in every round, even when
    one of them reshuffled more often.
    """

    def __init__(self, seed: str, deal_size: int) -> None:
        super().__init__(f"{seed}:reshuffles")
        self.deal_stream = random.Random(f"{seed}:deals")
        self.deal_size = deal_size

    def shuffle(self, x: Any) -> None:
        if len(x) == self.deal_size:
            self.deal_stream.shuffle(x)
        else:
            super().shuffle(x)


def new_game(game: str, rng: random.Random, options: Any = None) -> Any:
    """A new game of ``game`` from the engine's registry (Stakko looked up lazily)."""
    from stacko.engine.games import GAMES

    spec = GAMES.get(game)
    if spec is not None:
        return spec.new_game(options, rng)
    if game == "stakko":
        from stacko.engine.stakko import Stakko

        return Stakko(options, rng=rng)
    raise UnknownBotError(f"no game {game!r} (known: {', '.join(sorted(GAMES))})")


def deal_size(game: str, options: Any = None) -> int:
    if game == "stacko":
        from stacko.engine.stacko import StackoOptions

        return (options or StackoOptions()).bricks
    return -1  # no deal to keep: a game without hidden cards uses the plain stream


@dataclass(frozen=True, slots=True)
class Entrant:
    """A bot in the arena: ``game:level`` and the label it is reported under."""

    game: str
    level: str

    @property
    def label(self) -> str:
        return self.level

    def make(self, rng: random.Random) -> Any:
        return make_bot(self.game, self.level, rng)


@dataclass(frozen=True, slots=True)
class GameRecord:
    """One finished game, seats as played (``seats[s]``: index of the entrant in seat s)."""

    pair: int
    deal: int
    swapped: bool
    seats: tuple[int, int]
    winner: int | None
    """Winning seat, ``None`` for a draw."""
    scores: tuple[int, int]
    finishers: tuple[int | None, ...]
    """Per round: the seat that finished its tower, ``None`` when the turn cap ended it."""
    plies: int
    round_turns: tuple[int, ...] = ()
    """Per round: the turns played in it by both players together (in-process games only;
    empty for live ones)."""


MAX_PLIES = 100_000
"""A safety net only: Stacko's turn cap ends every round long before."""


def play_game(
    game: str,
    entrants: tuple[Entrant, Entrant],
    seed: str,
    options: Any = None,
    round_turns: list[int] | None = None,
) -> tuple[Any, int]:
    """Play one game in-process; returns the final state and the number of plies.

    Each bot sees only its seat's views: ``choose`` on its turn, ``observe`` for every other
    position (what the SDK will feed it from state frames). ``round_turns``, if given, gets
    the number of turns (both players) of each round as it ends (games with ``turns``).
    """
    rng = DuplicateRandom(seed, deal_size(game, options))
    state = new_game(game, rng, options)
    bots = [
        e.make(random.Random(f"{seed}:bot:{seat}:{e.level}")) for seat, e in enumerate(entrants)
    ]
    for bot in bots:
        reset_bot(bot)
    plies = 0
    while state.outcome() is None:
        seat = state.to_move
        other = 1 - seat
        observe_view(bots[other], state.view(other))
        move = checked_choice(bots[seat], state.view(seat), state.legal_moves())
        turns, rnd = getattr(state, "turns", 0), getattr(state, "round", 0)
        state.apply(move, seat)
        if round_turns is not None and (
            getattr(state, "round", 0) != rnd or state.outcome() is not None
        ):
            round_turns.append(turns + 1)  # a round ends with the turn that ends it
        plies += 1
        if plies > MAX_PLIES:
            raise RuntimeError(f"game {seed} did not end after {MAX_PLIES} plies")
    for seat, bot in enumerate(bots):
        observe_view(bot, state.view(seat))
    return state, plies


def _record(
    state: Any,
    pair: int,
    deal: int,
    swapped: bool,
    seats: tuple[int, int],
    plies: int,
    round_turns: Sequence[int] = (),
) -> GameRecord:
    outcome = state.outcome()
    rec = _make_record(outcome, getattr(state, "results", ()), pair, deal, swapped, seats, plies)
    return replace(rec, round_turns=tuple(round_turns))


def _make_record(
    outcome: Any,
    results: Sequence[Any],
    pair: int,
    deal: int,
    swapped: bool,
    seats: tuple[int, int],
    plies: int,
) -> GameRecord:
    return GameRecord(
        pair=pair,
        deal=deal,
        swapped=swapped,
        seats=seats,
        winner=outcome.winner,
        scores=tuple(outcome.scores),
        finishers=tuple(r.finisher for r in results),
        plies=plies,
    )


class GameRunner(Protocol):
    """Plays the two games of one duplicate deal (``InProcessRunner``; ``LiveRunner`` is
    its asynchronous twin, playing through a server)."""

    def play_deal(self, task: DealTask) -> list[GameRecord]: ...


@dataclass(frozen=True, slots=True)
class DealTask:
    game: str
    entrants: tuple[Entrant, ...]
    pair: int
    i: int
    j: int
    deal: int
    seed: int


class InProcessRunner:
    """Runs both games of a deal on the engine in this process."""

    def play_deal(self, task: DealTask) -> list[GameRecord]:
        out = []
        a, b = task.entrants[task.i], task.entrants[task.j]
        for swapped in (False, True):
            seats = (task.j, task.i) if swapped else (task.i, task.j)
            pair = (b, a) if swapped else (a, b)
            seed = f"{task.seed}:{task.deal}"  # the same deal for both games, and every pair
            turns: list[int] = []
            state, plies = play_game(task.game, pair, seed, round_turns=turns)
            out.append(_record(state, task.pair, task.deal, swapped, seats, plies, turns))
        return out


def _run_deal(task: DealTask) -> list[GameRecord]:
    return InProcessRunner().play_deal(task)
