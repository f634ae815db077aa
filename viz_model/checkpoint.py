"""Model directories: ``model.safetensors`` + ``config.json`` + ``tokenizer.model`` (+ ``MODEL_CARD.md``).

Weights are only ever read with safetensors (no pickle: a downloaded ``torch.load`` file can run code).
Loading validates every file and fails with a `CheckpointError` naming the file and the mismatch.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from .config import ConfigError, ModelConfig
from .model import Transformer
from .tokenizer import Tokenizer, TokenizerError

WEIGHTS, CONFIG, TOKENIZER, CARD, TRAINING_LOG = (
    "model.safetensors", "config.json", "tokenizer.model", "MODEL_CARD.md", "training_log.jsonl")
MAX_WEIGHTS_BYTES = 2 * 1024**3
FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")


class CheckpointError(ValueError):
    """A model directory or weights file is missing, malformed or inconsistent."""


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file beside `path`, then rename: a crash never leaves a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; model files are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def state_dict_for_saving(model: Transformer, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """Parameters by name, tied matrices stored once (safetensors refuses shared storage)."""
    seen: dict[int, str] = {}
    result = {}
    for name, tensor in model.state_dict().items():
        key = tensor.data_ptr()
        if key in seen:
            continue
        seen[key] = name
        t = tensor.detach().cpu()
        result[name] = (t.to(dtype) if dtype is not None and t.is_floating_point() else t).contiguous()
    return result


def save_weights(model: Transformer, path: str | Path, dtype: torch.dtype | None = None) -> None:
    path = Path(path)
    with tempfile.TemporaryDirectory(dir=path.parent if path.parent.exists() else None) as tmp:
        tmp_file = Path(tmp) / "w.safetensors"
        save_file(state_dict_for_saving(model, dtype), str(tmp_file), metadata={"format": "pt"})
        atomic_write_bytes(path, tmp_file.read_bytes())


def load_weights(model: Transformer, path: str | Path) -> None:
    """Load a safetensors file into `model`, checking names, shapes and values; names the file on any problem.

    Tensors are read one at a time straight into the parameters, so loading needs no second copy of the model.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: weights file not found")
    if path.stat().st_size > MAX_WEIGHTS_BYTES:
        raise CheckpointError(f"{path}: weights file is larger than {MAX_WEIGHTS_BYTES} bytes")
    expected = {name: tuple(t.shape) for name, t in state_dict_for_saving(model).items()}
    targets = dict(model.named_parameters(remove_duplicate=False))
    targets.update(dict(model.named_buffers()))
    try:
        with safe_open(str(path), framework="pt") as f:
            names = set(f.keys())
            missing, unexpected = sorted(set(expected) - names), sorted(names - set(expected))
            if missing or unexpected:
                raise CheckpointError(f"{path}: weights do not match the config: missing {missing[:5]}, "
                                      f"unexpected {unexpected[:5]}")
            for name in sorted(names):  # check every header before touching the model
                info = f.get_slice(name)
                shape, dtype = tuple(info.get_shape()), info.get_dtype()
                if shape != expected[name]:
                    raise CheckpointError(f"{path}: {name} has shape {shape}, the config expects {expected[name]}")
                if dtype not in FLOAT_DTYPES:
                    raise CheckpointError(f"{path}: {name} has dtype {dtype}, expected a floating type")
            with torch.no_grad():
                for name in sorted(names):
                    tensor = f.get_tensor(name)
                    if not torch.isfinite(tensor).all():
                        raise CheckpointError(f"{path}: {name} contains NaN or infinite values")
                    targets[name].copy_(tensor.to(targets[name].dtype))
    except (SafetensorError, OSError, ValueError, RuntimeError) as err:
        if isinstance(err, CheckpointError):
            raise
        raise CheckpointError(f"{path}: not a valid safetensors file (truncated or corrupt?): {err}") from None


def save_model_dir(model: Transformer, tokenizer: Tokenizer, directory: str | Path, card: str | None = None,
                   dtype: torch.dtype | None = None) -> Path:
    """Write a complete model directory (weights, config, tokenizer, optional model card)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    save_weights(model, directory / WEIGHTS, dtype)
    atomic_write_bytes(directory / CONFIG, (json.dumps(model.config.to_dict(), indent=2) + "\n").encode())
    atomic_write_bytes(directory / TOKENIZER, tokenizer.serialized())
    if card is not None:
        atomic_write_bytes(directory / CARD, card.encode("utf-8"))
    return directory


def load_model_dir(directory: str | Path) -> tuple[Transformer, Tokenizer, ModelConfig]:
    """Load and validate a model directory; every problem is a `CheckpointError` naming the file."""
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: model directory not found")
    for name in (CONFIG, WEIGHTS, TOKENIZER):
        if not (directory / name).is_file():
            raise CheckpointError(f"{directory / name}: missing file (a model directory holds "
                                  f"{WEIGHTS}, {CONFIG} and {TOKENIZER})")
    try:
        config = ModelConfig.load(directory / CONFIG)
    except ConfigError as err:
        raise CheckpointError(str(err)) from None
    try:
        tokenizer = Tokenizer.load(directory / TOKENIZER)
    except TokenizerError as err:
        raise CheckpointError(str(err)) from None
    if tokenizer.vocab_size != config.vocab_size:
        raise CheckpointError(f"{directory / TOKENIZER}: vocabulary of {tokenizer.vocab_size} pieces, but "
                              f"{CONFIG} says vocab_size {config.vocab_size}: tokenizer from another model?")
    model = Transformer(config)
    load_weights(model, directory / WEIGHTS)
    model.eval()
    return model, tokenizer, config
