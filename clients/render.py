"""Draw a ``state`` frame of Stacko or Stakko for a terminal: plain text, from the wire dict alone.

    print(render_state(frame))      # a decoded "state" frame (PROTOCOL.md "State frames")

``render_state`` follows ``view.game``.

Stacko: two columns, the receiver's tower on the left (seat 0 for a spectator), slot 9 at the top
and slot 0 at the bottom; each brick is its number and a bar as wide as the number is large; "?"
is a brick this receiver cannot see; "*" marks a brick both players see (on your side: a brick
the opponent knows). Below: the open brick, the draw stack, the discard pile, a drawn brick,
whose turn it is, the clock, the round, the scores, finished rounds and the last action in words.

Stakko: one row per stack of the line, index 0 (White's end) first; each row gives the number of
discs, the owner (the colour on top) and the discs bottom to top as letters ``W`` white, ``B``
black, ``G`` gray, ``R`` red. Above: each seat's colour, stacks owned (how far its moves go),
height and passes; below: whose turn it is, your legal moves grouped by stack, the clock, the
last move in words and, at the end, the outcome.

Like ``clients.client`` it knows only the wire format: no ``engine``, no ``protocol`` import.
``names`` (the players' names by seat, from the ``joined`` and ``room`` frames' ``info``) put
names where a seat would otherwise be "opponent" or "seat 1".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

BAR_WIDTH = 20
"""Columns of the widest bar (the largest brick)."""
SEEN = "*"
HIDDEN = "?"


Names = Sequence[str | None] | None
"""The players' names by seat (None where unknown)."""


def player_name(seat: int, viewer: int | None, names: Names = None) -> str:
    """A seat as the receiver reads it: "you", else the player's name, else "opponent" (a
    player's) or "seat N" (a spectator's). The same name in both seats gets its seat too."""
    if seat == viewer:
        return "you"
    name = names[seat] if names is not None and len(names) == 2 else None
    if name:
        return f"{name} (seat {seat})" if names is not None and names[0] == names[1] else name
    return f"seat {seat}" if viewer is None else "opponent"


def _possessive(who: str) -> str:
    return "your" if who == "you" else f"{who}'s"


def _who(seat: int | None, viewer: int | None, names: Names = None) -> str:
    if seat is None:
        return "nobody"
    return player_name(seat, viewer, names)


def brick_count(view: Mapping[str, Any]) -> int:
    """How many bricks the game has (the largest number): every brick is in a tower, the
    draw stack, the discard pile, or someone's hand."""
    towers = view["towers"]
    hand = 1 if view["holding"] else 0
    return len(towers[0]) + len(towers[1]) + int(view["stack"]) + len(view["discard"]) + hand


def bar(brick: int, bricks: int, *, ascii: bool = False) -> str:
    """A bar whose width follows the brick's number (1..``BAR_WIDTH`` columns)."""
    width = max(1, math.ceil(brick * BAR_WIDTH / max(bricks, 1)))
    return ("#" if ascii else "\u2588") * min(width, BAR_WIDTH)


def _cell(brick: int | None, seen: bool, bricks: int, ascii: bool) -> str:
    mark = SEEN if seen else " "
    if brick is None:
        return f"{mark} {HIDDEN:>3}".ljust(6 + BAR_WIDTH)
    return f"{mark} {brick:>3} {bar(brick, bricks, ascii=ascii)}".ljust(6 + BAR_WIDTH)


def render_towers(
    view: Mapping[str, Any], *, ascii: bool = False, names: Names = None
) -> list[str]:
    """The two towers side by side, top slot first, each headed by its player."""
    seat = view["seat"]
    left = seat if seat is not None else 0
    right = 1 - left
    towers: Sequence[Sequence[int | None]] = view["towers"]
    seen: Sequence[Sequence[bool]] = view["seen"]
    bricks = brick_count(view)
    head_l, head_r = (_head(s, seat, names) for s in (left, right))
    lines = [f"slot  {head_l:<{6 + BAR_WIDTH}}   {head_r}"]
    for i in reversed(range(len(towers[left]))):
        a = _cell(towers[left][i], seen[left][i], bricks, ascii)
        b = _cell(towers[right][i], seen[right][i], bricks, ascii)
        lines.append(f"{i:>4}  {a}   {b}".rstrip())
    return lines


