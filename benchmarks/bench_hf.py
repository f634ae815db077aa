#!/usr/bin/env python
"""An imported opus-mt-en-de-size Marian model: translate + full trace against Hugging Face ``generate`` on the
*same* weights (issue 21).

A random-weight ``MarianMTModel`` of opus-mt-en-de's size (d_model 512, 6+6 layers, 8 heads, FFN 2048, SiLU,
vocabulary 58,101) with a small SentencePiece tokenizer (its vocab.json filled up to 58,101 ids) is saved with
``save_pretrained``, trained for ``--fit`` Adam steps (default 60) to answer every English sentence with one German
sentence of L pieces (FORCED_TARGET), so that it ends its translations as a trained model does (random weights
never emit ``</s>`` and run to the length cap), and imported with ``viz-model import``. Then:

The folder's generation_config.json is opus-mt-en-de's (num_beams 4, max_length 512, the pad id banned, ``</s>``
forced at the limit). Then:

* **ours**: ``model.trace(SENTENCE)``, exactly what the app runs on Translate with the model's defaults: the search
  (an imported model's default: transformers' rule in full precision; ``--rule`` / ``--precision`` choose others),
  then the full trace (every map, masks, PE, top-5 steps); checked to translate into the L pieces;
* **Hugging Face**: ``generate(min_new_tokens=L, max_new_tokens=L, output_attentions=True,
  return_dict_in_generate=True)`` with the folder's generation config, on the same source ids with eager attention
  (only ``generate`` is timed).

Runs alternate between the two; p50 over ``--runs`` (>= 30). Peak RSS: a fresh process loads the imported model
(the load is timed too: ``viz_model.load``, torch and viz_model already imported) and runs one trace. Targets:
>= 2x faster than Hugging Face, p50 <= 150 ms, peak RSS <= 1 GB.

    python benchmarks/bench_hf.py            # 30 timed runs of each after 3 warm-up runs (~5 min, 2 of them fitting)
    python benchmarks/bench_hf.py --rule project --precision int8   # the search imported models ran before issue 34
    python benchmarks/bench_hf.py --quick    # smoke test
    python benchmarks/bench_hf.py --quick --save-model ../opus-size/opus-mt-size   # keep the model, e.g.
    python benchmarks/bench_app.py --model-assets ../opus-size --model opus-mt-size  # for the app benchmark
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from bench_app import sentences as app_sentences
from bench_common import write_results
from bench_trace import BEAM, FORCED_TARGET, SENTENCE, peak_rss_mb, percentiles, time_interleaved

OPUS_MT_EN_DE = {"d_model": 512, "layers": 6, "heads": 8, "ffn": 2048, "vocab": 58_101, "positions": 512}
RESULTS = Path(__file__).resolve().parent / "results"  # bench_hf[_RULE_SEARCH].json, written by full runs
TARGET_SPEEDUP, TARGET_P50_MS, TARGET_RSS_MB = 2.0, 150.0, 1024.0
WORDS = ["a", "man", "woman", "child", "dog", "in", "on", "the", "blue", "red", "shirt", "standing", "ladder",
         "cleaning", "windows", "street", "park", "ein", "mann", "frau", "kind", "hund", "im", "auf", "dem",
         "blauen", "roten", "hemd", "steht", "leiter", "putzt", "fenster", "straße", "großen", "einer", "einem",
         "und", "die"]


def build_folder(root: Path) -> Path:
    """The random opus-mt-size Marian model, saved as Hugging Face saves one."""
    import sentencepiece as spm
    import transformers

    rng = random.Random(0)
    # the benchmark's sentence and target many times over: whole words become pieces, as in opus-mt's 58k vocabulary
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(2000)]
    lines += [SENTENCE, FORCED_TARGET] * 500
    lines += app_sentences(500, 1)  # bench_app's 15-word sentences: their words become whole pieces as well
    # every ASCII letter and digit, so that any English test sentence (bench_app's too) has no unknown character
    lines += [" ".join(string.ascii_letters + string.digits)] * 50
    for side in ("source", "target"):
        spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=str(root / side), vocab_size=400,
                                       model_type="unigram", minloglevel=2, hard_vocab_limit=False, unk_id=1,
                                       bos_id=-1, eos_id=0, pad_id=-1, character_coverage=1.0)
    vocab: dict[str, int] = {"</s>": 0, "<unk>": 1}
    for side in ("source", "target"):
        sp = spm.SentencePieceProcessor(model_file=str(root / f"{side}.model"))
        for i in range(sp.get_piece_size()):
            vocab.setdefault(sp.id_to_piece(i), len(vocab))
    while len(vocab) < OPUS_MT_EN_DE["vocab"] - 1:
        vocab[f"▁filler{len(vocab)}"] = len(vocab)
    vocab["<pad>"] = len(vocab)
    (root / "vocab.json").write_text(json.dumps(vocab))
    tokenizer = transformers.MarianTokenizer(source_spm=str(root / "source.model"),
                                             target_spm=str(root / "target.model"), vocab=str(root / "vocab.json"),
                                             source_lang="en", target_lang="de")
    d = OPUS_MT_EN_DE
    config = transformers.MarianConfig(
        vocab_size=d["vocab"], d_model=d["d_model"], encoder_layers=d["layers"], decoder_layers=d["layers"],
        encoder_attention_heads=d["heads"], decoder_attention_heads=d["heads"], encoder_ffn_dim=d["ffn"],
        decoder_ffn_dim=d["ffn"], max_position_embeddings=d["positions"], activation_function="swish",
        scale_embedding=True, pad_token_id=vocab["<pad>"], decoder_start_token_id=vocab["<pad>"], eos_token_id=0,
        forced_eos_token_id=None)
    torch.manual_seed(0)
    folder = root / "opus-mt-size"
    transformers.MarianMTModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    pad = vocab["<pad>"]  # opus-mt-en-de's generation config
    (folder / "generation_config.json").write_text(json.dumps({
        "bad_words_ids": [[pad]], "bos_token_id": 0, "decoder_start_token_id": pad, "eos_token_id": 0,
        "forced_eos_token_id": 0, "max_length": 512, "num_beams": BEAM, "pad_token_id": pad}))
    return folder


def fit(folder: Path, steps: int) -> None:
    """Train the saved random model for `steps` Adam steps to translate any bench_app sentence into FORCED_TARGET
    (it learns to end there), and save it back: random weights never emit </s> and run to the length cap."""
    import transformers

    model = transformers.MarianMTModel.from_pretrained(folder)
    tokenizer = transformers.MarianTokenizer.from_pretrained(folder)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    model.train()
    for step in range(steps):
        batch = tokenizer(app_sentences(8, 100 + step), text_target=[FORCED_TARGET] * 8, return_tensors="pt",
                          padding=True)
        loss = model(**batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0 or step == steps - 1:
            print(f"fit step {step + 1}/{steps}: loss {loss.item():.3f}", file=sys.stderr)
    model.eval().save_pretrained(folder)


def ours_fn(model, timings: list[dict[str, float]] | None = None, rule: str | None = None):
    """The app's call on Translate with the model's defaults (or `rule`): search, then the full trace; each call's
    split (`trace.timings`) goes to `timings`."""
    def run() -> None:
        trace = model.trace(SENTENCE, rule=rule)
        if timings is not None:
            timings.append(trace.timings)
    return run


def output_length(model, rule: str) -> int:
    """Tokens (with </s>) the fitted model translates SENTENCE into; an error if it did not learn FORCED_TARGET."""
    trace = model.trace(SENTENCE, rule=rule)
    if trace.translation != FORCED_TARGET:
        raise SystemExit(f"the fitted model translates into {trace.translation!r}, not the {FORCED_TARGET!r} it "
                         "was trained on: raise --fit")
    return len(trace.output_ids)


def hf_fn(folder: Path, src_ids: list[int], steps: int):
    from transformers import MarianMTModel

    marian = MarianMTModel.from_pretrained(folder, attn_implementation="eager").eval()
    gen = marian.generation_config  # the folder's (opus-mt-en-de's), stopped at the fitted output's length
    gen.update(min_new_tokens=steps, max_new_tokens=steps, output_attentions=True, return_dict_in_generate=True)
    input_ids = torch.tensor([src_ids])

    def run() -> None:
        with torch.inference_mode():
            out = marian.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                                  generation_config=gen)
        assert out.cross_attentions, "generate returned no attentions"
    return run


def rss_child(directory: Path, precision: str, rule: str | None) -> None:
    import viz_model

    started = time.perf_counter()
    model = viz_model.load(directory, device="cpu", precision=precision)
    load_s = time.perf_counter() - started
    ours_fn(model, rule=rule)()
    peak, how = peak_rss_mb()
    print(json.dumps({"peak_rss_mb": round(peak, 1), "source": how, "load_s": round(load_s, 2)}))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="smoke test: 3 runs, 1 warm-up, no RSS")
    p.add_argument("--precision", choices=("auto", "int8", "fp32"), default="auto",
                   help="the search's precision (auto: an imported model's default, full precision)")
    p.add_argument("--rule", choices=("transformers", "project"), default=None,
                   help="the search's rule (default: an imported model's own, transformers')")
    p.add_argument("--save-model", type=Path, help="also copy the imported model directory here (a new path)")
    p.add_argument("--fit", type=int, default=60, metavar="STEPS",
                   help="train the random model for STEPS (>= 1) Adam steps to answer every English sentence with "
                        "FORCED_TARGET, so that it ends its translations as a trained model does (~2 min; the "
                        "benchmark checks that it learned it)")
    p.add_argument("--rss-child", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rss_child:
        rss_child(args.rss_child, args.precision, args.rule)
        return 0
    if args.fit < 1:
        p.error("--fit must be at least 1: an untrained model never ends its translations")
    if args.quick:
        args.runs, args.warmup = 3, 1
    import viz_model
    from viz_model.hf.importer import import_model

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = build_folder(root)
        fit(folder, args.fit)
        directory = import_model(str(folder), root / "imported")
        if args.save_model:
            shutil.copytree(directory, args.save_model)
        model = viz_model.load(directory, device="cpu", precision=args.precision)
        steps = output_length(model, args.rule)
        splits: list[dict[str, float]] = []
        fns = {"ours": ours_fn(model, splits, args.rule), "hf": hf_fn(folder, model.encode(SENTENCE), steps)}
        times = time_interleaved(fns, args.runs, args.warmup)
        result = {name: percentiles(ms) for name, ms in times.items()}
        result["speedup_p50"] = round(result["hf"]["p50_ms"] / result["ours"]["p50_ms"], 2)
        timed = splits[-args.runs:]  # where our time goes: the search (with the encoder) vs the trace pass
        result["ours_split_p50"] = {k: round(statistics.median(t[k] for t in timed), 2)
                                    for k in ("decode_ms", "trace_ms")}
        rule = model.search_settings(args.rule).rule
        result.update(steps=steps, search=model.search_precision, rule=rule, threads=torch.get_num_threads(),
                      parameters=model.network.num_parameters())
        if not args.quick:
            proc = subprocess.run([sys.executable, __file__, "--rss-child", str(directory), "--precision",
                                   args.precision, *(["--rule", args.rule] if args.rule else [])],
                                  capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                raise SystemExit(f"peak-RSS subprocess failed:\n{proc.stderr[-3000:]}")
            child = json.loads(proc.stdout.strip().splitlines()[-1])
            result["ours_peak_rss_mb"], result["ours_load_s"] = child["peak_rss_mb"], child["load_s"]
    print(json.dumps(result, indent=2))
    if not args.quick:
        default = args.rule is None and args.precision == "auto"
        path = RESULTS / ("bench_hf.json" if default else f"bench_hf_{rule}_{model.search_precision}.json")
        write_results(path, result)
        print(f"wrote {path}", file=sys.stderr)
    ours, hf = result["ours"]["p50_ms"], result["hf"]["p50_ms"]
    print(f"ours p50 {ours} ms ({'meets' if ours <= TARGET_P50_MS else 'misses'} <= {TARGET_P50_MS:g} ms); "
          f"Hugging Face p50 {hf} ms; speedup {result['speedup_p50']}x "
          f"({'meets' if result['speedup_p50'] >= TARGET_SPEEDUP else 'misses'} >= {TARGET_SPEEDUP:g}x)"
          + (f"; peak RSS {result['ours_peak_rss_mb']} MB" if "ours_peak_rss_mb" in result else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
