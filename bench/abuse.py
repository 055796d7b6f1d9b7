"""Abuse: what one hostile client costs a well-behaved game in another room.

    python bench/abuse.py                     # every scenario, 15 s without and 15 s with abuse
    python bench/abuse.py --quick             # 2 s each, fewer rooms: only that it runs
    python bench/abuse.py --only ping_flood   # one scenario

For each kind of abuse of issue 14, a fresh server (a separate process, so its RSS is its
own) hosts a pair of players in a clocked game at human pace (one move every 150 ms). The
pair plays ``--seconds`` alone (the baseline, same run), then ``--seconds`` again while an
abuser, in its own process and from another address (127.0.0.2: the server counts it apart
from the pair's 127.0.0.1), does its worst within the documented limits:

- ``ping_flood``: 4 connections write WebSocket pings (125-byte payloads) and never read;
- ``frame_flood``: 4 connections write text frames as fast as they can (and reconnect after
  each close, a new session each time: past the address's ``hello`` burst, 50, and rate,
  5 a second, the answer is the fatal ``too_many_hellos``);
- ``slow_consumer``: 6 connections ask for ``list_rooms`` (200 public rooms: the first page of
  100, ~27 KB an answer) at the rate limit and never read;
- ``bot_rooms``: one connection creates Stacko rooms against the strong bot with the largest
  options (200 bricks, 20 slots) at half the rate limit, the bot to move first; two are
  made (``--max-bot-games-per-session``), the rest refused with ``too_many_bot_games``, and
  the bots think in the worker pool (``--bot-workers``), not on the event loop;
- ``list_rooms``: 5 connections ask for ``list_rooms`` at the rate limit, with 2,000 public
  rooms on the server, and read every answer (a page of 100 from the per-game index: its
  cost does not grow with the rooms; encoded once until the listing changes);
- ``room_cap``: 16 connections (16 sessions) create public rooms at the rate limit (server
  ``--max-rooms 400``): each session holds at most 3 waiting rooms
  (``--max-waiting-per-session``) and the address 32 (``--max-waiting-per-ip``), so 32 are
  made and the rest refused with ``too_many_rooms``; ``create_room`` would stop at 360
  anyway (``--quick-match-reserve`` keeps a tenth for quick match);
- ``connections``: one address opens as many connections as it can (up to 3,000) and holds
  them;
- ``replays``: 40 whole games (about 440 plies each) are played to their end first, as fast
  as they go (the per-connection frame rate is lifted for that: ``--rate-per-second``); then one
  address asks over HTTP, at its ``/api/*`` rate limit (10 a second), for their replays
  (``/api/games/{id}/replay?seat=0|1|all``), records and texts in turn, 200 distinct answers
  of 0.1-1 MB, more than the record cache holds (16 MiB): nearly every answer is built
  afresh, in the server's record worker process (``server.recordworker``).

Per row: the pair's move-to-opponent p50/p99 without and with the abuse, the server's RSS
growth (peak while abused, less before) per abusive connection, whether the abuser was
refused or dropped as documented (``-`` where the documentation promises no refusal), and
the errors and disconnects of everyone else (the pair and, where a scenario needs them, the
hosts of the public rooms). Targets: p99 under abuse <= 3 x the baseline p99 and <= 20 ms;
RSS growth per abusive connection < ``max_outbox_bytes`` + 64 KB; nobody else gets an error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repo, not bench/, goes on sys.path
    sys.path[0:1] = [str(Path(__file__).resolve().parent.parent)]

import orjson

from bench import driver
from bench.wsclient import (
    REPO,
    HelpFormatter,
    LeanClient,
    connect,
    http_get,
    parse_prometheus,
    percentiles,
    proc_status,
    progress,
    raise_nofile,
    start_process,
    stop_process,
)
from stacko.server.config import ServerConfig

ABUSER_IP = "127.0.0.2"
PACE = 0.15
PAIR_OPTIONS = {"turn_cap": 30, "rounds": 1, "clock_ms": 30_000}
BOUND = ServerConfig().max_outbox_bytes
SLACK = 65_536
P99_RATIO, P99_MS = 3.0, 20.0

HOSTS = ("--max-connections-per-ip", "0", "--hello-burst-per-ip", "5000")
HOSTS += ("--max-waiting-per-ip", "0")
"""The public rooms' hosts are many sessions from the pair's address (one waiting room each,
the per-session cap being 3): the per-address limits on connections, ``hello`` s
and waiting rooms are lifted for them; the abuser uses a handful of connections, far below
either."""

SCENARIOS: dict[str, dict[str, Any]] = {
    "ping_flood": {"server": []},
    "frame_flood": {"server": []},
    "slow_consumer": {"server": [*HOSTS], "rooms": 200},
    "bot_rooms": {"server": []},
    "list_rooms": {"server": [*HOSTS], "rooms": 2000},
    "room_cap": {"server": ["--max-rooms", "400"], "ramp": 3.5},
    "connections": {"server": []},
    "replays": {"server": [*HOSTS, "--rate-per-second", "5000", "--burst", "5000"], "games": 40},
}
"""Server flags, public rooms (each from its own connection) set up before the baseline,
and how long the abuse runs before the pair starts (room_cap: until the cap could be full;
the setup figures are divided by 10 in quick mode)."""
SETTLE_S = 1.5
"""How long an abuser reads what the server still has for it (close frames) at the end."""
QUICK = False
"""The abuser runs for ``--quick`` (2 s): too short for a slow consumer's drop to show."""


