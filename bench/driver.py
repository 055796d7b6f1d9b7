"""The load engine behind ``loadgen.py`` and ``echo.py``: units of load spread over workers.

A *unit* is an echo connection (``EchoUnit``: send a move-sized frame, time the echo), a
relay pair (``RelayUnit``: the game's frame pattern with no game behind it: a move-sized frame
in from one of two connections, a state-sized frame out to each, the opponent first) or a
match (``MatchUnit``: two connections play Stacko through the real protocol: hello,
create_room with options, join, random legal moves with the current ply, rematch when a game
ends). All use ``wsclient.LeanClient`` and run as callbacks on one event loop: a worker
process holds thousands of connections without a task per connection.

Pace: 0 = as fast as possible (each unit has one request in flight: a closed loop), or one
request every ``pace`` seconds per unit, the first at a random offset so load is even.

A run is the same in one process or in ``procs`` worker processes (``run``):
connect and set up every unit -> "go" for all at once -> play for ``duration`` seconds ->
results (connections still held, so the caller can read the server's RSS and /metrics) ->
close. Counters and latency samples only count after ``warmup`` seconds.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import gc
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from bench.wsclient import REPO, LeanClient, connect, percentiles, raise_nofile, self_cpu

perf = time.perf_counter

ECHO_PAYLOAD = orjson.dumps(
    {"type": "move", "room": "ABCDEF", "ply": 123, "move": {"action": "take", "slot": 3},
     "id": 12345}
)  # fmt: skip
"""What the echo units send: the size and shape of a move frame."""

RELAY_FRAME = orjson.dumps({"type": "state", "room": "ABCDEF", "pad": "x" * 900})
"""What the relay server sends to both connections of a pair: the size of a state frame
(900-1,000 bytes in a Stacko game)."""


@dataclass
class Spec:
    kind: str  # "match", "echo" or "relay"
    urls: list[str]
    units: list[int]
    """Global unit indices this worker runs (unit i talks to urls[i % len(urls)])."""
    pace: float = 0.0
    duration: float = 10.0
    warmup: float = 1.0
    options: dict[str, Any] = field(default_factory=lambda: {"turn_cap": 30, "rounds": 1})
    games: int = 0
    """Games per match at most (0: no limit but the duration)."""
    public: bool = False
    """Create public rooms (listed by ``list_rooms``, e.g. for spectators to find)."""
    rematch_delay: float = 0.0
    """After a game, a match asks for its rematch after a random 0..rematch_delay seconds
    (players do not all start a new game in the same instant)."""
    connect_concurrency: int = 200
    setup_timeout: float = 120.0
    seed: int | None = None
    cross: bool = False
    """Match units put their second player on the next URL (another node of a cluster)."""


class Stats:
    __slots__ = (
        "disconnects", "error_codes", "errors", "games", "lat", "lat_t", "moves", "own", "sent",
        "setup_failures", "window_start",
    )  # fmt: skip

    def __init__(self) -> None:
        self.moves = 0  # acknowledged (echoed / state frame seen by the mover) in the window
        self.sent = 0
        self.games = 0
        self.errors = 0
        self.error_codes: Counter[str] = Counter()
        self.disconnects = 0
        self.setup_failures = 0
        self.lat: list[float] = []  # move -> opponent's state frame (echo: round trip)
        self.lat_t: list[float] = []  # when each of those was sent (perf_counter)
        self.own: list[float] = []  # move -> mover's own state frame
        self.window_start = float("inf")


class Worker:
    """Runs ``spec.units`` in this process."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.stats = Stats()
        self.rng = random.Random(spec.seed)
        self.running = False
        self.stopped = False
        self.clients: list[LeanClient] = []
        self.units: list[Any] = []
        self.ready = 0
        self.loop = asyncio.get_running_loop()
        self.cpu0 = 0.0
        self.play_started = 0.0
        self.play_ended = 0.0
        self.lag: list[float] = []

    @property
    def open_connections(self) -> int:
        return sum(1 for c in self.clients if c.open and not c.closed)

    def on_lost(self, client: LeanClient, by_us: bool) -> None:
        if not by_us and not self.stopped:
            self.stats.disconnects += 1

    async def setup(self) -> None:
        sem = asyncio.Semaphore(self.spec.connect_concurrency)
        cls = {"match": MatchUnit, "echo": EchoUnit, "relay": RelayUnit}[self.spec.kind]
        self.units = [
            cls(self, i, self.spec.urls[i % len(self.spec.urls)]) for i in self.spec.units
        ]

        async def one(unit: Any) -> None:
            try:
                async with sem:
                    await unit.connect()
                await asyncio.wait_for(unit.ready, self.spec.setup_timeout)
                self.ready += 1
            except (OSError, TimeoutError, ConnectionError) as exc:
                self.stats.setup_failures += 1
                if self.stats.setup_failures <= 3:
                    print(f"setup failed: {exc!r}", file=sys.stderr, flush=True)

        await asyncio.gather(*(one(u) for u in self.units))

    def go(self) -> None:
        # The client must not pause to collect garbage while it measures: everything set up
        # so far is frozen, and per-frame garbage is freed by reference counting anyway.
        gc.collect()
        gc.freeze()
        gc.disable()
        self.cpu0 = self_cpu()
        now = perf()
        self.play_started = now
        self.stats.window_start = now + self.spec.warmup
        self.running = True
        for unit in self.units:
            if unit.is_ready:
                unit.start(now)

    async def play(self) -> None:
        lag = asyncio.create_task(self._watch_lag())
        await asyncio.sleep(self.spec.duration)
        lag.cancel()
        self.running = False
        self.play_ended = perf()
        await asyncio.sleep(0.5)  # let the requests in flight land

    async def _watch_lag(self) -> None:
        """How late this client's own event loop runs a 10 ms timer: if it is often late, the
        client (not the server) adds latency, and the figures would be wrong."""
        while True:
            t = perf()
            await asyncio.sleep(0.01)
            if perf() >= self.stats.window_start:
                self.lag.append(perf() - t - 0.01)

    def snapshot(self) -> dict[str, Any]:
        s = self.stats
        return {
            "conns": self.open_connections, "ready": self.ready, "units": len(self.spec.units),
            "moves": s.moves, "sent": s.sent, "games": s.games, "errors": s.errors,
            "disconnects": s.disconnects, "setup_failures": s.setup_failures,
        }  # fmt: skip

    def result(self) -> dict[str, Any]:
        s = self.stats
        window = max(1e-9, self.play_ended - min(s.window_start, self.play_ended))
        return {
            **self.snapshot(),
            "window_s": window,
            "error_codes": dict(s.error_codes),
            "client_cpu_s": self_cpu() - self.cpu0,
            "play_s": self.play_ended - self.play_started,
            "loop_lag_ms": percentiles(self.lag, (99,)),
        }

    async def close(self) -> None:
        gc.enable()
        gc.unfreeze()
        self.stopped = True
        for c in self.clients:
            c.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(  # noqa: ASYNC110 (polls sockets, bounded)
            c.transport is not None and not c.transport.is_closing() for c in self.clients
        ):
            await asyncio.sleep(0.1)
        for c in self.clients:
            c.abort()


