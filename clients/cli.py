"""``stacko-client``: play Stacko or Stakko from a terminal, watch a room, play a built-in bot,
or let it play random moves.

    stacko-client --create                      # prints the room code for the other terminal
    stacko-client --join K7QJ2MXP                 # the other terminal (either game)
    stacko-client --create --game stakko --option variant=gray
    stacko-client --create --game stakko --bot search   # against a built-in bot
    stacko-client ws://HOST:PORT --quick-match --auto   # random legal moves, unattended
    stacko-client --replay GAME_ID              # a finished game, move by move
    stacko-client --register Ann                # an account: prints its token, once
    stacko-client --account TOKEN --challenge strongbot9 --rated   # a rated game with a bot
    stacko-client --account TOKEN --wait-challenges               # online, answer challenges

Built on ``clients.client`` (the wire) and ``clients.render`` (the board); ``--help`` says it all.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from stacko.clients.client import (
    Disconnected,
    Frame,
    ServerError,
    StackoClient,
    register,
    websocket_url,
)
from stacko.clients.render import (
    describe_result,
    describe_stakko_moves,
    player_name,
    render_state,
    render_view,
    stack_owner,
)

DEFAULT_URL = "ws://127.0.0.1:8765"
ROOM_CODE = re.compile(r"[A-Za-z0-9]{4,12}")
"""What a room code looks like (PROTOCOL.md): the server's are 6 letters and digits."""
RECONNECT_CODES = (None, 1006, 1011, 1012, 1013)
"""Close codes after which the client resumes its session on a new connection: no close frame
(a dropped connection, 1006), an internal error, a restart (1012), try again later (1013).
1001 (the server is shutting down for good) and 1000 end the run."""
RATING_WAIT_S = 2.0
"""How long a finished client signed in with an account waits for the ``rating`` frame that
follows a rated game's final state (an unrated game sends none: it waits this long)."""

GAMES = ("stacko", "stakko")
"""The games this client can draw and play (``list_games`` says what a server hosts)."""

STACKO_COMMANDS = """\
Stacko commands:
  t SLOT | take SLOT    take the open brick into SLOT (0 = bottom)
  d | draw              draw the top brick of the stack (only you see it)
  p SLOT | place SLOT   put the drawn brick into SLOT
  pass                  put the drawn brick on the discard pile"""

STAKKO_COMMANDS = """\
Stakko commands:
  m STACK COUNT | STACKxCOUNT
                        lift COUNT discs off the top of your stack STACK (e.g. m 2 3 or 2x3:
                        3 discs off stack 2; stacks count from 0 at White's end); they go as
                        many stacks toward the opponent as you own; "your moves" lists them"""

COMMON_COMMANDS = """\
  r | resign            give the game up (you lose it)
  rematch               ask for another game once this one is over
  b | board             draw the board again
  h | help              this list
  q | quit              leave (a game in progress is lost) and exit"""


def commands_text(game: str | None) -> str:
    """The keyboard commands of ``game`` (of both games while the game is not known yet)."""
    moves = {"stacko": [STACKO_COMMANDS], "stakko": [STAKKO_COMMANDS]}.get(
        game or "", [STACKO_COMMANDS, STAKKO_COMMANDS]
    )
    return "\n".join([*moves, "commands of both games:", COMMON_COMMANDS])


COMMANDS = commands_text(None)

HINTS = {
    "not_your_turn": "wait for the opponent's move",
    "wrong_phase": "take or draw first; after a draw, place or pass",
    "bad_slot": "slots count from 0 at the bottom",
    "stale_ply": "the game moved on; here is the current position",
    "game_over": "the game is over: type rematch or q",
    "not_started": "wait for the second player",
    "not_a_player": "spectators cannot play",
    "no_such_stack": "lift off a stack with your colour on top (b draws the board)",
    "overshoot": "that stack would go past the opponent's end; move another one",
    "bad_count": "lift at least 1 disc, and no gray or red base unless the variant allows it",
}

EPILOG = f"""\
{COMMANDS}

--game stakko plays Stakko (docs/rules-stakko.md) instead of Stacko when creating a room or
asking for a quick match; its room options go with --option, e.g. --option variant=gray
(basic, gray or red) and --option ply_cap=100. --join plays whichever game the room has.

--bot LEVEL (with --create) seats a built-in bot as the opponent and starts at once; the
levels are those the server lists (stacko: easy, medium, strong; stakko: random, search).

--auto plays random legal moves (the state frames' "legal" list, seeded by --seed) in either
game; two auto clients against one server play a whole game and each prints "result: ..." as
its last line, e.g. "result: you won 65:60 (completed)". It moves as fast as the server lets
it: the client keeps under the rate limit the server announces in its welcome (20 frames a
second by default; more are refused), so a Stacko game of about 100 plies takes a few seconds.
--auto-delay SECONDS waits that long before each move, to watch a game at a human pace.

URL is the server as ws://HOST:PORT or as the address a browser opens (http://HOST:PORT/ is
ws://HOST:PORT/, https:// is wss://). A connection that drops, or a server that restarts
(close 1012), is resumed by itself: the client reconnects with a growing pause and its session
token, and the game goes on where it was (within the server's reconnect grace, 60 s by
default).

--replay GAME_ID prints a finished game from the server's records move by move: the board
after each step with everything shown, and the result (--auto-delay pauses between steps).
At the end of every game the client prints its id as the --replay command to see it again,
and the address of its page for a browser (a server run with --database memory keeps no
records: no id then).

exit status: 0 done (the games were played, or you quit); 1 the games asked for could not be
played (the opponent left before a rematch); 2 a refused --create, --join or --quick-match
(e.g. an unknown --bot level or room code), a refused move in --auto mode, a fatal error frame,
a connection that could not be opened or closed unexpectedly, or bad arguments.
"""


