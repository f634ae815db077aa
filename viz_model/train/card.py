"""The model card: what a model is, how it was trained and how well it translates, written from the run's log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..config import TrainConfig


def read_log(path: Path) -> list[dict[str, Any]]:
    """Events of a JSON-lines run log (unreadable lines are skipped)."""
    events = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return events


def results_table(results: dict[str, dict[str, float]]) -> str:
    """Markdown table: one row per evaluation set, BLEU/chrF for greedy and beam 4."""
    sets = sorted({key.split("/")[0] for key in results}, key=lambda s: (not s.startswith("val"), s))
    rows = ["| set | BLEU greedy | BLEU beam 4 | chrF greedy | chrF beam 4 |", "|---|---|---|---|---|"]
    for name in sets:
        g, b = results.get(f"{name}/beam1", {}), results.get(f"{name}/beam4", {})
        rows.append(f"| {name} | {g.get('bleu', '-')} | {b.get('bleu', '-')} | {g.get('chrf', '-')} | "
                    f"{b.get('chrf', '-')} |")
    return "\n".join(rows)


def model_card(name: str, cfg: TrainConfig, params: int, events: list[dict[str, Any]],
               results: dict[str, dict[str, float]], averaged: list[str], notes: str = "") -> str:
    """Markdown model card from the run's config, log and test results."""
    m = cfg.model
    start = next((e for e in events if e.get("event") == "start"), {})
    vals = [e for e in events if e.get("event") == "val"]
    trains = [e for e in events if e.get("event") == "train"]
    wall = max((e.get("wall_time", 0) for e in trains + vals), default=0)
    speed = sorted(e["tokens_per_s"] for e in trains if "tokens_per_s" in e)
    median_speed = speed[len(speed) // 2] if speed else 0
    last_val = vals[-1] if vals else {}
    lines = [
        f"# Model card: {name}",
        "",
        f"English -> German Transformer (\"Attention Is All You Need\" architecture), trained with `viz-model train` "
        f"on {Path(cfg.data_dir).name} ({start.get('train_pairs', '?')} training pairs).",
        "",
        "## Architecture",
        f"- {m.encoder_layers} encoder + {m.decoder_layers} decoder layers, d_model {m.d_model}, {m.heads} heads "
        f"(d_k = {m.d_head}), d_ff {m.d_ff}, {m.norm}-LN, {m.positional} positions, max {m.max_positions} positions",
        f"- joint SentencePiece {cfg.tokenizer_type.upper()} vocabulary of {m.vocab_size} pieces (training split "
        f"only), {'3-way tied embeddings' if m.share_embeddings else 'separate embeddings'}",
        f"- {params:,} parameters",
        "",
        "## Recipe",
        f"- batches of about {cfg.batch_tokens} tokens grouped by length; Adam({cfg.adam_beta1}, {cfg.adam_beta2}, "
        f"{cfg.adam_eps}); inverse-square-root schedule with {cfg.warmup_steps} warm-up steps"
        + (f", peak lr {cfg.lr_peak}" if cfg.lr_peak else f", lr scale {cfg.lr_scale}"),
        f"- dropout {m.dropout}, label smoothing {cfg.label_smoothing}, seed {cfg.seed}",
        f"- trained for {last_val.get('epoch', '?')} epochs ({last_val.get('step', '?')} steps); final weights = "
        f"average of {len(averaged)} epoch checkpoints ({', '.join(averaged) or 'none'})",
        f"- hardware: {start.get('device', '?')} ({start.get('threads', '?')} threads, host {start.get('host', '?')}), "
        f"wall time {wall / 3600:.2f} h, median {median_speed:,.0f} target tokens/s",
        "",
        "## Quality (sacrebleu, cased, detokenized; alpha 0.6 for beam 4)",
        results_table(results) if results else "(not evaluated yet)",
        "",
    ]
    if notes:
        lines += ["## Notes", notes.strip(), ""]
    return "\n".join(lines)