class EchoUnit:
    """One connection to an echo server: a frame out, the same frame back."""

    __slots__ = ("client", "due", "idx", "is_ready", "ready", "t0", "url", "w")

    def __init__(self, w: Worker, idx: int, url: str) -> None:
        self.w, self.idx, self.url = w, idx, url
        self.ready: asyncio.Future[None] = w.loop.create_future()
        self.is_ready = False
        self.client: LeanClient | None = None
        self.t0 = 0.0
        self.due = 0.0

    async def connect(self) -> None:
        self.client = await connect(self.url, self.on_message, self.w.on_lost)
        self.w.clients.append(self.client)
        self.is_ready = True
        self.ready.set_result(None)

    def start(self, now: float) -> None:
        pace = self.w.spec.pace
        if pace <= 0:
            self.send()
        else:
            self.w.loop.call_later(self.w.rng.uniform(0, pace), self.tick)

    def tick(self) -> None:
        if self.w.running:
            self.send()
            self.w.loop.call_later(self.w.spec.pace, self.tick)

    def send(self) -> None:
        assert self.client is not None
        self.t0 = perf()
        self.w.stats.sent += 1
        self.client.send(ECHO_PAYLOAD)

    def on_message(self, client: LeanClient, payload: bytes) -> None:
        now = perf()
        w = self.w
        if self.t0 >= w.stats.window_start:
            w.stats.lat.append(now - self.t0)
            w.stats.lat_t.append(self.t0)
            w.stats.moves += 1
        if w.running and w.spec.pace <= 0:
            self.send()