@dataclass(frozen=True)
class Command:
    """A parsed line of keyboard input; ``move`` is a wire move for ``kind == "move"``."""

    kind: str
    move: dict[str, Any] | None = None


_STACKO_WORDS = {
    "t": "take", "take": "take", "d": "draw", "draw": "draw", "p": "place", "place": "place",
    "pass": "pass",
}  # fmt: skip
_COMMON_WORDS = {
    "r": "resign", "resign": "resign", "q": "quit", "quit": "quit", "exit": "quit",
    "h": "help", "help": "help", "?": "help", "b": "board", "board": "board",
    "rematch": "rematch",
}  # fmt: skip
_STAKKO_MOVE = re.compile(r"(?:(?:m|move)\s+)?(\d+)\s*(?:x|\s)\s*(\d+)", re.IGNORECASE)
"""``m 2 3``, ``move 2 3``, ``2x3``, ``m 2x3``, ``2 x 3``, ``2 3``: stack 2, count 3."""


def parse_command(line: str, game: str | None = "stacko") -> Command:
    """A line of keyboard input in ``game``: Stacko ``"t 3"`` -> a take into slot 3, ``"d"`` ->
    draw, ...; Stakko ``"m 2 3"`` or ``"2x3"`` -> lift 3 discs off stack 2 (``game`` None, not
    known yet: either). ValueError says what is wrong."""
    words = line.split()
    if not words:
        raise ValueError("type a command (h for help)")
    first = words[0].lower()
    stakko_move = _STAKKO_MOVE.fullmatch(line.strip())
    if game == "stacko":
        if stakko_move or first in ("m", "move"):
            raise ValueError("that is a Stakko move; this game is Stacko (h for help)")
    elif stakko_move:
        return Command("move", {"stack": int(stakko_move[1]), "count": int(stakko_move[2])})
    elif first in ("m", "move") or first[:1].isdigit():
        raise ValueError("a Stakko move is m STACK COUNT or STACKxCOUNT, e.g. m 2 3 or 2x3")
    elif game == "stakko" and first in _STACKO_WORDS:
        raise ValueError(
            f"{words[0]!r} is a Stacko command; in Stakko type m STACK COUNT or STACKxCOUNT"
            " (h for help)"
        )
    kind = _COMMON_WORDS.get(first) or _STACKO_WORDS.get(first)
    if kind is None:
        raise ValueError(f"unknown command {words[0]!r} (h for help)")
    if kind in ("take", "place"):
        if len(words) != 2 or not words[1].isdigit():
            raise ValueError(f"{kind} needs a slot number, e.g. {kind[0]} 3")
        return Command("move", {"action": kind, "slot": int(words[1])})
    if len(words) > 1:
        raise ValueError(f"{kind} takes no argument")
    if kind in ("draw", "pass"):
        return Command("move", {"action": kind})
    return Command(kind)


def stakko_refusal(frame: Frame | None, move: dict[str, Any]) -> tuple[str, str] | None:
    """Why a Stakko ``move`` is not in the ``legal`` list of the last ``state`` frame, as
    (the server's error code, a message); None when it is legal."""
    if frame is None:
        return "not_started", "the game has not started yet"
    view, legal = frame["view"], frame["legal"]
    if view["outcome"] is not None:
        return "game_over", "the game is over"
    seat = view["seat"]
    if seat is None:
        return "not_a_player", "spectators cannot play"
    if legal is None:
        return "not_your_turn", "it is the opponent's turn"
    i, k = move["stack"], move["count"]
    if any(m["stack"] == i and m["count"] == k for m in legal):
        return None
    line = view["line"]
    if i >= len(line):
        return "no_such_stack", f"there is no stack {i}: the line has stacks 0 to {len(line) - 1}"
    if stack_owner(line[i]) != seat:
        return "no_such_stack", f"stack {i} is not yours: its top disc is {line[i][-1]}"
    counts = [m["count"] for m in legal if m["stack"] == i]
    if not counts:
        n = view["owned"][seat]
        end = len(line) - 1 if seat == 0 else 0
        return "overshoot", f"stack {i} cannot move: going {n} would pass stack {end}, the end"
    most = max(counts)
    stack = line[i]
    why = ""
    if most < len(stack):
        why = f"; the {stack[-most - 1]} disc below may not be lifted in the {view['variant']} game"
    return "bad_count", f"you may lift 1 to {most} discs off stack {i}, not {k}{why}"