def hello(name: str) -> bytes:
    return orjson.dumps({"type": "hello", "protocol": 1, "name": name})


# -- the abusers (run in their own process: ``--abuser KIND``) ----------------------------------


class Tally:
    """What the abuser's connections saw: error codes, close codes, losses."""

    def __init__(self) -> None:
        self.conns = 0
        self.errors: Counter[str] = Counter()
        self.closes: Counter[str] = Counter()
        self.http: Counter[str] = Counter()
        self.lost = 0
        self.answers = 0
        self.clients: list[LeanClient] = []

    def on_message(self, client: LeanClient, payload: bytes) -> None:
        msg = orjson.loads(payload)
        if msg.get("type") == "error":
            self.errors[msg["code"]] += 1
        else:
            self.answers += 1

    def on_lost(self, client: LeanClient, by_us: bool) -> None:
        if not by_us:
            self.lost += 1

    async def open(self, url: str, name: str | None, rcvbuf: int | None = None) -> LeanClient:
        client = await connect(url, self.on_message, self.on_lost, rcvbuf=rcvbuf,
                               local_addr=ABUSER_IP, timeout=10)  # fmt: skip
        self.conns += 1
        self.clients.append(client)
        if name is not None:
            client.send(hello(name))
        return client

    async def settle(self) -> None:
        """Read everything the server still has for us (the close frames above all)."""
        for c in self.clients:
            if c.transport is not None and not c.transport.is_closing():
                c.transport.resume_reading()
        await asyncio.sleep(SETTLE_S)
        for c in self.clients:
            if c.close_code is not None:
                self.closes[str(c.close_code)] += 1

    def report(self, **extra: Any) -> dict[str, Any]:
        return {
            "conns": self.conns, "errors": dict(self.errors), "closes": dict(self.closes),
            "http": dict(self.http), "lost": self.lost, "answers": self.answers, **extra,
        }  # fmt: skip


def _ended(c: LeanClient) -> bool:
    return c.closed or c.transport is None or c.transport.is_closing()


async def ping_flood(url: str, until: float, t: Tally) -> dict[str, Any]:
    ping = bytes([0x89, 0x80 | 125]) + b"\0\0\0\0" + b"p" * 125
    clients = [await t.open(url, f"pinger{i}", rcvbuf=4096) for i in range(4)]
    for c in clients:
        assert c.transport is not None
        c.transport.pause_reading()  # never read
    written = 0
    while time.monotonic() < until:
        for c in clients:
            tr = c.transport
            if tr is not None and not tr.is_closing() and tr.get_write_buffer_size() < 1 << 20:
                tr.write(ping * 500)
                written += 500 * len(ping)
        await asyncio.sleep(0.02)
    await t.settle()
    stopped = sum(1 for c in clients if _ended(c) or c.close_code is not None)
    documented = t.errors.get("rate_limited", 0) + t.lost >= len(clients) or stopped == len(clients)
    return t.report(bytes_written=written, stopped=stopped, documented=documented)


