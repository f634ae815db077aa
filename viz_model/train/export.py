"""Turn a (possibly unfinished) run into a model directory: average its last epoch checkpoints."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..checkpoint import TRAINING_LOG, save_model_dir
from ..config import ConfigError, TrainConfig
from ..model import Transformer
from ..tokenizer import Tokenizer
from .loop import CONFIG_FILE, LOG_FILE, TOKENIZER_FILE, average_checkpoints


def export_run(run_dir: Path, out_dir: Path, last: int | None = None) -> Path:
    """Write `out_dir` (weights, config, tokenizer, training log) from the run's last `last` epochs."""
    if not (run_dir / CONFIG_FILE).is_file():
        raise ConfigError(f"{run_dir}: not a run directory ({CONFIG_FILE} not found)")
    cfg = TrainConfig.from_dict(json.loads((run_dir / CONFIG_FILE).read_text(encoding="utf-8")))
    checkpoints = sorted((run_dir / "epochs").glob("epoch_*.safetensors"))
    if not checkpoints:
        raise ConfigError(f"{run_dir}: no epoch checkpoint yet; wait for the first epoch to finish")
    last = last or cfg.average_last
    if last < 1:
        raise ConfigError(f"--last must be at least 1, got {last}")
    tokenizer = Tokenizer.load(run_dir / TOKENIZER_FILE)
    model_cfg = cfg.model if cfg.model.vocab_size == tokenizer.vocab_size else TrainConfig.from_dict(
        {**cfg.to_dict(), "model": {**cfg.model.to_dict(), "vocab_size": tokenizer.vocab_size}}).model
    model = Transformer(model_cfg)
    average_checkpoints(checkpoints[-last:], model)
    save_model_dir(model.eval(), tokenizer, out_dir)
    if (run_dir / LOG_FILE).is_file():
        shutil.copyfile(run_dir / LOG_FILE, out_dir / TRAINING_LOG)
    return out_dir
