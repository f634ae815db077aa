#!/usr/bin/env python
"""The research families fitted by transformers, loaded with ``viz_model.load(folder)``: how often their greedy and
beam (4) continuations of held-out prompts are ``generate``'s, and how far their prompt maps are from eager
``output_attentions`` (issue 60's done-when).

For each family (GPT-NeoX, GPT-Neo, OPT, Phi, OLMo 2, Mixtral, gpt-oss, Phi-3) a folder is built by transformers from
a config the tests have not seen (`SETTINGS`: other widths, heads, rotary shares, windows and options than
tests/support/hf_lm.py's), then fitted as tests/library/test_hf_generate_lm.py fits its families
(tests/support/hf_lm_fit.py: ``"<English sentence> ="`` continued by its word-for-word German and the end-of-text id,
`--steps` Adam steps on 16 sentences each), saved, reloaded by transformers with eager attention and opened by
``viz_model.load`` (its import cache in a temporary folder). The prompts are sentences the fitting never read. Per
prompt: ``continue_ids`` against ``generate(do_sample=False)``, ``beam_ids(.., 4, ..)`` against
``generate(num_beams=4)``, both up to 40 new tokens, and the largest difference of any map of the prompt's
``trace(prompt, max_new_tokens=0)`` from transformers' ``output_attentions``. fp32 on the CPU, `--threads` threads.
Targets: at least 99% (greedy) and 95% (beam 4) identical, every map within 1e-4.

    python benchmarks/bench_fitted_families.py                      # benchmarks/results/fitted_families.json
    python benchmarks/bench_fitted_families.py --quick --json       # smoke test: GPT-NeoX, 20 steps, 4 prompts
    python benchmarks/bench_fitted_families.py --families gpt_oss --out benchmarks/results/fitted_families_gpt_oss.json
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from bench_common import REPO, CpuMonitor, add_output_args, emit, finish_results, load_average

sys.path[:0] = [str(REPO), str(REPO / "tests")]  # the tests' folder builders and their fitting
from support.hf_lm import CONFIGS, RESEARCH, build_lm_folder  # noqa: E402
from support.hf_lm_fit import NEW_TOKENS, fit_folder, generated, seen_in_fitting, sentences  # noqa: E402

RESULTS = "fitted_families.json"
TARGETS = {"greedy_share": 0.99, "beam4_share": 0.95, "map_difference": 1e-4}
PROMPT_SEED = 60_000  # the held-out prompts' sentences: drawn from here, those the fitting read left out
WIDE = {"hidden_size": 48, "intermediate_size": 96}
# configs of sizes and settings tests/support/hf_lm.py's do not have (set over its CONFIGS)
SETTINGS = {
    "gpt_neox": {**WIDE, "num_attention_heads": 3, "rotary_pct": 0.25, "rotary_emb_base": 10000},
    "gpt_neo": {"hidden_size": 48, "num_heads": 6, "num_layers": 2, "attention_types": [[["local", "global"], 1]],
                "window_size": 8, "max_position_embeddings": 96},
    "opt": {"hidden_size": 48, "ffn_dim": 96, "num_attention_heads": 6, "max_position_embeddings": 96},
    "phi": {**WIDE, "num_attention_heads": 3, "num_key_value_heads": 3, "qk_layernorm": True,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}},
    "olmo2": {**WIDE, "num_attention_heads": 6, "num_key_value_heads": 3,
              "rope_parameters": {"rope_type": "default", "rope_theta": 50000.0}},
    "mixtral": {**WIDE, "intermediate_size": 64, "num_attention_heads": 3, "num_key_value_heads": 1,
                "num_local_experts": 3, "num_experts_per_tok": 2},
    "gpt_oss": {**WIDE, "intermediate_size": 64, "num_attention_heads": 6, "num_key_value_heads": 3,
                "num_local_experts": 3, "num_experts_per_tok": 2, "sliding_window": 12, "swiglu_limit": 4.0,
                "layer_types": ["full_attention", "sliding_attention"],
                "rope_parameters": {"rope_type": "yarn", "rope_theta": 20000.0, "factor": 2.0, "beta_fast": 16.0,
                                    "beta_slow": 1.0, "truncate": True, "original_max_position_embeddings": 48}},
    "phi3": {**WIDE, "num_attention_heads": 3, "num_key_value_heads": 1, "sliding_window": 12,
             "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}},
}


def held_out(count: int, steps: int) -> tuple[list[str], int]:
    """`count` prompts (``"<sentence> ="``) whose sentences the fitting of `steps` steps never read, and how many
    drawn sentences were left out for it."""
    seen, prompts, left_out, seed = seen_in_fitting(steps), [], 0, PROMPT_SEED
    while len(prompts) < count:
        for text in sentences(count, seed):
            if text in seen or f"{text} =" in prompts:
                left_out += 1
            elif len(prompts) < count:
                prompts.append(f"{text} =")
        seed += 1
    return prompts, left_out


def worst_map_difference(model, tokenizer, ours, prompt: str) -> float:
    """The largest difference of any map of our prompt trace from transformers' eager ``output_attentions``."""
    ids = tokenizer(prompt).input_ids
    trace = ours.trace(prompt, max_new_tokens=0)
    if trace.target_ids != ids:
        raise SystemExit(f"{prompt!r}: our tokens {trace.target_ids} are not transformers' {ids}")
    with torch.no_grad():
        theirs = model(torch.tensor([ids]), output_attentions=True).attentions
    if len(theirs) != len(trace.decoder_attentions) or any(t is None for t in theirs):
        raise SystemExit("transformers returned no map for some layer; the comparison would not be with them")
    return max(float(abs(a - b[0].numpy()).max()) for a, b in zip(trace.decoder_attentions, theirs))


