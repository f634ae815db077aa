#!/usr/bin/env python
"""A language model's full trace against transformers (issues 51 and 62), over a prompt set: GPT-2-small and
Qwen2.5-0.5B sizes.

Each model is built by transformers from the published config in ``tests/fixtures/lm`` (random weights, seed 0,
its published tokenizer), saved, and imported with `viz_model.hf.importer.import_model`; both sides run the same
weights in the same precision. Runs alternate between the systems (`bench_trace.time_interleaved`):

* **ours**: ``LanguageModel.trace(PROMPT, max_new_tokens=N, maps="full")``: tokenization, the greedy continuation and
  every map of every layer over prompt + continuation (kept: what transformers returns too), the numpy trace with each
  step's top candidates.
The prompt set (issue 62: the ratio must not rest on one prompt, nor on the int8 draft's luck there): 10 held-out
captions (Multi30K's test_2016_flickr English side under the data root, lines 0, 100, ..., 900) and the 10 mixed texts
of `MIXED` (prose, code, dialogue, numbers, a list, German, markup, ...), fixed before any measuring. Per prompt the
systems run by turns (`bench_trace.time_interleaved`), each prompt's per-run ratios give its median ratio, and the
file reports per system the median and the worst (least) of those ratios over the set, and each prompt's figures.

* **transformers (eager)**: ``generate(do_sample=False, max_new_tokens=N, output_attentions=True,
  return_dict_in_generate=True)`` with eager attention, plus the forward pass with ``output_attentions=True`` over
  prompt + continuation that returns the full maps (generate's are one row a step). Tokenization is not timed.
* **transformers (sdpa + eager forward)**: its best alternative: ``generate()`` with sdpa attention (no maps), then
  the same eager forward.
* **ours without the draft**: the same trace with ``draft="off"``: the fp32 network decoding alone, one token a call
  (``ours`` drafts in int8 and verifies in fp32 where ``draft="auto"`` does: on the CPU in fp32).

``int8_draft`` records how often the int8 copy agrees with fp32: in the timed trace (tokens drafted, accepted,
verifying calls) and teacher-forced (the share of positions where the copy's next token is fp32's, over the traced
continuation and over every position of the long prompt).

Each side's continuation is checked identical to the others' (a benchmark of different outputs is void: the run
stops). The long-prompt case: ours ``trace(LONG_PROMPT, max_new_tokens=0)`` against transformers' forward with
``output_attentions=True`` over the same ids: the time, and the peak memory one call adds, each side in a fresh
process that loads both models and warms the call once (CPU: the peak resident set, reset before the call with
freed memory handed back; CUDA: the allocator's peak).

Targets (issues 51, 62): the full trace 2x faster at GPT-2-small size, 1.5x at the Qwen size (the median over the
prompt set); the long prompt no slower, with no more peak memory. Results: ``benchmarks/results/bench_lm.json``
(``--out`` elsewhere). About 10 minutes on a quiet 2-core machine (``--models gpt2-small``: about 3).

    python benchmarks/bench_lm.py [--runs 3] [--threads 2] [--models gpt2-small]
    python benchmarks/bench_lm.py --device cuda --dtype bf16   # on a GPU: both sides in bf16
    python benchmarks/bench_lm.py --quick --json                # smoke test: tiny models, two prompts
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from bench_common import REPO, CpuMonitor, add_output_args, emit, finish_results, load_average, resident_kb
from bench_trace import time_interleaved

sys.path[:0] = [str(REPO), str(REPO / "tests")]  # the published fixtures and their unpacking
from support.published import FIXTURES, unpacked  # noqa: E402

import viz_model  # noqa: E402
from viz_model.config.data_root import data_root  # noqa: E402
from viz_model.data.textfiles import DataError, find_split, open_text  # noqa: E402
from viz_model.hf.importer import import_model  # noqa: E402
from viz_model.nn.causal_lm import CausalLM  # noqa: E402
from viz_model.search.causal import verified_greedy  # noqa: E402

QWEN = "qwen2.5-0.5b-instruct"
MODELS = {"gpt2-small": ("gpt2", "GPT2LMHeadModel", 2.0), "qwen2.5-0.5b": (QWEN, "Qwen2ForCausalLM", 1.5)}
QUICK = {"gpt2": {"n_embd": 32, "n_layer": 2, "n_head": 4},
         QWEN: {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                "num_key_value_heads": 2, "max_window_layers": 2}}
CAPTIONS = "test_2016_flickr"  # Multi30K's held-out test split (English side): lines CAPTION_LINES of its 1,000
CAPTION_LINES = range(0, 1000, 100)
MIXED = (
    "The old lighthouse keeper climbed the narrow stairs every evening, lit the great lamp, and watched the ships pass "
    "the rocks while the wind sang over the water and the gulls",
    "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\nprint(",
    "\"Are you coming to the station tomorrow?\" she asked. \"Only if the train leaves after nine,\" he said, "
    "\"because",
    "In 2023 the city recorded 1,482 mm of rain, 37% more than in 2022, and the river rose 4.6 m above its usual",
    "Shopping list: 2 kg of flour, 12 eggs, half a litre of milk, butter, three lemons, a jar of honey and",
    "Why does ice float on water while most solids sink in their own liquid? The answer lies in the way",
    "Der Zug nach Berlin hatte zwanzig Minuten Verspätung, und die Reisenden auf dem Bahnsteig warteten geduldig auf",
    '<div class="card"><h2>Weather</h2><p>Sunny, 24 °C, light wind from the west.</p></div>\n<div class=',
    "Roses are red, violets are blue, the morning is cold and the coffee is new; the cat on the mat",
    "Q: What is the capital of Australia?\nA: Canberra.\nQ: Which planet is closest to the sun?\nA:",
)
LONG_WORDS = ("In the middle of the valley there was a small town where people met at the market every morning to "
              "trade bread, cheese, apples and stories about the weather, the harvest and the roads. ")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
MEMORY_REPEATS = 3  # fresh processes per side for the long prompt's peak memory; the median is reported (--quick: 1)


def build_folder(root: Path, name: str, model_class: str, quick: bool, dtype: torch.dtype) -> Path:
    """`name`'s published config and tokenizer with random weights (seed 0), saved by transformers in `dtype`; a
    generation config of greedy search ending at the published end-of-text ids."""
    import transformers

    folder = unpacked(FIXTURES / "lm" / name, root / name)
    config = json.loads((folder / "config.json").read_text()) | (QUICK[name] if quick else {})
    cls = getattr(transformers, model_class)
    torch.manual_seed(0)
    model = cls(cls.config_class.from_dict(config)).to(dtype)
    model.save_pretrained(folder)
    generation = json.loads((FIXTURES / "lm" / name / "generation_config.json").read_text())
    kept = {k: generation[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if k in generation}
    (folder / "generation_config.json").write_text(json.dumps(kept))
    return folder


def synchronized(fn: Callable[[], Any], device: torch.device) -> Callable[[], Any]:
    """`fn`, waiting for the GPU's queued work before it returns (so that its time is the work's)."""
    if device.type != "cuda":
        return fn

    def run() -> Any:
        result = fn()
        torch.cuda.synchronize(device)
        return result
    return run


def peak_added_mb(fn: Callable[[], Any], device: torch.device) -> float | None:
    """The memory `fn` adds at its peak over what was in use before, in MB (CPU: resident set; CUDA: allocator)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return round((torch.cuda.max_memory_allocated(device) - before) / 2 ** 20, 1)
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # freed memory back to the system: not counted as in use before
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident set
        before = resident_kb("VmHWM")
        fn()
        return round((resident_kb("VmHWM") - before) / 1024, 1)
    except (OSError, AttributeError):
        return None