def parse_option(text: str) -> tuple[str, int | bool | str | None]:
    """``--option key=value``: integers, true/false and null become JSON values."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, not {text!r}")
    value: int | bool | str | None = raw
    low = raw.lower()
    if low in ("null", "none"):
        value = None
    elif low in ("true", "false"):
        value = low == "true"
    elif raw.lstrip("-").isdigit():
        value = int(raw)
    return key, value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stacko-client",
        description="Play Stacko or Stakko on a stacko server: create a room (maybe against a "
        "built-in bot), join one by its code, or let the server pair you; read moves from the "
        "keyboard or play random ones.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("url", nargs="?", default=DEFAULT_URL, help=f"server (default {DEFAULT_URL})")
    p.add_argument("--name", default="player", help="your name in the room (default: player)")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--create", action="store_true", help="create a room and print its code")
    mode.add_argument("--join", metavar="CODE", help="join the room with this code")
    mode.add_argument("--quick-match", action="store_true", help="let the server find an opponent")
    mode.add_argument(
        "--replay", metavar="GAME_ID", help="print a finished game move by move and exit"
    )
    mode.add_argument("--register", metavar="NAME", help="register an account; print its token")
    mode.add_argument(
        "--challenge", metavar="NAME", help="challenge the account NAME (online) to a game"
    )
    mode.add_argument(
        "--wait-challenges", action="store_true",
        help="stay online and answer challenges (y accepts, n declines; --auto accepts)",
    )  # fmt: skip
    p.add_argument(
        "--account", metavar="TOKEN", default=os.environ.get("STACKO_ACCOUNT"),
        help="sign in as this account (default: $STACKO_ACCOUNT): rated games, challenges",
    )  # fmt: skip
    p.add_argument(
        "--rated", action="store_true",
        help="with --create or --challenge: rate the game (both players need an account)",
    )  # fmt: skip
    p.add_argument(
        "--game", choices=GAMES,
        help="with --create or --quick-match: the game, stacko (default) or stakko; "
        "--join plays the room's game",
    )  # fmt: skip
    p.add_argument("--private", action="store_true", help="with --create: not in list_rooms")
    p.add_argument(
        "--option", action="append", type=parse_option, default=[], metavar="KEY=VALUE",
        help="with --create: a room option (repeat for more), e.g. rounds=1 or clock_ms=30000; "
        "keys and defaults: Stacko bricks=40 tower=10 rounds=2 turn_cap=200 clock_ms=null, "
        "Stakko variant=basic (gray, red) ply_cap=500 clock_ms=null (PROTOCOL.md)",
    )  # fmt: skip
    p.add_argument(
        "--bot", metavar="LEVEL",
        help="with --create: a built-in bot of this level takes the other seat (stacko: easy, "
        "medium, strong; stakko: random, search)",
    )  # fmt: skip
    p.add_argument("--spectate", action="store_true", help="with --join: watch instead of playing")
    p.add_argument("--auto", action="store_true", help="play random legal moves, no keyboard")
    p.add_argument("--seed", type=int, metavar="N", help="random seed for --auto")
    p.add_argument(
        "--games", type=int, default=1, metavar="N",
        help="with --auto or --spectate: games to play or watch before exiting (default 1); "
        "rooms play rematches, --quick-match queues again",
    )  # fmt: skip
    p.add_argument(
        "--auto-delay", "--delay", dest="delay", type=float, default=0.0, metavar="SECONDS",
        help="with --auto: wait this long before each move (default 0: as fast as the server's "
        "rate limit allows); with --replay: between steps",
    )  # fmt: skip
    p.add_argument(
        "--quiet", action="store_true", help="with --auto: print only results and errors"
    )
    p.add_argument("--ascii", action="store_true", help="draw in plain ASCII (Stacko bars with #)")
    return p


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.private or args.bot) and not args.create:
        parser.error("--private and --bot go with --create")
    if args.option and not (args.create or args.challenge):
        parser.error("--option goes with --create or --challenge")
    if args.rated and not (args.create or args.challenge):
        parser.error("--rated goes with --create or --challenge")
    if args.spectate and not args.join:
        parser.error("--spectate goes with --join")
    if args.game is not None and args.join:
        parser.error("--game goes with --create or --quick-match (--join plays the room's game)")
    if args.game is None and not args.join:
        args.game = "stacko"
    if args.games < 1:
        parser.error("--games must be at least 1")
    if args.delay < 0:
        parser.error("--auto-delay must be 0 or more seconds")
    if args.join is not None and not ROOM_CODE.fullmatch(args.join):
        parser.error(
            f"--join {args.join}: that is not a room code; a room code is 4 to 12 letters and"
            " digits, like K7QJ2M (the code stacko-client --create prints)"
        )
    args.url = websocket_url(args.url)
    return args


def summary(results: Sequence[str], *, watched: bool = False) -> str:
    """Several games in one line: "2 won, 1 lost, 0 drawn of 3 games"; a spectator
    (``watched``) gets each one. (A player's draws say "draw ...", like a spectator's.)"""
    if watched:
        return f"{len(results)} games watched: " + "; ".join(results)
    won = sum(r.startswith("you won") for r in results)
    lost = sum(r.startswith("you lost") for r in results)
    return f"{won} won, {lost} lost, {len(results) - won - lost} drawn of {len(results)} games"


MOVED_ON = frozenset({"stale_ply", "game_over"})
"""Refusals of a move that crossed a change it had not seen yet (the opponent moved,
resigned, or ran out of time): the state that says so follows, so ``--auto`` plays on.
``play`` gets its answer before the reader shows that state: an auto client whose move
crossed the opponent's resignation exited with status 2 ("error: the game is over")."""


