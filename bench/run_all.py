"""Every benchmark, one table: figures, the echo baseline of the same run, ratios, targets.

    python bench/run_all.py --quick          # about 2-3 minutes, scaled down
    python bench/run_all.py                  # full: 3 runs each, the 20,000-connection scale run
    python bench/run_all.py --json-out FILE  # also keep every raw figure

Steps (each a subprocess or the same code as the single tools):

1. engine: ``python bench/engine.py`` (moves/views/resamples per CPU-second), if present;
2. saturation, ``--runs`` times: echo round trips/s with N connections in a closed loop, the
   relay ceiling (N pairs: the game's 1 frame in, 2 frames out, with no game), then moves/s
   with N matches at pace 0 (1 frame in, 2 state frames out per move); medians;
3. light load, ``--runs`` times: echo, relay and 100 matches at one move every 2 s per match:
   move-to-opponent p50/p99 against echo p50/p99; medians;
4. scale: 10,000 matches (20,000 connections) at one move per match every 2 s (quick: 2,000
   matches): p99, errors, RSS per connection. One process cannot hold 20,000 sockets where
   the hard file limit is 20,000, so the full run then spreads the matches over two server
   processes (and says so). Store on and off alternate, twice each in the full run, and a
   row says whether each store-on figure stays within the store-off runs' spread;
5. one vs two server processes at saturation: N and 2N matches at pace 0 with the game's
   default options, from two client processes (so each server gets the same load);
6. asyncio vs uvloop (saturation, one run each), if uvloop is installed (full mode only);
7. slow consumers (``bench/slow_consumer.py``): dropped, memory bounded;
8. abuse (``bench/abuse.py``): one row per kind of abuse, the pair's p99 in another room
   alone and abused, RSS per abusive connection, refusals, others' errors (quick: 2 s each).

Absolute figures depend on the machine and on whatever else runs on it; the ratios to the
echo baseline, measured minutes apart with the same client, are the comparable part.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repo, not bench/, goes on sys.path
    sys.path[0:1] = [str(Path(__file__).resolve().parent.parent)]

from bench import abuse, echo, loadgen, slow_consumer
from bench import store as store_bench
from bench.wsclient import REPO, HelpFormatter, progress, raise_nofile
from stacko.server import compiled

SHORT_GAMES = '{"turn_cap": 10, "rounds": 1}'
NO_STORE = "--server-arg=--database=memory"
"""Servers run with the store on (the default, on a temporary data dir); the saturation and
light-load figures are also measured with it off, in alternating order, and shown beside."""
SCALE_PAIRS = 2
"""Full mode: the scale run twice with the store on and twice off, alternating."""


def store_view(g: dict[str, Any]) -> dict[str, Any]:
    return store_bench.store_figures(g)


def loadavg() -> list[str]:
    return Path("/proc/loadavg").read_text().split()[:3]


def median(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


async def game(argv: list[str]) -> dict[str, Any]:
    args = loadgen.build_parser().parse_args([*argv, "--no-baseline", "--quiet"])
    return await loadgen.run_load(args)


def engine_bench(quick: bool) -> dict[str, Any] | None:
    path = REPO / "bench" / "engine.py"
    if not path.exists():
        return None
    cmd = [sys.executable, str(path)] + (["--seconds", "1"] if quick else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)  # type: ignore[no-any-return]
            except json.JSONDecodeError:
                break
    return {"error": f"exit {out.returncode}: {out.stderr.strip()[-300:]}"}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    q = args.quick
    runs = args.runs
    sat_m = args.sat_matches
    sat_d = 4.0 if q else 10.0
    light_d = 8.0 if q else 30.0
    scale_m = 2000 if q else 10_000
    scale_d = 15.0 if q else 75.0
    loop = args.loop
    res: dict[str, Any] = {"quick": q, "runs": runs, "started": time.strftime("%F %T")}
    res["nofile"] = raise_nofile()
    res["loadavg_start"] = loadavg()
    running, stale = compiled.status()  # the servers it starts run this tree's modules
    res["compiled"] = {"modules": len(running), "of": len(compiled.MODULES), "stale": stale}

    progress("== engine")
    res["engine"] = engine_bench(q)

    progress(f"== saturation: echo vs {sat_m} matches at pace 0, {runs} runs of {sat_d:g} s")
    sat = []
    for i in range(runs):
        e = await echo.measure(conns=sat_m, pace=0, duration=sat_d, warmup=1, loop=loop,
                               quiet=True)  # fmt: skip
        rl = await echo.measure(conns=sat_m, kind="relay", pace=0, duration=sat_d, warmup=1,
                                loop=loop, quiet=True)  # fmt: skip
        argv = ["--matches", str(sat_m), "--duration", str(sat_d), "--warmup", "1",
                "--options", "{}", "--loop", loop]  # fmt: skip
        if i % 2:
            g0 = await game([*argv, NO_STORE])
            g = await game(argv)
        else:
            g = await game(argv)
            g0 = await game([*argv, NO_STORE])
        sat.append({"echo": e, "relay": rl, "game": g, "game_nostore": g0})
        progress(
            f"   run {i + 1}: echo {e['round_trips_per_s']:.0f} rt/s, relay "
            f"{rl['round_trips_per_s']:.0f} moves/s, game "
            f"{g['moves_per_s']:.0f} moves/s, ratio {g['moves_per_s'] / e['round_trips_per_s']:.3f}"
            f" (store off {g0['moves_per_s']:.0f} moves/s)"
        )
    res["saturation"] = sat

    progress(f"== light load: 100 conns/matches at one frame/move per 2 s, {runs} x {light_d:g} s")
    light = []
    for i in range(runs):
        e = await echo.measure(conns=100, pace=2.0, duration=light_d, warmup=1, loop=loop,
                               quiet=True)  # fmt: skip
        rl = await echo.measure(conns=100, kind="relay", pace=2.0, duration=light_d, warmup=1,
                                loop=loop, quiet=True)  # fmt: skip
        argv = ["--matches", "100", "--pace", "2", "--duration", str(light_d),
                "--warmup", "1", "--options", SHORT_GAMES, "--loop", loop]  # fmt: skip
        if i % 2:
            g0 = await game([*argv, NO_STORE])
            g = await game(argv)
        else:
            g = await game(argv)
            g0 = await game([*argv, NO_STORE])
        light.append({"echo": e, "relay": rl, "game": g, "game_nostore": g0})
        progress(
            f"   run {i + 1}: echo p50/p99 {e['latency']['p50_ms']}/{e['latency']['p99_ms']} ms, "
            f"relay {rl['latency']['p50_ms']}/{rl['latency']['p99_ms']} ms, "
            f"game p50/p99 {g['latency_opponent']['p50_ms']}/{g['latency_opponent']['p99_ms']} ms"
            f" (store off {g0['latency_opponent']['p50_ms']}/{g0['latency_opponent']['p99_ms']})"
        )
    res["light"] = light

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    scale_servers = args.scale_servers
    if scale_servers is None:
        scale_servers = 1 if 2 * scale_m + 100 <= hard else 2
    progress(
        f"== scale: {scale_m} matches ({2 * scale_m} connections) at pace 2 on {scale_servers} "
        f"server process(es), {scale_d:g} s (file limit {hard})"
    )
    scale_argv = ["--matches", str(scale_m), "--pace", "2", "--duration", str(scale_d),
                  "--warmup", "5", "--procs", str(args.client_procs), "--servers",
                  str(scale_servers), "--options",
                  '{"turn_cap": 4, "rounds": 1}' if q else SHORT_GAMES, "--loop", loop]  # fmt: skip
    # Store on and off alternate (full: twice each): on this shared machine one pair of runs
    # can differ by more than the store costs, so "unchanged within noise" needs repeats.
    runs = []
    for i in range(1 if q else SCALE_PAIRS):
        for store in (True, False):
            if i or not store:
                progress(f"   store {'on' if store else 'off'} (pair {i + 1})")
            r = await game(scale_argv if store else [*scale_argv, NO_STORE])
            runs.append({"store": store, "result": r})
            if i == 0:
                res["scale" if store else "scale_nostore"] = r
    res["scale"]["fd_hard_limit"] = hard
    res["scale_runs"] = [
        {"store": r["store"], "cpu_util": r["result"]["server"]["cpu_util"],
         **{k: r["result"]["latency_opponent"][k] for k in ("p50_ms", "p99_ms")}}
        for r in runs
    ]  # fmt: skip

    progress("== one vs two server processes (saturation)")
    cores = {}
    for n in (1, 2):
        cores[n] = await game(["--matches", str(sat_m * n), "--duration", str(sat_d), "--warmup",
                               "1", "--options", "{}", "--servers", str(n), "--procs", "2",
                               "--loop", loop])  # fmt: skip
        progress(f"   {n} server(s): {cores[n]['moves_per_s']:.0f} moves/s")
    res["cores"] = cores

    if not q and importlib.util.find_spec("uvloop") is not None:
        progress("== asyncio vs uvloop (saturation, echo and game on the same loop)")
        loops = {}
        for name in ("asyncio", "uvloop"):
            e = await echo.measure(conns=sat_m, pace=0, duration=sat_d, warmup=1, loop=name,
                                   quiet=True)  # fmt: skip
            g = await game(["--matches", str(sat_m), "--duration", str(sat_d), "--warmup", "1",
                            "--options", "{}", "--loop", name])  # fmt: skip
            loops[name] = {"echo": e, "game": g}
            progress(f"   {name}: echo {e['round_trips_per_s']:.0f}, game {g['moves_per_s']:.0f}")
        res["loops"] = loops

    progress("== store: bytes on disk per finished game, recovery of games in progress")
    res["store"] = {
        "disk": await store_bench.disk(100 if q else 1000),
        "recovery": await store_bench.recovery(1000 if q else 10_000, 20),
    }

    progress("== slow consumers")
    ns = argparse.Namespace(
        matches=4, slow=8 if q else 20, max_outbox_bytes=1_048_576, timeout=90.0
    )
    res["slow"] = await slow_consumer.scenario(ns)

    progress("== abuse")
    res["abuse"] = await abuse.run(list(abuse.SCENARIOS), 2.0 if q else 15.0, q)
    res["loadavg_end"] = loadavg()
    return res


def table(res: dict[str, Any]) -> str:
    rows: list[tuple[str, str, str, str, str, str]] = []

    def fmt(v: Any, digits: int = 3) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:,.{digits}g}" if abs(v) < 1000 else f"{v:,.0f}"
        if isinstance(v, int):
            return f"{v:,}"
        return str(v)

    def row(name: str, value: Any, echo_v: Any = None, ratio: Any = None, target: str = "",
            ok: bool | None = None) -> None:  # fmt: skip
        verdict = "" if ok is None else ("PASS" if ok else "FAIL")
        rows.append((name, fmt(value), fmt(echo_v), fmt(ratio), target, verdict))

    eng = res.get("engine")
    if eng and "error" not in eng:
        for key in ("moves_per_s", "views_per_s", "resamples_per_s"):
            if key in eng:
                target = eng.get("targets", {}).get(key)
                ok = None if target is None else eng[key] >= target
                row(f"engine {key} (per CPU-s)", eng[key], None, None,
                    "" if target is None else f">= {target:,}", ok)  # fmt: skip
    elif eng:
        row("engine", eng.get("error"))

    sat = res["saturation"]
    e_rt = median([r["echo"]["round_trips_per_s"] for r in sat])
    g_mv = median([r["game"]["moves_per_s"] for r in sat])
    ratio = median([r["game"]["moves_per_s"] / r["echo"]["round_trips_per_s"] for r in sat])
    n = sat[0]["game"]["config"]["matches"]
    row(f"saturation moves/s ({n} matches, median)", g_mv, e_rt, ratio, ">= 0.5 x echo",
        ratio is not None and ratio >= 0.5)  # fmt: skip
    r_mv = median([r["relay"]["round_trips_per_s"] for r in sat])
    row(
        "  relay ceiling moves/s (the game's frames, no game)",
        r_mv,
        e_rt,
        median([r["relay"]["round_trips_per_s"] / r["echo"]["round_trips_per_s"] for r in sat]),
    )
    row(
        "  game / relay ceiling",
        None,
        None,
        median([r["game"]["moves_per_s"] / r["relay"]["round_trips_per_s"] for r in sat]),
    )
    e_cpu = median([r["echo"]["server_cpu_us_per_round_trip"] for r in sat])
    g_cpu = median([r["game"]["server"]["cpu_us_per_move"] for r in sat])
    row("  server CPU us per move / per echo", g_cpu, e_cpu,
        None if not e_cpu or not g_cpu else e_cpu / g_cpu)  # fmt: skip
    row("  server CPU use (cores)", median([r["game"]["server"]["cpu_util"] for r in sat]),
        median([r["echo"]["server_cpu_util"] for r in sat]))  # fmt: skip
    row("  client CPU use (cores)", median([r["game"]["client_cpu_util"] for r in sat]),
        median([r["echo"]["client_cpu_util"] for r in sat]))  # fmt: skip
    row("  server move processing mean ms (/metrics)",
        median([(r["game"]["server"].get("metrics") or {}).get("move_processing_mean_ms")
                for r in sat]))  # fmt: skip
    if all("game_nostore" in r for r in sat):
        off = [r["game_nostore"] for r in sat]
        row("  store off: moves/s", median([g["moves_per_s"] for g in off]), e_rt,
            median([r["game_nostore"]["moves_per_s"] / r["echo"]["round_trips_per_s"]
                    for r in sat]))  # fmt: skip
        row("  store off: server CPU us per move",
            median([g["server"]["cpu_us_per_move"] for g in off]))  # fmt: skip
        views = [store_view(r["game"]) for r in sat]
        row("  store: commits/s (approx.)", median([v["commits_per_s_approx"] for v in views]))
        row("  store: changes per commit (mean / max)",
            f"{fmt(median([v['batch_mean'] for v in views]))} / "
            f"{fmt(median([v['batch_max'] for v in views]))}")  # fmt: skip
        row("  store: commit mean ms", median([v["commit_mean_ms"] for v in views]))
        if all(v["applies"] for v in views):  # the journal: a commit is one change's write
            row("  store: applier changes per SQLite transaction (mean), its mean ms",
                f"{fmt(median([v['apply_batch_mean'] for v in views]))}, "
                f"{fmt(median([v['apply_mean_ms'] for v in views]))}")  # fmt: skip

    light = res["light"]
    ep50 = median([r["echo"]["latency"]["p50_ms"] for r in light])
    ep99 = median([r["echo"]["latency"]["p99_ms"] for r in light])
    gp50 = median([r["game"]["latency_opponent"]["p50_ms"] for r in light])
    gp99 = median([r["game"]["latency_opponent"]["p99_ms"] for r in light])
    r50 = median([r["game"]["latency_opponent"]["p50_ms"] / r["echo"]["latency"]["p50_ms"]
                  for r in light])  # fmt: skip
    row("light load p50 ms (100 matches, 2 s pace)", gp50, ep50, r50, "<= 2 x echo p50",
        r50 is not None and r50 <= 2)  # fmt: skip
    rp50 = median([r["relay"]["latency"]["p50_ms"] for r in light])
    rr50 = median([r["relay"]["latency"]["p50_ms"] / r["echo"]["latency"]["p50_ms"] for r in light])
    row("  relay ceiling p50 ms (no game)", rp50, ep50, rr50)
    row("light load p99 ms", gp99, ep99, None if not ep99 or gp99 is None else gp99 / ep99,
        "<= 1.5 ms", gp99 is not None and gp99 <= 1.5)  # fmt: skip
    if all("game_nostore" in r for r in light):
        off = [r["game_nostore"]["latency_opponent"] for r in light]
        row("  store off: p50 ms", median([x["p50_ms"] for x in off]), ep50,
            median([r["game_nostore"]["latency_opponent"]["p50_ms"]
                    / r["echo"]["latency"]["p50_ms"] for r in light]))  # fmt: skip
        row("  store off: p99 ms", median([x["p99_ms"] for x in off]), ep99)
    row("  light load max ms", median([r["game"]["latency_opponent"]["max_ms"] for r in light]),
        median([r["echo"]["latency"]["max_ms"] for r in light]))  # fmt: skip
    row("  server move processing mean ms (/metrics)",
        median([(r["game"]["server"].get("metrics") or {}).get("move_processing_mean_ms")
                 for r in light]))  # fmt: skip

    sc = res["scale"]
    servers = sc["config"]["servers"]
    label = f"scale: {sc['config']['connections']:,} conns, {sc['config']['matches']:,} matches"
    label += f", {servers} server proc" + ("s" if servers > 1 else "")
    row(label + ", held", sc["connections_held"], None, None,
        f"= {sc['config']['connections']:,}",
        sc["connections_held"] == sc["config"]["connections"])  # fmt: skip
    lat = sc["latency_opponent"]
    row("  scale p50 ms", lat["p50_ms"])
    row("  scale p99 ms", lat["p99_ms"], None, None, "< 50 ms",
        lat["p99_ms"] is not None and lat["p99_ms"] < 50)  # fmt: skip
    off = res.get("scale_nostore")
    if off is not None:
        row(
            "  store off: scale p50 / p99 ms",
            f"{off['latency_opponent']['p50_ms']} / {off['latency_opponent']['p99_ms']}",
        )
        row("  store off: scale held", off["connections_held"])
    scale_noise_rows(res.get("scale_runs", []), row)
    row(
        "  scale errors / disconnects",
        f"{sc['errors']} / {sc['disconnects']}",
        None,
        None,
        "0",
        sc["errors"] == 0 and sc["disconnects"] == 0 and sc["setup_failures"] == 0,
    )
    kb = sc["server"]["rss_per_conn_kb"]
    row("  scale RSS per connection KB (loaded-idle)", kb, None, None, "< 30 KB",
        kb is not None and kb < 30)  # fmt: skip
    row("  scale RSS per connection KB (total)", sc["server"]["rss_total_per_conn_kb"])
    row("  scale moves/s, games completed", f"{sc['moves_per_s']:,.0f}, {sc['games_completed']:,}")
    row(
        "  scale server CPU (cores), client loop lag p99 ms",
        f"{sc['server']['cpu_util']}, {sc['client_loop_lag_p99_ms']}",
    )

    c1, c2 = res["cores"][1], res["cores"][2]
    m1, m2 = c1["config"]["matches"], c2["config"]["matches"]
    row(f"1 server process: moves/s ({m1} matches, 2 client procs)", c1["moves_per_s"])
    row(
        f"2 server processes: moves/s ({m2} matches, 2 client procs)",
        c2["moves_per_s"],
        None,
        c2["moves_per_s"] / c1["moves_per_s"] if c1["moves_per_s"] else None,
        "x of 1 proc",
    )

    if "loops" in res:
        for name, r in res["loops"].items():
            row(f"loop {name}: moves/s (echo rt/s)", r["game"]["moves_per_s"],
                r["echo"]["round_trips_per_s"],
                r["game"]["moves_per_s"] / r["echo"]["round_trips_per_s"])  # fmt: skip

    st = res.get("store")
    if st:
        d, rc = st["disk"], st["recovery"]
        row(f"store: bytes on disk per finished game ({d['plies_per_game']} plies)",
            d["bytes_per_game"])  # fmt: skip
        row(f"store: recovery of {rc['games']:,} games in progress, s", rc["recover_s"])

    sl = res["slow"]
    row(f"slow consumers dropped ({sl['slow']} never read)", sl["slow_dropped"], None, None,
        f"= {sl['slow']}", sl["slow_dropped"] == sl["slow"])  # fmt: skip
    row("  RSS growth KB while they hung (bound)", sl["rss_growth_kb"], None, None,
        f"<= {sl['bound_kb']:,} + {sl['slack_kb']:,}",
        sl["rss_growth_kb"] <= sl["bound_kb"] + sl["slack_kb"])  # fmt: skip
    row("  fast players' errors / disconnects meanwhile",
        f"{sl['fast_errors']} / {sl['fast_disconnects']}", None, None, "0",
        sl["fast_errors"] == 0 and sl["fast_disconnects"] == 0)  # fmt: skip
    row("  seconds until all dropped", sl["seconds_to_drop_all"])

    for r in res.get("abuse", []):
        b99, a99 = r["baseline"]["latency"]["p99_ms"], r["abused"]["latency"]["p99_ms"]
        doc = r["abuser"].get("documented")
        row(f"abuse {r['kind']}: pair p99 ms abused (alone)", a99, b99,
            None if not b99 or a99 is None else a99 / b99,
            f"<= {abuse.P99_RATIO:g} x, <= {abuse.P99_MS:g} ms", r["p99_ok"])  # fmt: skip
        kb = r["rss_growth_per_conn_b"] / 1024
        said = "-" if doc is None else ("yes" if doc else "NO")
        limit = f"< {(abuse.BOUND + abuse.SLACK) // 1024} KB"
        row(f"  {r['kind']}: RSS KB per abusive conn ({r['abuser'].get('conns')}), "
            f"refused as documented", f"{kb:.0f}, {said}", None, None,
            limit, r["rss_ok"] and doc is not False)  # fmt: skip
        row(f"  {r['kind']}: errors of everyone else", r["others_errors_total"], None, None,
            "0", r["others_ok"])  # fmt: skip

    head = ("figure", "value", "echo", "ratio", "target", "")
    widths = [max(len(r[i]) for r in [*rows, head]) for i in range(6)]
    lines = []
    for i, r in enumerate([head, *rows]):
        cells = [r[0].ljust(widths[0])] + [r[j].rjust(widths[j]) for j in (1, 2, 3)]
        cells += [r[4].ljust(widths[4]), r[5]]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("-" * len(lines[0]))
    lines.append(
        "(with several runs, value and echo are medians, and the ratio is the median of each"
        " run's ratio, not value / echo)"
    )
    return "\n".join(lines)


def scale_noise_rows(runs: list[dict[str, Any]], row: Any) -> None:
    """Every alternating scale run's p50 / p99, and whether the store-on runs stay within the
    store-off runs' own spread (the issue's "unchanged within noise"): each on figure at most
    the largest off figure (p50; p99 too). An off run whose servers used as much CPU as the
    on run before it (``cpu_util``) was disturbed by something else on the machine (the same
    load without the store is less work) and is left out: one such run's p50 of 1.9 ms
    against 1.06 in the other made the fourteenth session's row pass by itself."""
    on = [r for r in runs if r["store"]]
    off = [r for r in runs if not r["store"]]
    if len(on) < 2 or len(off) < 2:
        return
    disturbed = [
        i for i, (a, b) in enumerate(zip(on, off, strict=False))
        if a.get("cpu_util") is not None and b.get("cpu_util") is not None
        and b["cpu_util"] >= a["cpu_util"]
    ]  # fmt: skip
    clean = [r for i, r in enumerate(off) if i not in disturbed]
    note = "".join(
        f" (off run {i + 1} left out: server CPU {off[i]['cpu_util']:g} >= on "
        f"{on[i]['cpu_util']:g})"
        for i in disturbed
    )
    for key, name in (("p50_ms", "p50"), ("p99_ms", "p99")):
        ons = [r[key] for r in on if r[key] is not None]
        offs = [r[key] for r in off if r[key] is not None]
        base = [r[key] for r in clean if r[key] is not None]
        if not ons or not offs:
            continue
        text = f"{' '.join(f'{v:g}' for v in ons)} | {' '.join(f'{v:g}' for v in offs)}{note}"
        ok = max(ons) <= max(base) if base else None  # every off run disturbed: no verdict
        row(f"  scale {name} ms, store on runs | off runs", text, None, None,
            "on <= max(off)", ok)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--quick", action="store_true", help="scaled down: about 2-3 minutes")
    ap.add_argument("--runs", type=int, default=3, help="runs per figure (median)")
    ap.add_argument("--sat-matches", type=int, default=50,
                    help="matches (and echo connections) at saturation")  # fmt: skip
    ap.add_argument("--scale-servers", type=int, default=None,
                    help="server processes for the scale run (default: 1 if the file limit "
                         "allows, else 2)")  # fmt: skip
    ap.add_argument("--client-procs", type=int, default=2, help="client processes (scale)")
    ap.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    ap.add_argument("--json-out", default=None, help="write every raw figure here")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    res = asyncio.run(run(args))
    res["seconds"] = round(time.monotonic() - t0, 1)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res, indent=2))
    print()
    print(
        f"stacko benchmarks ({'quick' if args.quick else 'full'}, loop {args.loop}, "
        f"{res['seconds']:.0f} s, load average {' '.join(res['loadavg_start'])} -> "
        f"{' '.join(res['loadavg_end'])}, file limit {res['nofile']['hard']}, "
        f"{res['compiled']['modules']} of {res['compiled']['of']} per-move modules compiled"
        + (f", STALE: {res['compiled']['stale']}" if res["compiled"]["stale"] else "")
        + ")"
    )
    print(table(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
