#!/usr/bin/env python
"""The exact path at opus-mt size, side by side with CTranslate2 and Hugging Face in one run (issue 36).

The model: bench_hf's random opus-mt-en-de-size Marian (d 512, 6+6 layers, vocabulary 58,101, 74M parameters),
fitted for ``--fit`` steps so that it ends its translations (one 22-token German sentence for any input), with
opus-mt-en-de's generation config; imported with ``viz-model import``, and converted by CTranslate2's own converter
(float32 and int8). Every system translates the same ``--sentences`` English sentences (bench_app's generator, 15
words each) with beam 4 and 2 threads, CTranslate2 held to the same number of tokens:

* ours, what the app runs on Translate (``model.trace``: the search, then the full trace of every map and step):
  transformers' rule in full precision (an imported model's default: an int8 draft verified in one pass over its
  tree of prefixes, `viz_model.search.next_token`), the same search step by step (the draft switched off), this
  project's rule
  in full precision, and transformers' rule with int8 weights (inexact);
* CTranslate2 ``translate_batch`` float32 and int8 (the translation only: it records no per-head maps);
* Hugging Face ``generate`` with ``output_attentions=True``.

Then the shipped model (``mixed-en-de``, trained) written as a Marian folder (``viz-model export-hf``): our trace
against ``generate`` on the same trained weights. And gradient attributions of every output token of the first
sentence's translation (teacher-forced on it): saliency, input x gradient and integrated gradients (32 fixed
points), ours (`viz_model.attribution.attribute_ids`) against inseq's on the same Marian weights. (Stock inseq 0.7.1 on
transformers 5 passes Marian's decoder pre-scaled embeddings, which Marian's decoder scales again: its attributions
are of a slightly different network. The work is the same.)

Each system lives in a process of its own (two OpenMP runtimes in one process slow each other down: after a
CTranslate2 call our trace took 1.6x as long in the same process); the runs alternate between the processes, round by
round, and each round translates every sentence once. Each process also reports the time its system took to load
(imports aside) and its peak resident memory after loading and translating the sentences once (VmHWM, torch and the
other imports included). Reported: per-sentence p50 over all rounds, and ratios of
p50s. Writes ``benchmarks/results/bench_peers.json``.

    python benchmarks/bench_peers.py            # ~8 min (2 of them fitting); needs ctranslate2 and transformers
    python benchmarks/bench_peers.py --quick    # a smoke run (no results file)
    python benchmarks/bench_peers.py --translation  # the translation systems only, with the thread A/B
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_app import sentences as app_sentences
from bench_common import load_average, write_results
from bench_hf import build_folder, fit
from bench_trace import peak_rss_mb, percentiles

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "bench_peers.json"
BEAM = 4
ATTRIBUTIONS = {"saliency": {}, "input_x_gradient": {}, "integrated_gradients": {"n_steps": 32}}
OURS = {"ours_transformers_fp32": ("auto", "transformers", True),
        "ours_transformers_fp32_stepwise": ("auto", "transformers", False),
        "ours_project_fp32": ("fp32", "project", True),
        "ours_transformers_int8": ("int8", "transformers", True)}
DEFAULT_THREADS = "_default_threads"  # a system of OURS (or the shipped trace) with every search on torch's 2 threads
THREADS_AB = ["ours_transformers_fp32" + DEFAULT_THREADS, "shipped_ours_trace" + DEFAULT_THREADS]
TRANSLATION = [*OURS, "ctranslate2_float32", "ctranslate2_int8", "hf_generate_attentions", "shipped_ours_trace",
               "shipped_hf_generate_attentions"]


def make_system(name: str, root: Path, texts: list[str], steps: int):
    """The callable that translates `texts` once with system `name` (built inside the worker's own process)."""
    import torch

    torch.set_num_threads(2)
    if name.startswith(("ours_attribute_", "inseq_")):
        return attribution_system(name, root, texts)
    if name.endswith(DEFAULT_THREADS):  # the same system, its searches not calibrated (viz_model.search.thread_choice)
        import viz_model.kinds.translator as translator

        translator.search_threads = lambda *_: torch.get_num_threads()
        translator.TranslationModel.search_threads = lambda _: torch.get_num_threads()
        name = name.removesuffix(DEFAULT_THREADS)
    if name in OURS or name == "shipped_ours_trace":
        import viz_model

        if name == "shipped_ours_trace":
            model, rule, draft = viz_model.load(device="cpu"), None, True
        else:
            search, rule, draft = OURS[name]
            model = viz_model.load(root / "imported", device="cpu", precision=search)
        if not draft:
            model.draft_network = lambda: None  # the same search with its draft switched off: step by step
        return lambda: [model.trace(text, rule=rule) for text in texts]
    import transformers

    folder = root / ("shipped-marian" if name.startswith("shipped") else "opus-mt-size")
    tokenizer = transformers.MarianTokenizer.from_pretrained(folder)
    if name.startswith("ctranslate2"):
        import ctranslate2

        translator = ctranslate2.Translator(str(root / name), device="cpu", inter_threads=1, intra_threads=2)
        tokens = [tokenizer.convert_ids_to_tokens(tokenizer(text).input_ids) for text in texts]
        return lambda: [translator.translate_batch([t], beam_size=BEAM, min_decoding_length=steps,
                                                   max_decoding_length=steps) for t in tokens]
    marian = transformers.MarianMTModel.from_pretrained(folder, attn_implementation="eager").eval()
    settings = {"output_attentions": True, "return_dict_in_generate": True}
    if not name.startswith("shipped"):
        settings |= {"min_new_tokens": steps, "max_new_tokens": steps}
    ids = [tokenizer(text, return_tensors="pt").input_ids for text in texts]

    def generate() -> None:
        with torch.inference_mode():
            for input_ids in ids:
                marian.generate(input_ids=input_ids, **settings)
    return generate


def attribution_system(name: str, root: Path, texts: list[str]):
    """Every output token of each text's translation (teacher-forced on it) explained by one gradient method, by
    this project (`viz_model.attribution.attribute_ids`, its output as the trace found it) or by inseq (its
    ``attribute`` with that translation as ``generated_texts``)."""
    method = name.removeprefix("ours_attribute_").removeprefix("inseq_")
    if name.startswith("ours"):
        import viz_model
        from viz_model.attribution import attribute_ids

        model = viz_model.load(root / "imported", device="cpu")
        traces = [model.trace(text) for text in texts]
        # 32 fixed Gauss-Legendre points, as inseq's (Captum's) integrated gradients use by default
        return lambda: [attribute_ids(model.network, t.source_ids, t.output_ids, (method,), 32, tolerance=0)
                        for t in traces]
    import inseq
    import transformers

    import viz_model

    translations = [viz_model.load(root / "imported", device="cpu").translate(text) for text in texts]
    folder = root / "opus-mt-size"
    marian = transformers.MarianMTModel.from_pretrained(folder).eval()
    explainer = inseq.load_model(marian, method, tokenizer=transformers.MarianTokenizer.from_pretrained(folder))
    return lambda: [explainer.attribute(text, generated_texts=out, show_progress=False, **ATTRIBUTIONS[method])
                    for text, out in zip(texts, translations)]


def worker(connection, name: str, root: str, texts: list[str], steps: int) -> None:
    """Build system `name` (load time), translate once (then the peak memory of the process), then time one call per
    request until told to stop."""
    started = time.perf_counter()
    run = make_system(name, Path(root), texts, steps)
    load_s = time.perf_counter() - started
    run()
    found = {"load_s": round(load_s, 2), "peak_rss_mb": round(peak_rss_mb()[0], 1)}
    if "viz_model.search.thread_choice" in sys.modules:  # what the first trace's calibrations chose (none: not ours)
        found["calibrations"] = sys.modules["viz_model.search.thread_choice"].calibrations()
    connection.send(found)
    try:
        while connection.recv() == "run":
            started = time.perf_counter()
            run()
            connection.send((time.perf_counter() - started) * 1000 / len(texts))
    except EOFError:  # the benchmark stopped (another worker failed)
        return


def prepare(root: Path, fit_steps: int, count: int) -> tuple[list[str], dict]:
    """The fitted folder, its import, its CTranslate2 conversions and the shipped model's export; the sentences."""
    import ctranslate2

    import viz_model
    from viz_model.hf.importer import import_model

    folder = build_folder(root)
    fit(folder, fit_steps)
    import_model(str(folder), root / "imported")
    for quantization in ("float32", "int8"):
        ctranslate2.converters.TransformersConverter(str(folder)).convert(str(root / f"ctranslate2_{quantization}"),
                                                                          quantization=quantization)
    subprocess.run([sys.executable, "-m", "viz_model", "export-hf", str(viz_model.modeldir.shipped.ASSETS_DIR /
                    viz_model.DEFAULT_MODEL), "--out", str(root / "shipped-marian")], check=True, capture_output=True)
    texts = app_sentences(count, 7)
    model = viz_model.load(root / "imported", device="cpu")
    stepwise = viz_model.load(root / "imported", device="cpu")
    stepwise.draft_network = lambda: None
    outputs = [model.trace(t).output_ids for t in texts]
    facts = {"sentences": len(texts), "parameters": model.network.num_parameters(),
             "steps": sorted({len(o) for o in outputs}),
             "verified_equals_stepwise": outputs == [stepwise.trace(t).output_ids for t in texts]}
    return texts, facts


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--rounds", type=int, default=8, help="rounds of every system over every sentence (default 8)")
    p.add_argument("--sentences", type=int, default=10, help="sentences per round (default 10)")
    p.add_argument("--fit", type=int, default=60, help="Adam steps that teach the random model to end (default 60)")
    p.add_argument("--quick", action="store_true", help="2 rounds of 3 sentences, no results file")
    p.add_argument("--translation", action="store_true",
                   help="the translation systems only, and ours with the searches on torch's 2 threads beside the "
                        "calibrated ones (viz_model.search.thread_choice); writes bench_peers_translation.json")
    args = p.parse_args()
    if args.quick:
        args.rounds, args.sentences = 2, 3
    names = [*TRANSLATION, *THREADS_AB] if args.translation else [
        *TRANSLATION, *(f"{who}_{method}" for method in ATTRIBUTIONS for who in ("ours_attribute", "inseq"))]
    load_before = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        texts, facts = prepare(root, args.fit, args.sentences)
        context = multiprocessing.get_context("spawn")
        workers, started = {}, {}
        for name in names:  # one at a time: building a system alone, not beside the others' start-up
            here, there = context.Pipe()
            sentences = texts[:1] if name.startswith(("ours_attribute", "inseq")) else texts  # attributions: one
            process = context.Process(target=worker, args=(there, name, str(root), sentences, facts["steps"][-1]))
            process.start()
            there.close()  # the worker's end: a worker that dies makes recv() fail instead of waiting forever
            try:
                started[name] = here.recv()
            except EOFError:
                raise SystemExit(f"the {name} worker failed (its traceback is above)") from None
            workers[name] = (here, process)
        times: dict[str, list[float]] = {name: [] for name in names}
        for round_ in range(args.rounds):
            for name in names if round_ % 2 == 0 else names[::-1]:
                workers[name][0].send("run")
                times[name].append(workers[name][0].recv())
        for connection, process in workers.values():
            connection.send("stop")
            process.join()
    result = {name: percentiles(ms) | started[name] for name, ms in times.items()}
    p50 = {name: statistics.median(ms) for name, ms in times.items()}
    ratios = {f"ctranslate2_float32_vs_{name}": round(p50["ctranslate2_float32"] / p50[name], 2) for name in OURS}
    ratios["hf_vs_ours_transformers_fp32"] = round(p50["hf_generate_attentions"] / p50["ours_transformers_fp32"], 2)
    ratios["stepwise_vs_verified"] = round(p50["ours_transformers_fp32_stepwise"] / p50["ours_transformers_fp32"], 2)
    ratios["shipped_hf_vs_ours"] = round(p50["shipped_hf_generate_attentions"] / p50["shipped_ours_trace"], 2)
    for method in ATTRIBUTIONS if not args.translation else ():
        ratios[f"inseq_vs_ours_{method}"] = round(p50[f"inseq_{method}"] / p50[f"ours_attribute_{method}"], 2)
    for name in THREADS_AB if args.translation else ():
        ratios[f"default_vs_calibrated_threads_{name.removesuffix(DEFAULT_THREADS)}"] = round(
            p50[name] / p50[name.removesuffix(DEFAULT_THREADS)], 2)
    if args.translation:
        ratios["shipped_hf_vs_ours" + DEFAULT_THREADS] = round(
            p50["shipped_hf_generate_attentions"] / p50["shipped_ours_trace" + DEFAULT_THREADS], 2)
    result |= {"ratios": ratios, **facts, "beam": BEAM, "threads": 2, "rounds": args.rounds,
               "unit": "ms per sentence", "load_before": load_before, "load_after": load_average()}
    print(json.dumps(result, indent=2))
    if not args.quick:
        out = RESULTS.with_name("bench_peers_translation.json") if args.translation else RESULTS
        write_results(out, result)
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