class Player:
    """One run of the client: the frame handler, the keyboard (or --auto), the exit code."""

    def __init__(self, client: StackoClient, args: argparse.Namespace, out: TextIO) -> None:
        self.client, self.args, self.out = client, args, out
        self.rng = random.Random(args.seed)
        self.room: str | None = None
        self.seat: int | None = None
        self.game: str | None = args.game
        """The room's game: ``--game`` until a ``joined`` frame says it."""
        self.names: list[str | None] = [None, None]
        """The players' names by seat, from the ``joined`` and ``room`` frames."""
        self.state: Frame | None = None
        self.over = False
        self.ended_seq: int | None = None
        """The ``seq`` of the last game's final state."""
        self.results: list[str] = []
        self.want_rematch = False
        self.asked_rematch = False
        """This player asked for a rematch of the game just over (from the keyboard)."""
        self.opponent_left = False
        self.input_ended = False
        self.confirming: str | None = None
        """``"quit"``, ``"resign"`` or ``"eof"``: asked to confirm leaving or resigning;
        ``"challenge"``: asked whether to accept ``challenge``."""
        self.challenge: Frame | None = None
        """The last ``challenged`` frame not answered yet."""
        self.sent_challenge: str | None = None
        self.done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.rating_due = False
        """A game this account played has ended: its ``rating`` frame may follow the final
        state (a rated game's), and ``run`` gives it ``RATING_WAIT_S`` to arrive."""
        self.rating_seen = asyncio.Event()
        encoding = (getattr(out, "encoding", None) or "").lower()
        self.ascii = args.ascii or not encoding.startswith("utf")

    @property
    def interactive(self) -> bool:
        """A player at the keyboard (spectators may type too: b, h, q)."""
        return not self.args.auto and not self.args.spectate

    @property
    def playing(self) -> bool:
        """A game in progress in which this client holds a seat: leaving it loses it."""
        return (
            self.room is not None
            and self.seat is not None
            and self.state is not None
            and self.state["view"]["outcome"] is None
        )

    def opponent(self) -> str:
        """The other player as texts name them ("Bob")."""
        seat = 1 - self.seat if self.seat is not None else 1
        return player_name(seat, self.seat, self.names)

    def say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def note(self, text: str) -> None:
        """A progress line (rooms, joins, queueing): ``--quiet`` leaves only results and
        errors."""
        if not self.args.quiet:
            self.say(text)

    def finish(self, code: int, text: str | None = None) -> None:
        if not self.done.done():
            if text:
                self.say(text)
            self.done.set_result(code)

    # -- the session ----------------------------------------------------------------------

    async def run(self, lines: asyncio.Queue[str | None] | None) -> int:
        tasks = [asyncio.create_task(self._guard(self._frames()))]
        await self._guard(self._start())
        # The keyboard only once the request is answered: an early end of input (a closed
        # stdin) must not hide a refused --create / --join behind a clean "end of input".
        if lines is not None and not self.args.auto and not self.done.done():
            tasks.append(asyncio.create_task(self._guard(self._keyboard(lines))))
        try:
            code = await self.done
            if self.rating_due and not self.rating_seen.is_set():
                # The rating frame comes right after the final state, often in a later read:
                # cancelling the frames at once lost the "rating: ..." line now and then.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.rating_seen.wait(), RATING_WAIT_S)
            return code
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _guard(self, work: Awaitable[None]) -> None:
        """Any failure ends the run with status 2 and a message."""
        try:
            await work
        except ServerError as exc:
            self.finish(2, f"error: {exc.message} ({exc.code})")
        except (Disconnected, TimeoutError, OSError) as exc:
            self.finish(2, f"error: {exc or type(exc).__name__}")

    async def _start(self) -> None:
        a, c = self.args, self.client
        if a.create:
            joined = await c.create_room(
                a.game, public=not a.private, options=dict(a.option), bot=a.bot
            )
            self.note(f"room: {joined['room']}")
            if a.bot:
                self.note(f"playing against the built-in {a.bot} bot")
            else:
                self.note(f"others join with: stacko-client {c.url} --join {joined['room']}")
        elif a.join:
            await c.join(a.join, "spectator" if a.spectate else "player")
        elif a.challenge:
            sent = await c.request(
                {"type": "challenge", "to": a.challenge, "game": a.game,
                 "options": dict(a.option), "rated": a.rated}
            )  # fmt: skip
            self.sent_challenge = sent["challenge"]
            self.note(f"challenged {sent['to']}; waiting for an answer")
        elif a.wait_challenges:
            self.note(f"online as {self.client.name}: waiting for challenges")
        else:
            await self._queue()

    async def _queue(self) -> None:
        answer = await self.client.quick_match(self.args.game)
        if answer["type"] == "queued":
            self.note(f"waiting for an opponent for {answer['game']} ({answer['waiting']} waiting)")

    async def _frames(self) -> None:
        while True:
            async for frame in self.client:
                await self.on_frame(frame)
            client = self.client
            code, reason = client.close_code, client.close_reason
            if client.closed_by_us or self.done.done():
                return
            if code not in RECONNECT_CODES or reason == "session_replaced":
                closed = f"the server closed the connection ({code} {reason})".rstrip()
                self.finish(2, f"error: {closed}")
                return
            await self._resume(code, reason)

    async def _resume(self, code: int | None, reason: str) -> None:
        """The connection dropped or the server restarted: resume the session on a new one."""
        why = "the server is restarting" if code == 1012 else "the connection dropped"
        self.note(f"{why}; reconnecting ...")
        old = self.client
        try:
            client = await old.reconnect()
        except Exception as exc:
            self.finish(2, f"error: could not reconnect to {old.url}: {exc}")
            return
        self.client = client
        welcome = client.welcome or {}
        if not welcome.get("resumed") and self.room is None and self.args.quick_match:
            # A restart keeps no session without a seat (queues start empty): only queued,
            # this client lost nothing, and its new session queues again.
            self.note("reconnected with a new session (the server forgot the old one)")
            await self._queue()
            return
        if not welcome.get("resumed"):
            await client.close()
            self.finish(2, "error: reconnected, but the server no longer knows this session")
            return
        self.note("reconnected: the session is resumed")
        if self.room is None and self.args.quick_match and not welcome.get("rooms"):
            await self._queue()  # queueing belongs to the connection: queue again

    async def on_frame(self, frame: Frame) -> None:
        kind = frame["type"]
        if self.done.done() and kind != "rating":
            return  # finished: only the game's rating change may follow "result: ..."
        if kind == "joined":
            self.room, self.seat, self.over = frame["room"], frame["seat"], False
            self.game = frame.get("game", self.game)
            self.opponent_left = self.asked_rematch = False
            self.take_names(frame["info"])
            self.note(self.joined_text(frame))
        elif kind == "state" and frame["room"] == self.room:
            await self.on_state(frame)
        elif kind == "room" and frame["room"] == self.room:
            self.take_names(frame["info"])
            self.note(f"room {self.room}: {frame['text']}")
            alone = len(frame["info"]["players"]) < 2
            if self.want_rematch and alone:
                self.finish(1, f"the opponent left; played {len(self.results)} games")
            elif alone and self.over and self.seat is not None and not self.opponent_left:
                self.opponent_left = True
                if self.interactive and not self.input_ended:
                    self.say("no rematch: the opponent has left the room; q quits")
        elif kind == "error":
            self.on_error(frame)
        elif kind in ("challenged", "challenge_over", "rating"):
            await self.on_account_frame(frame)

    async def on_account_frame(self, frame: Frame) -> None:
        """Challenges (a prompt; ``--auto`` accepts) and rating changes."""
        kind = frame["type"]
        if kind == "rating":
            self.rating_seen.set()
            self.note(
                "rating: " + ", ".join(
                    f"{c['name']} {c['before']} -> {c['after']} ({c['delta']:+d})"
                    + (" provisional" if c["provisional"] else "")
                    for c in frame["changes"]
                )
            )  # fmt: skip
        elif kind == "challenged":
            rated = "rated" if frame["rated"] else "unrated"
            if self.args.auto:
                self.note(f"{frame['name']} challenges you ({frame['game']}, {rated}): accepting")
                await self.answer_challenge(frame, True)
                return
            self.challenge, self.confirming = frame, "challenge"
            self.say(
                f"{frame['name']} challenges you to a game of {frame['game']} ({rated}): "
                "y accepts, n declines"
            )
        elif frame["challenge"] == self.sent_challenge:
            self.finish(1, f"the challenge was {frame['reason']}")
        elif self.challenge is not None and frame["challenge"] == self.challenge["challenge"]:
            self.challenge = None
            self.confirming = None if self.confirming == "challenge" else self.confirming
            self.say(f"the challenge {frame['reason']}")

    async def answer_challenge(self, frame: Frame, accept: bool) -> None:
        kind = "accept_challenge" if accept else "decline_challenge"
        try:
            await self.client.request({"type": kind, "challenge": frame["challenge"]})
        except ServerError as exc:
            self.say(f"refused: {exc.message} ({exc.code})")
            return
        if not accept:
            self.say("declined")

    def take_names(self, info: Frame) -> None:
        for p in info.get("players", []):
            seat = p.get("seat")
            if seat in (0, 1):
                self.names[seat] = p.get("name")

    def joined_text(self, frame: Frame) -> str:
        """``joined room K7QJ2MXP as seat 0: Stakko, gray variant, you play White, 30 s a move``"""
        info = frame["info"]
        role = f"seat {self.seat}" if self.seat is not None else "spectator"
        about = [str(self.game).capitalize()]
        if self.game == "stakko":
            about.append(f"{info.get('options', {}).get('variant', 'basic')} variant")
            if self.seat is not None:
                about.append(f"you play {('White', 'Black')[self.seat]}")
        bots = [p["bot"] for p in info.get("players", []) if p.get("bot")]
        if bots:
            about.append(f"against the {bots[0]} bot")
        if info.get("clock_ms"):
            about.append(f"{info['clock_ms'] // 1000} s per move")
        return f"joined room {self.room} as {role}: {', '.join(about)}"

    def on_error(self, frame: Frame) -> None:
        code, message = frame["code"], frame["message"]
        if frame.get("fatal"):
            self.finish(2, f"error: {message} ({code})")
        elif code == "no_rematch" and self.want_rematch:
            self.finish(1, f"no rematch: {message}")
        elif code == "no_rematch":
            self.asked_rematch = False
            self.say(f"no rematch: {message}")
        elif not self.args.auto or code in MOVED_ON:
            self.say(f"refused: {message} ({code})")
        else:
            self.finish(2, f"error: {message} ({code})")

    async def on_state(self, frame: Frame) -> None:
        self.state = frame
        view = frame["view"]
        if self.interactive or (self.args.spectate and not self.args.auto):
            self.say(render_state(frame, ascii=self.ascii, names=self.names))
        elif not self.args.quiet and frame["text"]:
            self.say(f"[{frame['room']} ply {view['ply']}] {frame['text']}")
        if view["outcome"] is not None:
            # Not twice for one game: the final state comes again after a resumed session.
            first = not self.over and frame["seq"] != self.ended_seq
            self.over, self.ended_seq = True, frame["seq"]
            if first:
                self.replay_hint(frame.get("game_id"))
                await self.game_over(view, frame.get("rated"))
            return
        self.over = self.want_rematch = False
        if frame["legal"] is None:
            return
        if self.args.auto:
            if self.args.delay:
                await asyncio.sleep(self.args.delay)
            await self.play(self.rng.choice(frame["legal"]))
        else:
            self.say("your move (h for help):")

    def replay_hint(self, game_id: str | None) -> None:
        """How to see the game just over again: the final frame names its record (null from a
        server that keeps none)."""
        if not game_id:
            return
        url = "" if self.args.url == websocket_url(DEFAULT_URL) else f" {self.args.url}"
        self.say(
            f"replay: stacko-client{url} --replay {game_id}"
            f" (or {http_base(self.args.url)}/games/{game_id} in a browser)"
        )

    async def game_over(self, view: dict[str, Any], rated: bool | None = None) -> None:
        """``rated``: the final state's (``None`` from a server before that field, which
        may have rated any game played with an account)."""
        self.results.append(describe_result(view, self.names))
        if self.seat is not None and (rated or (rated is None and self.args.account)):
            self.rating_due = True
            self.rating_seen.clear()
        self.confirming = None
        if self.interactive:
            self.say(f"result: {self.results[-1]}")
            if self.input_ended:
                self.finish(0, "end of input")
            elif self.opponent_left:
                self.say("no rematch: the opponent has left the room; q quits")
            else:
                self.say("type rematch for another game, or q to quit")
            return
        if len(self.results) < self.args.games:
            self.say(f"game {len(self.results)}: {self.results[-1]}")
            if self.args.spectate:
                return
            assert self.room is not None
            if self.args.quick_match:
                await self.client.leave(self.room)
                self.room = None
                await self._queue()
            else:
                self.want_rematch = True
                await self.client.rematch(self.room)
            return
        if self.args.games == 1:
            self.finish(0, f"result: {self.results[0]}")
            return
        self.say(f"game {len(self.results)}: {self.results[-1]}")
        self.finish(0, "result: " + summary(self.results, watched=self.args.spectate))

    async def play(self, move: dict[str, Any]) -> None:
        """Send a move for the current position; a refusal is shown (or ends --auto)."""
        if self.state is None or self.room is None:
            self.say("the game has not started yet")
            return
        try:
            await self.client.move(self.room, self.state["view"]["ply"], move)
        except ServerError as exc:
            self.on_error(exc.frame)
            hint = HINTS.get(exc.code)
            if hint and self.interactive:
                self.say(f"  ({hint})")

    # -- the keyboard ---------------------------------------------------------------------

    async def _keyboard(self, lines: asyncio.Queue[str | None]) -> None:
        while not self.done.done():
            line = await lines.get()
            if line is None:
                await self.end_of_input()
                continue
            if not line.strip():
                continue
            if self.confirming is not None and await self.confirmed(line):
                continue
            try:
                command = parse_command(line, self.game)
            except ValueError as exc:
                self.say(str(exc))
                continue
            await self.command(command)

    async def end_of_input(self) -> None:
        """End of input (Ctrl-D) leaves, after a confirmation if a game is in progress."""
        if self.playing and self.confirming != "eof":
            self.confirming = "eof"
            self.say(
                f"end of input: leaving now loses the game against {self.opponent()}; "
                "Ctrl-D again (or y) leaves, anything else plays on"
            )
            return
        self.input_ended = True
        await self.quit("end of input")

    async def confirmed(self, line: str) -> bool:
        """The answer to a confirmation; True when the line is used up by it."""
        asked, self.confirming = self.confirming, None
        answer = line.strip().lower()
        if asked == "challenge" and self.challenge is not None:
            frame, self.challenge = self.challenge, None
            await self.answer_challenge(frame, answer in ("y", "yes", "a", "accept"))
            return True
        again = {"quit": ("q", "quit", "exit"), "resign": ("r", "resign")}.get(asked or "", ())
        if answer in ("y", "yes", *again) and self.playing:
            if asked == "resign":
                await self.resign()
            else:
                await self.quit("bye")
            return True
        self.say("not resigning: play on" if asked == "resign" else "not leaving: play on")
        return answer in ("n", "no")

    async def command(self, command: Command) -> None:
        if command.kind == "move" and command.move is not None:
            if self.game == "stakko" and self.refuse_locally(command.move):
                return
            await self.play(command.move)
        elif command.kind == "help":
            self.say(commands_text(self.game))
        elif command.kind == "board":
            self.say(
                render_state(self.state, ascii=self.ascii, names=self.names)
                if self.state
                else "no game yet"
            )
        elif command.kind == "quit":
            if self.playing:
                self.confirming = "quit"
                self.say(
                    f"leaving loses the game in progress against {self.opponent()}: "
                    "q again (or y) leaves, anything else plays on"
                )
                return
            await self.quit("bye")
        elif self.room is None:
            self.say("you are not in a room yet")
        elif command.kind == "resign":
            if not self.playing:
                self.say("there is no game in progress to resign")
                return
            self.confirming = "resign"
            self.say(
                f"resign, and lose the game against {self.opponent()}? "
                "r again (or y) resigns, anything else plays on"
            )
        elif command.kind == "rematch":
            await self.ask_rematch()

    async def resign(self) -> None:
        assert self.room is not None
        try:
            await self.client.resign(self.room)
        except ServerError as exc:
            self.on_error(exc.frame)

    async def ask_rematch(self) -> None:
        """Ask for a rematch only when one can be had, and say so once."""
        assert self.room is not None
        if self.seat is None:
            self.say("spectators cannot ask for a rematch")
        elif not self.over:
            self.say("the game is not over yet (r resigns it)")
        elif self.opponent_left:
            self.say("no rematch: the opponent has left the room; q quits")
        elif self.asked_rematch:
            self.say(f"you asked already; waiting for {self.opponent()}")
        else:
            self.asked_rematch = True
            await self.client.rematch(self.room)
            self.say(f"asked {self.opponent()} for a rematch; waiting for their answer")

    def refuse_locally(self, move: dict[str, Any]) -> bool:
        """Check a typed Stakko move against the last state's ``legal``; say why it is refused
        (and what would do) instead of sending it."""
        refusal = stakko_refusal(self.state, move)
        if refusal is None:
            return False
        code, message = refusal
        if code == "not_your_turn":
            message = f"it is {self.opponent()}'s turn"
        self.say(f"refused: {message} ({code})")
        if self.state is not None and self.state["legal"] and code != "not_your_turn":
            self.say(
                "  your moves: " + describe_stakko_moves(self.state["view"], self.state["legal"])
            )
        elif code in HINTS:
            self.say(f"  ({HINTS[code]})")
        return True

    async def quit(self, why: str) -> None:
        if self.room is not None:
            if self.playing:
                self.say("leaving a game in progress: you lose it")
            with contextlib.suppress(ServerError, Disconnected):
                await self.client.leave(self.room)
        self.finish(0, why)


