#!/usr/bin/env python
"""A language model's full trace against transformers (issue 51, Performance): GPT-2-small and Qwen2.5-0.5B sizes.

Each model is built by transformers from the published config in ``tests/fixtures/lm`` (random weights, seed 0,
its published tokenizer), saved, and imported with `viz_model.hf.importer.import_model`; both sides run the same
weights in the same precision. Runs alternate between the systems (`bench_trace.time_interleaved`):

* **ours**: ``LanguageModel.trace(PROMPT, max_new_tokens=N, maps="full")``: tokenization, the greedy continuation and
  every map of every layer over prompt + continuation (kept: what transformers returns too), the numpy trace with each
  step's top candidates.
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

Targets (issue 51): the full trace 2x faster at GPT-2-small size, 1.5x at the Qwen size; the long prompt no slower,
with no more peak memory. Results: ``benchmarks/results/bench_lm.json`` (``--out`` elsewhere).

    python benchmarks/bench_lm.py [--runs 7] [--threads 2]
    python benchmarks/bench_lm.py --device cuda --dtype bf16   # on a GPU: both sides in bf16
    python benchmarks/bench_lm.py --quick --json                # smoke test: tiny models of the same families
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
from viz_model.hf.importer import import_model  # noqa: E402
from viz_model.search.causal import verified_greedy  # noqa: E402

QWEN = "qwen2.5-0.5b-instruct"
MODELS = {"gpt2-small": ("gpt2", "GPT2LMHeadModel", 2.0), "qwen2.5-0.5b": (QWEN, "Qwen2ForCausalLM", 1.5)}
QUICK = {"gpt2": {"n_embd": 32, "n_layer": 2, "n_head": 4},
         QWEN: {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                "num_key_value_heads": 2, "max_window_layers": 2}}
PROMPT = ("The old lighthouse keeper climbed the narrow stairs every evening, lit the great lamp, and watched the "
          "ships pass the rocks while the wind sang over the water and the gulls")
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


def timed(label: str, folder: Path, out: Path, args: argparse.Namespace, device: torch.device) -> dict:
    """The systems' times, runs alternating: the full trace (continuations checked identical), the long prompt."""
    _, model_class, target = MODELS[label]
    ours, theirs, tokenizer = load_pair(folder, out, model_class, args, device)
    new = args.new_tokens
    prompt = tokenizer(PROMPT, return_tensors="pt").input_ids.to(device)
    if ours.encode(PROMPT) != prompt[0].tolist():
        raise SystemExit(f"{label}: the two tokenizers give different ids for the prompt")

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
            return ours.trace(PROMPT, max_new_tokens=new, maps="full").target_ids[prompt.shape[1]:]
        finally:
            ours.draft = "auto"

    systems = {"ours": lambda: ours.trace(PROMPT, max_new_tokens=new, maps="full"), "ours_no_draft": undrafted,
               "transformers_eager": lambda: generate("eager", True),
               "transformers_sdpa_generate": lambda: generate("sdpa", False)}
    trace = systems["ours"]()
    continuations = {"ours": trace.target_ids[prompt.shape[1]:], "ours_no_draft": undrafted()}
    continuations |= {n: fn().tolist() for n, fn in systems.items() if n not in continuations}
    if len({tuple(c) for c in continuations.values()}) != 1:
        raise SystemExit(f"{label}: the continuations differ, the benchmark is void: {continuations}")
    times = time_interleaved({n: synchronized(fn, device) for n, fn in systems.items()}, args.runs, args.warmup)
    found: dict[str, Any] = {
        "parameters": sum(p.numel() for p in theirs.parameters()), "prompt_tokens": prompt.shape[1],
        "new_tokens": len(continuations["ours"]), "continuations_identical": True,
        "target_speedup": target, **summary(times)}
    found["target_met"] = found["speedup_vs_transformers_eager"]["median"] >= target
    found["ours_phases_ms"] = {k: round(v, 1) for k, v in trace.timings.items()}
    found["int8_draft"] = draft_agreement(ours, trace.target_ids, prompt.shape[1], tokenizer, args)
    systems = long_prompt_systems(ours, theirs, tokenizer, args, device)
    times = time_interleaved({n: synchronized(fn, device) for n, fn in systems.items()}, args.runs, args.warmup)
    lp = found["long_prompt"] = {"tokens": len(tokenizer(long_text(tokenizer, args)).input_ids), **summary(times)}
    lp["no_slower"] = lp["speedup_vs_transformers_forward"]["median"] >= 1.0
    return found


