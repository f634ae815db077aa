"""The model card: what a model is, how it was trained and how well it translates (a language model: how well it
predicts its held-out lines), written from the run's log.

Each measured figure carries the marker ``benchmarks/docs_figures.py`` checks (``<!-- fig FILE KEY FORMAT -->``, a
file of the model directory): the card of a shipped model is checked against its files as the docs are."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ..config import TrainConfig
from ..modeldir.training_facts import TrainingFacts

# Published scores to print beside ours: test split -> (BLEU, what it was measured on)
PAPER_BLEU = {"newstest2014": (27.3, "the paper's base Transformer (Vaswani et al., 2017), beam 4, after training on "
                                     "4.5M WMT14 English-German sentence pairs")}
PAPER_TRAIN_PAIRS = 4_500_000


def figure(value: float, file: str, key: str, spec: str) -> str:
    """`value` as the card prints it (`spec`: a reducer and a scale, then a format spec), followed by the marker
    that names the model directory's `file` and `key` it was read from."""
    return f"{format(value, spec.split()[-1])}<!-- fig {file} {key} {spec} -->"


def bleu_figure(results: dict[str, dict[str, float]], key: str) -> str:
    """The BLEU of results.json's `key` ("set/beamN") with its marker, "-" where it was not scored."""
    value = results.get(key, {}).get("bleu")
    return "-" if value is None else figure(value, "results.json", f"{key}.bleu", ".2f")


def split_of(name: str) -> str:
    """The split of an evaluation set's name: ``tatoeba:test`` -> ``test``, ``val`` -> ``val``."""
    return name.rpartition(":")[2]


def results_table(results: dict[str, dict[str, float]]) -> str:
    """Markdown table: one row per evaluation set (validation sets first), BLEU/chrF for greedy and beam 4."""
    sets = sorted({key.split("/")[0] for key in results}, key=lambda s: (not split_of(s).startswith("val"), s))
    rows = ["| set | BLEU greedy | BLEU beam 4 | chrF greedy | chrF beam 4 |", "|---|---|---|---|---|"]
    for name in sets:
        g, b = results.get(f"{name}/beam1", {}), results.get(f"{name}/beam4", {})
        rows.append(f"| {name} | {g.get('bleu', '-')} | {b.get('bleu', '-')} | {g.get('chrf', '-')} | "
                    f"{b.get('chrf', '-')} |")
    return "\n".join(rows)


def data_section(cfg: TrainConfig, start: dict[str, Any]) -> list[str]:
    """Markdown lines on the corpora of a [[corpora]] run: sizes, weights, held-out splits, evaluation sets."""
    trained = {c["name"]: c for c in start.get("corpora", [])}
    sets: dict[str, dict[str, int]] = start.get("eval_sets", {})
    tokenizer = f"Tokenizer copied from `{cfg.init_from}`." if cfg.init_from else (
        "Tokenizer trained on the union of the training parts.")
    lines = ["## Data", tokenizer]
    if isinstance(start.get("epoch_pairs"), int):
        lines[-1] += (f" One epoch = {start['epoch_pairs']:,} pairs sampled by weight (whole copies, plus a random "
                      "subset for a fraction, drawn anew from the seed and the epoch).")
    lines.append("")
    for corpus in cfg.corpus_list:
        own = [f"{split_of(name)} ({n['sentences']:,} sentences, {n['references']:,} references)"
               for name, n in sets.items() if name.partition(":")[0] == corpus.name]
        if corpus.name in trained:
            unit = "pairs" if cfg.model.kind == "seq2seq" else "lines"
            what = f"{trained[corpus.name]['train_pairs']:,} training {unit}, weight {corpus.weight:g}"
        else:
            what = "evaluation only"
        lines.append(f"- **{corpus.name}** (`{corpus.data_dir}`): {what}; evaluated on {', '.join(own) or 'nothing'}")
        if corpus.holdout:
            lines.append(f"  - no official split: {corpus.holdout_val:,} validation and {corpus.holdout_test:,} test "
                         "English sentences held out by distinct sentence, each with all its German translations as "
                         f"references, never trained on (seed {corpus.holdout_seed}; SHA-256 ranking, see "
                         "`viz_model/train/splits.py`)")
    return lines + [""]


def paper_section(cfg: TrainConfig, results: dict[str, dict[str, float]], start: dict[str, Any]) -> list[str]:
    """Markdown lines comparing our score on the paper's test set with the paper's, and why they differ (none for a
    language model)."""
    lines: list[str] = []
    if cfg.model.kind != "seq2seq":
        return lines
    pairs = start.get("train_pairs")
    size = f"{pairs:,}" if isinstance(pairs, int) else "?"
    corpora = trained_on(cfg, start, weights=False)
    scale = f"about {PAPER_TRAIN_PAIRS / pairs:,.0f} times fewer than the paper's 4.5 million and " if (
        isinstance(pairs, int) and pairs > 0) else ""
    for name in sorted({key.split("/")[0] for key in results}):
        if split_of(name) not in PAPER_BLEU:
            continue
        bleu, source = PAPER_BLEU[split_of(name)]
        ours = {beam: bleu_figure(results, f"{name}/beam{beam}") for beam in (1, 4)}
        lines += ["## Compared with the paper",
                  f"{split_of(name)}: **{ours[4]} BLEU** with beam 4 ({ours[1]} greedy), against **{bleu}** for "
                  f"{source}.",
                  "",
                  f"This model learned from {size} short sentence pairs ({corpora}), {scale}none of "
                  "them news: news sentences are long and full of names, numbers, politics and economics it has "
                  "never seen, so the gap measures data scale and domain, not the architecture.",
                  ""]
    return lines