def _stdin_lines(loop: asyncio.AbstractEventLoop) -> asyncio.Queue[str | None]:
    """Keyboard lines as an asyncio queue (``None`` at end of input).

    A daemon thread blocks on ``readline`` instead of the event loop. Not an executor: a thread
    stuck in ``readline`` would keep the process alive at exit; not ``connect_read_pipe``: it
    makes a terminal's stdin (and with it stdout) non-blocking.

    A terminal can be read again after Ctrl-D (the player may answer the confirmation it
    asks for); the end of a pipe or file is final, so it comes twice: asked and confirmed."""
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    tty = sys.stdin.isatty()

    def pump() -> None:
        try:
            while True:
                for line in iter(sys.stdin.readline, ""):
                    loop.call_soon_threadsafe(queue.put_nowait, line)
                loop.call_soon_threadsafe(queue.put_nowait, None)
                if not tty:
                    loop.call_soon_threadsafe(queue.put_nowait, None)
                    return
        except RuntimeError:  # the loop is closed: the client is exiting
            return

    threading.Thread(target=pump, name="stdin", daemon=True).start()
    return queue


async def run(
    args: argparse.Namespace,
    out: TextIO | None = None,
    lines: asyncio.Queue[str | None] | None = None,
) -> int:
    """One client run; ``lines`` feeds keyboard commands (default: stdin when interactive)."""
    out = out or sys.stdout
    if args.replay is not None:
        return await replay(args, out)
    if args.register is not None:
        return await register_account(args, out)
    client = StackoClient(args.url, args.name, account=args.account)
    try:
        welcome = await client.connect()
    except Exception as exc:  # refused, unreachable, not a WebSocket server, invalid URI, ...
        out.write(f"error: cannot connect to {args.url}: {exc}\n")
        out.flush()
        return 2
    player = Player(client, args, out)
    if not args.quiet:
        player.say(f"connected to {welcome['server']} as {welcome['name']}")
    if lines is None and not args.auto:
        lines = _stdin_lines(asyncio.get_running_loop())
    try:
        return await player.run(lines)
    finally:
        await player.client.close()


