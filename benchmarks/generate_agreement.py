#!/usr/bin/env python
"""How often each of our searches gives transformers' ``generate`` translation, on trained weights (issue 34).

The shipped model is written as a Hugging Face Marian folder (``viz-model export-hf``) and imported back; for each
Multi30K validation sentence, ``generate()`` with the folder's generation config (beam 4, length_penalty 1.0,
early_stopping False, ...) is compared with our searches of the imported model: transformers' rule (the default
for imported models) in full precision and with int8 weights, and this project's rule (GNMT alpha 0.6, OpenNMT's
stop) in both precisions. Per search: sentences whose output ids equal generate's, corpus BLEU (sacrebleu) against
the references, and the wall time of the whole run. Writes ``benchmarks/results/generate_agreement.json``.

    python benchmarks/generate_agreement.py              # 1,014 sentences, ~10 min on 2 cores
    python benchmarks/generate_agreement.py --limit 50   # a smoke run (no results file)
"""

from __future__ import annotations

import argparse
import gzip
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import publish

from viz_model.config.data_root import data_root

REPO = Path(__file__).resolve().parent.parent
DATA = data_root() / "multi30k"
OUT = REPO / "benchmarks" / "results" / "generate_agreement.json"
SEARCHES = {"transformers_fp32": ("transformers", "fp32"), "transformers_int8": ("transformers", "int8"),
            "project_fp32": ("project", "fp32"), "project_int8": ("project", "int8")}


def read(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.strip() for line in f]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=REPO / "assets" / "mixed-en-de")
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--limit", type=int, default=None, help="only the first N sentences (no results file)")
    args = p.parse_args()

    import sacrebleu
    import torch
    import transformers

    import viz_model

    torch.set_num_threads(2)
    sources, references = read(args.data / "val.en.gz"), read(args.data / "val.de.gz")
    if args.limit:
        sources, references = sources[:args.limit], references[:args.limit]
    with tempfile.TemporaryDirectory() as tmp:
        folder, imported = Path(tmp) / "marian", Path(tmp) / "imported"
        for command in (["export-hf", str(args.model), "--out", str(folder)],
                        ["import", str(folder), "--out", str(imported)]):
            subprocess.run([sys.executable, "-m", "viz_model", *command], check=True)
        hf = transformers.MarianMTModel.from_pretrained(folder).eval()
        tokenizer = transformers.MarianTokenizer.from_pretrained(folder)
        model = viz_model.load(imported, device="cpu")
        eos = model.config.eos_id
        started = time.perf_counter()
        theirs = []
        with torch.inference_mode():
            for text in sources:
                ids = hf.generate(tokenizer(text, return_tensors="pt").input_ids)[0, 1:].tolist()
                theirs.append(ids[:ids.index(eos) + 1] if eos in ids else ids)
        rows = {"generate": {"identical": len(sources), "seconds": round(time.perf_counter() - started, 1),
                             "bleu": round(sacrebleu.corpus_bleu([tokenizer.decode(t, skip_special_tokens=True)
                                                                  for t in theirs], [references]).score, 2)}}
        for name, (rule, precision) in SEARCHES.items():
            searching = model.with_precision(precision)
            started = time.perf_counter()
            ours = [searching.trace(text, rule=rule, top_k=1).output_ids for text in sources]
            seconds = time.perf_counter() - started
            rows[name] = {"identical": sum(a == b for a, b in zip(ours, theirs)), "seconds": round(seconds, 1),
                          "bleu": round(sacrebleu.corpus_bleu([model.tokenizer.decode(o) for o in ours],
                                                              [references]).score, 2)}
            print(name, rows[name], file=sys.stderr)
    result = {"model": args.model.name, "set": "multi30k val", "sentences": len(sources), "beam": 4,
              "generation_config": model.generation.transformers.to_dict(), "searches": rows,
              "transformers": transformers.__version__, "torch": torch.__version__}
    publish(OUT, result, write=args.limit is None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
