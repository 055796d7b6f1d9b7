"""``stacko-client``: play Stacko from a terminal, watch a room, or let it play random moves.

    stacko-client --create                      # prints the room code for the other terminal
    stacko-client --join K7QJ2M                 # the other terminal
    stacko-client ws://HOST:PORT --quick-match --auto   # random legal moves, unattended

Built on ``clients.client`` (the wire) and ``clients.render`` (the board); ``--help`` says it all.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sys
import threading
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from clients.client import Disconnected, Frame, ServerError, StackoClient
from clients.render import describe_result, render_state

DEFAULT_URL = "ws://127.0.0.1:8765"

COMMANDS = """\
commands:
  t SLOT | take SLOT    take the open brick into SLOT (0 = bottom)
  d | draw              draw the top brick of the stack (only you see it)
  p SLOT | place SLOT   put the drawn brick into SLOT
  pass                  put the drawn brick on the discard pile
  r | resign            give the game up (you lose it)
  rematch               ask for another game once this one is over
  b | board             draw the board again
  h | help              this list
  q | quit              leave (a game in progress is lost) and exit"""

HINTS = {
    "not_your_turn": "wait for the opponent's move",
    "wrong_phase": "take or draw first; after a draw, place or pass",
    "bad_slot": "slots count from 0 at the bottom",
    "stale_ply": "the game moved on; here is the current position",
    "game_over": "the game is over: type rematch or q",
    "not_started": "wait for the second player",
    "not_a_player": "spectators cannot play",
}

EPILOG = f"""\
{COMMANDS}

