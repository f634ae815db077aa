#!/usr/bin/env python
"""How often the int8 search gives another translation than the full-precision one, and where the difference
comes from (issue 36).

The shipped model (``mixed-en-de``) searches the 1,014 Multi30K validation sentences (beam 4, this project's rule,
the app's call ``trace``) in full precision and with int8 copies that differ in one thing each:

* ``int8``: the app's int8 search (the decoder's Linear layers and the output projection int8, activations
  quantized per call with one 7-bit scale, ``reduce_range``);
* ``int8_8bit_activations``: the same with 8-bit activations (safe only on CPUs whose int8 kernels cannot overflow,
  such as AVX-512 VNNI; this one has ``avx512_vnni``: see the results file);
* ``int8_fp32_projection``: the int8 decoder with the output projection in full precision;
* ``fp32_int8_projection``: the full-precision decoder with an int8 output projection only.

Per variant: sentences whose output ids equal the full-precision search's, and the trace's p50 per sentence.
Writes ``benchmarks/results/int8_agreement.json``.

    python benchmarks/int8_agreement.py             # ~5 min on 2 cores
    python benchmarks/int8_agreement.py --limit 50  # a smoke run (no results file)
"""

from __future__ import annotations

import argparse
import copy
import gzip
import statistics
import sys
import time
from pathlib import Path

from bench_common import publish

from viz_model.config.data_root import data_root

REPO = Path(__file__).resolve().parent.parent
DATA = data_root() / "multi30k"
OUT = REPO / "benchmarks" / "results" / "int8_agreement.json"


def variants(model) -> list[tuple[str, object, bool]]:
    """(name, search network, 7-bit activations) of each variant."""
    from viz_model.nn.quantize import Int8Linear, int8_search_network

    full_int8 = int8_search_network(model.network)
    fp32_projection = copy.copy(full_int8)
    fp32_projection._modules = dict(full_int8._modules)
    fp32_projection.output_projection = None  # the tied full-precision embedding matrix
    int8_projection = copy.copy(model.network)
    int8_projection._modules = dict(model.network._modules)
    int8_projection.output_projection = Int8Linear(model.network.tgt_embedding.weight, None)
    int8_projection.shared_activation_scale = True
    return [("int8", full_int8, True), ("int8_8bit_activations", full_int8, False),
            ("int8_fp32_projection", fp32_projection, True), ("fp32_int8_projection", int8_projection, True)]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=REPO / "assets" / "mixed-en-de")
    p.add_argument("--limit", type=int, default=None)
    args = p.parse_args()
    import torch

    import viz_model
    from viz_model.nn.quantize import Int8Linear

    torch.set_num_threads(2)
    with gzip.open(DATA / "val.en.gz", "rt", encoding="utf-8") as f:
        texts = [line.strip() for line in f][:args.limit]
    model = viz_model.load(args.model, device="cpu", precision="fp32")
    reference, rows = [], {}
    started = time.perf_counter()
    for text in texts:
        reference.append(model.trace(text, top_k=1).output_ids)
    rows["fp32"] = {"identical": len(texts), "ms_per_sentence": round((time.perf_counter() - started) * 1000 /
                                                                        len(texts), 1)}
    for name, network, reduce_range in variants(model):
        view = model.with_precision("fp32")
        view.search_network = network
        for module in network.modules():
            if isinstance(module, Int8Linear):
                module.reduce_range = reduce_range
        times, same = [], 0
        for text, ids in zip(texts, reference):
            t = time.perf_counter()
            same += view.trace(text, top_k=1).output_ids == ids
            times.append((time.perf_counter() - t) * 1000)
        rows[name] = {"identical": same, "ms_per_sentence": round(statistics.median(times), 1)}
        print(name, rows[name], file=sys.stderr)
    flags = Path("/proc/cpuinfo").read_text().split()
    result = {"model": args.model.name, "sentences": len(texts), "beam": 4, "rule": "project", "variants": rows,
              "cpu_avx512_vnni": "avx512_vnni" in flags, "torch": torch.__version__}
    publish(OUT, result, write=args.limit is None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
