"""The command line: ``stacko-arena`` and ``python -m clients.arena``."""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from pathlib import Path

from stacko.bots.registry import UnknownBotError, levels, parse_spec
from stacko.clients.arena.live import LOCAL
from stacko.clients.arena.play import Entrant
from stacko.clients.arena.ratings import ratings
from stacko.clients.arena.report import report, write_outputs
from stacko.clients.arena.schedule import run_arena

# -- command line -----------------------------------------------------------------------------


DESCRIPTION = """\
Play bots against each other and rate them: a match (two bots) or a round robin (more).

Duplicate deals: each deal is played twice with the seats swapped, both games getting the
same bricks in every round, so luck of the deal cancels out. The report gives per pair
wins/draws/losses, the score rate with a 95% interval, rounds finished by each side and the
first-mover split; per bot a Bradley-Terry rating (Elo scale, via choix) with a 95% bootstrap
interval and, for Stacko, the turns it needs to finish a tower alone (solitaire). It is
printed and written to --out as report.txt, results.json and ratings.png.

Deterministic: the same --seed (and bots, --deals, --solitaire) gives the same games and
figures, whatever --workers (and with --server local whatever --parallel); a different seed
gives other deals. Only the timings differ from run to run. A progress bar runs on
stderr while it plays (--no-progress to hide it); --time-limit bounds a run (exit status 1
and the report marked INCOMPLETE if it stopped early)."""

