#!/usr/bin/env python
"""How many students one explorer replica serves (issue 37): the server's own work, measured without a browser.

A visitor is simulated as the browser does it, over Streamlit's websocket protocol (``/_stcore/stream``, binary
protobufs): a new session opens with a sentence in its URL (as a shared link or a typed sentence does) and the
server runs the page: it translates, traces and builds every figure of the explore page; the visit ends when the
server reports the run finished. Nothing is drawn (no browser), so what is timed is the server's work and the
network on loopback.

1. **Work per visit**, one visit at a time: the wall time of a Translate (a new sentence) and of a re-render (the
   same session run again: the trace is cached), and the server process's CPU time for each.
2. **Capacity**: new visits arrive at random (Poisson) at a rate raised step by step; at each rate the p50 and p90
   of the visits' times. The capacity is the highest rate whose p50 stays under 1 s. Students per core follow
   from it for a stated pace of work (``--pace``, default one Translate every 30 s per student):
   students = rate x pace / cores.
3. With ``--replicas 2``: the same through nginx in front of two replicas (``deploy/replicas.py``), and the
   capacity's ratio to one replica.

Writes ``benchmarks/results/bench_capacity.json`` (and ``bench_capacity_<model>.json`` for ``--model``).

    python benchmarks/bench_capacity.py                          # the shipped model, 1 and 2 replicas, ~15 min
    python benchmarks/bench_capacity.py --model-assets DIR --model opus-mt-size   # an opus-mt-size model
    python benchmarks/bench_capacity.py --quick                  # a smoke run (no results file)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_app import _health, _stat_fields, _status_kb, free_port  # noqa: E402
from bench_app import sentences as make_sentences  # noqa: E402
from bench_common import write_results  # noqa: E402

TARGET_P50_S = 1.0


# --- one visit over the websocket ----------------------------------------------------------------------------------
async def visit(url: str, sentence: str, reruns: int = 0, model: str | None = None) -> list[float]:
    """Open a session on `url` with `sentence` in its query, run the page (and `reruns` more times); the seconds
    each run took until the server reported it finished."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from tornado.websocket import websocket_connect

    query = urlencode({"sentence": sentence, **({"model": model} if model else {})})
    socket = await websocket_connect(url.replace("http://", "ws://") + "/_stcore/stream", subprotocols=["streamlit"],
                                     max_message_size=512 * 2**20)
    times = []
    try:
        for _ in range(1 + reruns):
            message = BackMsg()
            message.rerun_script.query_string = query
            started = time.perf_counter()
            await socket.write_message(message.SerializeToString(), binary=True)
            while True:
                data = await socket.read_message()
                if data is None:
                    raise ConnectionError("the server closed the session")
                forward = ForwardMsg()
                forward.ParseFromString(data)
                if forward.WhichOneof("type") == "script_finished":
                    break
            times.append(time.perf_counter() - started)
    finally:
        socket.close()
    return times


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` and its waited-for children so far (Linux /proc)."""
    return sum(int(v) for v in (_stat_fields(pid) or [0] * 15)[11:15]) / os.sysconf("SC_CLK_TCK")


# --- the measurements ----------------------------------------------------------------------------------------------
def work_per_visit(url: str, pids: list[int], sentences: list[str], model: str | None) -> dict:
    """Sequential visits: wall and server CPU seconds of a Translate and of a re-render."""
    translate, rerender, translate_cpu, rerender_cpu = [], [], [], []
    for sentence in sentences:
        before = sum(cpu_seconds(p) for p in pids)
        first, = asyncio.run(visit(url, sentence, model=model))
        middle = sum(cpu_seconds(p) for p in pids)
        _, again = asyncio.run(visit(url, sentence, reruns=1, model=model))
        after = sum(cpu_seconds(p) for p in pids)
        translate.append(first)
        translate_cpu.append(middle - before)
        rerender.append(again)
        rerender_cpu.append(after - middle)
    return {"translate_wall_p50_s": round(statistics.median(translate), 3),
            "translate_cpu_p50_s": round(statistics.median(translate_cpu), 3),
            # a re-render's session also ran the page once with the cached trace: its CPU is that run's and the
            # re-render's together, so half of it is one render
            "render_wall_p50_s": round(statistics.median(rerender), 3),
            "render_cpu_p50_s": round(statistics.median(rerender_cpu) / 2, 3), "visits": len(sentences)}


async def arrivals(url: str, rate: float, duration: float, sentences: list[str], model: str | None,
                   rng: random.Random) -> list[float]:
    """Poisson arrivals at `rate` per second for `duration` seconds, each a visit with a new sentence; their times
    (a visit that fails counts as infinitely slow)."""
    tasks, elapsed, number = [], 0.0, 0
    started = time.perf_counter()
    while True:
        elapsed += rng.expovariate(rate)
        if elapsed > duration:
            break
        await asyncio.sleep(max(0.0, started + elapsed - time.perf_counter()))
        tasks.append(asyncio.create_task(visit(url, sentences[number % len(sentences)], model=model)))
        number += 1
    times = []
    for result in await asyncio.gather(*tasks, return_exceptions=True):
        times.append(result[0] if isinstance(result, list) else float("inf"))
    return times


def capacity(url: str, sentences: list[str], model: str | None, duration: float, start_rate: float,
             step: float, seed: int) -> dict:
    """Raise the arrival rate by `step` until the p50 passes the target; each level's p50/p90 and the capacity."""
    rng, levels, rate, best = random.Random(seed), [], start_rate, 0.0
    while True:
        times = sorted(asyncio.run(arrivals(url, rate, duration, sentences, model, rng)))
        if not times:
            rate *= step
            continue
        p50 = statistics.median(times)
        levels.append({"rate_per_s": round(rate, 3), "visits": len(times), "p50_s": round(p50, 3),
                       "p90_s": round(times[int(0.9 * (len(times) - 1))], 3),
                       "failed": sum(t == float("inf") for t in times)})
        print(f"  {rate:.2f} visits/s: p50 {p50:.2f} s over {len(times)} visits", file=sys.stderr, flush=True)
        if p50 >= TARGET_P50_S or levels[-1]["failed"]:
            break
        best = rate
        rate *= step
    return {"levels": levels, "capacity_per_s": round(best, 3)}


# --- servers -------------------------------------------------------------------------------------------------------
def wait_up(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 180
    while not _health(url):
        if process.poll() is not None:
            raise SystemExit(f"the server exited: {log.read_text()[-2000:]}")
        if time.monotonic() > deadline:
            raise SystemExit(f"the server did not start: {log.read_text()[-2000:]}")
        time.sleep(0.5)


def start_one(assets: list[Path], workdir: Path) -> tuple[str, list[int], subprocess.Popen]:
    port = free_port()
    log = workdir / "server.log"
    process = subprocess.Popen([sys.executable, "-m", "viz_model", "app", "--headless", "--address", "127.0.0.1",
                                "--port", str(port), *[a for d in assets for a in ("--models", str(d))]],
                               stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=workdir)
    url = f"http://127.0.0.1:{port}"
    wait_up(url, process, log)
    return url, [process.pid], process


def start_replicas(assets: list[Path], workdir: Path, count: int) -> tuple[str, list[int], subprocess.Popen]:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(REPO / "deploy" / "replicas.py"), "--replicas", str(count),
                                "--port", str(port), "--first-port", str(free_port()), "--workdir", str(workdir),
                                *[a for d in assets for a in ("--models", str(d))]],
                               stdout=(workdir / "replicas.out").open("w"), stderr=subprocess.STDOUT)
    state = workdir / "replicas.json"
    deadline = time.monotonic() + 240
    while not state.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"replicas.py did not start: {(workdir / 'replicas.out').read_text()[-2000:]}")
        time.sleep(0.5)
    url = f"http://127.0.0.1:{port}"
    wait_up(url, process, workdir / "replicas.out")
    pids = [r["pid"] for r in json.loads(state.read_text())["replicas"]]
    return url, pids, process


def rss_mb(pid: int) -> float:
    return round((_status_kb(pid, "VmRSS") or 0) / 1024, 1)


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


def measure(label: str, started: tuple[str, list[int], subprocess.Popen], args: argparse.Namespace,
            sentences: list[str]) -> dict:
    url, pids, process = started
    try:
        asyncio.run(visit(url, "A man is walking his dog.", model=args.model))  # load the model, warm up
        print(f"{label}: work per visit", file=sys.stderr, flush=True)
        work = work_per_visit(url, pids, sentences[:args.visits], args.model)
        print(f"{label}: capacity", file=sys.stderr, flush=True)
        found = capacity(url, sentences[args.visits:], args.model, args.duration, args.start_rate, args.step,
                         args.seed)
        return {**work, **found, "rss_mb_per_replica": [rss_mb(p) for p in pids], "replicas": len(pids)}
    finally:
        stop(process)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-assets", type=Path, default=None, help="a folder of model directories")
    p.add_argument("--model", default=None, help="the model to visit (default: the app's default)")
    p.add_argument("--replicas", type=int, default=2, help="also measure this many replicas behind nginx (0: no)")
    p.add_argument("--visits", type=int, default=12, help="sequential visits for the work per visit (default 12)")
    p.add_argument("--duration", type=float, default=40.0, help="seconds of arrivals per rate (default 40)")
    p.add_argument("--start-rate", type=float, default=0.5, help="first arrival rate, visits/s (default 0.5)")
    p.add_argument("--step", type=float, default=1.4, help="rate factor between levels (default 1.4)")
    p.add_argument("--pace", type=float, default=30.0,
                   help="seconds between one student's Translates, for students per core (default 30)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="a smoke run: few visits, short levels, no results file")
    args = p.parse_args()
    if args.quick:
        args.visits, args.duration, args.start_rate, args.step = 2, 8.0, 1.0, 2.0
    sentences = make_sentences(args.visits + 2000, args.seed)
    assets = [args.model_assets] if args.model_assets else []
    cores = os.cpu_count() or 1
    result = {"benchmark": "bench_capacity", "model": args.model or "the app's default", "cores": cores,
              "pace_s": args.pace, "target_p50_s": TARGET_P50_S, "duration_s": args.duration, "quick": args.quick}
    with tempfile.TemporaryDirectory() as folder:
        one = Path(folder) / "one"
        one.mkdir()
        result["one_replica"] = measure("one replica", start_one(assets, one), args, sentences)
        if args.replicas > 1:
            many = Path(folder) / "many"
            many.mkdir()
            result["replicas_behind_nginx"] = measure(f"{args.replicas} replicas behind nginx",
                                                      start_replicas(assets, many, args.replicas), args, sentences)
    for key in ("one_replica", "replicas_behind_nginx"):
        if key in result:
            rate = result[key]["capacity_per_s"]
            result[key]["students_per_core"] = round(rate * args.pace / cores, 1)
    if "replicas_behind_nginx" in result and result["one_replica"]["capacity_per_s"]:
        result["throughput_ratio"] = round(result["replicas_behind_nginx"]["capacity_per_s"]
                                           / result["one_replica"]["capacity_per_s"], 2)
    print(json.dumps(result, indent=2))
    if not args.quick:
        name = "bench_capacity" + (f"_{args.model}" if args.model else "") + ".json"
        write_results(REPO / "benchmarks" / "results" / name, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