def trained_on(cfg: TrainConfig, start: dict[str, Any], weights: bool = True) -> str:
    """The training data in words: the data directory's name, or each training corpus (with its weight)."""
    if cfg.corpora is None:
        return Path(cfg.data_dir).name
    return " + ".join(c["name"] + (f" (weight {c['weight']:g})" if weights else "")
                      for c in start.get("corpora", [])) or "?"


def tokenizer_line(cfg: TrainConfig) -> str:
    """The vocabulary in words: trained by the run (training data only), or copied from the warm-start model."""
    if cfg.init_from:
        return f"joint SentencePiece vocabulary of {cfg.model.vocab_size} pieces (copied from `{cfg.init_from}`)"
    if cfg.model.kind == "encoder":
        return (f"lowercased WordPiece vocabulary of {cfg.model.vocab_size} pieces (BERT's normalizer and "
                "pre-tokenizer; training split only) with [PAD], [UNK], [CLS], [SEP] and [MASK]")
    joint = "joint " if cfg.model.kind == "seq2seq" else ""
    return (f"{joint}SentencePiece {cfg.tokenizer_type.upper()} vocabulary of {cfg.model.vocab_size} pieces (training "
            f"{'split' if cfg.corpora is None else 'parts of all corpora'} only)")


def what_it_is(cfg: TrainConfig, start: dict[str, Any]) -> list[str]:
    """The card's first lines: a translator, a decoder-only language model or an encoder, and what it was trained
    on."""
    if cfg.model.kind == "encoder":
        return [f"Encoder-only Transformer (BERT-shaped), trained with `viz-model train` to fill in masked tokens of "
                f"the `{cfg.text_lang}` lines of {trained_on(cfg, start)} ({start.get('train_pairs', '?')} training "
                "lines): 15% of the tokens chosen, 80% of those replaced by [MASK], 10% by a random token, 10% kept."]
    if cfg.model.kind == "decoder":
        return [f"Decoder-only Transformer language model, trained with `viz-model train` to predict each next piece "
                f"of the `{cfg.text_lang}` lines of {trained_on(cfg, start)} ({start.get('train_pairs', '?')} "
                + ("training sequences packed from its lines)." if cfg.pack_len else "training lines).")]
    return [f"English -> German Transformer (\"Attention Is All You Need\" architecture), trained with `viz-model "
            f"train` on {trained_on(cfg, start)} ({start.get('train_pairs', '?')} training pairs)."]


def architecture_lines(cfg: TrainConfig) -> list[str]:
    """The stacks, widths, heads, norms and positions, the vocabulary and how the embeddings are tied."""
    m = cfg.model
    norm = {"layer": "LN", "rms": "RMSNorm", "gemma": "RMSNorm"}[m.normalization]
    ffn = f"gated ({m.activation}) " if m.gated_ffn else ""
    widths = (f"d_model {m.d_model}, {m.heads} heads (d_k = {m.d_head}), {ffn}d_ff {m.d_ff}, {m.norm}-{norm}, "
              f"{m.positional} positions, max {m.max_positions} positions")
    if m.kind == "encoder":
        return [f"- {m.encoder_layers} self-attention layers over [CLS] text [SEP], {widths}",
                f"- {tokenizer_line(cfg)}; the masked-LM head (dense, {m.head_activation}, norm) tied to the "
                "embeddings"]
    if m.kind == "decoder":
        grouped = f", {m.kv_heads} key/value heads" if m.kv_heads else ""
        head = "the output projection tied to the embeddings" if m.tied_head else "its own output projection"
        return [f"- {m.decoder_layers} causal self-attention layers{grouped}, {widths}",
                f"- {tokenizer_line(cfg)}, {head}"]
    return [f"- {m.encoder_layers} encoder + {m.decoder_layers} decoder layers, {widths}",
            f"- {tokenizer_line(cfg)}, {'3-way tied embeddings' if m.share_embeddings else 'separate embeddings'}"]


def quality_lines(cfg: TrainConfig, results: dict[str, dict[str, float]]) -> list[str]:
    """The scores: a translator's BLEU and chrF per set, a language model's loss and perplexity per set."""
    if cfg.model.kind == "seq2seq":
        return ["## Quality (sacrebleu, cased, detokenized; alpha 0.6 for beam 4)",
                results_table(results) if results else "(not evaluated yet)"]
    if cfg.model.kind == "encoder":
        return masked_quality_lines(results)
    rows = ["| set | lines | NLL per piece | perplexity |", "|---|---|---|---|"]
    rows += [f"| {name} | {r.get('lines', '-')} | {r.get('nll', '-')} | {r.get('perplexity', '-')} |"
             for name, r in sorted(results.items(), key=lambda item: (not split_of(item[0]).startswith("val"),
                                                                        item[0]))]
    return ["## Quality (next-piece loss on held-out lines, `</s>` included)",
            "\n".join(rows) if results else "(not evaluated yet)"]


