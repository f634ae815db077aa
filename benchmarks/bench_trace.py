#!/usr/bin/env python
"""Latency of one translation + full attention trace (beam 4) on the CPU, against Hugging Face Marian.

What is timed, per run (runs of the two systems alternate, so background load hits both alike):

* **ours**: ``TranslationModel.trace(SENTENCE, beam=4)``: tokenization, beam search (alpha 0.6, KV cache; on the
  CPU with int8 decoder weights by default, as the app and CLI run it, ``--precision fp32`` for full precision), the
  teacher-forced pass that records every per-head attention map, the numpy trace (masks, positional encodings,
  embeddings, top-5 candidates per step) and the detokenized translation. The trace carries the translation, so
  this is "translate + full trace" in one call.
* **Marian**: ``MarianMTModel.generate(num_beams=4, output_attentions=True, return_dict_in_generate=True)`` with the
  same dimensions (d_model, layers, heads, FFN width, ReLU, vocabulary, scaled embeddings, tied embeddings), random
  weights, on the *same source ids*; ``min_new_tokens = max_new_tokens = our output length`` so both decode the same
  number of steps. Only ``generate`` is timed (no tokenization, no conversion of the attentions to numpy): that
  favours Marian.

The model: ``--model DIR``, else the shipped ``assets/multi30k-en-de`` when it exists, else (or with ``--random``)
a random-init model of the reference size (d_model 256, 3+3 layers, 8 heads, d_ff 1024, vocab 8k) with an 8k BPE
tokenizer (``--tokenizer FILE``, or trained once on the Multi30K training split of ``--data-dir`` and cached in
``.data/bench/``). Random weights almost never emit ``</s>``, so a free beam search would run to its length limit
(source length + 50 = 67 steps), which is not what a trained model does. In that mode the timed call is therefore
``beam_search(..., beam=4, max_lens=[L])`` (a beam search capped at L steps; all 4 beams run every step) followed
by ``trace(SENTENCE, target=FORCED_TARGET)`` (the full trace of a forced 16-piece German translation, L = 17 tokens
with ``</s>``), i.e. the same work a trained model does when it translates the sentence into 17 tokens.

Peak RSS is measured in a fresh subprocess that imports torch and viz_model, loads the model and runs one trace
(VmHWM from /proc/self/status, else ru_maxrss).

Targets (issue 3): p50 <= 60 ms, >= 3x faster than Marian, peak RSS <= 300 MB. Run it on an idle machine:
a busy CPU with 2 threads per process makes both sides many times slower (OpenMP threads wait on each other).

    python benchmarks/bench_trace.py            # full run: 100 timed runs of each after 5 warm-up runs
    python benchmarks/bench_trace.py --json     # the same, JSON on stdout (the table goes to stderr)
    python benchmarks/bench_trace.py --quick    # smoke test: 5 runs
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from bench_common import (
    REFERENCE_DIMS,
    CpuMonitor,
    cached_tokenizer,
    describe_machine,
    emit,
    load_average,
    machine,
    repo_label,
)

from viz_model.config.data_root import data_root

SENTENCE = "A man in a blue shirt is standing on a ladder and cleaning the windows."  # 15 words
FORCED_TARGET = "Ein Mann in einem blauen Hemd steht auf einer Leiter und putzt die großen Fenster."
TARGET_P50_MS = 60.0
TARGET_SPEEDUP = 3.0
TARGET_RSS_MB = 300.0
BEAM, ALPHA = 4, 0.6


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="p50/p90 latency of viz_model translate + full trace (beam 4) vs Hugging Face MarianMTModel "
                    "generate(num_beams=4, output_attentions=True) at the same dimensions, plus peak RSS.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", type=Path, help="model directory (default: assets/multi30k-en-de when it exists, "
                                              "else a random-init model of the reference size)")
    p.add_argument("--random", action="store_true", help="use a random-init model even when a shipped one exists")
    p.add_argument("--tokenizer", type=Path, help="SentencePiece model for the random-init model (default: train "
                                                  "an 8k BPE on --data-dir's training split, cached in .data/bench)")
    p.add_argument("--data-dir", type=Path, default=data_root() / "multi30k",
                   help="Multi30K directory (only used to train the random-init model's tokenizer)")
    p.add_argument("--sentence", default=SENTENCE, help="English input sentence")
    p.add_argument("--runs", type=int, default=100, help="timed runs of each system (>= 50 for the report)")
    p.add_argument("--warmup", type=int, default=5, help="untimed warm-up runs of each system")
    p.add_argument("--threads", type=int, default=0, help="torch threads for both systems (0 = torch's default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-marian", action="store_true", help="skip the Marian comparison")
    p.add_argument("--precision", choices=("auto", "int8", "fp32"), default="auto",
                   help="our beam-search precision (viz_model.load(precision=...)): auto = int8 on the CPU, what the "
                        "app and CLI run; the trace is full precision either way")
    p.add_argument("--marian-len", choices=("output", "steps"), default="output",
                   help="Marian generates exactly as many tokens as our output has (output) or as many as the "
                        "decoder steps our beam search ran (steps: it may go on after the best hypothesis ends, "
                        "until the best candidate of a step is </s>)")
    p.add_argument("--default-threads", action="store_true",
                   help="also time ours with the search on torch's default thread count (not the calibrated one: "
                        "viz_model.search.thread_choice), interleaved with the others in the same run")
    p.add_argument("--no-rss", action="store_true", help="skip the peak-RSS subprocess")
    p.add_argument("--quick", action="store_true", help="smoke test: 5 timed runs, 1 warm-up")
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout (table on stderr)")
    p.add_argument("--rss-child", choices=("ours", "marian"), help=argparse.SUPPRESS)
    p.add_argument("--out-len", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--child-spec", default="{}", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.runs, args.warmup = min(args.runs, 5), min(args.warmup, 1)
    if args.runs < 1 or args.warmup < 0:
        p.error("--runs must be >= 1 and --warmup >= 0")
    return args


# --- helpers ---------------------------------------------------------------------------------------------------
def peak_rss_mb() -> tuple[float, str]:
    """Peak resident set size of this process in MB (VmHWM, else ru_maxrss)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024, "VmHWM"
    except OSError:
        pass
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return (rss / 2**20 if sys.platform == "darwin" else rss / 1024), "ru_maxrss"