async def frame_flood(url: str, until: float, t: Tally) -> dict[str, Any]:
    frame = orjson.dumps({"type": "ping"})
    batch = (bytes((0x81, 0x80 | len(frame))) + b"\0\0\0\0" + frame) * 1000
    clients = [await t.open(url, f"flooder{i}") for i in range(4)]
    while time.monotonic() < until:
        for i, c in enumerate(clients):
            if _ended(c):
                try:
                    clients[i] = c = await t.open(url, f"flooder{i}")
                except ConnectionError as exc:  # refused (429): try again next round
                    t.http[str(exc)[-40:]] += 1
                    continue
            assert c.transport is not None
            if c.transport.get_write_buffer_size() < 1 << 20:
                c.transport.write(batch)
        await asyncio.sleep(0.02)
    await t.settle()
    refused = t.errors.get("rate_limited", 0) + t.errors.get("too_many_hellos", 0)
    documented = refused >= t.conns - len(clients)
    return t.report(documented=documented)


async def slow_consumer(url: str, until: float, t: Tally) -> dict[str, Any]:
    clients = [await t.open(url, f"slow{i}", rcvbuf=4096) for i in range(6)]
    for c in clients:
        assert c.transport is not None
        c.transport.pause_reading()
    asked = 0
    ask = orjson.dumps({"type": "list_rooms"})
    while time.monotonic() < until:
        for c in clients:
            c.send(ask)
        asked += len(clients)
        await asyncio.sleep(0.055)  # just under the rate limit (20 a second)
    dropped = sum(1 for c in clients if _ended(c))
    await t.settle()
    gone = sum(1 for c in clients if c.close_code in (1008, 1011) or _ended(c))
    documented: bool | None = gone == len(clients)
    if QUICK and not documented:
        documented = None  # the drop takes 7-40 s (socket buffers fill first): not in 2 s
    return t.report(asked=asked, dropped_while_abusing=dropped, gone=gone, documented=documented)


async def bot_rooms(url: str, until: float, t: Tally) -> dict[str, Any]:
    c = await t.open(url, "botfarm")
    create = orjson.dumps({
        "type": "create_room", "options": {"bricks": 200, "tower": 20, "rounds": 1},
        "bot": "strong", "seat": 1, "public": False,
    })  # fmt: skip
    sent = 0
    while time.monotonic() < until and not _ended(c):
        c.send(create)
        sent += 1
        await asyncio.sleep(0.1)
    await t.settle()
    refused = sum(n for code, n in t.errors.items() if code != "rate_limited")
    return t.report(created_asked=sent, documented=refused > 0)


async def list_rooms(url: str, until: float, t: Tally) -> dict[str, Any]:
    clients = [await t.open(url, f"lister{i}") for i in range(5)]
    ask = orjson.dumps({"type": "list_rooms"})
    while time.monotonic() < until:
        for c in clients:
            c.send(ask)
        await asyncio.sleep(0.055)
    await t.settle()
    return t.report(documented=None)


async def room_cap(url: str, until: float, t: Tally) -> dict[str, Any]:
    clients = [await t.open(url, f"hoarder{i}") for i in range(16)]
    create = orjson.dumps({"type": "create_room", "options": {}, "public": True})
    while time.monotonic() < until:
        for c in clients:
            c.send(create)
        await asyncio.sleep(0.055)
    await t.settle()
    refused = sum(n for code, n in t.errors.items() if code not in ("rate_limited",))
    return t.report(documented=refused > 0)


async def connections(url: str, until: float, t: Tally, most: int = 3000) -> dict[str, Any]:
    async def one() -> None:
        try:
            await t.open(url, None)
            t.http["101"] += 1
        except ConnectionError as exc:
            text = str(exc)
            code = text.split("HTTP/1.1 ", 1)[1][:3] if "HTTP/1.1 " in text else "cut"
            t.http[code] += 1
        except (OSError, TimeoutError):
            t.http["error"] += 1

    tried = 0
    while tried < most and time.monotonic() < until:
        await asyncio.gather(*(one() for _ in range(50)))
        tried += 50
    await asyncio.sleep(max(0.0, until - time.monotonic()))  # hold them
    held = sum(1 for c in t.clients if not _ended(c))
    cap = ServerConfig().max_connections_per_ip
    documented = t.http.get("101", 0) <= cap and t.http.get("429", 0) > 0
    return t.report(tried=tried, held=held, cap=cap, documented=documented)


