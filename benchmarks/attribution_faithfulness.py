"""Which explanation is most faithful for the shipped model, over the Multi30K validation set (the README's table).

    python benchmarks/attribution_faithfulness.py [--data-dir DIR (default: the data root)] [--model assets/mixed-en-de]

Every sentence is translated greedily and teacher-forced on that translation; for every output token and method the
k = 1, 2, 3 source tokens the method ranks highest are removed (comprehensiveness: the drop of the token's
log-probability; higher = more faithful) or kept alone (sufficiency: the drop; lower = better), against random
sets of k. Writes the per-sentence rows to .data/attribution/ and the summary to
benchmarks/results/attribution_faithfulness.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench_common import REPO, load_average, write_results

from viz_model.config.data_root import data_root

METHODS = ["attention", "rollout", "value_weighted", "alti", "saliency", "input_x_gradient", "integrated_gradients"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=str(data_root()), help="the data root holding multi30k/")
    parser.add_argument("--model", default=None, help="model directory (default: the shipped default model)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences (a quick look)")
    parser.add_argument("--steps", type=int, default=32, help="integrated-gradient points (default 32)")
    parser.add_argument("--tolerance", type=float, default=0.0,
                        help="integrated gradients: 0 (default, as the results file was made): --steps fixed "
                             "Gauss-Legendre points; above 0: adaptive, at most --steps points")
    args = parser.parse_args()

    import viz_model
    from viz_model.analysis.tables import write_table
    from viz_model.attribution.corpus_scores import corpus_faithfulness, default_workers, faithfulness_table
    from viz_model.data.textfiles import find_split, open_text

    model = viz_model.load(args.model, device="cpu")
    sources = open_text(find_split(Path(args.data_dir) / "multi30k", "val", "en"))[:args.limit]
    started = time.perf_counter()
    workers = default_workers(model)
    rows = corpus_faithfulness(model, sources, methods=METHODS, steps=args.steps, beam=1, progress=True,
                               workers=workers, tolerance=args.tolerance).faithfulness
    seconds = time.perf_counter() - started
    out_dir = REPO / ".data" / "attribution"
    out_dir.mkdir(parents=True, exist_ok=True)
    write_table(rows, out_dir / f"{model.name}-multi30k-val.parquet")
    table = faithfulness_table(rows)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    result = {
        "model": model.name, "data": "multi30k val (English sources), greedy translations by the full-precision "
                                     "network, teacher-forced", "workers": workers,
        "sentences": len(sources), "ks": [1, 2, 3], "random_draws": 8,
        "ig_steps": args.steps, "ig_tolerance": args.tolerance,
        "command": "python benchmarks/attribution_faithfulness.py" + (f" --limit {args.limit}" if args.limit else ""),
        "seconds": round(seconds, 1), "load_average": load_average(),
        "table": [{k: (None if v != v else round(v, 4)) if isinstance(v, float) else v for k, v in row.items()}
                  for row in table.to_dict(orient="records")],
    }
    if args.limit is None:
        path = REPO / "benchmarks" / "results" / "attribution_faithfulness.json"
        write_results(path, result)
        print(f"wrote {path}", file=sys.stderr)
    else:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
