"""How many CPU threads a search runs on: a short calibration timed on this machine, kept in a file.

A decoding step multiplies four rows by each of a few dozen small matrices, so each call is over in tens of
microseconds and a second OpenMP thread adds a fork and a join to every one of them. Whether that pays depends on the
CPU (cores, caches, how busy it is), not on its name: on the 2-core AMD EPYC of `benchmarks/bench_trace.py` the
shipped model's trace took 0.34 s on one thread against 10.5 s on two while other processes kept the cores busy.
So the first search of a network on a machine times a few decoding steps at each candidate thread count (the default
and one), interleaved, and keeps the fastest among those whose logits are bit-identical to the default's: the
choice never changes a search's decisions. The answer is kept per machine and network shape in
``$VIZ_MODEL_CACHE/search_threads.json`` (else ``~/.cache/viz-model/``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from ..nn.devices import threads
from ..nn.model import Transformer
from .next_token import StepScorer

CACHE_ENV = "VIZ_MODEL_CACHE"
CALIBRATION_FILE = "search_threads.json"
ROUNDS, WARMUP, STEPS, SOURCE_TOKENS, BEAM = 7, 1, 6, 16, 4
BUDGET_S = 2.0  # rounds after the first timed one stop here: a calibration costs a page a second or two

_lock = threading.Lock()
_chosen: dict[str, int] = {}  # this process's answers, by calibration key


def calibration_path() -> Path:
    """The file that keeps the calibrations: ``$VIZ_MODEL_CACHE/search_threads.json``, else under
    ``~/.cache/viz-model``."""
    root = os.environ.get(CACHE_ENV)
    return (Path(root) if root else Path.home() / ".cache" / "viz-model") / CALIBRATION_FILE


def machine_key() -> str:
    """This machine as a calibration sees it: its CPU's model and flags, core count, torch build and default thread
    count (a hash: the flags are long)."""
    try:
        info = Path("/proc/cpuinfo").read_text(errors="replace").split("\n\n")[0]
    except OSError:
        info = platform.processor()
    facts = f"{info}|{os.cpu_count()}|{torch.__version__}|{torch.get_num_threads()}"
    return hashlib.sha256(facts.encode()).hexdigest()[:16]


def network_key(network: Transformer) -> str:
    """The shape and kernels of a search network (what its step costs): ``Int8RowBlocks-d256-L4-h8-ff1024-v10000``."""
    c = network.config
    kernel = type(network.output_projection or network.tgt_embedding).__name__
    return f"{kernel}-d{c.d_model}-L{c.decoder_layers}-h{c.heads}-ff{c.d_ff}-v{c.vocab_size}"


def decoding_steps(network: Transformer) -> Callable[[], Tensor]:
    """A calibration's work: `STEPS` decoding steps of `BEAM` rows reading a `SOURCE_TOKENS`-token source (fixed ids,
    encoded once), returning every step's logits."""
    c = network.config
    device = next(network.parameters()).device
    src = (torch.arange(SOURCE_TOKENS, device=device) * 7919 % max(1, c.vocab_size - 4) + 4)[None]
    src[0, -1] = c.eos_id

    with torch.inference_mode():  # at the default thread count, outside the timing, as a trace encodes its source
        encoded = network.encode(src, need_weights=True).repeated(BEAM)

    @torch.inference_mode()
    def run() -> Tensor:
        scorer = StepScorer(network, encoded)
        rows = list(range(BEAM))
        out = []
        for step in range(STEPS):
            out.append(scorer.scores())
            scorer.advance(rows, [4 + (step * BEAM + r) % max(1, c.vocab_size - 4) for r in rows])
        return torch.cat(out)
    return run


def calibrate(work: Callable[[], Tensor], candidates: list[int], clock: Callable[[], float] = time.perf_counter
              ) -> dict[str, object]:
    """Time `work` at each thread count of `candidates` (the first is the reference), interleaved round by round;
    the answer is the fastest median among the counts whose output equals the reference's bit for bit."""
    reference, same = None, {}
    times: dict[int, list[float]] = {n: [] for n in candidates}
    started_all = clock()
    for round_ in range(WARMUP + ROUNDS):
        if round_ > WARMUP and clock() - started_all > BUDGET_S:  # a busy machine: decide on the rounds timed
            break
        order = candidates if round_ % 2 == 0 else candidates[::-1]
        for n in order:
            with threads(n):
                started = clock()
                out = work()
                elapsed = clock() - started
            if round_ == 0:
                if n == candidates[0]:
                    reference = out
                same[n] = out
            if round_ >= WARMUP:
                times[n].append(elapsed)
    assert reference is not None
    equal = [n for n in candidates if torch.equal(same[n], reference)]
    medians = {n: statistics.median(times[n]) * 1000 for n in candidates}
    return {"threads": min(equal, key=lambda n: medians[n]), "median_ms": {str(n): round(medians[n], 3)
                                                                           for n in candidates},
            "equal": [str(n) for n in equal], "date": time.strftime("%Y-%m-%d")}


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text("utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def search_threads(network: Transformer) -> int:
    """The thread count `network`'s searches run on here: the default where it is one (nothing to choose) or the
    network is not on the CPU, else the calibration's answer (kept in `calibration_path()`; calibrated on the first
    call where the file lacks it)."""
    default = torch.get_num_threads()
    if default == 1 or next(network.parameters()).device.type != "cpu":
        return default
    key = f"{machine_key()}/{network_key(network)}"
    with _lock:
        if key not in _chosen:
            path = calibration_path()
            known = _read(path).get(key)
            if not isinstance(known, dict) or known.get("threads") not in (1, default):
                known = calibrate(decoding_steps(network), [default, 1])
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(json.dumps(_read(path) | {key: known}, indent=1), "utf-8")
                except OSError:  # a read-only home: calibrate again in the next process
                    pass
            _chosen[key] = int(known["threads"])  # type: ignore[call-overload]
    return _chosen[key]