--auto plays random legal moves (the state frames' "legal" list, seeded by --seed); two
auto clients against one server play a whole game and each prints "result: ..." as its last
line, e.g. "result: you won 65:60 (completed)".

exit status: 0 done (the games were played, or you quit); 1 the games asked for could not be
played (the opponent left before a rematch); 2 a refused request in --auto mode, a fatal
error frame, a connection that could not be opened or closed unexpectedly, or bad arguments.
"""


@dataclass(frozen=True)
class Command:
    """A parsed line of keyboard input; ``move`` is a wire move for ``kind == "move"``."""

    kind: str
    move: dict[str, Any] | None = None


_WORDS = {
    "t": "take", "take": "take", "d": "draw", "draw": "draw", "p": "place", "place": "place",
    "pass": "pass", "r": "resign", "resign": "resign", "q": "quit", "quit": "quit",
    "exit": "quit", "h": "help", "help": "help", "?": "help", "b": "board", "board": "board",
    "rematch": "rematch",
}  # fmt: skip


def parse_command(line: str) -> Command:
    """``"t 3"`` -> a take into slot 3, ``"d"`` -> draw, ... ValueError says what is wrong."""
    words = line.split()
    if not words:
        raise ValueError("type a command (h for help)")
    kind = _WORDS.get(words[0].lower())
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
        description="Play Stacko on a stacko server: create a room, join one by its code, "
        "or let the server pair you; read moves from the keyboard or play random ones.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("url", nargs="?", default=DEFAULT_URL, help=f"server (default {DEFAULT_URL})")
    p.add_argument("--name", default="player", help="your name in the room (default: player)")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--create", action="store_true", help="create a room and print its code")
    mode.add_argument("--join", metavar="CODE", help="join the room with this code")
    mode.add_argument("--quick-match", action="store_true", help="let the server find an opponent")
    p.add_argument("--private", action="store_true", help="with --create: not in list_rooms")
    p.add_argument(
        "--option", action="append", type=parse_option, default=[], metavar="KEY=VALUE",
        help="with --create: a room option, e.g. clock_ms=30000, rounds=1, turn_cap=50 "
        "(repeat for more)",
    )  # fmt: skip
    p.add_argument(
        "--bot", metavar="LEVEL", help="with --create: a built-in bot takes the other seat"
    )
    p.add_argument("--spectate", action="store_true", help="with --join: watch instead of playing")
    p.add_argument("--auto", action="store_true", help="play random legal moves, no keyboard")
    p.add_argument("--seed", type=int, metavar="N", help="random seed for --auto")
    p.add_argument(
        "--games", type=int, default=1, metavar="N",
        help="with --auto or --spectate: games to play or watch before exiting (default 1); "
        "rooms play rematches, --quick-match queues again",
    )  # fmt: skip
    p.add_argument(
        "--delay", type=float, default=0.0, metavar="SECONDS", help="with --auto: pause per move"
    )
    p.add_argument("--quiet", action="store_true", help="with --auto: print only the result")
    p.add_argument("--ascii", action="store_true", help="draw bars with # instead of blocks")
    return p


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.private or args.option or args.bot) and not args.create:
        parser.error("--private, --option and --bot go with --create")
    if args.spectate and not args.join:
        parser.error("--spectate goes with --join")
    if args.games < 1:
        parser.error("--games must be at least 1")
    return args


def summary(results: Sequence[str]) -> str:
    """Several games in one line: "2 won, 1 lost, 0 drawn of 3 games" (a spectator: each one)."""
    if not any(r.startswith("you ") for r in results):
        return f"{len(results)} games watched: " + "; ".join(results)
    won = sum(r.startswith("you won") for r in results)
    lost = sum(r.startswith("you lost") for r in results)
    return f"{won} won, {lost} lost, {len(results) - won - lost} drawn of {len(results)} games"


class Player:
    """One run of the client: the frame handler, the keyboard (or --auto), the exit code."""

    def __init__(self, client: StackoClient, args: argparse.Namespace, out: TextIO) -> None:
        self.client, self.args, self.out = client, args, out
        self.rng = random.Random(args.seed)
        self.room: str | None = None
        self.seat: int | None = None
        self.state: Frame | None = None
        self.over = False
        self.results: list[str] = []
        self.want_rematch = False
        self.done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        encoding = (getattr(out, "encoding", None) or "").lower()
        self.ascii = args.ascii or not encoding.startswith("utf")

    @property
    def interactive(self) -> bool:
        """A player at the keyboard (spectators may type too: b, h, q)."""
        return not self.args.auto and not self.args.spectate

    def say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def finish(self, code: int, text: str | None = None) -> None:
        if not self.done.done():
            if text:
                self.say(text)
            self.done.set_result(code)

    # -- the session ----------------------------------------------------------------------

    async def run(self, lines: asyncio.Queue[str | None] | None) -> int:
        tasks = [asyncio.create_task(self._guard(self._frames()))]
        if lines is not None and not self.args.auto:
            tasks.append(asyncio.create_task(self._guard(self._keyboard(lines))))
        await self._guard(self._start())
        try:
            return await self.done
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
            joined = await c.create_room(public=not a.private, options=dict(a.option), bot=a.bot)
            self.say(f"room: {joined['room']}")
            self.say(f"others join with: stacko-client {c.url} --join {joined['room']}")
        elif a.join:
            await c.join(a.join, "spectator" if a.spectate else "player")
        else:
            await self._queue()

    async def _queue(self) -> None:
        answer = await self.client.quick_match()
        if answer["type"] == "queued":
            self.say(f"waiting for an opponent ({answer['waiting']} waiting)")

    async def _frames(self) -> None:
        async for frame in self.client:
            await self.on_frame(frame)
        code, reason = self.client.close_code, self.client.close_reason
        self.finish(2, f"error: the server closed the connection ({code} {reason})".rstrip())

    async def on_frame(self, frame: Frame) -> None:
        kind = frame["type"]
        if kind == "joined":
            self.room, self.seat, self.over = frame["room"], frame["seat"], False
            info = frame["info"]
            clock = f", {info['clock_ms'] // 1000} s per move" if info.get("clock_ms") else ""
            role = f"seat {self.seat}" if self.seat is not None else "spectator"
            self.say(f"joined room {self.room} as {role}{clock}")
        elif kind == "state" and frame["room"] == self.room:
            await self.on_state(frame)
        elif kind == "room" and frame["room"] == self.room:
            self.say(f"room {self.room}: {frame['text']}")
            if self.want_rematch and len(frame["info"]["players"]) < 2:
                self.finish(1, f"the opponent left; played {len(self.results)} games")
        elif kind == "error":
            self.on_error(frame)

    def on_error(self, frame: Frame) -> None:
        code, message = frame["code"], frame["message"]
        if frame.get("fatal"):
            self.finish(2, f"error: {message} ({code})")
        elif code == "no_rematch" and self.want_rematch:
            self.finish(1, f"no rematch: {message}")
        elif not self.args.auto or code == "stale_ply":
            self.say(f"refused: {message} ({code})")
        else:
            self.finish(2, f"error: {message} ({code})")

    async def on_state(self, frame: Frame) -> None:
        self.state = frame
        view = frame["view"]
        if self.interactive or (self.args.spectate and not self.args.auto):
            self.say(render_state(frame, ascii=self.ascii))
        elif not self.args.quiet and frame["text"]:
            self.say(f"[{frame['room']} ply {view['ply']}] {frame['text']}")
        if view["outcome"] is not None:
            if not self.over:
                self.over = True
                await self.game_over(view)
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

    async def game_over(self, view: dict[str, Any]) -> None:
        self.results.append(describe_result(view))
        if self.interactive:
            self.say(f"result: {self.results[-1]}")
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
        self.finish(0, "result: " + summary(self.results))

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
        while True:
            line = await lines.get()
            if line is None:
                await self.quit("end of input")
                return
            if not line.strip():
                continue
            try:
                command = parse_command(line)
            except ValueError as exc:
                self.say(str(exc))
                continue
            await self.command(command)

    async def command(self, command: Command) -> None:
        if command.kind == "move" and command.move is not None:
            await self.play(command.move)
        elif command.kind == "help":
            self.say(COMMANDS)
        elif command.kind == "board":
            self.say(render_state(self.state, ascii=self.ascii) if self.state else "no game yet")
        elif command.kind == "quit":
            await self.quit("bye")
        elif self.room is None:
            self.say("you are not in a room yet")
        elif command.kind == "resign":
            try:
                await self.client.resign(self.room)
            except ServerError as exc:
                self.on_error(exc.frame)
        elif command.kind == "rematch":
            await self.client.rematch(self.room)
            self.say("asked for a rematch; waiting for the opponent")

    async def quit(self, why: str) -> None:
        if self.room is not None:
            if self.state is not None and self.state["view"]["outcome"] is None:
                self.say("leaving a game in progress: you lose it")
            with contextlib.suppress(ServerError):
                await self.client.leave(self.room)
        self.finish(0, why)


def _stdin_lines(loop: asyncio.AbstractEventLoop) -> asyncio.Queue[str | None]:
    """Keyboard lines as an asyncio queue (``None`` at end of input).

    A daemon thread blocks on ``readline`` instead of the event loop. Not an executor: a thread
    stuck in ``readline`` would keep the process alive at exit; not ``connect_read_pipe``: it
    makes a terminal's stdin (and with it stdout) non-blocking."""
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def pump() -> None:
        for line in iter(sys.stdin.readline, ""):
            try:
                loop.call_soon_threadsafe(queue.put_nowait, line)
            except RuntimeError:  # the loop is closed: the client is exiting
                return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=pump, name="stdin", daemon=True).start()
    return queue


async def run(
    args: argparse.Namespace,
    out: TextIO | None = None,
    lines: asyncio.Queue[str | None] | None = None,
) -> int:
    """One client run; ``lines`` feeds keyboard commands (default: stdin when interactive)."""
    out = out or sys.stdout
    client = StackoClient(args.url, args.name)
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
        await client.close()


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
