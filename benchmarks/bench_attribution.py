#!/usr/bin/env python
"""Wall time of the attributions (issue 22's targets) with the shipped model on this CPU.

1. One 15-word sentence, teacher-forced on the model's greedy translation: value-weighted attention + ALTI+ for
   every output token (`attribute_ids(..., ["value_weighted", "alti"])`): median of 7 runs after a warm-up.
   Target <= 250 ms.
2. The same sentence: integrated gradients with 32 fixed Gauss-Legendre points (tolerance 0) for every output
   token: median of 3 runs. Target <= 3 s.
   The completeness gap (relative to the score change) at 32 and at 128 steps is printed beside it.
3. ``--corpus``: ``viz-model attribute`` over the 1,014 Multi30K validation sentences with value-weighted + ALTI
   (greedy translation by the full-precision network, deletion of k = 1, 2, 3 tokens, 8 random draws, one worker
   process per core as the command's default): one run, with the time of the translation and of starting the
   workers included. Target <= 5 min.

Run it on an idle machine; the table reports how many cores other processes kept busy. Results are written to
benchmarks/results/bench_attribution.json.

    python benchmarks/bench_attribution.py [--corpus] [--model DIR] [--data-dir DIR (default: the data root)]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from bench_common import REPO, CpuMonitor, load_average, write_results

from viz_model.config.data_root import data_root

SENTENCE = "Two young dogs are playing together in the deep snow near a small wooden house."
TARGETS = {"vw_alti_ms": 250.0, "ig32_s": 3.0, "corpus_s": 300.0}


def timed(call, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--model", default=None, help="model directory (default: the shipped default model)")
    parser.add_argument("--data-dir", default=str(data_root()), help="the data root holding multi30k/")
    parser.add_argument("--corpus", action="store_true", help="also time viz-model attribute over Multi30K val")
    args = parser.parse_args()

    import viz_model
    from viz_model.attribution import attribute_ids
    from viz_model.attribution.corpus_scores import corpus_faithfulness, default_workers
    from viz_model.attribution.gradients import gradient_attributions
    from viz_model.data.textfiles import find_split, open_text

    assert len(SENTENCE.split()) == 15
    model = viz_model.load(args.model, device="cpu")
    trace = model.trace(SENTENCE, beam=1)
    src, out = trace.source_ids, trace.output_ids
    monitor = CpuMonitor(children=True)  # the corpus part runs worker processes
    attribute_ids(model.network, src, out, ["value_weighted", "alti"])  # warm-up
    vw_alti = timed(lambda: attribute_ids(model.network, src, out, ["value_weighted", "alti"]), 7)
    gradient_attributions(model.network, src, out, ("integrated_gradients",), 4, tolerance=0)  # warm-up
    ig = timed(lambda: gradient_attributions(model.network, src, out, ("integrated_gradients",), 32, tolerance=0), 3)
    gaps = {steps: gradient_attributions(model.network, src, out, ("integrated_gradients",), steps,
                                         tolerance=0).relative_gap
            for steps in (32, 128)}
    found = {
        "model": model.name, "sentence": SENTENCE, "source_tokens": len(src), "output_tokens": len(out),
        "vw_alti_ms_median": round(statistics.median(vw_alti) * 1000, 1),
        "ig32_s_median": round(statistics.median(ig), 2),
        "ig_relative_gap_max": {str(k): round(float(v.max()), 4) for k, v in gaps.items()},
        "ig_relative_gap_median": {str(k): round(float(statistics.median(v)), 4) for k, v in gaps.items()},
    }
    if args.corpus:
        sources = open_text(find_split(Path(args.data_dir) / "multi30k", "val", "en"))
        started = time.perf_counter()
        workers = default_workers(model)  # what `viz-model attribute` runs with by default
        corpus_faithfulness(model, sources, methods=["value_weighted", "alti"], beam=1, progress=True, workers=workers)
        found["corpus_sentences"] = len(sources)
        found["corpus_workers"] = workers
        found["corpus_s"] = round(time.perf_counter() - started, 1)
    found["other_cores_busy"] = monitor.other_cores()
    found["load_average"] = load_average()
    found["targets"] = TARGETS
    lines = [f"value-weighted + ALTI+, {len(out)} output tokens: {found['vw_alti_ms_median']} ms (target <= 250 ms)",
             f"integrated gradients, 32 steps: {found['ig32_s_median']} s (target <= 3 s); largest completeness gap "
             f"{found['ig_relative_gap_max']['32']:.1%} at 32 steps, {found['ig_relative_gap_max']['128']:.1%} at 128"]
    if args.corpus:
        lines.append(f"viz-model attribute, value-weighted + ALTI, {found['corpus_sentences']} sentences, "
                     f"{found['corpus_workers']} workers: {found['corpus_s']} s (target <= 300 s)")
    print("\n".join(lines), file=sys.stderr)
    path = REPO / "benchmarks" / "results" / "bench_attribution.json"
    write_results(path, found)
    print(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
