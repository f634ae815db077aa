"""Turn a run into a model directory: average epoch checkpoints, score, write weights + card + log."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import torch
from tqdm import tqdm

from ..config import ConfigError, TrainConfig
from ..data.textfiles import DataError
from ..modeldir.checkpoint import (
    TRAINING_LOG,
    WEIGHTS,
    atomic_write_bytes,
    load_tokenizer,
    network_class,
    save_model_dir,
)
from ..modeldir.coverage import TRAINING_STATS, TrainingStats, training_stats
from ..modeldir.series import step_folder
from ..modeldir.training_facts import TRAINING_FACTS, facts_from_run, read_log
from ..nn.causal_lm import CausalLM
from ..nn.encoder_lm import MaskedLM
from ..tokenization.tokenizer import Tokenizer
from .card import model_card
from .checkpoints import CONFIG_FILE, LOG_FILE, SERIES_DIR, average_checkpoints
from .corpora import load_corpora, select_eval_sets
from .data import EvalSet
from .evaluate import evaluate_bleu, evaluate_loss, evaluate_masked
from .objectives import Network

RESULTS_FILE = "results.json"
EXPORT_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def evaluate_sets(model: Network, tokenizer: Tokenizer, sets: list[EvalSet], device: torch.device,
                  beams: tuple[int, ...] = (1, 4)) -> dict[str, dict[str, float]]:
    """BLEU/chrF of each evaluation set (all its references), keyed "set/beamN" (e.g. "tatoeba:test/beam4"); a
    language model's NLL and perplexity of each set, an encoder's masked-token accuracy, keyed by the set's name."""
    results: dict[str, dict[str, float]] = {}
    for data in sets:
        if isinstance(model, MaskedLM):
            results[data.name] = scores = evaluate_masked(model, tokenizer, data, device)
            tqdm.write(f"{data.name}: masked-token top-1 {scores['top1']}, top-5 {scores['top5']}")
            continue
        if isinstance(model, CausalLM):
            results[data.name] = evaluate_loss(model, tokenizer, data, device)
            tqdm.write(f"{data.name}: NLL {results[data.name]['nll']}, perplexity {results[data.name]['perplexity']}")
            continue
        for beam in beams:
            scores = evaluate_bleu(model, tokenizer, data, beam, device)
            results[f"{data.name}/beam{beam}"] = scores
            tqdm.write(f"{data.name} beam {beam}: BLEU {scores['bleu']}, chrF {scores['chrf']}")
    return results


def write_training_stats(cfg: TrainConfig, tokenizer: Tokenizer, out_dir: Path) -> TrainingStats | None:
    """`TRAINING_STATS` from the run's training corpora (the app's domain notice and input checks); None, with a
    note, when the training data cannot be read any more."""
    try:
        corpora = [c for c in load_corpora(cfg) if c.train_src]
    except (DataError, ConfigError, OSError) as err:
        tqdm.write(f"no {TRAINING_STATS} written: the training data cannot be read ({err})")
        return None
    stats = training_stats(tokenizer, {c.config.name: c.train_src for c in corpora})
    atomic_write_bytes(out_dir / TRAINING_STATS, stats.to_json().encode())
    return stats


def write_model_dir(model: Network, tokenizer: Tokenizer, cfg: TrainConfig, run_dir: Path, out_dir: Path,
                    results: dict[str, dict[str, float]], averaged: list[str], notes: str = "",
                    dtype: str = "fp32", step: int | None = None) -> Path:
    """Weights (stored as `dtype`), config, tokenizer, training log and facts, results and model card into
    `out_dir`; `step`: the weights are the run's series checkpoint of that step, and the log and facts end there."""
    save_model_dir(model.cpu(), tokenizer, out_dir, dtype=EXPORT_DTYPES[dtype])
    write_training_stats(cfg, tokenizer, out_dir)
    events = read_log(run_dir / LOG_FILE)
    if step is not None:  # what was logged after the checkpoint is not this model's training
        events = [e for e in events if not (e.get("event") in ("train", "val") and e.get("step", 0) > step)]
    facts = facts_from_run(cfg, events)
    if step is not None:
        facts = dataclasses.replace(facts, steps=step)
    atomic_write_bytes(out_dir / TRAINING_FACTS, facts.to_json().encode())
    if step is not None:
        atomic_write_bytes(out_dir / TRAINING_LOG, "".join(json.dumps(e) + "\n" for e in events).encode("utf-8"))
    elif (run_dir / LOG_FILE).is_file():
        shutil.copyfile(run_dir / LOG_FILE, out_dir / TRAINING_LOG)
    (out_dir / RESULTS_FILE).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    card = model_card(out_dir.name, cfg, model.num_parameters(), events, facts, results, averaged, notes)
    (out_dir / "MODEL_CARD.md").write_text(card, encoding="utf-8")
    return out_dir


def export_run(run_dir: Path, out_dir: Path, last: int | None = None, evaluate: tuple[str, ...] = (),
               notes: str = "", dtype: str = "fp32", step: int | None = None) -> Path:
    """Model directory from the run's last `last` epoch checkpoints (or, with `step`, its series checkpoint of that
    step alone), weights stored as `dtype` (fp32, fp16 or bf16: the averaging and any scoring run in fp32, the
    scores are of the stored weights); optionally score the `evaluate` sets (names as `select_eval_sets` takes
    them). The same run exported twice gives the same bytes."""
    if dtype not in EXPORT_DTYPES:
        raise ConfigError(f"--dtype must be one of {', '.join(EXPORT_DTYPES)}, got {dtype!r}")
    if not (run_dir / CONFIG_FILE).is_file():
        raise ConfigError(f"{run_dir}: not a run directory ({CONFIG_FILE} not found)")
    cfg = TrainConfig.from_dict(json.loads((run_dir / CONFIG_FILE).read_text(encoding="utf-8")))
    if step is not None:
        checkpoints = [step_folder(run_dir / SERIES_DIR, step) / WEIGHTS]
        if not checkpoints[0].is_file():
            raise ConfigError(f"{run_dir}: no series checkpoint of step {step} ({checkpoints[0]} not found)")
        last = 1
    else:
        checkpoints = sorted((run_dir / "epochs").glob("epoch_*.safetensors"))
        if not checkpoints:
            raise ConfigError(f"{run_dir}: no epoch checkpoint yet; wait for the first epoch to finish")
        last = cfg.average_last if last is None else last  # (--last 0 is an error, not the default)
        if last < 1:
            raise ConfigError(f"--last must be at least 1, got {last}")
    sets = select_eval_sets(cfg, evaluate) if evaluate else []  # data errors before the work
    tokenizer = load_tokenizer(run_dir)[0]  # the run's tokenizer.model, or an encoder's tokenizer.json and rules
    model_cfg = cfg.model if cfg.model.vocab_size == tokenizer.vocab_size else TrainConfig.from_dict(
        {**cfg.to_dict(), "model": {**cfg.model.to_dict(), "vocab_size": tokenizer.vocab_size}}).model
    model = network_class(model_cfg)(model_cfg)
    used = checkpoints[-last:]
    average_checkpoints(used, model)
    model.eval()
    if dtype != "fp32":  # score what is shipped: the weights rounded to the stored precision, computed in fp32
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(EXPORT_DTYPES[dtype]).float())
    results = evaluate_sets(model, tokenizer, sets, torch.device("cpu"))
    names = [p.name for p in used] if step is None else [f"{SERIES_DIR}/{checkpoints[0].parent.name}"]
    return write_model_dir(model, tokenizer, cfg, run_dir, out_dir, results, names, notes, dtype, step)