class Player:
    __slots__ = ("client", "name", "turn", "unit")

    def __init__(self, unit: MatchUnit, name: str) -> None:
        self.unit = unit
        self.name = name
        self.client: LeanClient | None = None
        self.turn: tuple[int, list[Any]] | None = None
        """(ply, legal) while it is this player's turn and no move was sent yet."""


class RelayUnit:
    """Two connections to the relay server (``bench/echo.py``, path ``/relay``), taking turns
    like two players: the mover sends a move-sized frame, the server sends a state-sized
    frame to the opponent and then to the mover, and when both have it the other side moves.
    The game's frame pattern and timing with no parsing, rules or views: the ceiling a game
    server on this transport can reach."""

    __slots__ = ("a", "b", "due", "got", "idx", "is_ready", "mover", "ready", "t0", "url", "w")

    def __init__(self, w: Worker, idx: int, url: str) -> None:
        self.w, self.idx, self.url = w, idx, url.rstrip("/") + "/relay"
        self.ready: asyncio.Future[None] = w.loop.create_future()
        self.is_ready = False
        self.a: LeanClient | None = None
        self.b: LeanClient | None = None
        self.mover: LeanClient | None = None
        self.got = [0, 0]
        """Frames each side still waits for: [a, b]; while a side waits, it cannot move."""
        self.t0 = 0.0
        self.due = 0.0

    async def connect(self) -> None:
        key = f"pair:{os.getpid()}:{self.idx}".encode()
        self.a = await connect(self.url, self.on_message, self.w.on_lost)
        self.b = await connect(self.url, self.on_message, self.w.on_lost)
        self.w.clients += [self.a, self.b]
        self.got = [1, 1]  # each waits for "paired"
        self.a.send(key)
        self.b.send(key)

    def start(self, now: float) -> None:
        pace = self.w.spec.pace
        self.due = now + (self.w.rng.uniform(0, pace) if pace > 0 else 0.0)
        self.mover = self.a
        self.schedule()

    def schedule(self) -> None:
        delay = self.due - perf()
        if delay <= 0:
            self.move()
        else:
            self.w.loop.call_later(delay, self.move)

    def move(self) -> None:
        w = self.w
        if not w.running or self.mover is None:
            return
        self.got = [1, 1]
        self.t0 = perf()
        if w.spec.pace > 0:
            self.due = self.t0 + w.spec.pace
        w.stats.sent += 1
        self.mover.send(ECHO_PAYLOAD)

    def on_message(self, client: LeanClient, payload: bytes) -> None:
        now = perf()
        side = 0 if client is self.a else 1
        if self.got[side] <= 0:
            return
        self.got[side] = 0
        if not self.is_ready:
            if self.got == [0, 0]:
                self.is_ready = True
                self.ready.set_result(None)
            return
        w = self.w
        counted = self.t0 >= w.stats.window_start
        if client is not self.mover and counted:
            w.stats.lat.append(now - self.t0)
            w.stats.lat_t.append(self.t0)
        if self.got == [0, 0]:
            if counted:
                w.stats.own.append(now - self.t0)  # the last of the two: usually the mover's
                w.stats.moves += 1
            self.mover = self.b if self.mover is self.a else self.a
            if w.running:
                self.schedule()


