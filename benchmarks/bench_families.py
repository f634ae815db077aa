#!/usr/bin/env python
"""Translate + full trace of the imported families (T5 v1.1, BART, mBART-50, the original mBART) against
transformers' ``generate`` with attentions, on the same weights, side by side in one run.

For each family a folder is built by transformers from a config of a small translation model's size (d_model 256,
3 + 3 layers, 8 heads (T5: d_kv 32), d_ff 1024; random weights; the tests' small trained tokenizers) and imported
with `viz_model.hf.importer.import_model`. Runs alternate between the two systems:

* **ours**: ``TranslationModel.trace(SENTENCE, beam=4)`` with the folder's own rule (transformers' search settings):
  tokenization, the beam search, the teacher-forced pass that records every map, the numpy trace.
* **transformers**: ``generate(num_beams=4, output_attentions=True, return_dict_in_generate=True)`` on the same
  source ids, the model loaded with ``attn_implementation="eager"`` (its default, sdpa, returns no attention maps:
  checked, the run stops if ``generate`` returns none); only ``generate`` is timed.

Random weights rarely end a sentence, so both decode to the same length limit (the folder's generation config sets
``max_length`` = ``--steps`` + 1 and ``min_length`` to it, so neither stops early); the number of decoder steps is
checked equal. Target (issue 45): ours at least 2x faster. Results: ``benchmarks/results/bench_families.json``.

    python benchmarks/bench_families.py [--runs 20] [--steps 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch
from bench_common import REPO, CpuMonitor, load_average, write_results
from bench_trace import time_interleaved

sys.path[:0] = [str(REPO), str(REPO / "tests")]  # the tests' folder builders
from support.hf_families import (  # noqa: E402
    build_bart_folder,
    build_mbart50_folder,
    build_original_mbart_folder,
    build_t5_folder,
)

import viz_model  # noqa: E402
from viz_model.hf.importer import import_model  # noqa: E402

SENTENCE = "A man reads a book in the park."
SIZES = {"t5": {"d_model": 256, "d_kv": 32, "d_ff": 1024, "num_layers": 3, "num_decoder_layers": 3, "num_heads": 8},
         "bart": {"d_model": 256, "encoder_layers": 3, "decoder_layers": 3, "encoder_attention_heads": 8,
                  "decoder_attention_heads": 8, "encoder_ffn_dim": 1024, "decoder_ffn_dim": 1024}}
BUILDERS = {"t5-v1.1": (lambda root: build_t5_folder(root, "1.1"), "t5"), "bart": (build_bart_folder, "bart"),
            "mbart-50": (build_mbart50_folder, "bart"), "mbart": (build_original_mbart_folder, "bart")}
LANGUAGES = {"t5-v1.1": ("en", "de"), "bart": (None, None), "mbart-50": ("en_XX", "de_DE"), "mbart": (None, None)}


def resized(folder: Path, sizes: dict, steps: int) -> Path:
    """The folder's model rebuilt at `sizes` with random weights, decoding exactly `steps` tokens."""
    import transformers

    config = transformers.AutoConfig.from_pretrained(folder)
    for key, value in sizes.items():
        setattr(config, key, value)
    torch.manual_seed(0)
    model = transformers.AutoModelForSeq2SeqLM.from_config(config)
    model.save_pretrained(folder)
    generation = json.loads((folder / "generation_config.json").read_text())
    generation.update({"max_length": steps + 1, "min_length": steps + 1, "num_beams": 4})
    generation.pop("max_new_tokens", None)
    (folder / "generation_config.json").write_text(json.dumps(generation))
    return folder


def family(name: str, root: Path, runs: int, steps: int) -> dict:
    """Both systems on one family's folder, runs alternating."""
    import transformers

    build, kind = BUILDERS[name]
    folder = resized(build(root), SIZES[kind], steps)
    out = root / f"{name}-imported"
    source_lang, target_lang = LANGUAGES[name]
    import_model(str(folder), out, source_lang=source_lang, target_lang=target_lang)
    ours = viz_model.load(out, device="cpu", precision="fp32")
    theirs = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()
    source = torch.tensor([ours.encode(SENTENCE)])
    trace = ours.trace(SENTENCE, beam=4)
    with torch.no_grad():
        generated = theirs.generate(source, num_beams=4, output_attentions=True, return_dict_in_generate=True)
    our_steps, their_steps = len(trace.output_ids), generated.sequences.shape[1] - 1
    maps = [generated.encoder_attentions, generated.decoder_attentions[0], generated.cross_attentions[0]]
    if not all(maps) or any(m is None for kind in maps for m in kind):
        raise SystemExit(f"{name}: generate returned no attention maps; the comparison would not be with them")
    times = time_interleaved({"ours": lambda: ours.trace(SENTENCE, beam=4),
                              "transformers": lambda: theirs.generate(source, num_beams=4, output_attentions=True,
                                                                      return_dict_in_generate=True)}, runs, 1)
    p50 = {name: statistics.median(ms) for name, ms in times.items()}
    return {"ours_p50_ms": round(p50["ours"], 1), "transformers_p50_ms": round(p50["transformers"], 1),
            "speedup_p50": round(p50["transformers"] / p50["ours"], 2), "ours_steps": our_steps,
            "transformers_steps": int(their_steps), "transformers_attention": theirs.config._attn_implementation,
            "parameters": sum(p.numel() for p in theirs.parameters()),
            "target_met": p50["transformers"] / p50["ours"] >= 2.0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    monitor = CpuMonitor()
    found: dict = {"sentence": SENTENCE, "runs": args.runs, "steps": args.steps, "beam": 4,
                   "threads": torch.get_num_threads(), "load_average_before": load_average(), "families": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in BUILDERS:
            root = Path(tmp) / name
            root.mkdir()
            found["families"][name] = family(name, root, args.runs, args.steps)
            print(name, found["families"][name], flush=True)
    found["other_cores_busy"] = monitor.other_cores()
    write_results(REPO / "benchmarks" / "results" / "bench_families.json", found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