async def replays(url: str, until: float, t: Tally) -> dict[str, Any]:
    status, body = await http_get(url, "/api/games?limit=100", 30.0, ABUSER_IP)
    ids = [g["id"] for g in orjson.loads(body)["games"]] if status == 200 else []
    paths = [f"/api/games/{i}{s}" for s in ("/replay?seat=all", "/replay?seat=0",
             "/replay?seat=1", "", ".txt") for i in ids]  # fmt: skip
    sizes: list[int] = []
    tasks: set[asyncio.Task[None]] = set()

    async def one(path: str) -> None:
        try:
            code, answer = await http_get(url, path, 30.0, ABUSER_IP)
        except (OSError, TimeoutError):
            t.http["error"] += 1
            return
        t.http[str(code)] += 1
        if code == 200:
            sizes.append(len(answer.encode()))

    n = 0
    while paths and time.monotonic() < until:
        task = asyncio.create_task(one(paths[n % len(paths)]))  # not waiting for the answer
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        n += 1
        await asyncio.sleep(0.1)  # the rate limit: 10 a second
    if tasks:
        await asyncio.wait(tasks, timeout=30)
    t.conns = max(1, n)
    served = sorted(sizes)
    return t.report(
        games=len(ids),
        asked=n,
        distinct=len(paths),
        answered_bytes=sum(sizes),
        median_answer_kb=round(served[len(served) // 2] / 1024) if served else 0,
        documented=None,
    )


ABUSERS = {
    "ping_flood": ping_flood, "frame_flood": frame_flood, "slow_consumer": slow_consumer,
    "bot_rooms": bot_rooms, "list_rooms": list_rooms, "room_cap": room_cap,
    "connections": connections, "replays": replays,
}  # fmt: skip


async def abuser_main(kind: str, url: str, seconds: float) -> dict[str, Any]:
    t = Tally()
    out = await ABUSERS[kind](url, time.monotonic() + seconds, t)
    for c in t.clients:
        c.abort()
    return out


# -- the scenario (the main process: server, pair, public rooms) --------------------------------


async def public_rooms(url: str, n: int, errors: Counter[str]) -> list[LeanClient]:
    """``n`` public waiting rooms, each held by its own connection (so that no per-session cap
    stands in the way), with long names: the answers to ``list_rooms`` get large."""

    def on_message(client: LeanClient, payload: bytes) -> None:
        msg = orjson.loads(payload)
        if msg["type"] == "error":
            errors[msg["code"]] += 1
        elif msg["type"] == "joined" and not client.tag.done():
            client.tag.set_result(None)

    def on_lost(client: LeanClient, by_us: bool) -> None:
        if not by_us:
            errors["disconnect"] += 1

    loop = asyncio.get_running_loop()
    hosts: list[LeanClient] = []
    for start in range(0, n, 100):
        batch = [await connect(url, on_message, on_lost, tag=loop.create_future())
                 for _ in range(start, min(n, start + 100))]  # fmt: skip
        for i, c in enumerate(batch):
            c.send(hello(f"host{start + i:05d}-{'x' * 22}"))
            c.send(orjson.dumps({"type": "create_room", "options": {}, "public": True}))
        await asyncio.wait_for(asyncio.gather(*(c.tag for c in batch)), 60)
        hosts.extend(batch)
    return hosts


async def finished_games(url: str, n: int) -> int:
    """Play ``n`` whole games (the default options) to their end, as fast as they go (about
    a second at 20,000 moves a second; 8 s leaves room on a loaded machine)."""
    res = await driver.run("match", [url], n, pace=0.0, duration=8.0, warmup=0.0, games=1,
                           options={}, seed=11, setup_timeout=30)  # fmt: skip
    return int(res.summary["games"])


async def gc_figures(url: str) -> dict[str, float]:
    """The server's paced collector so far (``/metrics``): a walk of the frozen objects
    (``full``) pauses every game, so a p99 miss with a long one is the collector's."""
    try:
        status, body = await http_get(url, "/metrics")
    except (OSError, TimeoutError):
        return {}
    m = parse_prometheus(body) if status == 200 else {}
    return {
        "full_walks": m.get('stacko_gc_pauses_total{walk="full"}', 0.0),
        "pause_max_ms": round(1000 * m.get("stacko_gc_pause_max_seconds", 0.0), 2),
    }


async def pair(url: str, seconds: float) -> dict[str, Any]:
    res = await driver.run("match", [url], 1, pace=PACE, duration=seconds, warmup=0.5,
                           options=PAIR_OPTIONS, seed=7, setup_timeout=10)  # fmt: skip
    s = res.summary
    return {
        "latency": percentiles(res.lat), "moves": s["moves"], "errors": s["errors"],
        "disconnects": s["disconnects"], "error_codes": s["error_codes"],
        "setup_failures": s["setup_failures"],
    }  # fmt: skip


async def scenario(kind: str, seconds: float, quick: bool = False) -> dict[str, Any]:
    spec = SCENARIOS[kind]
    rooms = spec.get("rooms", 0) // (10 if quick else 1)
    ramp = spec.get("ramp", 1.0) / (4 if quick else 1)
    data = tempfile.TemporaryDirectory(prefix="stacko-abuse-")  # the store on, not in ~
    argv = [sys.executable, "-m", "stacko.server", "--port", "0", "--log-level", "ERROR",
            "--data-dir", data.name, *spec["server"]]  # fmt: skip
    try:
        proc, url = start_process(argv, r"(ws://\S+/)")
    except BaseException:
        data.cleanup()
        raise
    out: dict[str, Any] = {"kind": kind, "server_flags": spec["server"]}
    host_errors: Counter[str] = Counter()
    hosts: list[LeanClient] = []
    try:
        if rooms:
            hosts = await public_rooms(url, rooms, host_errors)
        out["public_rooms"] = len(hosts)
        if spec.get("games"):
            out["finished_games"] = await finished_games(url, spec["games"] // (4 if quick else 1))
        out["baseline"] = await pair(url, seconds)
        out["gc_after_baseline"] = await gc_figures(url)
        await asyncio.sleep(0.5)
        rss_before = proc_status(proc.pid).get("VmRSS", 0)
        abuser = await asyncio.create_subprocess_exec(
            sys.executable, str(REPO / "bench" / "abuse.py"), "--abuser", kind, "--url", url,
            "--seconds", str(ramp + seconds + 0.5), *(["--quick"] if quick else []), cwd=REPO,
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        peak = rss_before
        sampling = True

        async def sample() -> None:
            nonlocal peak
            while sampling:
                peak = max(peak, proc_status(proc.pid).get("VmRSS", 0))
                await asyncio.sleep(0.1)

        sampler = asyncio.create_task(sample())
        await asyncio.sleep(ramp)  # the abuse is under way before the pair starts
        out["abused"] = await pair(url, seconds)
        out["gc_after_abuse"] = await gc_figures(url)
        stdout, _ = await asyncio.wait_for(abuser.communicate(), seconds + 60)
        sampling = False
        await sampler
        lines = stdout.decode().strip().splitlines()
        out["abuser"] = json.loads(lines[-1]) if lines else {"error": "no report"}
        out["rss_before_kb"] = rss_before
        out["rss_peak_kb"] = peak
        out["others_errors"] = dict(host_errors)
    finally:
        for c in hosts:
            c.abort()
        stop_process(proc)
        data.cleanup()
    return judge(out)


def judge(out: dict[str, Any]) -> dict[str, Any]:
    base, abused, ab = out["baseline"], out["abused"], out["abuser"]
    b99, a99 = base["latency"]["p99_ms"], abused["latency"]["p99_ms"]
    out["p99_ok"] = bool(b99 and a99 is not None and a99 <= P99_RATIO * b99 and a99 <= P99_MS)
    conns = max(1, int(ab.get("conns", 1)))
    growth = max(0, out["rss_peak_kb"] - out["rss_before_kb"]) * 1024
    out["rss_growth_per_conn_b"] = growth // conns
    out["rss_ok"] = out["rss_growth_per_conn_b"] < BOUND + SLACK
    others = abused["errors"] + abused["disconnects"] + abused["setup_failures"]
    others += sum(out["others_errors"].values())
    out["others_errors_total"] = others
    out["others_ok"] = others == 0
    documented = ab.get("documented")
    out["pass"] = bool(out["p99_ok"] and out["rss_ok"] and out["others_ok"]
                       and documented is not False)  # fmt: skip
    return out


async def run(kinds: list[str], seconds: float, quick: bool = False) -> list[dict[str, Any]]:
    results = []
    for kind in kinds:
        progress(f"== abuse: {kind} ({seconds:g} s alone, {seconds:g} s abused)")
        r = await scenario(kind, seconds, quick)
        progress(f"   {row(r)}")
        results.append(r)
    return results


def row(r: dict[str, Any]) -> str:
    b, a = r["baseline"]["latency"], r["abused"]["latency"]
    doc = r["abuser"].get("documented")
    return (
        f"{r['kind']:<14} p50 {b['p50_ms']} -> {a['p50_ms']} ms, p99 {b['p99_ms']} -> "
        f"{a['p99_ms']} ms, RSS +{r['rss_growth_per_conn_b'] / 1024:.0f} KB/conn "
        f"({r['abuser'].get('conns')} conns), refused/dropped as documented: "
        f"{'-' if doc is None else ('yes' if doc else 'NO')}, others' errors "
        f"{r['others_errors_total']}, {gc_text(r)}  {'PASS' if r['pass'] else 'FAIL'}"
    )


def gc_text(r: dict[str, Any]) -> str:
    """Walks of the frozen objects (all pause the server) while the pair played."""
    before, after = r.get("gc_after_baseline") or {}, r.get("gc_after_abuse") or {}
    if not after:
        return "gc ?"
    walks = after.get("full_walks", 0) - before.get("full_walks", 0)
    total, longest = after.get("full_walks", 0), after.get("pause_max_ms")
    return f"gc full walks {walks:.0f}/{total:.0f}, max {longest} ms"


def table(results: list[dict[str, Any]]) -> str:
    head = ("scenario", "p50 ms (alone -> abused)", "p99 ms (alone -> abused)", "p99 target",
            "RSS KB/abusive conn", "conns", "documented", "others' errors", "server GC",
            "")  # fmt: skip
    rows = [head]
    for r in results:
        b, a = r["baseline"]["latency"], r["abused"]["latency"]
        doc = r["abuser"].get("documented")
        rows.append((
            r["kind"], f"{b['p50_ms']} -> {a['p50_ms']}", f"{b['p99_ms']} -> {a['p99_ms']}",
            "ok" if r["p99_ok"] else "MISSED", f"{r['rss_growth_per_conn_b'] / 1024:.0f}",
            str(r["abuser"].get("conns")), "-" if doc is None else ("yes" if doc else "NO"),
            str(r["others_errors_total"]), gc_text(r), "PASS" if r["pass"] else "FAIL",
        ))  # fmt: skip
    widths = [max(len(x[i]) for x in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(x, widths, strict=True)).rstrip() for x in rows]
    lines.insert(1, "-" * len(lines[0]))
    lines.append(
        f"(targets: p99 abused <= {P99_RATIO:g} x alone and <= {P99_MS:g} ms; RSS growth per "
        f"abusive connection < {BOUND // 1024} KB + {SLACK // 1024} KB; no error for others)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--seconds", type=float, default=None,
                    help="baseline and abuse, each (default 15, quick 2)")  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="2 s each, a tenth of the rooms")
    ap.add_argument("--only", action="append", choices=list(SCENARIOS), help="scenario(s)")
    ap.add_argument("--json-out", default=None, help="write every raw figure here")
    ap.add_argument("--abuser", choices=list(ABUSERS), help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    raise_nofile()
    if args.abuser:
        global SETTLE_S, QUICK
        SETTLE_S = 0.5 if args.quick else SETTLE_S
        QUICK = args.quick
        print(json.dumps(asyncio.run(abuser_main(args.abuser, args.url, args.seconds))))
        return 0
    seconds = args.seconds if args.seconds is not None else (2.0 if args.quick else 15.0)
    results = asyncio.run(run(args.only or list(SCENARIOS), seconds, args.quick))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=2))
    print(table(results))
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())