async def register_account(args: argparse.Namespace, out: TextIO) -> int:
    """``--register NAME``: a human account; its token is printed once."""
    try:
        made = await asyncio.to_thread(register, args.url, args.register, "human")
    except ServerError as exc:
        out.write(f"error: {exc.message} ({exc.code})\n")
        return 2
    except OSError as exc:
        out.write(f"error: cannot reach {http_base(args.url)}: {exc}\n")
        return 2
    token = made["token"]
    out.write(
        f"registered the account {made['name']}\ntoken: {token}\n"
        "Keep the token secret: it is shown only now. Sign in with it:\n"
        f"  stacko-client {args.url} --account {token} --quick-match   (rated games)\n"
        "or export STACKO_ACCOUNT=<token>.\n"
    )
    return 0


# -- replays ------------------------------------------------------------------------------------


def http_base(url: str) -> str:
    """The server's HTTP root for its WebSocket address: ``ws://H:P/...`` -> ``http://H:P``."""
    parts = urllib.parse.urlsplit(websocket_url(url))
    scheme = "https" if parts.scheme == "wss" else "http"
    return f"{scheme}://{parts.netloc}"


def fetch_replay(url: str, game_id: str, timeout: float = 10.0) -> Frame:
    """``GET /api/games/{id}/replay?seat=all``: a finished game with every step's view."""
    path = f"/api/games/{urllib.parse.quote(game_id, safe='')}/replay?seat=all"
    with urllib.request.urlopen(http_base(url) + path, timeout=timeout) as answer:
        data: Frame = json.loads(answer.read())
    return data