class MatchUnit:
    """Two connections, one room, games one after another (rematch) until told to stop."""

    __slots__ = (
        "a", "b", "due", "game_over_seq", "games", "idx", "is_ready", "pending", "ready",
        "rematch_at", "req", "room", "states", "timer", "url", "url_b", "w", "welcomed",
    )  # fmt: skip

    def __init__(self, w: Worker, idx: int, url: str) -> None:
        self.w, self.idx, self.url = w, idx, url
        urls = w.spec.urls
        self.url_b = urls[(idx + 1) % len(urls)] if w.spec.cross else url
        self.a = Player(self, f"lg{idx}a")
        self.b = Player(self, f"lg{idx}b")
        self.ready: asyncio.Future[None] = w.loop.create_future()
        self.is_ready = False
        self.room: str | None = None
        self.welcomed = 0
        self.states = 0
        self.games = 0
        self.game_over_seq = -1
        self.rematch_at = 0.0
        self.req = 0
        self.pending: dict[int, list[Any]] = {}
        """ply after the move -> [t0, mover, own frame seen, opponent frame seen]"""
        self.due = 0.0
        self.timer: asyncio.TimerHandle | None = None

    async def connect(self) -> None:
        for p, url in ((self.a, self.url), (self.b, self.url_b)):
            client = await connect(url, self.on_message, self.w.on_lost, tag=p)
            p.client = client
            self.w.clients.append(client)
            client.send(orjson.dumps({"type": "hello", "protocol": 1, "name": p.name}))

    def start(self, now: float) -> None:
        pace = self.w.spec.pace
        self.due = now + (self.w.rng.uniform(0, pace) if pace > 0 else 0.0)
        for p in (self.a, self.b):
            if p.turn is not None:
                self.schedule(p)

    # -- frames ----------------------------------------------------------------------------

    def on_message(self, client: LeanClient, payload: bytes) -> None:
        now = perf()
        p: Player = client.tag
        msg = orjson.loads(payload)
        kind = msg["type"]
        w = self.w
        if kind == "state":
            view = msg["view"]
            ply = view["ply"]
            if self.pending:
                for key in [k for k in self.pending if k <= ply]:
                    entry = self.pending[key]
                    t0, mover = entry[0], entry[1]
                    counted = t0 >= w.stats.window_start
                    if p is mover:
                        if not entry[2]:
                            entry[2] = True
                            if counted:
                                w.stats.own.append(now - t0)
                                w.stats.moves += 1
                    elif not entry[3]:
                        entry[3] = True
                        if counted:
                            w.stats.lat.append(now - t0)
                            w.stats.lat_t.append(t0)
                    if entry[2] and entry[3]:
                        del self.pending[key]
            if view["outcome"] is not None:
                p.turn = None
                seq = msg["seq"]
                if seq != self.game_over_seq:
                    self.game_over_seq = seq
                    self.games += 1
                    if w.running:
                        w.stats.games += 1
                    delay = w.spec.rematch_delay
                    self.rematch_at = now + (w.rng.uniform(0, delay) if delay > 0 else 0.0)
                limit = w.spec.games
                if w.running and (limit <= 0 or self.games < limit):
                    delay = self.rematch_at - now
                    if delay > 0:
                        w.loop.call_later(delay, self.ask_rematch, p)
                    else:
                        self.ask_rematch(p)
                return
            legal = msg["legal"]
            if legal:
                p.turn = (ply, legal)
                if w.running:
                    self.schedule(p)
            else:
                p.turn = None
            if not self.is_ready:
                self.states += 1
                if self.states >= 2:
                    self.is_ready = True
                    self.ready.set_result(None)
        elif kind == "error":
            w.stats.errors += 1
            w.stats.error_codes[msg.get("code", "?")] += 1
            if w.stats.errors <= 5:
                print(f"error frame: {payload[:300]!r}", file=sys.stderr, flush=True)
        elif kind == "welcome":
            if p is self.a:
                client.send(
                    orjson.dumps(
                        {"type": "create_room", "game": "stacko", "public": w.spec.public,
                         "options": w.spec.options, "id": 1}
                    )
                )  # fmt: skip
            else:
                self.welcomed = 1
                self.join_if_ready()
        elif kind == "joined" and self.room is None and p is self.a:
            self.room = msg["room"]
            self.join_if_ready()

    def ask_rematch(self, p: Player) -> None:
        if self.w.running and p.client is not None:
            self.req += 1
            p.client.send(orjson.dumps({"type": "rematch", "room": self.room, "id": self.req}))

    def join_if_ready(self) -> None:
        if self.room is not None and self.welcomed == 1 and self.b.client is not None:
            self.welcomed = 2
            self.b.client.send(orjson.dumps({"type": "join", "room": self.room, "id": 2}))

    # -- moves -----------------------------------------------------------------------------

    def schedule(self, p: Player) -> None:
        pace = self.w.spec.pace
        if pace <= 0:
            self.move(p)
            return
        delay = self.due - perf()
        if delay <= 0:
            self.move(p)
        else:
            if self.timer is not None:
                self.timer.cancel()
            self.timer = self.w.loop.call_later(delay, self.move, p)

    def move(self, p: Player) -> None:
        self.timer = None
        w = self.w
        turn = p.turn
        if turn is None or not w.running or p.client is None:
            return
        p.turn = None
        ply, legal = turn
        self.req += 1
        frame = orjson.dumps(
            {"type": "move", "room": self.room, "ply": ply, "move": w.rng.choice(legal),
             "id": self.req}
        )  # fmt: skip
        now = perf()
        self.pending[ply + 1] = [now, p, False, False]
        if w.spec.pace > 0:
            self.due = now + w.spec.pace
        w.stats.sent += 1
        p.client.send(frame)