def _head(seat: int, viewer: int | None, names: Names) -> str:
    """A column's heading: "you (seat 0)", "Bob (seat 1)"."""
    who = player_name(seat, viewer, names)
    return who if who.endswith(f"(seat {seat})") else f"{who} (seat {seat})"


def _scores(view: Mapping[str, Any], scores: Sequence[int], names: Names = None) -> str:
    seat = view["seat"]
    left = seat if seat is not None else 0
    a, b = (player_name(s, seat, names) for s in (left, 1 - left))
    return f"{a} {scores[left]} : {scores[1 - left]} {b}"


def describe_result(view: Mapping[str, Any], names: Names = None) -> str:
    """The outcome from the receiver's side: "you won 65:60 (completed)"; your score first."""
    outcome = view["outcome"]
    if outcome is None:
        return "the game is not over"
    seat = view["seat"]
    a, b = outcome["scores"]
    if seat == 1:
        a, b = b, a
    winner = outcome["winner"]
    if winner is None:
        verdict = "draw"
    elif seat is None:
        verdict = f"{player_name(winner, None, names)} won"
    else:
        verdict = "you won" if winner == seat else "you lost"
    return f"{verdict} {a}:{b} ({outcome['termination']})"


def _turn_line(view: Mapping[str, Any], names: Names = None) -> str:
    seat, to_move, phase = view["seat"], view["to_move"], view["phase"]
    if phase == "over" or to_move is None:
        return "game over: " + describe_result(view, names)
    if seat is not None and to_move == seat:
        if phase == "drawn":
            return f"your turn: place the drawn {view['drawn']} (p SLOT) or pass it (pass)"
        return f"your turn: take the open {view['discard'][-1]} (t SLOT) or draw (d)"
    who = _possessive(player_name(to_move, seat, names))
    holding = ", holding a drawn brick" if view["holding"] else ""
    return f"{who} turn{holding}"


def _clock(frame: Mapping[str, Any], now_ms: int | None) -> str | None:
    deadline, left = frame.get("deadline_ms"), frame.get("clock_ms")
    if deadline is not None and now_ms is not None:
        left = max(0, deadline - now_ms)
    if left is None:
        return None
    return f"clock {left / 1000:.0f} s"


def render_view(
    view: Mapping[str, Any],
    *,
    text: str = "",
    clock: str | None = None,
    room: str | None = None,
    ascii: bool = False,
    legal: Sequence[Mapping[str, Any]] | None = None,
    names: Names = None,
) -> str:
    """A ``view`` object (PROTOCOL.md "State frames") as lines of text: Stacko, or Stakko when
    ``view["game"]`` says so (``legal``, the frame's legal moves, is shown for Stakko)."""
    if view.get("game") == "stakko":
        return render_stakko_view(
            view, text=text, clock=clock, room=room, ascii=ascii, legal=legal, names=names
        )
    dot = "-" if ascii else "\u00b7"
    cap = f"/{view['turn_cap']}" if view["turn_cap"] is not None else ""
    head = [f"Stacko {dot} round {view['round']} of {view['rounds']}"]
    if room:
        head.insert(0, f"room {room}")
    head.append(f"turn {view['turns']}{cap} {dot} ply {view['ply']}")
    lines = [f" {dot} ".join(head), *render_towers(view, ascii=ascii, names=names)]
    discard = view["discard"]
    lines.append(
        f"open brick {discard[-1] if discard else '-'} {dot} draw stack {view['stack']}"
        f" {dot} discard (bottom to top) {' '.join(map(str, discard)) or '-'}"
    )
    if view["drawn"] is not None:  # a player's own, or in a replay (everything shown) the mover's
        who = player_name(view["to_move"], view["seat"], names)
        lines.append(f"{who} drew {view['drawn']}")
    turn = _turn_line(view, names)
    if clock and view["phase"] != "over":
        turn += f" {dot} {clock}"
    lines.append(turn)
    lines.append("scores " + _scores(view, view["totals"], names))
    for result in view["results"]:
        finisher = result["finisher"]
        how = (
            f"{_who(finisher, view['seat'], names)} finished"
            if finisher is not None
            else "turn cap reached"
        )
        towers = " / ".join(" ".join(map(str, t)) for t in result["towers"])
        lines.append(
            f"round {result['round']}: {how}, {_scores(view, result['scores'], names)}"
            f" (towers seat 0 / seat 1, bottom to top: {towers})"
        )
    if text:
        lines.append(f"last: {text}")
    lines.append(f"{SEEN} = a brick both players see; {HIDDEN} = a brick you cannot see")
    return "\n".join(lines)