def current_rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def percentiles(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {"p50_ms": round(float(np.percentile(a, 50)), 2), "p90_ms": round(float(np.percentile(a, 90)), 2),
            "mean_ms": round(float(a.mean()), 2), "min_ms": round(float(a.min()), 2),
            "max_ms": round(float(a.max()), 2), "runs": len(ms)}


# --- the two systems ---------------------------------------------------------------------------------------------
REFERENCE_MODEL = "multi30k-en-de"  # the shipped model of the reference size (the default app model is larger)


def default_model_dir() -> Path:
    from viz_model.modeldir.shipped import ASSETS_DIR

    return Path(os.environ.get("VIZ_MODEL_ASSETS", ASSETS_DIR)) / REFERENCE_MODEL


def build_ours(args: argparse.Namespace) -> tuple[Any, str, str]:
    """(TranslationModel, mode "trained" | "random", description)."""
    import viz_model
    from viz_model.config import ModelConfig
    from viz_model.kinds.translator import TranslationModel
    from viz_model.nn.model import Transformer
    from viz_model.tokenization.tokenizer import Tokenizer

    directory = args.model or (None if args.random else default_model_dir())
    if directory is not None and (args.model is not None or directory.is_dir()):
        model = viz_model.load(directory, device="cpu", precision=args.precision)
        return model, "trained", repo_label(directory)
    hint = "Pass --tokenizer FILE or --data-dir DIR"
    tokenizer = Tokenizer.load(args.tokenizer or cached_tokenizer(args.data_dir, hint=hint))
    dims = dict(REFERENCE_DIMS)
    if tokenizer.vocab_size != dims["vocab_size"]:
        print(f"note: tokenizer has {tokenizer.vocab_size} pieces; the random model uses that vocabulary size",
              file=sys.stderr)
        dims["vocab_size"] = tokenizer.vocab_size
    torch.manual_seed(args.seed)
    network = Transformer(ModelConfig(**dims, dropout=0.1, max_positions=256))
    model = TranslationModel(network, tokenizer, "random-init", None, "cpu", precision=args.precision)
    return model, "random", "random-init (--random)" if args.random else "random-init (no shipped model found)"


def ours_fn(model: Any, mode: str, sentence: str, out_len: int) -> Callable[[], tuple[str, int]]:
    """The timed call; returns (translation, output length in tokens incl. </s>)."""
    if mode == "trained":
        def run() -> tuple[str, int]:
            trace = model.trace(sentence, beam=BEAM, alpha=ALPHA)
            return trace.translation, len(trace.output_ids)
        return run

    from viz_model.search.decoding import beam_search

    def run_random() -> tuple[str, int]:
        src = torch.tensor([model.encode(sentence)])
        hyp = beam_search(model.search_network, src, BEAM, ALPHA, [out_len])[0]
        text = model.tokenizer.decode(hyp.tokens)
        trace = model.trace(sentence, beam=BEAM, alpha=ALPHA, target=FORCED_TARGET)
        assert trace.steps and text is not None
        return text, len(hyp.tokens)
    return run_random


def count_decoder_steps(model: Any, fn: Callable[[], Any]) -> int | None:
    """Decoder passes one call of `fn` makes, minus the trace's single teacher-forced pass: the beam-search steps."""
    calls = 0

    def hook(*_: Any) -> None:
        nonlocal calls
        calls += 1

    handle = model.network.decoder_layers[0].register_forward_hook(hook)
    try:
        fn()
    finally:
        handle.remove()
    return calls - 1 if calls > 1 else None


def forced_length(model: Any) -> int:
    """Output length (pieces + </s>) of the forced German target."""
    return len(model.tokenizer.encode(FORCED_TARGET)) + 1


def build_marian(cfg: Any, out_len: int) -> tuple[Any, Any]:
    """Random-init MarianMTModel with our dimensions, and the generation config matched to our output length."""
    import transformers
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    transformers.logging.set_verbosity_error()
    mcfg = MarianConfig(
        vocab_size=cfg.vocab_size, decoder_vocab_size=cfg.vocab_size, d_model=cfg.d_model,
        encoder_layers=cfg.encoder_layers, decoder_layers=cfg.decoder_layers,
        encoder_attention_heads=cfg.heads, decoder_attention_heads=cfg.heads,
        encoder_ffn_dim=cfg.d_ff, decoder_ffn_dim=cfg.d_ff, max_position_embeddings=cfg.max_positions,
        activation_function="relu", scale_embedding=True, dropout=cfg.dropout,
        pad_token_id=cfg.pad_id, eos_token_id=3, bos_token_id=2, decoder_start_token_id=cfg.pad_id,
        forced_eos_token_id=None)
    mcfg._attn_implementation = "eager"  # output_attentions needs the eager path; set it up front (no fallback)
    torch.manual_seed(0)
    marian = MarianMTModel(mcfg).eval()
    gen = GenerationConfig(num_beams=BEAM, do_sample=False, min_new_tokens=out_len, max_new_tokens=out_len,
                           length_penalty=ALPHA, output_attentions=True, return_dict_in_generate=True,
                           pad_token_id=cfg.pad_id, eos_token_id=3, decoder_start_token_id=cfg.pad_id)
    return marian, gen


def marian_fn(marian: Any, gen: Any, src_ids: list[int]) -> Callable[[], tuple[str, int]]:
    input_ids = torch.tensor([src_ids])
    mask = torch.ones_like(input_ids)

    def run() -> tuple[str, int]:
        with torch.inference_mode():
            out = marian.generate(input_ids=input_ids, attention_mask=mask, generation_config=gen)
        assert out.cross_attentions and out.encoder_attentions, "generate returned no attentions"
        return "", out.sequences.shape[1] - 1
    return run


def calibration_record(model: Any) -> dict[str, Any] | None:
    """The thread calibration the search ran by in this process (its timings per thread count), if it ran one."""
    from viz_model.search import thread_choice

    return thread_choice.calibrations().get(thread_choice.calibration_key(model.search_network,
                                                                          model.recording_network))


# --- measurement ----------------------------------------------------------------------------------------------------
def time_interleaved(fns: dict[str, Callable[[], Any]], runs: int, warmup: int) -> dict[str, list[float]]:
    """Alternate the systems run by run (and which goes first), so slow phases of the machine hit both."""
    names = list(fns)
    times: dict[str, list[float]] = {n: [] for n in names}
    for i in range(warmup + runs):
        order = names if i % 2 == 0 else names[::-1]
        for name in order:
            start = time.perf_counter()
            fns[name]()
            elapsed = (time.perf_counter() - start) * 1000
            if i >= warmup:
                times[name].append(elapsed)
    return times


def child_args(args: argparse.Namespace) -> list[str]:
    out = ["--threads", str(args.threads), "--seed", str(args.seed), "--data-dir", str(args.data_dir),
           "--precision", args.precision]
    if args.model:
        out += ["--model", str(args.model)]
    if args.random:
        out += ["--random"]
    if args.tokenizer:
        out += ["--tokenizer", str(args.tokenizer)]
    return out


def measure_rss(args: argparse.Namespace, which: str, out_len: int, spec: dict[str, Any]) -> dict[str, Any]:
    """Run this script in a fresh process that loads one system and runs it once; return its report."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--rss-child", which, "--out-len", str(out_len),
           "--sentence", args.sentence, "--child-spec", json.dumps(spec), *child_args(args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"peak-RSS subprocess failed ({which}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rss_child(args: argparse.Namespace) -> None:
    """Fresh process: imports, load one system, run it once, report peak RSS (JSON on stdout)."""
    if args.rss_child == "ours":
        import viz_model  # noqa: F401  (counted in the "after imports" figure)

        imports_mb = current_rss_mb()
        model, mode, _ = build_ours(args)
        ours_fn(model, mode, args.sentence, args.out_len)()
    else:
        spec = json.loads(args.child_spec)
        import transformers  # noqa: F401

        imports_mb = current_rss_mb()
        marian, gen = build_marian(SimpleNamespace(**spec["config"]), args.out_len)
        marian_fn(marian, gen, spec["src_ids"])()
    peak, how = peak_rss_mb()
    print(json.dumps({"peak_rss_mb": round(peak, 1), "after_imports_mb": round(imports_mb, 1), "source": how,
                      "threads": torch.get_num_threads()}))


# --- report ---------------------------------------------------------------------------------------------------------
def status(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def table(r: dict[str, Any]) -> str:
    cfg, lines = r["config"], []
    lines.append(f"bench_trace: translate + full trace, beam {BEAM}, CPU, {r['threads']} torch threads "
                 f"(torch {r['torch']}, transformers {r.get('transformers', '-')}, {describe_machine(r['machine'])})")
    lines.append(f"model: {r['model']} [{r['mode']}]: d_model {cfg['d_model']}, {cfg['encoder_layers']}+"
                 f"{cfg['decoder_layers']} layers, {cfg['heads']} heads, d_ff {cfg['d_ff']}, "
                 f"vocab {cfg['vocab_size']}, "
                 f"{r['parameters'] / 1e6:.2f}M parameters")
    if r["dims_differ"]:
        lines.append(f"note: not the reference size {REFERENCE_DIMS}; Marian is built with the model's own sizes")
    lines.append(f"beam search: {r['search']} weights (--precision {r.get('search_arg', 'auto')}) on "
                 f"{r.get('search_threads', r['threads'])} thread(s) (calibrated: {r.get('calibration')}); the trace "
                 "pass: full precision")
    lines.append(f"input: {r['sentence']!r} ({r['words']} words, {r['source_tokens']} source tokens with </s>)")
    lines.append(f"output: {r['output_tokens']} tokens with </s>: {r['translation']!r}")
    lines.append(f"decoder steps: ours {r['decoder_steps']} (beam search stops when a step's best candidate is </s>), "
                 f"Marian {r['marian_new_tokens']} (min_new_tokens = max_new_tokens, --marian-len "
                 f"{r['marian_len_rule']})")
    if r["mode"] == "random":
        lines.append(f"random weights: timed = beam search capped at {r['output_tokens']} steps + trace of the forced "
                     f"target {FORCED_TARGET!r}")
    lines.append(f"runs: {r['runs']} timed after {r['warmup']} warm-up, alternating; other processes kept "
                 f"{r['other_cores']} of {os.cpu_count()} CPUs busy meanwhile (load average {r['load_before']})")
    if r["busy"]:
        lines.append("WARNING: the machine was busy during the run: the figures are inflated and noisy; "
                     "measure on an idle machine" + (" (with several torch threads on a busy machine, OpenMP "
                                                     "threads wait on each other: --threads 1 is steadier)"
                                                     if r["threads"] > 1 else ""))
    lines.append("")
    lines.append(f"{'':34}{'p50 ms':>9}{'p90 ms':>9}{'mean ms':>9}{'min ms':>9}")
    rows = [("viz_model trace(beam=4)", r["ours"])]
    if r.get("ours_default_threads"):
        rows.append((f"... search on {r['threads']} threads", r["ours_default_threads"]))
    if r.get("marian"):
        rows.append(("Marian generate(num_beams=4)", r["marian"]))
    for name, s in rows:
        lines.append(f"{name:34}{s['p50_ms']:9.1f}{s['p90_ms']:9.1f}{s['mean_ms']:9.1f}{s['min_ms']:9.1f}")
    if r.get("speedup_p50"):
        lines.append(f"{'speed-up (Marian / ours)':34}{r['speedup_p50']:8.2f}x{r['speedup_p90']:8.2f}x")
    if r.get("ours_split_p50"):
        s = r["ours_split_p50"]
        lines.append(f"ours, p50 split (trace.timings): decode {s['decode_ms']} ms, trace {s['trace_ms']} ms")
    rss = r.get("rss")
    if rss:
        lines.append("")
        lines.append(f"peak RSS, fresh process, model loaded + one trace: {rss['ours']['peak_rss_mb']:.0f} MB "
                     f"({rss['ours']['source']}; {rss['ours']['after_imports_mb']:.0f} MB after importing torch + "
                     "viz_model)" + (f"; Marian the same way: {rss['marian']['peak_rss_mb']:.0f} MB"
                                     if rss.get("marian") else ""))
    t = r["targets"]
    lines.append("")
    lines.append(f"{'target':28}{'measured':>12}  status")
    lines.append(f"{'p50 <= 60 ms':28}{r['ours']['p50_ms']:>10.1f}ms  {status(t['p50'])}")
    sp = f"{r['speedup_p50']:.2f}x" if r.get("speedup_p50") else "-"
    lines.append(f"{'>= 3x faster than Marian':28}{sp:>12}  {status(t['speedup'])}")
    mb = f"{rss['ours']['peak_rss_mb']:.0f}MB" if rss else "-"
    lines.append(f"{'peak RSS <= 300 MB':28}{mb:>12}  {status(t['rss'])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.rss_child:
        rss_child(args)
        return 0
    torch.manual_seed(args.seed)
    load_before = load_average()
    try:
        model, mode, description = build_ours(args)
    except (ValueError, OSError) as err:  # CheckpointError, TokenizerError, ConfigError are ValueErrors
        raise SystemExit(f"bench: {err}") from None
    if mode == "random" and not args.tokenizer:  # the RSS subprocess reuses the cached tokenizer
        args.tokenizer = cached_tokenizer(args.data_dir)
    cfg = model.config
    src_ids = model.encode(args.sentence)
    out_len = forced_length(model) if mode == "random" else 0
    run_ours = ours_fn(model, mode, args.sentence, out_len)
    translation, out_len = run_ours()  # first call: also the output length Marian must match
    steps = count_decoder_steps(model, run_ours)
    marian_len = steps if args.marian_len == "steps" and steps else out_len
    fns: dict[str, Callable[[], Any]] = {"ours": run_ours}
    if args.default_threads:
        fixed = copy.copy(model)  # the same network and search copy; only its searches' thread count differs
        fixed.search_threads = torch.get_num_threads
        fns["ours_default_threads"] = ours_fn(fixed, mode, args.sentence, out_len)
    result: dict[str, Any] = {
        "benchmark": "bench_trace", "mode": mode, "model": description, "config": cfg.to_dict(),
        "parameters": model.network.num_parameters(), "dims_differ": any(
            getattr(cfg, k) != v for k, v in REFERENCE_DIMS.items()),
        "sentence": args.sentence, "words": len(args.sentence.split()), "source_tokens": len(src_ids),
        "output_tokens": out_len, "decoder_steps": steps, "marian_new_tokens": marian_len,
        "translation": translation, "beam": BEAM, "alpha": ALPHA,
        "runs": args.runs, "warmup": args.warmup, "threads": torch.get_num_threads(), "torch": torch.__version__,
        "python": platform.python_version(), "machine": machine(),
        "quick": args.quick, "marian_len_rule": args.marian_len,
        "search": "int8" if model.search_network is not model.network else "fp32", "search_arg": args.precision,
        "search_threads": model.search_threads(), "calibration": calibration_record(model),
    }
    if not args.no_marian:
        import transformers

        marian, gen = build_marian(cfg, marian_len)
        run_marian = marian_fn(marian, gen, src_ids)
        _, got = run_marian()
        if got != marian_len:
            raise SystemExit(f"Marian generated {got} tokens instead of {marian_len}: lengths not matched")
        fns["marian"] = run_marian
        result["transformers"] = transformers.__version__
        result["marian_parameters"] = sum(p.numel() for p in marian.parameters())
    monitor = CpuMonitor()
    times = time_interleaved(fns, args.runs, args.warmup)
    result["other_cores"] = monitor.other_cores()
    result["ours"] = percentiles(times["ours"])
    if mode == "trained":  # where the time goes: decode vs trace, from trace.timings of 10 more (untimed) calls
        splits = [model.trace(args.sentence, beam=BEAM, alpha=ALPHA).timings for _ in range(min(args.runs, 10))]
        result["ours_split_p50"] = {k: round(float(np.median([s[k] for s in splits])), 2)
                                    for k in ("decode_ms", "trace_ms")}
    if "ours_default_threads" in times:
        result["ours_default_threads"] = percentiles(times["ours_default_threads"])
        result["calibrated_vs_default_threads_p50"] = round(
            result["ours_default_threads"]["p50_ms"] / result["ours"]["p50_ms"], 2)
    if "marian" in times:
        result["marian"] = percentiles(times["marian"])
        result["speedup_p50"] = round(result["marian"]["p50_ms"] / result["ours"]["p50_ms"], 2)
        result["speedup_p90"] = round(result["marian"]["p90_ms"] / result["ours"]["p90_ms"], 2)
    result["load_before"] = load_before
    result["busy"] = result["other_cores"] is not None and result["other_cores"] > 0.2
    if not args.no_rss:
        spec = {"config": cfg.to_dict(), "src_ids": src_ids}
        result["rss"] = {"ours": measure_rss(args, "ours", out_len, spec)}
        if not args.no_marian:
            result["rss"]["marian"] = measure_rss(args, "marian", marian_len, spec)
    result["targets"] = {
        "p50": result["ours"]["p50_ms"] <= TARGET_P50_MS,
        "speedup": result["speedup_p50"] >= TARGET_SPEEDUP if "speedup_p50" in result else None,
        "rss": result["rss"]["ours"]["peak_rss_mb"] <= TARGET_RSS_MB if "rss" in result else None,
        "p50_ms_max": TARGET_P50_MS, "speedup_min": TARGET_SPEEDUP, "rss_mb_max": TARGET_RSS_MB,
    }
    emit(table(result), result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