def summary(times: dict[str, list[float]], ours: str = "ours") -> dict:
    """Medians per system, and per other system the median, least and greatest of the per-pair ratios theirs/ours."""
    found: dict[str, Any] = {f"{name}_p50_ms": round(statistics.median(ms), 1) for name, ms in times.items()}
    for name, ms in times.items():
        if name != ours:
            ratios = [t / o for t, o in zip(ms, times[ours])]
            found[f"speedup_vs_{name}"] = {"median": round(statistics.median(ratios), 2),
                                           "min": round(min(ratios), 2), "max": round(max(ratios), 2)}
    return found


def load_pair(folder: Path, out: Path, model_class: str, args: argparse.Namespace,
              device: torch.device) -> tuple[viz_model.LanguageModel, Any, Any]:
    """Our import of `folder` (`out`), transformers' model of it (eager attention) and its tokenizer."""
    import transformers

    ours = viz_model.load(out, device=device)
    theirs = getattr(transformers, model_class).from_pretrained(folder, attn_implementation="eager",
                                                              dtype=DTYPES[args.dtype]).to(device).eval()
    return ours, theirs, transformers.AutoTokenizer.from_pretrained(folder)


def model_case(label: str, root: Path, args: argparse.Namespace, device: torch.device) -> dict:
    """Both systems on one model size: the full trace and the long prompt."""
    name, model_class, _ = MODELS[label]
    folder = build_folder(root, name, model_class, args.quick, DTYPES[args.dtype])
    out = root / f"{name}-imported"
    import_model(str(folder), out)
    found = timed(label, folder, out, args, device)
    lp = found["long_prompt"]
    peaks: dict[str, list] = {"ours": [], "transformers_forward": []}
    for _ in range(1 if args.quick else MEMORY_REPEATS):  # each in a fresh process, the models let go, sides by turns
        for side, found_peaks in peaks.items():
            found_peaks.append(memory_child(side, folder, out, model_class, args))
    for side, found_peaks in peaks.items():
        known = [p for p in found_peaks if p is not None]
        lp[f"{side}_peak_added_mb_runs"] = found_peaks
        lp[f"{side}_peak_added_mb"] = round(statistics.median(known), 1) if known else None
    if lp["ours_peak_added_mb"] is not None and lp["transformers_forward_peak_added_mb"] is not None:
        lp["no_more_memory"] = lp["ours_peak_added_mb"] <= lp["transformers_forward_peak_added_mb"]
    return found