EPILOG = """\
live mode (--server):
  The same games played through a WebSocket server, each bot on its own connection, seeing
  only what its state frames carry (converted back to engine views).
  --server local   starts a server in this process on 127.0.0.1 (a free port, rate limit
                   lifted) that deals the arena's duplicate deals: the results equal the
                   in-process ones for the same seed.
  --server URL     plays on a running server (e.g. ws://127.0.0.1:8765/) in private rooms,
                   at that server's rate limit. It deals with its own RNG: the two games of
                   a deal are NOT dealt alike and a rerun gives other results; this checks
                   that the bots play over the wire, reported the same way.
  No solitaire in live mode (the absent opponent has no wire form).

examples:
  stacko-arena --deals 2000 --solitaire 500 --seed 1 --out artifacts/arena
  stacko-arena --bots easy,medium --deals 200
  stacko-arena --game stakko --deals 50
  stacko-arena --server local --deals 20
  stacko-arena --server ws://127.0.0.1:8765/ --bots medium,strong --deals 5 --parallel 2

exit status: 0 done, 1 incomplete (time limit, failed live games), 2 bad arguments."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stacko-arena",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--game", default="stacko", help="game of the bots (default: stacko)")
    p.add_argument(
        "--bots",
        default=None,
        help="comma-separated levels or GAME:LEVEL specs (default: every level of"
        " --game); two bots make a match, more a round robin",
    )
    p.add_argument(
        "--bot",
        action="append",
        default=[],
        metavar="MODULE:NAME",
        help="your own bot, beside the built-in levels (repeat for more): a class or factory"
        " taking a random.Random and returning a bot with choose(view, legal), like the"
        " classes of stacko.bots; MODULE is imported from the current directory too",
    )
    p.add_argument(
        "--deals",
        type=int,
        default=100,
        help="duplicate deals per pair; each is 2 games (default: 100)",
    )
    p.add_argument("--seed", type=int, default=1, help="base seed (default: 1)")
    p.add_argument(
        "--solitaire",
        type=int,
        default=None,
        help="towers per bot for the solitaire turns (Stacko, in-process only; 0: skip;"
        " default 200, and 0 with --server)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        choices=(1, 2),
        help="processes to play in (at most 2; default 1; in-process only)",
    )
    p.add_argument(
        "--bootstrap",
        type=int,
        default=200,
        help="bootstrap samples for the rating intervals (default: 200)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop scheduling games after this long (report marked incomplete)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("artifacts/arena"),
        help="directory for report.txt, results.json, ratings.png (default: artifacts/arena)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--server",
        metavar="URL|local",
        default=None,
        help="play through a WebSocket server: a ws:// URL, or 'local' for one started in"
        " this process (see live mode below)",
    )
    p.add_argument(
        "--parallel",
        type=int,
        default=1,
        metavar="N",
        help="live mode: deals played at once, 2 games and 4 connections each (default: 1)",
    )
    p.add_argument(
        "--game-timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="live mode: a game taking longer fails (default: 600)",
    )
    return p


ARENA_EXTRA = ("choix", "matplotlib", "tqdm")
"""What the ratings, the chart and the progress bar need: ``pip install 'stacko[arena]'``."""


def missing_extra() -> list[str]:
    import importlib.util

    return [m for m in ARENA_EXTRA if importlib.util.find_spec(m) is None]


def load_bot(spec: str, game: str) -> str:
    """``--bot MODULE:NAME``: import the bot, register it as level NAME of ``game`` (so the
    arena's workers and live runners make it like any level); returns the level."""
    import importlib

    from stacko.bots.registry import register

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr.isidentifier():
        raise ValueError(f"--bot {spec!r}: expected MODULE:NAME (a class or factory in MODULE)")
    if "" not in sys.path:
        sys.path.insert(0, "")  # the author's module, in the directory the arena runs from
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--bot {spec}: cannot load it: {exc}") from None
    if attr in levels(game):
        raise ValueError(f"--bot {spec}: {attr} is the name of a built-in {game} bot")
    register(game, attr, factory)
    return attr


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    missing = missing_extra()
    if missing:
        print(
            f"arena: needs {', '.join(missing)}; install the arena extra: "
            "python3 -m pip install 'stacko[arena]' (or '.[arena]' in a checkout)",
            file=sys.stderr,
        )
        return 2
    live = args.server is not None
    solitaire = args.solitaire if args.solitaire is not None else (0 if live else 200)
    if args.deals < 0 or solitaire < 0 or args.bootstrap < 0:
        print("arena: --deals, --solitaire and --bootstrap must be >= 0", file=sys.stderr)
        return 2
    if live and solitaire:
        print("arena: no solitaire in live mode (--solitaire 0 or no --server)", file=sys.stderr)
        return 2
    if live and args.server != LOCAL and not args.server.startswith(("ws://", "wss://")):
        print(f"arena: --server wants ws://HOST:PORT/ or 'local', not {args.server!r}",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.parallel < 1 or args.game_timeout <= 0:
        print("arena: --parallel must be >= 1 and --game-timeout > 0", file=sys.stderr)
        return 2
    try:
        specs = args.bots.split(",") if args.bots else levels(args.game)
        specs += [f"{args.game}:{load_bot(spec, args.game)}" for spec in args.bot]
        entrants = [Entrant(*parse_spec(s, args.game)) for s in specs if s.strip()]
        for e in entrants:
            e.make(random.Random(0))  # fail early on an unknown bot
        if len(entrants) < 2:
            raise ValueError("need at least two bots")
    except (ValueError, UnknownBotError) as exc:
        print(f"arena: {exc}", file=sys.stderr)
        return 2
    try:
        result = run_arena(
            entrants,
            args.deals,
            args.seed,
            solitaire=solitaire,
            workers=args.workers,
            progress=not args.no_progress,
            time_limit=args.time_limit,
            server=args.server,
            parallel=args.parallel,
            game_timeout=args.game_timeout,
        )
    except OSError as exc:  # the server cannot be reached at all
        print(f"arena: cannot play on {args.server}: {exc}", file=sys.stderr)
        return 1
    rated = ratings(result, args.bootstrap)
    text = report(result, rated)
    print(text)
    write_outputs(result, rated, text, args.out)
    print(f"\nwrote {args.out / 'report.txt'}, results.json" + (", ratings.png" if rated else ""))
    return 0 if result.complete else 1