def draft_agreement(ours: viz_model.LanguageModel, ids: list[int], prompt: int, tokenizer: Any,
                    args: argparse.Namespace) -> dict[str, Any]:
    """How often the int8 copy agrees with fp32: the traced continuation's draft-and-verify rounds, and teacher-forced
    next-token agreement over the continuation (`ids` after the `prompt` tokens) and over the long prompt."""
    draft = ours.draft_network()
    found: dict[str, Any] = {"used": draft is not None}
    if draft is None:
        ours.draft = "int8"
        draft = ours.draft_network() if ours.device.type == "cpu" else None
        ours.draft = "auto"
    if draft is None:
        return found
    run = verified_greedy(ours.network, draft, ids[:prompt], len(ids) - prompt, ours._choice, ours.tokenizer.eos_ids)
    if run.tokens != ids[prompt:]:
        raise SystemExit("the drafted continuation differs from the trace's; the agreement would be void")
    found |= {"drafted": run.drafted, "accepted": run.accepted, "verifying_calls": run.rounds,
              "accepted_share": round(run.accepted / max(run.drafted, 1), 3)}

    def agreement(sequence: list[int], start: int) -> float:
        with torch.inference_mode():
            tensor = torch.tensor([sequence], device=ours.device)
            full, int8 = ours.network(tensor).logits[0, start:], draft(tensor).logits[0, start:]
        return round(float((full.argmax(-1) == int8.argmax(-1)).float().mean()), 3)
    found["agreement_continuation"] = agreement(ids[:-1], prompt - 1)  # the positions that chose a new token
    found["agreement_long_prompt"] = agreement(tokenizer(long_text(tokenizer, args)).input_ids, 0)
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
    lines = [f"{'model':14} {'no draft':>9} {'ours ms':>9} {'eager ms':>9} {'x':>6} {'sdpa ms':>9} {'x':>6}  target  "
             f"| long: {'ours ms':>9} {'fwd ms':>9} {'x':>6} {'ours MB':>8} {'fwd MB':>8}"]
    for label, r in found["models"].items():
        lp = r["long_prompt"]
        eager, sdpa = r["speedup_vs_transformers_eager"], r["speedup_vs_transformers_sdpa_generate"]
        lines.append(f"{label:14} {r['ours_no_draft_p50_ms']:9.1f} {r['ours_p50_ms']:9.1f} "
                     f"{r['transformers_eager_p50_ms']:9.1f} "
                     f"{eager['median']:6.2f} {r['transformers_sdpa_generate_p50_ms']:9.1f} "
                     f"{sdpa['median']:6.2f}  {r['target_speedup']:>4}x "
                     f"{'met' if r['target_met'] else 'NOT'} | {lp['ours_p50_ms']:15.1f} "
                     f"{lp['transformers_forward_p50_ms']:9.1f} {lp['speedup_vs_transformers_forward']['median']:6.2f} "
                     f"{lp['ours_peak_added_mb']!s:>8} {lp['transformers_forward_peak_added_mb']!s:>8}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs of each system (default 7)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--new-tokens", type=int, default=20)
    parser.add_argument("--long-tokens", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="fp32", choices=sorted(DTYPES))
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
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
    found: dict[str, Any] = {"prompt": PROMPT, "runs": args.runs, "warmup": args.warmup, "threads": args.threads,
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
