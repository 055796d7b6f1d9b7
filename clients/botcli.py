"""``stacko-bot``: run a built-in bot against a live server, through the bot SDK.

    stacko-bot --quick-match --games 10                    # the strong Stacko bot, 10 games
    stacko-bot ws://HOST:PORT --game stakko --level search --create --private
    stacko-bot --join K7QJ2MXP --level medium --seed 7
    stacko-bot --create --bot easy --games 5               # against the server's easy bot

Any level of ``clients.bots.registry`` plays (``--help`` lists them); ``clients.sdk`` does the
protocol. One line per finished game, then a summary; ``--help`` says the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import TextIO

from stacko.clients.bots.registry import available
from stacko.clients.cli import parse_option
from stacko.clients.client import Disconnected, ServerError
from stacko.clients.sdk import BotError, BotRunner, BuiltinBot, ConnectionLost, GameResult

DEFAULT_URL = "ws://127.0.0.1:8765"
DEFAULT_LEVEL = {"stacko": "strong", "stakko": "search"}
"""The level played without ``--level``: each game's strongest quick one."""


def _epilog() -> str:
    bots = available()
    levels = "\n".join(f"  {game:8} {', '.join(names)}" for game, names in bots.items())
    return f"""\
bot levels (--level), by game:
{levels}

modes:
  --quick-match   the server pairs the bot with the next player waiting for --game; with
                  --games N it queues again after each game
  --create        creates a room (options from --option, --private to keep it out of the
                  room list) and prints "room: CODE"; someone joins with --join CODE
  --join CODE     takes the free seat of room CODE
  --create --bot LEVEL
                  creates a room where the server's built-in bot of LEVEL takes the other
                  seat: the game starts at once (the same levels as above)
  With --create or --join, --games N plays rematches in the same room (seats swap).

output: one line per finished game, e.g.
  game 1: won 50:5 (completed) as seat 0, stacko room K7QJ2MXP, 31 plies
then a summary, e.g. "strong: 6 won, 3 lost, 1 drawn of 10 games".

--seed makes the bot's own choices repeatable (the server still deals at random).
A dropped connection is resumed with the session token; a slow decision is replaced by a
safe legal move shortly before the server's clock runs out.

exit status: 0 all games played; 1 fewer games than --games (the opponent left or refused
a rematch); 2 usage errors, a connection that could not be opened or was lost for good, or
a refused request (e.g. an unknown room code), or a failure of the bot itself.
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stacko-bot",
        description="Run one of the built-in bots on a stacko server: it creates a room,\n"
        "joins one by its code, or takes quick matches, and plays --games games.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("url", nargs="?", default=DEFAULT_URL, help=f"server (default {DEFAULT_URL})")
    p.add_argument(
        "--game", default="stacko", choices=sorted(available()), help="game (default stacko)"
    )
    p.add_argument(
        "--level",
        help="bot level (default: "
        + ", ".join(f"{level} for {game}" for game, level in DEFAULT_LEVEL.items())
        + "); the list is below",
    )
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--quick-match", action="store_true", help="let the server find opponents")
    mode.add_argument("--create", action="store_true", help="create a room and print its code")
    mode.add_argument("--join", metavar="CODE", help="join the room with this code")
    p.add_argument("--games", type=int, default=1, metavar="N", help="games to play (default 1)")
    p.add_argument("--seed", type=int, metavar="N", help="seed of the bot's random choices")
    p.add_argument("--name", help="the bot's name in the room (default: LEVEL-bot)")
    p.add_argument(
        "--option", action="append", type=parse_option, default=[], metavar="KEY=VALUE",
        help="with --create: a room option, e.g. rounds=1, clock_ms=30000 (repeat for more)",
    )  # fmt: skip
    p.add_argument("--private", action="store_true", help="with --create: not in list_rooms")
    p.add_argument(
        "--bot", metavar="LEVEL",
        help="with --create: the server's built-in bot of this level is the opponent",
    )  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="print only the room code and the summary")
    return p


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    levels = available().get(args.game, [])
    if args.level is None:
        default = DEFAULT_LEVEL.get(args.game)
        args.level = default if default in levels or not levels else levels[-1]
    if args.level not in levels:
        parser.error(f"--level {args.level} is not a {args.game} bot (levels: {', '.join(levels)})")
    if (args.option or args.private or args.bot) and not args.create:
        parser.error("--option, --private and --bot go with --create")
    if args.bot is not None and args.bot not in levels:
        parser.error(f"--bot {args.bot} is not a {args.game} bot (levels: {', '.join(levels)})")
    if args.games < 1:
        parser.error("--games must be at least 1")
    if args.name is None:
        args.name = f"{args.level}-bot"
    if not 1 <= len(args.name) <= 32:
        parser.error("--name must be 1 to 32 characters")
    return args


def summary(level: str, results: Sequence[GameResult]) -> str:
    """``"strong: 6 won, 3 lost, 1 drawn of 10 games"``."""
    won = sum(r.outcome == "won" for r in results)
    lost = sum(r.outcome == "lost" for r in results)
    drawn = len(results) - won - lost
    return f"{level}: {won} won, {lost} lost, {drawn} drawn of {len(results)} games"


async def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """One ``stacko-bot`` run with parsed arguments; returns the exit status."""
    stream = out or sys.stdout

    def say(text: str) -> None:
        stream.write(text + "\n")
        stream.flush()

    done = 0

    def on_result(result: GameResult) -> None:
        nonlocal done
        done += 1
        if not args.quiet:
            say(f"game {done}: {result}")

    bot = BuiltinBot(args.game, args.level, seed=args.seed)
    runner = BotRunner(
        bot, args.url, name=args.name, on_result=on_result,
        on_status=None if args.quiet else say,
    )  # fmt: skip
    try:
        welcome = await runner.connect()
    except Exception as exc:  # refused, unreachable, not a WebSocket server, a bad URL ...
        say(f"error: cannot connect to {args.url}: {exc}")
        return 2
    if not args.quiet:
        say(f"connected to {welcome['server']} as {welcome['name']} ({bot.name})")
    try:
        if args.join:
            results = await runner.join(args.join, games=args.games)
        elif args.create:
            results = await runner.create(
                args.game, options=dict(args.option), public=not args.private,
                games=args.games, on_room=lambda code: say(f"room: {code}"), bot=args.bot,
            )  # fmt: skip
        else:
            results = await runner.quick_match(args.game, games=args.games)
    except ServerError as exc:
        say(f"error: {exc.message} ({exc.code})")
        return 2
    except (ConnectionLost, Disconnected, TimeoutError, OSError) as exc:
        say(f"error: {exc or type(exc).__name__}")
        return 2
    except BotError as exc:
        say(f"error: {exc}")
        return 2
    finally:
        await runner.close()
    say(summary(args.level, results))
    return 0 if len(results) == args.games else 1


async def amain(argv: Sequence[str], out: TextIO | None = None) -> int:
    """``main`` for a running event loop (tests, embedding)."""
    return await run(parse_args(argv), out)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``stacko-bot`` command."""
    args = parse_args(argv)
    try:
        return asyncio.run(run(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
