#!/usr/bin/env python
"""Is the search inside ``trace`` as fast as the same search in ``translate``? (issue 36, target 5)

The shipped model (``mixed-en-de``) with a full-precision search, beam 4, one 15-word sentence at a time (bench_app's
generator): ``translate(sentence)`` against the search part of ``trace(sentence)`` (its ``timings["decode_ms"]``:
the encoder pass with the maps recorded, then the search from it), interleaved sentence by sentence. Also the int8
search. Prints the p50s and their ratio; writes ``benchmarks/results/bench_search_in_trace.json``.

    python benchmarks/bench_search_in_trace.py            # 40 sentences, ~1 min
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_app import sentences  # noqa: E402
from bench_common import write_results  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=40)
    args = p.parse_args()
    import torch

    import viz_model

    torch.set_num_threads(2)
    texts = sentences(args.count + 3, 7)
    result = {"model": viz_model.DEFAULT_MODEL, "beam": 4, "sentences": args.count, "threads": 2}
    for search in ("fp32", "int8"):
        model = viz_model.load(precision=search, device="cpu")
        for text in texts[:3]:  # warm-up
            model.translate(text, beam=4)
            model.trace(text, beam=4)
        translate, in_trace = [], []
        for text in texts[3:]:
            started = time.perf_counter()
            model.translate(text, beam=4)
            translate.append(1000 * (time.perf_counter() - started))
            in_trace.append(model.trace(text, beam=4).timings["decode_ms"])
        result[search] = {"translate_p50_ms": round(statistics.median(translate), 2),
                          "search_in_trace_p50_ms": round(statistics.median(in_trace), 2),
                          "ratio": round(statistics.median(in_trace) / statistics.median(translate), 3)}
        print(f"{search}: translate p50 {result[search]['translate_p50_ms']} ms, the search in trace "
              f"{result[search]['search_in_trace_p50_ms']} ms ({result[search]['ratio']}x)", file=sys.stderr)
    write_results(REPO / "benchmarks" / "results" / "bench_search_in_trace.json", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