def replay_lines(record: Frame, *, ascii: bool = False) -> list[str]:
    """A replay as text blocks: a header, the board after each step, and the result."""
    names: list[str | None] = [None, None]
    players = []
    for p in record.get("players", []):
        seat = p.get("seat")
        if seat in (0, 1):
            names[seat] = p.get("name")
            bot = f", {p['bot']} bot" if p.get("bot") else ""
            players.append(f"{p.get('name')} (seat {seat}{bot})")
    options = ", ".join(f"{k}={v}" for k, v in (record.get("options") or {}).items())
    head = f"game {record.get('id')}: {str(record.get('game')).capitalize()}"
    out = [f"{head}, {' vs '.join(players)}" + (f"; {options}" if options else "")]
    # Drawn as a spectator's (``seat`` None) though everything is shown: the reader is
    # neither player (seat 0's view said "you", "your turn: ... (t SLOT)", "you lost").
    views = [{**step["view"], "seat": None} for step in record.get("steps", [])]
    for step, view in zip(record.get("steps", []), views, strict=True):
        who = "" if step.get("seat") is None else f" ({player_name(step['seat'], None, names)})"
        out.append(
            f"-- ply {step.get('ply')}{who}: {step.get('text') or 'the deal'}\n"
            + render_view(view, text=step.get("text") or "", ascii=ascii, names=names)
        )
    if views and views[-1].get("outcome") is not None:
        out.append(f"result: {describe_result(views[-1], names)}")
    elif record.get("result"):
        out.append(f"result: {record['result']}")
    return out


