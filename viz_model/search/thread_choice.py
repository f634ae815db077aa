"""How many CPU threads a trace runs on: a short calibration timed in this process, on this machine.

A decoding step multiplies four rows by each of a few dozen small matrices, so each call is over in tens of
microseconds and a second OpenMP thread adds a fork and a join to every one of them, which waits on the slower thread
(on a busy machine, one the system has not scheduled). Whether that pays depends on the CPU (cores, caches, how busy it
is), not on its name: on the 2-core AMD EPYC of `benchmarks/bench_trace.py`, with other processes keeping both cores
busy, the shipped model's int8 decoding steps took 71 ms on one thread against 4,183 ms on two. So the first trace of
a network on a machine times a trace's work (`trace_work`) at each candidate thread count (the default and one),
interleaved, and keeps the fastest among those whose encoding and search logits are bit-identical to the default's
(the choice never changes a search's decisions) and whose recorded maps are within `MAPS_ATOL`. The answer is kept
for the process's life, per network shape, and never written down: how busy the machine is decides it too, so a
calibration taken while other work kept the cores busy must not outlive that work (a server calibrates once, in its
warm-up).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable

import torch
from torch import Tensor

from ..nn.devices import threads
from ..nn.model import Transformer
from .next_token import StepScorer

ROUNDS, WARMUP, STEPS, SOURCE_TOKENS, BEAM = 7, 1, 6, 16, 4
BUDGET_S = 2.0
MAPS_ATOL = 1e-6  # rounds after the first timed one stop here: a calibration costs a page a second or two

_lock = threading.Lock()
_chosen: dict[str, dict[str, object]] = {}  # this process's calibrations, by calibration key


def network_key(network: Transformer) -> str:
    """The shape and kernels of a search network (what its step costs): ``Int8RowBlocks-d256-L4-h8-ff1024-v10000``."""
    c = network.config
    kernel = type(network.output_projection or network.tgt_embedding).__name__
    return f"{kernel}-d{c.d_model}-L{c.decoder_layers}-h{c.heads}-ff{c.d_ff}-v{c.vocab_size}"


Work = Callable[[], tuple[Tensor, Tensor]]
"""A calibration's work: what must be bit-identical on any thread count chosen (the source's encoding and the search's
logits: they decide the output), and what must be close (a recording pass's logits and maps: `close`)."""


def close(a: Tensor, b: Tensor) -> bool:
    """Within `MAPS_ATOL` of each other (a recorded pass summed in another order: maps within 1e-5 as promised)."""
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=MAPS_ATOL, atol=MAPS_ATOL))


def trace_work(network: Transformer, recording: Transformer | None = None) -> Work:
    """A trace's work on `network` (its search network): the encoder pass, `STEPS` decoding steps of `BEAM` rows
    reading a `SOURCE_TOKENS`-token source (fixed ids), and with `recording` its recorded pass over the steps' tokens
    (every map); returns the encoding and every step's logits, and the recorded pass's logits and maps."""
    c = network.config
    device = next(network.parameters()).device
    src = (torch.arange(SOURCE_TOKENS, device=device) * 7919 % max(1, c.vocab_size - 4) + 4)[None]
    src[0, -1] = c.eos_id
    tokens = [4 + step * BEAM % max(1, c.vocab_size - 4) for step in range(STEPS)]

    @torch.inference_mode()
    def run() -> tuple[Tensor, Tensor]:
        encoded = network.encode(src, need_weights=True)
        scorer = StepScorer(network, encoded.repeated(BEAM))
        exact = [encoded.hidden.flatten()]
        for token in tokens:
            exact.append(scorer.scores().flatten())
            scorer.advance(list(range(BEAM)), [token] * BEAM)
        if recording is None:
            return torch.cat(exact), torch.zeros(0)
        out = recording(src, torch.tensor([[c.bos_id, *tokens]], device=device), need_weights=True, encoded=encoded)
        maps = [out.logits.flatten(), *(m.flatten() for m in out.decoder_attentions + out.cross_attentions)]
        return torch.cat(exact), torch.cat(maps)
    return run


def calibrate(work: Work, candidates: list[int], clock: Callable[[], float] = time.perf_counter) -> dict[str, object]:
    """Time `work` at each thread count of `candidates` (the first is the reference), interleaved round by round;
    the answer is the fastest median among the counts whose work is bit-identical to the reference's in its first
    part and `close` in its second."""
    outputs: dict[int, tuple[Tensor, Tensor]] = {}
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
            outputs.setdefault(n, out)
            if round_ >= WARMUP:
                times[n].append(elapsed)
    exact, near = outputs[candidates[0]]
    equal = [n for n in candidates if torch.equal(outputs[n][0], exact) and close(outputs[n][1], near)]
    medians = {n: statistics.median(times[n]) * 1000 for n in candidates}
    return {"threads": min(equal, key=lambda n: medians[n]), "median_ms": {str(n): round(medians[n], 3)
                                                                           for n in candidates},
            "equal": [str(n) for n in equal], "date": time.strftime("%Y-%m-%d")}


def calibration_key(network: Transformer, recording: Transformer | None = None) -> str:
    """What this process's answer for `network` (and `recording`) is kept under: their shapes and kernels, and the
    default thread count it was chosen against (``@2``)."""
    pair = network_key(network) + ("" if recording is None else f"+{network_key(recording)}")
    return f"{pair}@{torch.get_num_threads()}"


def calibrations() -> dict[str, dict[str, object]]:
    """This process's calibrations so far (threads chosen, median ms per count, the equal counts), by key."""
    return dict(_chosen)


def search_threads(network: Transformer, recording: Transformer | None = None) -> int:
    """The thread count a trace on search network `network` (and `recording`, its recorded pass: see `trace_work`)
    runs on here: the default where it is one (nothing to choose) or the network is not on the CPU, else the
    calibration's answer (calibrated on this process's first call for its shapes)."""
    default = torch.get_num_threads()
    if default == 1 or next(network.parameters()).device.type != "cpu":
        return default
    key = calibration_key(network, recording)
    with _lock:
        if key not in _chosen:
            _chosen[key] = calibrate(trace_work(network, recording), [default, 1])
    return int(_chosen[key]["threads"])  # type: ignore[call-overload]