def masked_quality_lines(results: dict[str, dict[str, float]]) -> list[str]:
    """An encoder's held-out masked-token accuracy per set, each figure with its marker."""
    rows = ["| set | lines | masked tokens | top-1 | top-5 | NLL per masked token |", "|---|---|---|---|---|---|"]
    for name in sorted(results, key=lambda s: (not split_of(s).startswith("val"), s)):
        cells = [figure(results[name][key], "results.json", f"{name}.{key}", spec)
                 for key, spec in (("lines", "d"), ("masked", "d"), ("top1", ".4f"), ("top5", ".4f"), ("nll", ".4f"))]
        rows.append(f"| {name} | {' | '.join(cells)} |")
    return ["## Quality (held-out masked tokens: 15% of each line's tokens chosen by a fixed draw, each replaced by "
            "[MASK]; the share whose token is the first prediction, or among the first five)",
            "\n".join(rows) if results else "(not evaluated yet)"]


def model_card(name: str, cfg: TrainConfig, params: int, events: list[dict[str, Any]], facts: TrainingFacts,
               results: dict[str, dict[str, float]], averaged: list[str], notes: str = "") -> str:
    """Markdown model card from the run's config, log, training facts and test results; the recipe lines are
    `facts` (the data the app reads), in words."""
    m = cfg.model
    start = next((e for e in events if e.get("event") == "start"), {})
    walls = [e["wall_time"] for e in events if isinstance(e.get("wall_time"), (int, float))]
    speeds = [e["tokens_per_s"] for e in events if isinstance(e.get("tokens_per_s"), (int, float))]
    wall = figure(max(walls) / 3600, "training_log.jsonl", "*.wall_time", "max /3600 .2f") if walls else "?"
    speed = (figure(statistics.median(speeds), "training_log.jsonl", "*.tokens_per_s", "median ,.0f")
             if speeds else "?")
    lines = [
        f"# Model card: {name}",
        "",
        *what_it_is(cfg, start),
        "",
        "## Architecture",
        *architecture_lines(cfg),
        f"- {params:,} parameters",
        "",
        *(data_section(cfg, start) if cfg.corpora is not None else []),
        "## Recipe",
        *([f"- warm-started from the model directory `{cfg.init_from}`: its weights (in fp32) and its tokenizer; "
           "optimizer, schedule (warm-up included) and data order started fresh"] if cfg.init_from else []),
        f"- batches of about {cfg.batch_tokens} tokens grouped by length; Adam({cfg.adam_beta1}, {cfg.adam_beta2}, "
        f"{cfg.adam_eps}); inverse-square-root schedule with {facts.warmup_steps} warm-up steps"
        + (f", peak lr {facts.lr_peak}" if facts.lr_peak else f", lr scale {facts.lr_scale}")
        + (f", then a linear cooldown to zero over the last {facts.cooldown_epochs} "
           f"epoch{'s' if facts.cooldown_epochs > 1 else ''}" if facts.cooldown_epochs else ""),
        f"- dropout {facts.dropout}, label smoothing {facts.label_smoothing}, seed {facts.seed}, "
        f"{'sentences' if m.kind == 'seq2seq' else 'lines'} of at most {facts.max_len} pieces",
        *([f"- training lines packed into sequences of up to {cfg.pack_len} positions (each line ended by `</s>`)"
           + (f"; each line after a sequence's first is, with chance {cfg.pack_repeat}, a copy of one of its earlier "
              "lines" if cfg.pack_repeat else "")
           + (f"; with chance {cfg.pack_spans}, a span of 8 to 32 random pieces followed by its copy instead (a "
              "copying curriculum)" if cfg.pack_spans else "") + "; validation one line a sequence"]
          if cfg.pack_len else []),
        f"- trained for {facts.trained_epochs or '?'} epochs ({facts.steps or '?'} steps); final weights = "
        + (f"the checkpoint of step {facts.steps} ({averaged[0]}), not averaged"
           if len(averaged) == 1 and averaged[0].startswith("series/") else
           f"the last epoch checkpoint ({averaged[0]}), not averaged" if len(averaged) == 1 else
           f"average of {len(averaged)} epoch checkpoints ({', '.join(averaged) or 'none'})"),
        f"- hardware: {start.get('device', '?')} ({start.get('threads', '?')} threads), wall time {wall} h, median "
        f"{speed} target tokens/s{facts.precision_note()}",
        "",
        *quality_lines(cfg, results),
        "",
        *paper_section(cfg, results, start),
    ]
    if notes:
        lines += ["## Notes", notes.strip(), ""]
    return "\n".join(lines)
