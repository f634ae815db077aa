#!/usr/bin/env python
"""BLEU of a shipped model with the int8 search the app and CLI run on the CPU, written into its results.json
(issue 24: the README's int8 column must come from a file a command wrote, not be typed).

For each set, beam 4 with ``search="int8"`` and, in the same run, ``search="fp32"`` (the precision
``viz-model export --evaluate`` scores with), both on the model's stored weights: keys ``SET/beam4-int8`` and
``SET/beam4-fp32-stored``; with ``--alphas`` also the fp32 search at other length penalties
(``SET/beam4-alphaA-fp32-stored``). Sets: Multi30K test_2016_flickr (``--all-multi30k``: all four), and for a model
trained with Tatoeba its old held-out test set (rebuilt exactly as `tatoeba_unseen.py` does).

    python benchmarks/eval_int8.py --model assets/mixed-en-de --tatoeba
    python benchmarks/eval_int8.py --model assets/multi30k-en-de --all-multi30k
    python benchmarks/eval_int8.py --model assets/multi30k-en-de --sets val --alphas 1.0 --no-int8
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench_common import report_results

from viz_model.config.data_root import data_root

REPO = Path(__file__).resolve().parent.parent
DATA = data_root()
MULTI30K = ["val", "test_2016_flickr", "test_2017_flickr", "test_2017_mscoco"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=REPO / "assets" / "mixed-en-de")
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--tatoeba", action="store_true", help="also the Tatoeba held-out test set (seed 20180513)")
    p.add_argument("--all-multi30k", action="store_true",
                   help="every Multi30K set: val, test_2016_flickr, test_2017_flickr, test_2017_mscoco")
    p.add_argument("--sets", nargs="+", choices=MULTI30K, help="these Multi30K sets (default: test_2016_flickr)")
    p.add_argument("--alphas", nargs="+", type=float, default=[],
                   help="also score the fp32 search at these length penalties (default 0.6 always)")
    p.add_argument("--no-int8", action="store_true", help="only the fp32 search")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args()

    import viz_model
    from viz_model.data.bleu import corpus_scores, reference_streams
    from viz_model.data.textfiles import read_parallel
    from viz_model.train.splits import holdout_split

    splits = MULTI30K if args.all_multi30k else args.sets or ["test_2016_flickr"]
    sets = {}
    for split in splits:
        src, tgt = read_parallel(str(args.data / "multi30k"), split, "en", "de")
        sets[f"multi30k:{split}"] = (src, [[t] for t in tgt])
    if args.tatoeba:
        pairs = read_parallel(str(args.data / "tatoeba"), "pairs", "en", "de")
        split = holdout_split(*pairs, 1000, 1000, 20180513)
        sets["tatoeba:test"] = (split.test_src, split.test_refs)
    found = {}
    for search in ("fp32",) if args.no_int8 else ("int8", "fp32"):
        model = viz_model.load(args.model, device="cpu", precision=search)
        suffix = "int8" if search == "int8" else "fp32-stored"
        for name, (sources, refs) in sets.items():
            hyps = model.translate(sources, beam=4)
            found[f"{name}/beam4-{suffix}"] = corpus_scores(hyps, reference_streams(refs))
            for alpha in args.alphas if search == "fp32" else []:
                hyps = model.translate(sources, beam=4, alpha=alpha)
                found[f"{name}/beam4-alpha{alpha}-{suffix}"] = corpus_scores(hyps, reference_streams(refs))
    report_results(args.model, found, write=not args.no_write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
