"""Files of a run directory: the resumable training state and the per-epoch weights."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from ..config import ConfigError
from ..modeldir.checkpoint import atomic_write_bytes, load_weights, save_model_dir
from ..modeldir.series import record_step, step_folder
from ..nn.model import Transformer

CONFIG_FILE, LATEST, TOKENIZER_FILE, LOG_FILE = "config.json", "latest.pt", "tokenizer.model", "log.jsonl"
SERIES_DIR = "series"


def training_state(model: Transformer, optimizer: torch.optim.Optimizer, step: int, epoch: int, batch_index: int,
                   wall: float, bf16_autocast: bool, world: int = 1) -> dict[str, Any]:
    """What an exact resume needs: weights, optimizer, position in the data (`batch_index` counts each of the
    `world` processes' own batches), RNG states and the precision."""
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step, "epoch": epoch,
             "batch_index": batch_index, "wall_time": wall, "torch_rng": torch.get_rng_state(),
             "bf16_autocast": bf16_autocast, "world": world}
    if torch.cuda.is_available():
        state["cuda_rng"] = torch.cuda.get_rng_state_all()
    return state


def save_state(path: Path, state: dict[str, Any]) -> None:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def load_state(path: Path, mmap: bool = False) -> dict[str, Any]:
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except (RuntimeError, EOFError, OSError) as err:
        raise ConfigError(f"{path}: unreadable training state ({err})") from None


def average_checkpoints(paths: list[Path], model: Transformer) -> None:
    """Load into `model` the element-wise mean of the weights in `paths` (paper: last 5 checkpoints)."""
    total: dict[str, torch.Tensor] = {}
    for path in paths:
        for name, tensor in load_file(str(path)).items():
            total[name] = total.get(name, 0) + tensor.double()
    averaged = {name: (t / len(paths)).float() for name, t in total.items()}
    tmp = paths[-1].with_name(".average.safetensors")
    save_file(averaged, str(tmp))
    load_weights(model, tmp)
    tmp.unlink()




def save_series_step(model: Transformer, tokenizer: Any, run_dir: Path, step: int) -> Path:
    """The model as of `step`, a loadable folder of the run's checkpoint series (``series/step-NNNNNN``), recorded
    in its ``series.json`` (`viz_model.modeldir.series`)."""
    series_dir = run_dir / SERIES_DIR
    folder = save_model_dir(model, tokenizer, step_folder(series_dir, step))
    record_step(series_dir, step)
    return folder