def prompt_set(args: argparse.Namespace) -> list[dict[str, str]]:
    """The prompts, fixed before measuring: the held-out captions (`CAPTION_LINES` of Multi30K's `CAPTIONS` split,
    English side, under ``--data-dir``), then `MIXED`; ``--quick``: the first of each (the mixed text alone where the
    data root holds no captions)."""
    try:
        lines = open_text(find_split(args.data_dir / "multi30k", CAPTIONS, "en"))
    except DataError as err:
        if not args.quick:
            raise SystemExit(f"bench_lm: the held-out captions: {err} (viz-model data fetch multi30k, or "
                             "--data-dir)") from None
        lines = []
    captions = [{"kind": "caption", "text": lines[i]} for i in CAPTION_LINES] if lines else []
    mixed = [{"kind": "mixed", "text": text} for text in MIXED]
    return captions[:1] + mixed[:1] if args.quick else captions + mixed


def timed(label: str, folder: Path, out: Path, args: argparse.Namespace, device: torch.device) -> dict:
    """The systems' times over the prompt set, runs alternating per prompt (continuations checked identical), each
    prompt's figures and their median and worst over the set; then the long prompt."""
    _, model_class, target = MODELS[label]
    ours, theirs, tokenizer = load_pair(folder, out, model_class, args, device)
    rows = [prompt_case(label, row, ours, theirs, tokenizer, args, device) for row in prompt_set(args)]
    found: dict[str, Any] = {
        "parameters": sum(p.numel() for p in theirs.parameters()), "prompts": len(rows),
        "prompt_tokens": round(statistics.median(r["prompt_tokens"] for r in rows)),
        "new_tokens": round(statistics.median(r["new_tokens"] for r in rows)), "continuations_identical": True,
        "target_speedup": target, **over_prompts(rows)}
    found["target_met"] = found["speedup_vs_transformers_eager"]["median"] >= target
    found["int8_draft"] = draft_totals(ours, rows, tokenizer, args)
    found["per_prompt"] = rows
    systems = long_prompt_systems(ours, theirs, tokenizer, args, device)
    times = time_interleaved({n: synchronized(fn, device) for n, fn in systems.items()}, args.runs, args.warmup)
    lp = found["long_prompt"] = {"tokens": len(tokenizer(long_text(tokenizer, args)).input_ids), **summary(times)}
    lp["no_slower"] = lp["speedup_vs_transformers_forward"]["median"] >= 1.0
    return found