def render_state(
    frame: Mapping[str, Any],
    *,
    ascii: bool = False,
    now_ms: int | None = None,
    names: Names = None,
) -> str:
    """A whole ``state`` frame; ``now_ms`` (epoch ms) counts the clock down from
    ``deadline_ms``, else the frame's ``clock_ms`` is shown."""
    return render_view(
        frame["view"],
        text=frame.get("text", ""),
        clock=_clock(frame, now_ms),
        room=frame.get("room"),
        ascii=ascii,
        legal=frame.get("legal"),
        names=names,
    )


# -- Stakko ---------------------------------------------------------------------------------

DISC_LETTERS = {"white": "W", "black": "B", "gray": "G", "red": "R"}
"""The rules' notation (docs/rules-stakko.md "Notation"): one letter per disc."""
COLOUR_NAMES = ("White", "Black")
"""Seat 0 plays White, seat 1 Black."""
STAKKO_LEGEND = "W white, B black, G gray, R red; a stack belongs to the colour on its top"


def disc_letters(stack: Sequence[str]) -> str:
    """``["red", "white", "white"]`` -> ``"R W W"`` (bottom first)."""
    return " ".join(DISC_LETTERS.get(d, "?") for d in stack)


def stack_owner(stack: Sequence[str]) -> int | None:
    """The seat whose colour tops ``stack``, or None (gray or red on top: nobody's)."""
    top = stack[-1] if stack else None
    return 0 if top == "white" else 1 if top == "black" else None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _ranges(numbers: Sequence[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``"1..3,5"``."""
    parts: list[str] = []
    nums = sorted(numbers)
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}..{nums[j]}")
        i = j + 1
    return ",".join(parts)


def describe_stakko_moves(view: Mapping[str, Any], legal: Sequence[Mapping[str, Any]]) -> str:
    """Legal moves grouped by stack: ``"0x1..9 onto 1; 1x1..3 onto 3"`` (``STACKxCOUNT``, the
    counts that may be lifted, and the stack they land on)."""
    mover = view["to_move"]
    by_stack: dict[int, list[int]] = {}
    for m in legal:
        by_stack.setdefault(int(m["stack"]), []).append(int(m["count"]))
    if not by_stack:
        return "none"
    line = view["line"]
    parts = []
    for stack, counts in sorted(by_stack.items()):
        onto = ""
        if mover in (0, 1):
            n = view["owned"][mover]
            onto = f" onto {stack + n if mover == 0 else stack - n}"
        if 0 <= stack < len(line) and len(line[stack]) in counts:
            onto += f" ({stack}x{len(line[stack])}: the whole stack, its space leaves the line)"
        parts.append(f"{stack}x{_ranges(counts)}{onto}")
    return "; ".join(parts)


def _stakko_ends(view: Mapping[str, Any]) -> tuple[str, str]:
    """The notes of the first and the last stack of the line."""
    word = "end" if view["variant"] == "red" else "home"
    if len(view["line"]) == 1:
        return f"both ends: White's and Black's {word}, both goals", ""
    return f"White's {word}, Black's goal", f"Black's {word}, White's goal"


def _stakko_seat_line(view: Mapping[str, Any], seat: int, dot: str, names: Names) -> str:
    """``White (W) you, seat 0: owns 2 stacks, moves go 2 toward Black's end (stack 8) ...``"""
    viewer = view["seat"]
    who = _head(seat, viewer, names).replace(" (seat", ", seat").rstrip(")")
    if who == f"seat {seat}, seat {seat}":
        who = f"seat {seat}"
    owned = view["owned"][seat]
    end = len(view["line"]) - 1 if seat == 0 else 0
    moves = f"a move goes {owned} toward stack {end}" if owned else "nothing to move"
    return (
        f"{COLOUR_NAMES[seat]} ({'WB'[seat]}) {who}: owns {_plural(owned, 'stack')}, {moves}"
        f" {dot} height {view['heights'][seat]} {dot} passes {view['passes'][seat]}"
    )


def _stakko_turn_line(view: Mapping[str, Any], names: Names) -> str:
    seat, to_move = view["seat"], view["to_move"]
    if view["outcome"] is not None or to_move is None:
        return "game over: " + describe_result(view, names)
    colour = COLOUR_NAMES[to_move]
    if seat is not None and to_move == seat:
        return (
            f"your turn ({colour}): lift discs off a stack of yours: m STACK COUNT or STACKxCOUNT"
        )
    return f"{_possessive(player_name(to_move, seat, names))} turn ({colour})"


def render_stakko_view(
    view: Mapping[str, Any],
    *,
    text: str = "",
    clock: str | None = None,
    room: str | None = None,
    ascii: bool = False,
    legal: Sequence[Mapping[str, Any]] | None = None,
    names: Names = None,
) -> str:
    """A Stakko ``view`` (PROTOCOL.md "The Stakko view") as lines of text: a header, a line per
    seat, then one row per stack (index, discs, owner, discs bottom to top), whose turn it is
    and your legal moves, the last move in words and the legend."""
    dot = "-" if ascii else "\u00b7"
    arrow = "->" if ascii else "\u2192"
    line: Sequence[Sequence[str]] = view["line"]
    head = [
        f"Stakko {dot} {view['variant']} variant",
        f"ply {view['ply']} of at most {view['ply_cap']}",
    ]
    if room:
        head.insert(0, f"room {room}")
    lines = [f" {dot} ".join(head)]
    lines += [_stakko_seat_line(view, s, dot, names) for s in (0, 1)]
    width = max(len(disc_letters(stack)) for stack in line)
    bottom_top = f"bottom {arrow} top"
    owners = ["-", *(_who(s, view["seat"], names) for s in (0, 1))]
    column = max(8, *map(len, owners))
    lines.append(f"stack discs  {'owner':<{column}}  {bottom_top}")
    first, last = _stakko_ends(view)
    for i, stack in enumerate(line):
        owner = stack_owner(stack)
        who = owners[0 if owner is None else owner + 1]
        note = first if i == 0 else last if i == len(line) - 1 else ""
        row = f"{i:>5} {len(stack):>5}  {who:<{column}}  {disc_letters(stack):<{width}}"
        lines.append(f"{row}   {note}".rstrip())
    turn = _stakko_turn_line(view, names)
    if clock and view["outcome"] is None:
        turn += f" {dot} {clock}"
    lines.append(turn)
    if legal is not None and view["outcome"] is None:
        lines.append("your moves: " + describe_stakko_moves(view, legal))
    if text:
        lines.append(f"last: {text}")
    lines.append(STAKKO_LEGEND)
    return "\n".join(lines)
