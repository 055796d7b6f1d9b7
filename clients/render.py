"""Draw a Stacko ``state`` frame for a terminal: plain text, from the wire dict alone.

    print(render_state(frame))      # a decoded "state" frame (PROTOCOL.md "State frames")

Two columns, the receiver's tower on the left (seat 0 for a spectator), slot 9 at the top and
slot 0 at the bottom; each brick is its number and a bar as wide as the number is large; "?" is
a brick this receiver cannot see; "*" marks a brick both players see (on your side: a brick the
opponent knows). Below: the open brick, the draw stack, the discard pile, a drawn brick, whose
turn it is, the clock, the round, the scores, finished rounds and the last action in words.

Like ``clients.client`` it knows only the wire format: no ``engine``, no ``protocol`` import.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

BAR_WIDTH = 20
"""Columns of the widest bar (the largest brick)."""
SEEN = "*"
HIDDEN = "?"


def _names(seat: int | None) -> tuple[str, str]:
    """(left, right) column owners as the receiver says them."""
    if seat is None:
        return "seat 0", "seat 1"
    return "you", "opponent"


def _who(seat: int | None, viewer: int | None) -> str:
    if seat is None:
        return "nobody"
    if viewer is None:
        return f"seat {seat}"
    return "you" if seat == viewer else "opponent"


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


def render_towers(view: Mapping[str, Any], *, ascii: bool = False) -> list[str]:
    """The two towers side by side, top slot first."""
    seat = view["seat"]
    left = seat if seat is not None else 0
    right = 1 - left
    towers: Sequence[Sequence[int | None]] = view["towers"]
    seen: Sequence[Sequence[bool]] = view["seen"]
    bricks = brick_count(view)
    lname, rname = _names(seat)
    head_l = f"{lname} (seat {left})" if seat is not None else lname
    head_r = f"{rname} (seat {right})" if seat is not None else rname
    lines = [f"slot  {head_l:<{6 + BAR_WIDTH}}   {head_r}"]
    for i in reversed(range(len(towers[left]))):
        a = _cell(towers[left][i], seen[left][i], bricks, ascii)
        b = _cell(towers[right][i], seen[right][i], bricks, ascii)
        lines.append(f"{i:>4}  {a}   {b}".rstrip())
    return lines


def _scores(view: Mapping[str, Any], scores: Sequence[int]) -> str:
    seat = view["seat"]
    if seat is None:
        return f"seat 0 {scores[0]} : {scores[1]} seat 1"
    return f"you {scores[seat]} : {scores[1 - seat]} opponent"


def describe_result(view: Mapping[str, Any]) -> str:
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
        verdict = f"seat {winner} won"
    else:
        verdict = "you won" if winner == seat else "you lost"
    return f"{verdict} {a}:{b} ({outcome['termination']})"


def _turn_line(view: Mapping[str, Any]) -> str:
    seat, to_move, phase = view["seat"], view["to_move"], view["phase"]
    if phase == "over" or to_move is None:
        return "game over: " + describe_result(view)
    if seat is not None and to_move == seat:
        if phase == "drawn":
            return f"your turn: place the drawn {view['drawn']} (p SLOT) or pass it (pass)"
        return f"your turn: take the open {view['discard'][-1]} (t SLOT) or draw (d)"
    who = "opponent's" if seat is not None else f"seat {to_move}'s"
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
) -> str:
    """A Stacko ``view`` object (PROTOCOL.md "State frames") as lines of text."""
    dot = "-" if ascii else "\u00b7"
    cap = f"/{view['turn_cap']}" if view["turn_cap"] is not None else ""
    head = [f"Stacko {dot} round {view['round']} of {view['rounds']}"]
    if room:
        head.insert(0, f"room {room}")
    head.append(f"turn {view['turns']}{cap} {dot} ply {view['ply']}")
    lines = [f" {dot} ".join(head), *render_towers(view, ascii=ascii)]
    discard = view["discard"]
    lines.append(
        f"open brick {discard[-1] if discard else '-'} {dot} draw stack {view['stack']}"
        f" {dot} discard (bottom to top) {' '.join(map(str, discard)) or '-'}"
    )
    if view["drawn"] is not None:
        lines.append(f"you drew {view['drawn']}")
    turn = _turn_line(view)
    if clock and view["phase"] != "over":
        turn += f" {dot} {clock}"
    lines.append(turn)
    lines.append("scores " + _scores(view, view["totals"]))
    for result in view["results"]:
        finisher = result["finisher"]
        how = (
            f"{_who(finisher, view['seat'])} finished"
            if finisher is not None
            else "turn cap reached"
        )
        towers = " / ".join(" ".join(map(str, t)) for t in result["towers"])
        lines.append(
            f"round {result['round']}: {how}, {_scores(view, result['scores'])}"
            f" (towers seat 0 / seat 1, bottom to top: {towers})"
        )
    if text:
        lines.append(f"last: {text}")
    lines.append(f"{SEEN} = a brick both players see; {HIDDEN} = a brick you cannot see")
    return "\n".join(lines)


def render_state(
    frame: Mapping[str, Any], *, ascii: bool = False, now_ms: int | None = None
) -> str:
    """A whole ``state`` frame; ``now_ms`` (epoch ms) counts the clock down from
    ``deadline_ms``, else the frame's ``clock_ms`` is shown."""
    return render_view(
        frame["view"],
        text=frame.get("text", ""),
        clock=_clock(frame, now_ms),
        room=frame.get("room"),
        ascii=ascii,
    )