def family(name: str, root: Path, args: argparse.Namespace, prompts: list[str]) -> dict[str, Any]:
    """One family built, fitted, loaded and compared on every prompt."""
    import viz_model

    started = time.perf_counter()
    folder = build_lm_folder(root, name, **SETTINGS[name])
    model, tokenizer = fit_folder(folder, name, steps=args.steps, lr=args.lr)
    fit_s = time.perf_counter() - started
    ours = viz_model.load(str(folder), device="cpu")
    eos = ours.tokenizer.eos_ids
    searches = {"greedy": (1, lambda ids: ours.continue_ids(ids, NEW_TOKENS)),
                "beam4": (4, lambda ids: ours.beam_ids(ids, 4, NEW_TOKENS))}
    found: dict[str, Any] = {}
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for search, (beams, continued) in searches.items():
            identical = ended = 0
            for prompt in prompts:
                ids, theirs = generated(model, tokenizer, prompt, eos, num_beams=beams)
                identical += continued(ids) == theirs
                ended += bool(theirs) and theirs[-1] in eos
            found[search] = {"identical": identical, "share": round(identical / len(prompts), 4), "ended": ended}
        worst = max(worst_map_difference(model, tokenizer, ours, prompt) for prompt in prompts)
    return {"settings": SETTINGS[name], "parameters": sum(p.numel() for p in model.parameters()),
            "heads": ours.config.heads, "kv_heads": ours.config.kv_heads, "layers": ours.config.decoder_layers,
            "prompts": len(prompts), **found, "worst_map_difference": float(f"{worst:.3g}"),
            "fit_s": round(fit_s, 1), "compare_s": round(time.perf_counter() - started, 1),
            "targets_met": found["greedy"]["share"] >= TARGETS["greedy_share"]
            and found["beam4"]["share"] >= TARGETS["beam4_share"] and worst <= TARGETS["map_difference"]}


def table(found: dict) -> str:
    """The results in words: a family a line."""
    head = f"{'family':9} {'prompts':>7} {'greedy':>7} {'beam 4':>7} {'ended':>6} {'worst map':>10} {'fit s':>6}"
    rows = [f"{name:9} {f['prompts']:>7} {f['greedy']['share']:7.1%} {f['beam4']['share']:7.1%} "
            f"{f['greedy']['ended']:>6} {f['worst_map_difference']:10.2e} {f['fit_s']:6.0f}"
            for name, f in found["families"].items()]
    return "\n".join([head, *rows, f"every target met: {found['all_targets_met']}"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=list(RESEARCH), choices=list(RESEARCH))
    parser.add_argument("--steps", type=int, default=300, help="fitting steps (default 300, the test's)")
    parser.add_argument("--lr", type=float, default=1e-2, help="Adam's learning rate (default 1e-2, the test's)")
    parser.add_argument("--prompts", type=int, default=100, help="held-out prompts per family (default 100)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: a tiny model runs fastest so)")
    add_output_args(parser, RESULTS, "GPT-NeoX only, 20 fitting steps, 4 prompts")
    args = parser.parse_args(argv)
    if args.quick:
        args.families, args.steps, args.prompts = ["gpt_neox"], 20, 4
    if args.steps < 1 or args.prompts < 1 or args.threads < 1:
        parser.error("--steps, --prompts and --threads must be at least 1")
    import transformers

    torch.set_num_threads(args.threads)
    prompts, left_out = held_out(args.prompts, args.steps)
    monitor = CpuMonitor()
    found: dict[str, Any] = {"dtype": "fp32", "device": "cpu", "threads": args.threads, "quick": args.quick,
                             "fit_steps": args.steps, "lr": args.lr, "new_tokens": NEW_TOKENS, "beam": 4,
                             "prompts": len(prompts), "prompts_left_out_as_seen_in_fitting": left_out,
                             "targets": TARGETS, "transformers": transformers.__version__,
                             "load_average_before": load_average(), "families": {}}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["VIZ_MODEL_CACHE"] = str(Path(tmp) / "cache")  # load(folder) imports into it
        for name in args.families:
            root = Path(tmp) / name
            root.mkdir()
            found["families"][name] = family(name, root, args, prompts)
            print(name, found["families"][name], file=sys.stderr, flush=True)
    found["all_targets_met"] = all(f["targets_met"] for f in found["families"].values())
    finish_results(args, found, RESULTS, monitor, start)
    emit(table(found), found, args.json)
    return 0


if __name__ == "__main__":
    assert set(SETTINGS) == set(RESEARCH) and set(SETTINGS) <= set(CONFIGS)
    sys.exit(main())