def prompt_case(label: str, row: dict[str, str], ours: viz_model.LanguageModel, theirs: Any, tokenizer: Any,
                args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """One prompt: the systems' times, runs alternating (after their continuations are checked identical), the
    ratios per run, our trace's phases and the int8 draft's rounds."""
    new, text = args.new_tokens, row["text"]
    prompt = tokenizer(text, return_tensors="pt").input_ids.to(device)
    if ours.encode(text) != prompt[0].tolist():
        raise SystemExit(f"{label}: the two tokenizers give different ids for the prompt {text!r}")

    def generate(attention: str, maps: bool) -> torch.Tensor:
        theirs.set_attn_implementation(attention)
        with torch.inference_mode():
            generated = theirs.generate(prompt, do_sample=False, max_new_tokens=new, output_attentions=maps,
                                        return_dict_in_generate=True)
            theirs.set_attn_implementation("eager")
            full = theirs(generated.sequences, output_attentions=True)
        if maps and not all(generated.attentions) or any(a is None for a in full.attentions):
            raise SystemExit(f"{label}: transformers returned no attention maps; the comparison would be void")
        return generated.sequences[0, prompt.shape[1]:]

    def undrafted() -> list[int]:
        ours.draft = "off"
        try:
            return ours.trace(text, max_new_tokens=new, maps="full").target_ids[prompt.shape[1]:]
        finally:
            ours.draft = "auto"

    systems = {"ours": lambda: ours.trace(text, max_new_tokens=new, maps="full"), "ours_no_draft": undrafted,
               "transformers_eager": lambda: generate("eager", True),
               "transformers_sdpa_generate": lambda: generate("sdpa", False)}
    trace = systems["ours"]()
    continuations = {"ours": trace.target_ids[prompt.shape[1]:], "ours_no_draft": undrafted()}
    continuations |= {n: fn().tolist() for n, fn in systems.items() if n not in continuations}
    if len({tuple(c) for c in continuations.values()}) != 1:
        raise SystemExit(f"{label}: the continuations of {text!r} differ, the benchmark is void: {continuations}")
    times = time_interleaved({n: synchronized(fn, device) for n, fn in systems.items()}, args.runs, args.warmup)
    found = {**row, "prompt_tokens": prompt.shape[1], "new_tokens": len(continuations["ours"]), **summary(times),
             "ours_phases_ms": {k: round(v, 1) for k, v in trace.timings.items()},
             "int8_draft": draft_rounds(ours, trace.target_ids, prompt.shape[1])}
    print(f"{label} {row['kind']:7} {found['ours_p50_ms']:8.1f} ms, transformers eager "
          f"{found['transformers_eager_p50_ms']:8.1f} ms: {found['speedup_vs_transformers_eager']['median']:.2f}x "
          f"(load {load_average()}) {text[:40]!r}", file=sys.stderr, flush=True)
    return found


def over_prompts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per system the median over the prompts of each prompt's median time, and per other system the median, the
    worst (least: ``min``) and the best (``max``) over the prompts of each prompt's median ratio theirs/ours, with the
    worst prompt's index in the set."""
    found: dict[str, Any] = {}
    for key in rows[0]:
        if key.endswith("_p50_ms"):
            found[key] = round(statistics.median(r[key] for r in rows), 1)
        elif key.startswith("speedup_vs_"):
            ratios = [r[key]["median"] for r in rows]
            found[key] = {"median": round(statistics.median(ratios), 2), "min": min(ratios), "max": max(ratios),
                          "worst_prompt": ratios.index(min(ratios))}
    return found


def draft_rounds(ours: viz_model.LanguageModel, ids: list[int], prompt: int) -> dict[str, Any]:
    """The int8 draft on one traced continuation (`ids` after the `prompt` tokens): the tokens drafted and accepted,
    the verifying calls, and the teacher-forced share of the continuation's positions where the int8 copy's next
    token is fp32's (empty where no draft runs)."""
    draft = int8_copy(ours)
    if draft is None:
        return {}
    run = verified_greedy(ours.network, draft, ids[:prompt], len(ids) - prompt, ours._choice, ours.tokenizer.eos_ids)
    if run.tokens != ids[prompt:]:
        raise SystemExit("the drafted continuation differs from the trace's; the agreement would be void")
    return {"drafted": run.drafted, "accepted": run.accepted, "verifying_calls": run.rounds,
            "accepted_share": round(run.accepted / max(run.drafted, 1), 3),
            "agreement_continuation": agreement(ours, draft, ids[:-1], prompt - 1)}


def int8_copy(ours: viz_model.LanguageModel) -> CausalLM | None:
    """The int8 copy `ours` drafts with, or would draft with where ``draft="int8"`` (on the CPU); None elsewhere."""
    draft = ours.draft_network()
    if draft is None and ours.device.type == "cpu":
        ours.draft = "int8"
        draft = ours.draft_network()
        ours.draft = "auto"
    return draft


def agreement(ours: viz_model.LanguageModel, draft: Any, sequence: list[int], start: int) -> float:
    """The share of `sequence`'s positions from `start` on where the int8 copy's next token is fp32's."""
    with torch.inference_mode():
        tensor = torch.tensor([sequence], device=ours.device)
        full, int8 = ours.network(tensor).logits[0, start:], draft(tensor).logits[0, start:]
    return round(float((full.argmax(-1) == int8.argmax(-1)).float().mean()), 3)


def draft_totals(ours: viz_model.LanguageModel, rows: list[dict[str, Any]], tokenizer: Any,
                 args: argparse.Namespace) -> dict[str, Any]:
    """How often the int8 copy agrees with fp32 over the set: whether the trace drafts, the prompts' drafted and
    accepted tokens and verifying calls summed, the least and median accepted share, the teacher-forced agreement
    over every continuation's positions (weighted by their count) and over every position of the long prompt."""
    found: dict[str, Any] = {"used": ours.draft_network() is not None}
    draft = int8_copy(ours)
    if draft is None:
        return found
    drafts = [r["int8_draft"] for r in rows]
    found |= {key: sum(d[key] for d in drafts) for key in ("drafted", "accepted", "verifying_calls")}
    shares = [d["accepted_share"] for d in drafts]
    found |= {"accepted_share": round(found["accepted"] / max(found["drafted"], 1), 3),
              "accepted_share_median": statistics.median(shares), "accepted_share_least": min(shares)}
    weights = [r["new_tokens"] for r in rows]
    found["agreement_continuation"] = round(sum(d["agreement_continuation"] * w for d, w in zip(drafts, weights))
                                            / sum(weights), 3)
    found["agreement_long_prompt"] = agreement(ours, draft, tokenizer(long_text(tokenizer, args)).input_ids, 0)
    return found


def long_text(tokenizer: Any, args: argparse.Namespace) -> str:
    """About `args.long_tokens` tokens of text (cut at a token, decoded: its own ids may join pieces differently)."""
    return tokenizer.decode(tokenizer(LONG_WORDS * (args.long_tokens // 20 + 1)).input_ids[:args.long_tokens])


def long_prompt_systems(ours: viz_model.LanguageModel, theirs: Any, tokenizer: Any, args: argparse.Namespace,
                        device: torch.device) -> dict[str, Callable[[], Any]]:
    """Ours tracing the long prompt with every map held (as transformers' forward over its ids with its
    attentions holds them)."""
    text = long_text(tokenizer, args)
    ids = tokenizer(text).input_ids
    if ours.encode(text) != ids:
        raise SystemExit("the two tokenizers give different ids for the long prompt")
    source = torch.tensor([ids], device=device)

    def forward() -> Any:
        with torch.inference_mode():
            return theirs(source, output_attentions=True)
    return {"ours": lambda: ours.trace(text, max_new_tokens=0, maps="full"), "transformers_forward": forward}


def memory_child(side: str, folder: Path, out: Path, model_class: str, args: argparse.Namespace) -> float | None:
    """The peak memory one long-prompt call of `side` adds, in a fresh process that loads both and warms it once."""
    command = [sys.executable, str(Path(__file__).resolve()), "--memory-child", side, str(folder), str(out),
               model_class, "--long-tokens", str(args.long_tokens), "--threads", str(args.threads), "--device",
               args.device, "--dtype", args.dtype]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"the memory child ({side}) failed: {result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])["peak_added_mb"]


def run_memory_child(args: argparse.Namespace, device: torch.device) -> int:
    side, folder, out, model_class = args.memory_child
    ours, theirs, tokenizer = load_pair(Path(folder), Path(out), model_class, args, device)
    fn = long_prompt_systems(ours, theirs, tokenizer, args, device)[side]
    fn()  # warm: what a first call allocates once is not the call's
    print(json.dumps({"peak_added_mb": peak_added_mb(fn, device)}))
    return 0


def table(found: dict) -> str:
    lines = [f"{'model':14} {'no draft':>9} {'ours ms':>9} {'eager ms':>9} {'x':>6} {'worst':>6} {'sdpa ms':>9} "
             f"{'x':>6}  target  | long: {'ours ms':>9} {'fwd ms':>9} {'x':>6} {'ours MB':>8} {'fwd MB':>8}"]
    for label, r in found["models"].items():
        lp = r["long_prompt"]
        eager, sdpa = r["speedup_vs_transformers_eager"], r["speedup_vs_transformers_sdpa_generate"]
        lines.append(f"{label:14} {r['ours_no_draft_p50_ms']:9.1f} {r['ours_p50_ms']:9.1f} "
                     f"{r['transformers_eager_p50_ms']:9.1f} {eager['median']:6.2f} {eager['min']:6.2f} "
                     f"{r['transformers_sdpa_generate_p50_ms']:9.1f} "
                     f"{sdpa['median']:6.2f}  {r['target_speedup']:>4}x "
                     f"{'met' if r['target_met'] else 'NOT'} | {lp['ours_p50_ms']:15.1f} "
                     f"{lp['transformers_forward_p50_ms']:9.1f} {lp['speedup_vs_transformers_forward']['median']:6.2f} "
                     f"{lp['ours_peak_added_mb']!s:>8} {lp['transformers_forward_peak_added_mb']!s:>8}")
    lines.append("(times: medians over the prompt set of each prompt's median; x: the median over the prompts of each "
                 "prompt's median ratio, worst: the least)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each system on each prompt (default 3)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--new-tokens", type=int, default=20)
    parser.add_argument("--long-tokens", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="fp32", choices=sorted(DTYPES))
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--data-dir", type=Path, default=data_root(), help="the data root holding multi30k/")
    add_output_args(parser, "bench_lm.json", "tiny models, 1 run, short prompts")
    parser.add_argument("--memory-child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.warmup, args.new_tokens, args.long_tokens = 1, 0, 4, 48
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here")
    if args.device == "cpu" and args.dtype != "fp32":
        parser.error("--dtype bf16 is for --device cuda (on the CPU a language model computes in fp32)")
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.memory_child:
        return run_memory_child(args, device)
    monitor = CpuMonitor()
    captions = f"multi30k/{CAPTIONS}.en lines {', '.join(map(str, CAPTION_LINES))}"
    found: dict[str, Any] = {"prompt_set": {"captions": captions, "mixed": len(MIXED)}, "runs": args.runs,
                             "warmup": args.warmup, "threads": args.threads,
                             "device": args.device, "dtype": args.dtype, "quick": args.quick,
                             "load_average_before": load_average(), "models": {}}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for label in args.models:
            root = Path(tmp) / label
            root.mkdir()
            found["models"][label] = model_case(label, root, args, device)
            print(label, json.dumps(found["models"][label]), file=sys.stderr, flush=True)
    suffix = "" if args.device == "cpu" else f"_{args.device}_{args.dtype}"
    finish_results(args, found, f"bench_lm{suffix}.json", monitor, start)
    emit(table(found), found, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