# -- running workers: in this process or in subprocesses -------------------------------------


class LocalWorker:
    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.worker: Worker | None = None
        self.last: dict[str, Any] = {}

    async def setup(self) -> None:
        self.worker = Worker(self.spec)
        await self.worker.setup()

    def go(self) -> None:
        assert self.worker is not None
        self.worker.go()

    async def play(self) -> tuple[dict[str, Any], list[float], list[float], list[float]]:
        assert self.worker is not None
        await self.worker.play()
        st = self.worker.stats
        return self.worker.result(), st.lat, st.own, st.lat_t

    def snapshot(self) -> dict[str, Any]:
        return self.worker.snapshot() if self.worker is not None else {}

    async def close(self) -> None:
        if self.worker is not None:
            await self.worker.close()


class RemoteWorker:
    """``python -m bench.driver`` in a subprocess, steered by lines on its stdin."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.proc: asyncio.subprocess.Process | None = None
        self.last: dict[str, Any] = {}
        self.events: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.reader: asyncio.Task[None] | None = None

    def _future(self, name: str) -> asyncio.Future[dict[str, Any]]:
        if name not in self.events:
            self.events[name] = asyncio.get_running_loop().create_future()
        return self.events[name]

    async def setup(self) -> None:
        env = dict(os.environ)
        repo = str(REPO)
        env["PYTHONPATH"] = repo
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.driver", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, cwd=repo, env=env, limit=2**24,
        )  # fmt: skip
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(self.spec.__dict__).encode() + b"\n")
        await self.proc.stdin.drain()
        self.reader = asyncio.create_task(self._read())
        self.last = await self._future("ready")

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                break
            event = json.loads(line)
            name = event.pop("event")
            if name == "progress":
                self.last = event
            else:
                fut = self._future(name)
                if not fut.done():
                    fut.set_result(event)
        for fut in self.events.values():
            if not fut.done():
                fut.set_exception(RuntimeError("worker exited early"))
        for name in ("ready", "result", "closed"):
            fut = self._future(name)
            if not fut.done():
                fut.set_exception(RuntimeError(f"worker exited before {name}"))

    async def _say(self, word: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(word.encode() + b"\n")
        await self.proc.stdin.drain()

    def go(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")

    async def play(self) -> tuple[dict[str, Any], list[float], list[float], list[float]]:
        res = await self._future("result")
        lat = _load_samples(res.pop("lat_file"))
        own = _load_samples(res.pop("own_file"))
        lat_t = _load_samples(res.pop("lat_t_file"))
        return res, lat, own, lat_t

    def snapshot(self) -> dict[str, Any]:
        return self.last

    async def close(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(Exception):
            await self._say("close")
            await asyncio.wait_for(self._future("closed"), 30)
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


def _dump_samples(samples: list[float]) -> str:
    fd, path = tempfile.mkstemp(prefix="stacko-bench-", suffix=".f64")
    with os.fdopen(fd, "wb") as f:
        array.array("d", samples).tofile(f)
    return path


def _load_samples(path: str) -> list[float]:
    data = array.array("d")
    with open(path, "rb") as f:
        data.frombytes(f.read())
    os.unlink(path)
    return data.tolist()


async def _worker_main() -> None:
    """Subprocess side of ``RemoteWorker``."""
    raise_nofile()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    def emit(name: str, **data: Any) -> None:
        sys.stdout.write(json.dumps({"event": name, **data}) + "\n")
        sys.stdout.flush()

    spec = Spec(**json.loads(await reader.readline()))
    worker = Worker(spec)
    await worker.setup()
    emit("ready", **worker.snapshot())
    if (await reader.readline()).strip() != b"go":
        return

    async def report() -> None:
        while True:
            await asyncio.sleep(1.0)
            emit("progress", **worker.snapshot())

    reporter = asyncio.create_task(report())
    worker.go()
    await worker.play()
    reporter.cancel()
    emit(
        "result", **worker.result(), lat_file=_dump_samples(worker.stats.lat),
        own_file=_dump_samples(worker.stats.own), lat_t_file=_dump_samples(worker.stats.lat_t),
    )  # fmt: skip
    await reader.readline()  # "close" (or EOF)
    await worker.close()
    emit("closed")


# -- the whole run ------------------------------------------------------------------------------


@dataclass
class RunResult:
    summary: dict[str, Any]
    lat: list[float]
    own: list[float]
    lat_t: list[float] = field(default_factory=list)


async def run(
    kind: str,
    urls: list[str],
    units: int,
    *,
    procs: int = 1,
    pace: float = 0.0,
    duration: float = 10.0,
    warmup: float = 1.0,
    options: dict[str, Any] | None = None,
    games: int = 0,
    rematch_delay: float = 0.0,
    public: bool = False,
    seed: int | None = None,
    label: str = "",
    on_progress: Callable[[float, dict[str, Any]], None] | None = None,
    before_close: Callable[[], Awaitable[None]] | None = None,
    setup_timeout: float = 120.0,
    cross: bool = False,
) -> RunResult:
    """Set up ``units`` units over ``procs`` workers, play, collect, close."""
    procs = max(1, min(procs, units))
    specs = [
        Spec(
            kind=kind, urls=urls, units=list(range(k, units, procs)), pace=pace,
            duration=duration, warmup=warmup,
            options=options if options is not None else {"turn_cap": 30, "rounds": 1},
            games=games, rematch_delay=rematch_delay, public=public,
            seed=None if seed is None else seed + k, setup_timeout=setup_timeout, cross=cross,
        )
        for k in range(procs)
    ]  # fmt: skip
    workers: list[LocalWorker | RemoteWorker] = (
        [LocalWorker(specs[0])] if procs == 1 else [RemoteWorker(s) for s in specs]
    )
    t_setup = perf()
    await asyncio.gather(*(w.setup() for w in workers))
    setup_s = perf() - t_setup
    snaps = [w.snapshot() for w in workers]
    if on_progress is not None:
        on_progress(-1.0, _sum(snaps))
    for w in workers:
        w.go()
    t0 = perf()

    async def ticker() -> None:
        while True:
            await asyncio.sleep(2.0)
            if on_progress is not None:
                on_progress(perf() - t0, _sum([w.snapshot() for w in workers]))

    tick = asyncio.create_task(ticker())
    try:
        results = await asyncio.gather(*(w.play() for w in workers))
    finally:
        tick.cancel()
    lat: list[float] = []
    own: list[float] = []
    lat_t: list[float] = []
    for _, la, ow, lt in results:
        lat.extend(la)
        own.extend(ow)
        lat_t.extend(lt)
    parts = [r[0] for r in results]
    summary = _sum(parts)
    summary["error_codes"] = dict(sum((Counter(p["error_codes"]) for p in parts), Counter()))
    summary["window_s"] = max(p["window_s"] for p in parts)
    summary["client_cpu_s"] = sum(p["client_cpu_s"] for p in parts)
    summary["play_s"] = max(p["play_s"] for p in parts)
    summary["client_loop_lag_p99_ms"] = max(p["loop_lag_ms"]["p99_ms"] or 0.0 for p in parts)
    summary["client_loop_lag_max_ms"] = max(p["loop_lag_ms"]["max_ms"] or 0.0 for p in parts)
    summary["setup_s"] = setup_s
    summary["procs"] = procs
    if before_close is not None:
        await before_close()
    await asyncio.gather(*(w.close() for w in workers))
    return RunResult(summary, lat, own, lat_t)


def _sum(parts: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("conns", "ready", "units", "moves", "sent", "games", "errors", "disconnects",
            "setup_failures")  # fmt: skip
    return {k: sum(int(p.get(k, 0)) for p in parts) for k in keys}


def latency_summary(samples: list[float]) -> dict[str, Any]:
    return percentiles(samples)


def timeline(lat: list[float], sent: list[float], step: float = 1.0) -> list[list[float]]:
    """[second, moves, p99 ms, max ms] per ``step`` seconds of sending time: where the tail
    comes from (a steady tail, or stalls at particular moments)."""
    if not sent:
        return []
    t0 = min(sent)
    buckets: dict[int, list[float]] = {}
    for t, v in zip(sent, lat, strict=True):
        buckets.setdefault(int((t - t0) / step), []).append(v)
    out = []
    for k in sorted(buckets):
        p = percentiles(buckets[k], (99,))
        out.append([round(k * step, 1), p["count"], p["p99_ms"], p["max_ms"]])
    return out


if __name__ == "__main__":
    asyncio.run(_worker_main())
