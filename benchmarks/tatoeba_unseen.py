#!/usr/bin/env python
"""The shipped model's Tatoeba test score on the sentences it could not have seen (issue 24).

The shipped model was trained on the old held-out split (``holdout_rule = "source"``: pairs grouped by exact English
text), which leaves paraphrases, punctuation variants and shared German translations of held-out sentences in
training. This script rebuilds that split exactly (same files, seed and sizes), keeps the test sentences whose
normalised source and every normalised reference (`viz_model.train.splits.normalised`: case, punctuation and
whitespace ignored) appear on neither side of the training pairs, translates the test set (beam 4, the full-precision
search, as `viz-model export --evaluate` scored it) and writes BLEU and chrF of that unseen part, with its sentence
count and the whole set's score recomputed in the same run, into the model's ``results.json``
(``tatoeba:test-unseen/beam4`` and ``tatoeba:test-unseen/count``).

    python benchmarks/tatoeba_unseen.py                      # assets/mixed-en-de, the data root's tatoeba/
    python benchmarks/tatoeba_unseen.py --model DIR --data-dir DIR --no-write [--out FILE.json]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench_common import report_results, write_results

from viz_model.config.data_root import data_root

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--model", type=Path, default=REPO / "assets" / "mixed-en-de")
    p.add_argument("--data-dir", type=Path, default=data_root() / "tatoeba")
    p.add_argument("--prefix", default="pairs")
    p.add_argument("--seed", type=int, default=20180513)
    p.add_argument("--val", type=int, default=1000)
    p.add_argument("--test", type=int, default=1000)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--precision", choices=("auto", "int8", "fp32"), default="fp32")
    p.add_argument("--no-write", action="store_true", help="print only; leave results.json as it is")
    p.add_argument("--out", type=Path, help="also write the scores as a results file (e.g. for a model whose "
                   "results.json should stay as exported)")
    args = p.parse_args()

    import viz_model
    from viz_model.data.bleu import corpus_scores, reference_streams
    from viz_model.data.textfiles import read_parallel
    from viz_model.train.splits import holdout_split, unseen_test_sentences

    src, tgt = read_parallel(str(args.data_dir), args.prefix, "en", "de")
    split = holdout_split(src, tgt, args.val, args.test, args.seed)
    keep = unseen_test_sentences(split)
    model = viz_model.load(args.model, precision=args.precision)
    hyps = model.translate(split.test_src, beam=args.beam)
    whole = corpus_scores(hyps, reference_streams(split.test_refs))
    unseen = corpus_scores([hyps[i] for i in keep], reference_streams([split.test_refs[i] for i in keep]))
    key = f"beam{args.beam}"
    result = {f"tatoeba:test-unseen/{key}": unseen,
              "tatoeba:test-unseen/count": {"sentences": len(keep), "of": len(split.test_src),
                                            "search": model.search_precision, f"whole_test_{key}": whole}}
    report_results(args.model, result, write=not args.no_write)
    if args.out:
        write_results(args.out, {"model": args.model.name, "beam": args.beam, **result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
