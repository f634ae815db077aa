"""The ``viz-model`` command: app, translate, trace, eval, analyze, importance, info, train, export, import,
export-hf, data.

Every user error prints one line ``viz-model: error: ...`` on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import __version__
from ..attribution.gradients import DEFAULT_STEPS, DEFAULT_TOLERANCE
from ..command_line import TRAIN_HELP, add_train_arguments, report_errors
from ..data import shard
from ..hf.arguments import command_line_flags
from ..modeldir.training_facts import TRAINING_FACTS
from ..nn.quantize import SEARCH_PRECISIONS
from ..search.settings import RULES
from .data_command import add_data_arguments, cmd_data

CORPUS_COMMANDS = ("eval", "analyze", "importance", "attribute")  # shared among processes under torchrun


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="model directory (default: the shipped model in assets/)")
    p.add_argument("--revision", default=None, metavar="REV",
                   help="a hub id's version: a branch, tag or commit (Pythia's checkpoints: step1000, ...)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--precision", default="auto", choices=list(SEARCH_PRECISIONS),
                   help="beam-search precision: auto = full precision for a model that searches as transformers "
                        "does (an imported one) and on a GPU, int8 weights for this project's models on the CPU "
                        "(traces are always full precision)")


def _decode_args(p: argparse.ArgumentParser, beam: int | None = None) -> None:
    default = "the rule's: 4 by this project's rule, the generation config's num_beams by transformers'"
    p.add_argument("--beam", type=int, default=beam, help=f"beam size, 1 = greedy (default {beam or default})")
    p.add_argument("--alpha", type=float, default=None,
                   help="length penalty: GNMT's alpha by this project's rule (default 0.6), transformers' "
                        "length_penalty by its rule (default: the generation config's)")
    p.add_argument("--rule", default=None, choices=list(RULES),
                   help="how to search: " + "; ".join(f"{k} = {v}" for k, v in RULES.items())
                        + " (default: the model's own: transformers for an imported model)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="viz-model", description="An instrumented Transformer translator.")
    parser.add_argument("--version", action="version", version=f"viz-model {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("app", help="start the explorer in the browser (Streamlit), with the shipped model")
    p.add_argument("--port", type=int, default=8501, help="the port to serve on (default 8501)")
    p.add_argument("--address", default="", help="the address to serve on (default: every address)")
    p.add_argument("--models", action="append", default=[], metavar="DIR",
                   help="a folder of model directories to offer too (repeatable; imported models, your own)")
    p.add_argument("--headless", action="store_true", help="do not open a browser window")
    p.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                   help="do not run the default page once at start (the first visitor then waits for the model's "
                        "load)")
    p.add_argument("--no-hub", dest="hub", action="store_false",
                   help="offer visitors no hub downloads (the sidebar's hub series form is not shown): for a public "
                        "server")
    p.add_argument("--device", default=None, metavar="{auto,cpu,cuda,cuda:N}",
                   help="where models run: auto (the GPU when torch sees one; the default, or VIZ_MODEL_DEVICE), cpu, "
                        "cuda or cuda:N")

    p = sub.add_parser("translate", help="print the translation of TEXT")
    p.add_argument("text")
    _model_args(p)
    _decode_args(p)

    p = sub.add_parser("trace", help="write the full attention trace of TEXT")
    p.add_argument("text")
    p.add_argument("--out", required=True, help="FILE.json, FILE.npz, or - for JSON on stdout")
    p.add_argument("--target", default=None, help="force this output (teacher forcing)")
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--maps", default="full", metavar="{auto,full,on_demand}",
                   help="full (the default): every map kept; on_demand: what each layer's scores need, maps made "
                        "when read; auto: on demand past FULL_MAPS_MAX_TOKENS tokens of source or output")
    _model_args(p)
    _decode_args(p)

    p = sub.add_parser("eval", help="corpus BLEU and chrF of translating --src against --ref or --ref-tsv (one "
                                    "JSON line)")
    p.add_argument("--src", required=True, help="source sentences, one per line (plain or .gz)")
    p.add_argument("--ref", action="append",
                   help="reference translations (plain or .gz); repeat for several references")
    p.add_argument("--ref-tsv", default=None, metavar="FILE",
                   help="instead of --ref: line i holds all references of source line i, separated by tabs "
                        "(any number per line; plain or .gz)")
    _model_args(p)
    _decode_args(p)

    p = sub.add_parser("analyze", help="per-head attention statistics and roles over a corpus (CSV or Parquet)")
    p.add_argument("--src", required=True, help="source sentences, one per line (plain or .gz)")
    p.add_argument("--tgt", default=None, help="reference translations to force instead of translating (plain or .gz)")
    p.add_argument("--limit", type=int, default=None, help="only the first N sentences")
    p.add_argument("--out", required=True, help="FILE.csv or FILE.parquet: one row per head")
    _batch_tokens_arg(p)
    _model_args(p)
    _decode_args(p, beam=1)

    p = sub.add_parser("importance", help="per head: the loss rise when that head alone is switched off (CSV or "
                                          "Parquet)")
    p.add_argument("--src", required=True, help="source sentences (a language model: prompts), one per line (plain "
                                                 "or .gz)")
    p.add_argument("--tgt", required=True, help="their reference translations (a language model: the continuations "
                                                 "whose NLL is measured), one per line (plain or .gz)")
    p.add_argument("--limit", type=int, default=None, help="only the first N sentences")
    p.add_argument("--out", required=True, help="FILE.csv or FILE.parquet: one row per head")
    p.add_argument("--bleu", action="store_true", help="also decode with each head off and report the BLEU drop "
                                                       "(slow: one search of the corpus per head)")
    _batch_tokens_arg(p)
    _model_args(p)
    _decode_args(p, beam=1)

    p = sub.add_parser("attribute", help="which explanation is faithful: per sentence, method and k, the drop of each "
                                         "output token's log-probability when the k source tokens a method ranks "
                                         "highest are removed, or all others (CSV or Parquet)")
    p.add_argument("--src", required=True, help="source sentences, one per line (plain or .gz)")
    p.add_argument("--tgt", default=None, help="translations to force instead of the model's own (plain or .gz; "
                                                   "the model's own: its full-precision greedy or beam search)")
    p.add_argument("--methods", nargs="+", default=["value_weighted", "alti"], metavar="METHOD",
                   help="attention (the layer mean and each layer), rollout, value_weighted, alti, saliency, "
                        "input_x_gradient, integrated_gradients (default: value_weighted alti)")
    p.add_argument("--k", nargs="+", type=int, default=[1, 2, 3], help="how many source tokens to remove (1 2 3)")
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                   help=f"integrated gradients: the most points on the path (default {DEFAULT_STEPS})")
    p.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                   help="integrated gradients: add points until every output token's completeness gap is within "
                        f"this share of its score change (default {DEFAULT_TOLERANCE}); 0: exactly --steps points")
    p.add_argument("--gaps-out", default=None, metavar="FILE",
                   help="with integrated_gradients: FILE.csv or FILE.parquet, every output token's completeness gap")
    p.add_argument("--limit", type=int, default=None, help="only the first N sentences")
    p.add_argument("--out", required=True, help="FILE.csv or FILE.parquet: one row per sentence, method and k")
    p.add_argument("--gold", default=None, metavar="FILE",
                   help="gold word alignments of --src / --tgt, Pharaoh format (i-j sure, i?j possible), one line per "
                        "sentence: also the AER of every method and layer")
    p.add_argument("--aer-out", default=None, metavar="FILE", help="with --gold: FILE.csv or FILE.parquet for the AER")
    p.add_argument("--draws", type=int, default=8, help="random k-token sets per sentence and k, the baseline "
                                                          "(default 8; each is a full pass of the decoder)")
    p.add_argument("--workers", type=int, default=None,
                   help="processes attributing sentences at once (default: one per core on the CPU, up to 16)")
    _model_args(p)
    _decode_args(p, beam=1)

    p = sub.add_parser("info", help="print the config, parameter count and model card")
    _model_args(p)

    add_train_arguments(sub.add_parser("train", help=TRAIN_HELP))

    p = sub.add_parser("export", help="average a run's last epoch checkpoints into a model directory")
    p.add_argument("run_dir")
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--last", type=int, default=None, help="how many epoch checkpoints to average")
    p.add_argument("--evaluate", nargs="*", default=[], metavar="SET",
                   help="evaluation sets to score (greedy and beam 4): 'all', split prefixes of a single-corpus "
                        "run (val test_2016_flickr), or CORPUS:SPLIT / CORPUS of a [[corpora]] run (tatoeba:test wmt)")
    p.add_argument("--notes", default="", help="text for the model card's Notes section (or @FILE)")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "fp16", "bf16"],
                   help="precision of the stored weights (the shipped models are fp16; scores are of these weights)")
    p.add_argument("--step", type=int, default=None,
                   help="export the run's series checkpoint of this step (series_every_steps) instead of its epochs")

    p = sub.add_parser("facts", help=f"write a model directory's {TRAINING_FACTS} from its training config and "
                                     "training log (for directories exported before the file existed)")
    p.add_argument("model_dir")
    p.add_argument("--config", required=True, help="the TOML config the model was trained with")
    p.add_argument("overrides", nargs="*", help="config overrides key=value the run was given (e.g. epochs=24)")

    p = sub.add_parser("import", help="import a Hugging Face Marian (opus-mt), M2M100, NLLB, T5, mT5, BART or mBART "
                                      "model folder or hub id, exactly")
    p.add_argument("source", help="a local Hugging Face model folder, or a hub id such as Helsinki-NLP/opus-mt-en-de "
                                  "(downloaded through huggingface_hub when installed and online)")
    p.add_argument("--out", required=True, help="model directory to write (e.g. assets/opus-mt-en-de); must not exist")
    p.add_argument("--source-lang", default=None, metavar="CODE",
                   help="M2M100 / NLLB / mBART: the source language's code (default: the folder's "
                        "tokenizer_config.json src_lang); T5: with --target-lang, which translation task of its "
                        "config (default: the first it lists)")
    p.add_argument("--target-lang", default=None, metavar="CODE",
                   help="M2M100 / NLLB / mBART: the target language's code, forced as the first output (default: "
                        "its tgt_lang); T5: the translation task into it")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "fp16"],
                   help="precision of the stored weights: fp32 (exact, the default) or fp16 (half the size, loaded "
                        "into fp32; for models above the 2 GiB weight-file limit, such as NLLB-600M)")
    p.add_argument("--revision", default=None, metavar="REV",
                   help="the hub repository's version to import: a branch, tag or commit (Pythia's step1000, ...)")
    p.add_argument("--copy", action="store_true",
                   help="language models: write the weights into the model directory (a self-contained copy, "
                        "within the 2 GiB weight-file limit) instead of reading them where they are")

    p = sub.add_parser("export-hf", help="write one of this project's models as a Hugging Face MarianMTModel folder "
                                         "(transformers' from_pretrained, CTranslate2's converter)")
    p.add_argument("model_dir", help="the model directory, e.g. assets/mixed-en-de")
    p.add_argument("--out", required=True, help="the folder to write; must not exist")

    add_data_arguments(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    def run() -> int:
        # under torchrun the corpus commands share their sentences among the processes; rank 0 writes
        ranks = shard.join() if args.command in CORPUS_COMMANDS else None
        with shard.sharing(ranks):
            code = COMMANDS[args.command](args)
        if ranks is not None:  # every rank done: leave together (a failed rank exits at once, torchrun ends the rest)
            shard.leave()
        return code

    with command_line_flags():  # messages name this command's flags, not a Python call's keywords
        return report_errors(run)


def _batch_tokens_arg(p: argparse.ArgumentParser) -> None:
    from ..data.batching import DEFAULT_BATCH_TOKENS

    p.add_argument("--batch-tokens", type=int, default=DEFAULT_BATCH_TOKENS,
                   help=f"padded tokens per teacher-forced batch (default {DEFAULT_BATCH_TOKENS}; fewer: less memory; "
                        "under torchrun the batches are what the processes share)")


def _load(args: argparse.Namespace, language_models: bool = False):
    """The model of ``--model``; a decoder-only language model refused in one line unless `language_models`, an
    encoder always."""
    from ..api import load
    from ..modeldir.checkpoint import model_kind

    def refused(kind: str | None) -> ValueError:
        if kind == "encoder":
            return ValueError(f"{args.model}: an encoder-only model; this command works on translation models (in "
                              "Python: viz_model.load(...).fill_mask(text) or .trace(text))")
        return ValueError(f"{args.model}: a decoder-only language model; this command works on translation models "
                          "(in Python: viz_model.load(...).complete(prompt) or .trace(prompt))")

    kind = model_kind(Path(args.model)) if args.model and Path(args.model).is_dir() else None
    if kind == "encoder" or (kind == "decoder" and not language_models):  # before --precision is refused
        raise refused(kind)
    model = load(args.model, device=args.device, precision=args.precision, revision=args.revision)
    if model.kind == "encoder" or ("cross" not in model.attention_kinds and not language_models):  # a hub id's
        raise refused(model.kind if model.kind == "encoder" else "decoder")
    return model


def cmd_app(args: argparse.Namespace) -> int:
    from .launch import run_app

    return run_app(args.port, args.models, args.address, args.headless, args.device, args.warm_up, args.hub)


def cmd_translate(args: argparse.Namespace) -> int:
    print(_load(args).translate(args.text, beam=args.beam, alpha=args.alpha, rule=args.rule))
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    model = _load(args)
    if args.out != "-" and Path(args.out).suffix not in (".json", ".npz"):
        raise ValueError(f"--out must end in .json or .npz (or be -), got {args.out!r}")
    trace = model.trace(args.text, beam=args.beam, alpha=args.alpha, target=args.target, top_k=args.top_k,
                        rule=args.rule, maps=args.maps)
    if args.out == "-":
        print(trace.to_json())
    else:
        trace.save(args.out)
        print(f"wrote {args.out}: {len(trace.source_tokens)} source x {len(trace.target_tokens)} target tokens, "
              f"translation: {trace.translation}", file=sys.stderr)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..data.bleu import corpus_scores, reference_streams
    from ..data.textfiles import open_references, open_text
    from ..data.typed_text import check_text

    if args.ref and args.ref_tsv:
        raise ValueError("give the references either as --ref files or as one --ref-tsv file, not both")
    if not args.ref and not args.ref_tsv:
        raise ValueError("eval needs references: --ref FILE (repeatable) or --ref-tsv FILE")
    _check_search_args(args)  # before the progress bar, so the error stays one line
    src = open_text(Path(args.src))
    refs: list[list[str]] | list[list[str | None]]
    if args.ref_tsv:  # a variable number of references per sentence, scored as padded reference streams
        per_sentence = open_references(Path(args.ref_tsv))
        if len(per_sentence) != len(src):
            raise ValueError(f"{args.ref_tsv} has {len(per_sentence)} lines but {args.src} has {len(src)}")
        refs = reference_streams(per_sentence)
    else:
        refs = [open_text(Path(r)) for r in args.ref]
        for path, ref in zip(args.ref, refs):
            if len(ref) != len(src):
                raise ValueError(f"{path} has {len(ref)} lines but {args.src} has {len(src)}")
    if not src:
        raise ValueError(f"{args.src} is empty")
    for i, line in enumerate(src, 1):
        try:
            check_text(line, f"{args.src} line {i}")
        except ValueError as err:
            raise ValueError(str(err)) from None
    model = _load(args)
    search = model.search_settings(args.rule, args.beam, args.alpha)
    with tqdm(total=len(src), unit="sent", file=sys.stderr, disable=not shard.writes()) as bar:
        outputs = model.translate_ids([model.encode(line, truncate=True) for line in src], search,
                                      progress=bar.update)
    if not shard.writes():  # under torchrun rank 0 reports
        return 0
    scores = corpus_scores([model.tokenizer.decode(ids) for ids in outputs], refs)
    print(json.dumps({**scores, "sentences": len(src), "beam": search.beam, "alpha": search.alpha,
                      "rule": search.rule, "search": model.search_precision, "model": model.name}))
    return 0


def _check_search_args(args: argparse.Namespace) -> None:
    """--beam and --alpha within the bounds of the rule asked for, before a model loads (None: the model's)."""
    from ..search.requests import check_decoding
    from ..search.settings import PROJECT_ALPHA, PROJECT_BEAM

    beam = PROJECT_BEAM if args.beam is None else args.beam
    alpha = PROJECT_ALPHA if args.alpha is None else args.alpha
    check_decoding(beam, alpha, rule=args.rule or "transformers")  # the rule's own bounds are checked on load


def _corpus_args(args: argparse.Namespace) -> tuple[Path, list[str], list[str] | None]:
    """The checked --out path and the first --limit lines of --src (and --tgt), before the model is loaded."""
    from ..analysis.inputs import check_corpus
    from ..analysis.tables import check_table_path
    from ..data.textfiles import open_text

    out = check_table_path(args.out)
    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit must be at least 1, got {args.limit}")
    if getattr(args, "batch_tokens", 1) < 1:
        raise ValueError(f"--batch-tokens must be at least 1, got {args.batch_tokens}")
    _check_search_args(args)
    src = open_text(Path(args.src))
    if not src:
        raise ValueError(f"{args.src} is empty")
    tgt = open_text(Path(args.tgt)) if args.tgt else None
    if tgt is not None and len(tgt) != len(src):
        raise ValueError(f"{args.tgt} has {len(tgt)} lines but {args.src} has {len(src)}")
    src, tgt = check_corpus(src, tgt, args.limit, (f"{args.src} line", f"{args.tgt} line"))
    return out, src, tgt


def cmd_analyze(args: argparse.Namespace) -> int:
    from ..analysis.corpus_attention import analyze_corpus
    from ..analysis.tables import write_table

    out, src, tgt = _corpus_args(args)
    model = _load(args)
    analysis = analyze_corpus(model, src, tgt, beam=args.beam, alpha=args.alpha, progress=shard.writes(),
                              rule=args.rule, batch_tokens=args.batch_tokens)
    if not shard.writes():  # under torchrun rank 0 writes
        return 0
    write_table(analysis.heads, out)
    summary = analysis.summary()
    summary["example_text"] = [text if len(text) <= 60 else text[:57] + "..." for text in summary["example_text"]]
    print(summary.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print(f"wrote {out}: {len(analysis.heads)} heads x {len(src)} sentences "
          f"({'forced on ' + args.tgt if tgt is not None else f'translated, beam {args.beam}'})", file=sys.stderr)
    return 0


def cmd_importance(args: argparse.Namespace) -> int:
    from ..analysis.ablation import head_importance
    from ..analysis.tables import write_table

    out, src, tgt = _corpus_args(args)
    model = _load(args, language_models=True)  # a language model's: the NLL of each prompt's continuation
    table = head_importance(model, src, tgt, bleu=args.bleu, beam=args.beam, alpha=args.alpha,
                            progress=shard.writes(), rule=args.rule, batch_tokens=args.batch_tokens)
    if not shard.writes():  # under torchrun rank 0 writes
        return 0
    write_table(table, out)
    top = table.sort_values("nll_rise", ascending=False, kind="stable").head(5)
    print(top.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"wrote {out}: {len(table)} heads x {len(src)} sentences (intact NLL {table['nll_intact'].iloc[0]:.4f} "
          "nats per token)", file=sys.stderr)
    return 0


def cmd_attribute(args: argparse.Namespace) -> int:
    from ..analysis.tables import check_table_path, write_table
    from ..analysis.word_alignment import read_pharaoh
    from ..attribution import check_methods
    from ..attribution.corpus_scores import (
        check_draws,
        completeness_summary,
        corpus_faithfulness,
        default_workers,
        faithfulness_table,
    )
    from ..attribution.gradients import check_steps, check_tolerance

    check_methods(args.methods)
    check_tolerance(args.tolerance, check_steps(args.steps))
    if args.gaps_out is not None and "integrated_gradients" not in args.methods:
        raise ValueError("--gaps-out writes integrated gradients' completeness gaps: add integrated_gradients to "
                         "--methods")
    gaps_out = check_table_path(args.gaps_out) if args.gaps_out else None
    if any(k < 1 for k in args.k):
        raise ValueError(f"--k values must be at least 1, got {args.k}")
    check_draws(args.draws, "--draws")  # before the model loads
    if (args.gold is None) != (args.aer_out is None):
        raise ValueError("--gold and --aer-out go together: the gold alignments, and where their AER table goes")
    if args.gold is not None and args.tgt is None:
        raise ValueError("--gold needs --tgt: the gold alignments align the given target sentences")
    aer_out = check_table_path(args.aer_out) if args.aer_out else None
    out, src, tgt = _corpus_args(args)
    gold = read_pharaoh(Path(args.gold))[:len(src)] if args.gold else None
    model = _load(args)
    # under torchrun the processes are the launch's (one sentence share each), not a pool's
    workers = (1 if shard.active() else default_workers(model)) if args.workers is None else args.workers
    table, aer, gaps = corpus_faithfulness(model, src, tgt, args.methods, args.k, args.steps, beam=args.beam,
                                           draws=args.draws, alpha=args.alpha, progress=shard.writes(), gold=gold,
                                           workers=workers, rule=args.rule, tolerance=args.tolerance)
    if not shard.writes():  # under torchrun rank 0 writes
        return 0
    write_table(table, out)
    if gaps is not None:
        print(completeness_summary(gaps, args.tolerance), file=sys.stderr)
        if gaps_out is not None:
            write_table(gaps, gaps_out)
    if aer is not None and aer_out is not None:
        write_table(aer, aer_out)
        print(aer.head(10).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(faithfulness_table(table).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"wrote {out}: {len(table)} rows, {len(src)} sentences "
          f"({'forced on ' + args.tgt if tgt is not None else f'translated, beam {args.beam}'})", file=sys.stderr)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    model = _load(args)
    print(json.dumps({"model": model.name, "directory": str(model.directory), "device": model.device_label,
                      "search": model.search_precision,
                      "parameters": model.network.num_parameters(), "config": model.config.to_dict()}, indent=2))
    if model.card:
        print()
        print(model.card)
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from ..train.command import train_command

    return train_command(args)


def cmd_import(args: argparse.Namespace) -> int:
    from ..config import ModelConfig
    from ..hf.importer import import_model
    from ..search.settings import load_generation

    out = import_model(args.source, args.out, args.source_lang, args.target_lang, args.dtype, copy=args.copy,
                       revision=args.revision)
    notes = load_generation(out, ModelConfig.load(out / "config.json")).transformers.notes
    if notes:
        print(f"viz-model: note: generation settings not implemented (used as stated): {'; '.join(notes)}",
              file=sys.stderr)
    print(f"model written to {out}", file=sys.stderr)
    return 0


def cmd_export_hf(args: argparse.Namespace) -> int:
    from ..hf.exporter import export_hf

    out = export_hf(args.model_dir, args.out)
    print(f"Marian folder written to {out}", file=sys.stderr)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from ..train.export import export_run

    notes = Path(args.notes[1:]).read_text(encoding="utf-8") if args.notes.startswith("@") else args.notes
    out = export_run(Path(args.run_dir), Path(args.out), args.last, tuple(args.evaluate), notes, args.dtype,
                     args.step)
    print(f"model written to {out}", file=sys.stderr)
    return 0


def cmd_facts(args: argparse.Namespace) -> int:
    from ..config import TrainConfig
    from ..modeldir.checkpoint import TRAINING_LOG, atomic_write_bytes, model_file
    from ..modeldir.training_facts import facts_from_run, read_log

    directory = Path(args.model_dir)
    cfg = TrainConfig.from_toml(args.config, args.overrides)
    events = read_log(model_file(directory, TRAINING_LOG))
    if not any(e.get("event") == "val" for e in events):
        raise ValueError(f"{directory / TRAINING_LOG}: no validation event, so the run's course is unknown")
    facts = facts_from_run(cfg, events)
    atomic_write_bytes(directory / TRAINING_FACTS, facts.to_json().encode())
    print(f"{directory / TRAINING_FACTS}: {facts.trained_epochs} epochs, {facts.steps} steps", file=sys.stderr)
    return 0


COMMANDS = {"app": cmd_app, "translate": cmd_translate, "trace": cmd_trace, "eval": cmd_eval, "analyze": cmd_analyze,
            "importance": cmd_importance, "info": cmd_info, "train": cmd_train, "export": cmd_export,
            "import": cmd_import, "facts": cmd_facts, "attribute": cmd_attribute, "export-hf": cmd_export_hf,
            "data": cmd_data}
