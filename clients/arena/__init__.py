"""The arena: bots play each other, in-process on the engine or through a server, and get rated.

Library and CLI (``python -m clients.arena --help``; ``main(argv)`` is the console script
``stacko-arena``). One module per part: ``play`` (a game, duplicate deals), ``live``
(through a server), ``solitaire``, ``workers`` (processes, progress, time limit),
``schedule`` (round robins into an ``ArenaResult``), ``stats``, ``ratings``, ``report``,
``plot`` and ``cli``; this package re-exports what callers use.

- **Duplicate deals.** Each seeded deal is played twice with the seats swapped. The game's
  RNG is a ``DuplicateRandom``: every full deal (a shuffle of all the bricks) comes from a
  stream of its own, so both games of a pair get the same towers and draw stack in every
  round, whatever happened before; reshuffles come from a second stream.
- **Reports.** Per pair: wins/draws/losses, the score rate with a 95% interval (over deals,
  each deal's two games together), rounds finished by each side, and how seat 0 fared
  against seat 1 (seat 0 starts round 1, seat 1 round 2), and the race length: turns per
  player in a finished round (the measure of the published Rack-O player's 8.88). Per bot:
  solitaire turns to finish a tower (``solitaire_turns``; Stacko only; not comparable with
  the 8.88) and a Bradley-Terry rating with a 95% bootstrap interval (fitted with
  ``choix``), as a text table and a PNG.
- **Deterministic** for a given ``--seed``: each game's RNG and each bot's RNG are seeded
  from the seed, the pair and the deal, so the worker count does not change the results.
- **Live** (``--server``, ``run_live_arena``): the same games through a WebSocket server,
  each bot on its own ``StackoClient`` connection, fed the state frames' views converted
  back to engine views (``clients.wire_views``). On the arena's own in-process server
  (``--server local``) the deals are still the duplicate deals (``LocalDealer``) and the
  results equal the in-process ones; a server at a URL deals with its own RNG, so there the
  two games of a deal differ and runs do not repeat (the report says so).
"""

from stacko.clients.arena.cli import ARENA_EXTRA, build_parser, main, missing_extra
from stacko.clients.arena.live import LOCAL, LiveError, LiveRunner, LocalDealer
from stacko.clients.arena.play import (
    DealTask,
    DuplicateRandom,
    Entrant,
    GameRecord,
    InProcessRunner,
    deal_size,
    new_game,
    play_game,
)
from stacko.clients.arena.plot import plot
from stacko.clients.arena.ratings import ELO_PER_NAT, Rating, ratings
from stacko.clients.arena.report import report, write_outputs
from stacko.clients.arena.schedule import ArenaResult, run_arena, run_live_arena
from stacko.clients.arena.solitaire import SOLITAIRE_DEALS, run_solitaire, solitaire_turns
from stacko.clients.arena.stats import PairStats, mean_ci, pair_stats

__all__ = [
    "ARENA_EXTRA",
    "ELO_PER_NAT",
    "LOCAL",
    "SOLITAIRE_DEALS",
    "ArenaResult",
    "DealTask",
    "DuplicateRandom",
    "Entrant",
    "GameRecord",
    "InProcessRunner",
    "LiveError",
    "LiveRunner",
    "LocalDealer",
    "PairStats",
    "Rating",
    "build_parser",
    "deal_size",
    "main",
    "mean_ci",
    "missing_extra",
    "new_game",
    "pair_stats",
    "play_game",
    "plot",
    "ratings",
    "report",
    "run_arena",
    "run_live_arena",
    "run_solitaire",
    "solitaire_turns",
    "write_outputs",
]