def _error_message(exc: urllib.error.HTTPError) -> str:
    """The message of a records endpoint's JSON error (``{"error": {"message": ...}}``)."""
    try:
        body = json.loads(exc.read(4096))
        message = body["error"]["message"]
    except (OSError, ValueError, TypeError, KeyError):
        return ""
    return message if isinstance(message, str) else ""


async def replay(args: argparse.Namespace, out: TextIO) -> int:
    """``--replay ID``: print a finished game from the server's records, step by step."""
    try:
        record = await asyncio.to_thread(fetch_replay, args.url, args.replay)
    except urllib.error.HTTPError as exc:
        why = _error_message(exc) or {
            404: "no finished game with that id",
            400: "not a game id",
        }.get(exc.code, "")
        out.write(f"error: cannot replay {args.replay}: {why or exc.reason} (HTTP {exc.code})\n")
        return 2
    except (OSError, ValueError) as exc:  # refused, unreachable, not JSON ...
        out.write(f"error: cannot replay {args.replay} from {http_base(args.url)}: {exc}\n")
        return 2
    encoding = (getattr(out, "encoding", None) or "").lower()
    blocks = replay_lines(record, ascii=args.ascii or not encoding.startswith("utf"))
    for i, block in enumerate(blocks):
        if i and args.delay:
            await asyncio.sleep(args.delay)
        out.write(block + "\n\n" if i < len(blocks) - 1 else block + "\n")
        out.flush()
    return 0


async def amain(
    argv: Sequence[str], out: TextIO | None = None, lines: asyncio.Queue[str | None] | None = None
) -> int:
    """``main`` for a running event loop (tests, embedding)."""
    return await run(parse_args(argv), out, lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``stacko-client`` command."""
    args = parse_args(argv)
    try:
        return asyncio.run(run(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
