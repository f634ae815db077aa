"""Model directories: ``model.safetensors`` + ``config.json`` + ``tokenizer.model`` (+ ``MODEL_CARD.md``); an
imported language model's has ``weight_source.json`` instead of weights (see `viz_model.modeldir.weight_source`).

Weights are only ever read with safetensors (no pickle: a downloaded ``torch.load`` file can run code).
Loading validates every file and fails with a `CheckpointError` naming the file and the mismatch: files may not
lead outside their directory, the config is checked against the weights' header on the meta device before any
memory is allocated, and the SHA-256 digests written at saving (weights, tokenizer, config) must still match.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save

from ..config import MAX_CONFIG_BYTES, ConfigError, ModelConfig
from ..nn.causal_lm import CausalLM
from ..nn.encoder_lm import MaskedLM
from ..nn.model import Transformer
from ..tokenization.imported import PRETRAINED_TOKENIZERS, PretrainedTokenizer, pretrained_tokenizer_class
from ..tokenization.tokenizer import Tokenizer, TokenizerError
from .weight_source import MAX_SOURCE_BYTES, WEIGHT_SOURCE, WeightSource, WeightSourceError, read_weight_source

WEIGHTS, CONFIG, TOKENIZER, CARD, TRAINING_LOG = (
    "model.safetensors", "config.json", "tokenizer.model", "MODEL_CARD.md", "training_log.jsonl")
MAX_WEIGHTS_BYTES = 2 * 1024**3
MAX_MODEL_BYTES = 2 * MAX_WEIGHTS_BYTES  # fp32 parameters + buffers: room for the largest fp16 file, loaded
MAX_FILE_BYTES = {WEIGHTS: MAX_WEIGHTS_BYTES, CONFIG: MAX_CONFIG_BYTES, TOKENIZER: 64 * 1024**2, CARD: 1024**2,
                  TRAINING_LOG: 64 * 1024**2,
                  **{name: 64 * 1024**2 for cls in PRETRAINED_TOKENIZERS for name in cls.FILES}}
FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")
SAFETENSORS_DTYPES = {"F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32, "F64": torch.float64}
WEIGHTS_DIGEST, TOKENIZER_DIGEST, CONFIG_DIGEST = "weights_sha256", "tokenizer_sha256", "config_sha256"
# The markers that name each measured figure's file for the figure check (benchmarks/docs_figures.py): not for readers
FIGURE_MARKER = re.compile(r"<!-- (?:fig [^\n]+?|machine \S+|/machine) -->")


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


def saved_shapes(model: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor `save_weights` writes (a tied matrix once); works on the meta device too."""
    seen: set[int] = set()
    shapes = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        if id(tensor) not in seen:
            seen.add(id(tensor))
            shapes[name] = tuple(tensor.shape)
    return shapes


def planned_model(config: ModelConfig) -> tuple[dict[str, tuple[int, ...]], int]:
    """(saved tensor shapes, bytes of all parameters and buffers) of `config`'s model, built on the meta device:
    nothing is allocated, so a config.json asking for a huge model is refused before it can exhaust memory."""
    with torch.device("meta"):
        model = network_class(config)(config)
    needed = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    return saved_shapes(model), needed


def network_class(config: ModelConfig) -> type[Transformer] | type[CausalLM] | type[MaskedLM]:
    """The network a config describes: the encoder-decoder `Transformer`, a decoder-only `CausalLM` or an
    encoder-only `MaskedLM`."""
    return {"decoder": CausalLM, "encoder": MaskedLM}.get(config.kind, Transformer)


def _digest_update(digest: Any, name: str, tensor: torch.Tensor) -> None:
    digest.update(f"{name}\0{tensor.dtype}\0{tuple(tensor.shape)}\0".encode())
    digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())


def tensors_digest(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 over every tensor's name, dtype, shape and bytes (in name order): any changed bit changes it."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        _digest_update(digest, name, tensors[name])
    return digest.hexdigest()


def config_digest(config: ModelConfig) -> str:
    """SHA-256 of the config's values (canonical JSON), so an edited or damaged config.json is noticed."""
    return hashlib.sha256(json.dumps(config.to_dict(), sort_keys=True).encode()).hexdigest()


def save_weights(model: Transformer, path: str | Path, dtype: torch.dtype | None = None,
                 metadata: dict[str, str] | None = None) -> None:
    """Write the weights as safetensors, atomically, with the SHA-256 digest `load_weights` verifies."""
    tensors = state_dict_for_saving(model, dtype)
    header = {"format": "pt", WEIGHTS_DIGEST: tensors_digest(tensors), **(metadata or {})}
    atomic_write_bytes(Path(path), canonical_header(save(tensors, metadata=header)))


def canonical_header(data: bytes) -> bytes:
    """The same safetensors file with its JSON header's keys sorted: safetensors writes the metadata map in a
    per-process random order, so the same weights would give other bytes on every save. The tensor offsets are
    relative to the data section, so only the header (padded with spaces to 8 bytes, as safetensors does) changes."""
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data[8 + size:]


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[None]:
    """Turn any low-level failure while reading the safetensors file `path` into a `CheckpointError` naming it."""
    try:
        yield
    except CheckpointError:
        raise
    except (SafetensorError, OSError, ValueError, RuntimeError) as err:
        raise CheckpointError(f"{path}: not a valid safetensors file (truncated or corrupt?): {err}") from None


def check_header(path: Path, f: Any, expected: dict[str, tuple[int, ...]]) -> None:
    """Check the names, shapes and dtypes of an open safetensors file against `expected` (header only)."""
    names = set(f.keys())
    missing, unexpected = sorted(set(expected) - names), sorted(names - set(expected))
    if missing or unexpected:
        raise CheckpointError(f"{path}: weights do not match the config: missing {missing[:5]}, "
                              f"unexpected {unexpected[:5]}")
    for name in sorted(names):
        info = f.get_slice(name)
        shape, dtype = tuple(info.get_shape()), info.get_dtype()
        if shape != expected[name]:
            raise CheckpointError(f"{path}: {name} has shape {shape}, the config expects {expected[name]}")
        if dtype not in FLOAT_DTYPES:
            raise CheckpointError(f"{path}: {name} has dtype {dtype}, expected a floating type")


def load_weights(model: Transformer, path: str | Path) -> None:
    """Load a safetensors file into `model`, checking names, shapes, values and the recorded digest; names the
    file on any problem. Every check passes before the first parameter changes: a bad file leaves `model` as it was.

    The file is read with plain reads, a block at a time to check it, then straight into each parameter's memory
    (block by block where the stored dtype differs): loading needs no second copy of the model, and no page of the
    file is mapped into the process (a memory map made the file count a second time in the peak memory).
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: weights file not found")
    if path.stat().st_size > MAX_WEIGHTS_BYTES:
        raise CheckpointError(f"{path}: weights file is larger than {MAX_WEIGHTS_BYTES} bytes")
    targets = dict(model.named_parameters(remove_duplicate=False))
    targets.update(dict(model.named_buffers()))
    with _reading(path):
        with safe_open(str(path), framework="pt") as f:  # the header: names, shapes, dtypes, metadata
            check_header(path, f, saved_shapes(model))
            names, recorded = sorted(f.keys()), (f.metadata() or {}).get(WEIGHTS_DIGEST)
        spans = tensor_spans(path)
        with path.open("rb") as raw:
            digest = hashlib.sha256()
            for name in names:
                dtype, shape, start, end = spans[name]
                digest.update(f"{name}\0{dtype}\0{shape}\0".encode())
                for block in read_blocks(raw, start, end, dtype.itemsize):
                    digest.update(block)
                    if not bool(torch.isfinite(torch.frombuffer(block, dtype=dtype)).all()):
                        raise CheckpointError(f"{path}: {name} contains NaN or infinite values")
            if recorded is not None and recorded != digest.hexdigest():
                raise CheckpointError(f"{path}: the weights differ from the SHA-256 digest recorded when they were "
                                      "saved (flipped bits or an edited file)")
            with torch.no_grad():
                for name in names:
                    dtype, _, start, end = spans[name]
                    read_into(raw, start, end, dtype, targets[name])


READ_BLOCK = 1 << 20  # bytes read at a time while checking (and converting) weights: 1 MB, one reused buffer (large
# blocks raise glibc's mmap threshold, and the freed blocks then stay in the process: +57 MB resident at 16 MB)


def tensor_spans(path: Path) -> dict[str, tuple[torch.dtype, tuple[int, ...], int, int]]:
    """Name -> (dtype, shape, first byte, end byte) of each tensor of a safetensors file (its header checked)."""
    with path.open("rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
    file_size, spans = path.stat().st_size, {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = SAFETENSORS_DTYPES[info["dtype"]]
        shape, (begin, end) = tuple(info["shape"]), info["data_offsets"]
        count = 1
        for n in shape:
            count *= n
        if end - begin != count * dtype.itemsize or 8 + size + end > file_size:
            raise CheckpointError(f"{path}: {name}'s bytes do not match its shape (a damaged file?)")
        spans[name] = (dtype, shape, 8 + size + begin, 8 + size + end)
    return spans


def read_blocks(raw: Any, start: int, end: int, itemsize: int) -> Iterator[memoryview]:
    """The bytes ``start:end`` of the open file `raw`, in blocks of whole elements: views of one buffer, each valid
    until the next is read."""
    raw.seek(start)
    buffer = memoryview(bytearray(min(READ_BLOCK - READ_BLOCK % itemsize, end - start)))
    while start < end:
        chunk = buffer[:min(len(buffer), end - start)]
        if raw.readinto(chunk) != len(chunk):
            raise CheckpointError(f"{raw.name}: ends before its tensors do (truncated?)")
        start += len(chunk)
        yield chunk


def read_into(raw: Any, start: int, end: int, dtype: torch.dtype, target: torch.Tensor) -> None:
    """Bytes ``start:end`` of `raw` (elements of `dtype`) into `target`: straight into its memory when the dtypes
    match, else converted a block at a time."""
    if dtype == target.dtype != torch.bfloat16 and target.is_contiguous() and target.device.type == "cpu":
        raw.seek(start)
        if raw.readinto(memoryview(target.detach().numpy()).cast("B")) != end - start:
            raise CheckpointError(f"{raw.name}: ends before its tensors do (truncated?)")
        return
    flat, done = target.view(-1), 0
    for block in read_blocks(raw, start, end, dtype.itemsize):
        values = torch.frombuffer(block, dtype=dtype)
        flat[done:done + values.numel()].copy_(values)
        done += values.numel()


def tokenizer_digest(files: dict[str, bytes]) -> str:
    """SHA-256 of a tokenizer's files: of the file itself when it is one (``tokenizer.model``), else of each
    file's name and digest in name order (Marian's three)."""
    if len(files) == 1:
        return hashlib.sha256(next(iter(files.values()))).hexdigest()
    return hashlib.sha256("".join(f"{name}:{hashlib.sha256(data).hexdigest()}\n"
                                  for name, data in sorted(files.items())).encode()).hexdigest()


def save_model_dir(model: Transformer, tokenizer: Tokenizer | PretrainedTokenizer, directory: str | Path,
                   card: str | None = None, dtype: torch.dtype | None = None) -> Path:
    """Write a complete model directory (weights, config, tokenizer files, optional model card)."""
    directory = Path(directory)
    save_weights(model, directory / WEIGHTS, dtype, saved_digests(model.config, tokenizer))
    return save_model_files(model.config, tokenizer, directory, card)


def saved_digests(config: ModelConfig, tokenizer: Tokenizer | PretrainedTokenizer) -> dict[str, str]:
    """The config's and tokenizer's digests a directory's weights (or weight source) record."""
    return {TOKENIZER_DIGEST: tokenizer_digest(tokenizer.files()), CONFIG_DIGEST: config_digest(config)}


def save_model_files(config: ModelConfig, tokenizer: Tokenizer | PretrainedTokenizer, directory: Path,
                     card: str | None = None) -> Path:
    """Write a model directory's config, tokenizer files and optional card (all but the weights)."""
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(directory / CONFIG, (json.dumps(config.to_dict(), indent=2) + "\n").encode())
    for name, data in tokenizer.files().items():
        atomic_write_bytes(directory / name, data)
    if card is not None:
        atomic_write_bytes(directory / CARD, card.encode("utf-8"))
    return directory


def model_file(directory: Path, name: str, limit: int | None = None) -> Path:
    """``directory / name``, checked: a regular file, inside `directory` (no link out of it), of a plausible size
    (`limit` bytes, default the `MAX_FILE_BYTES` entry of `name`)."""
    path = directory / name
    if not path.is_file():
        raise CheckpointError(f"{path}: missing file (a model directory holds {WEIGHTS}, {CONFIG} and {TOKENIZER})")
    try:
        inside = path.resolve(strict=True).is_relative_to(directory.resolve(strict=True))
        size = path.stat().st_size
    except (OSError, RuntimeError) as err:  # e.g. a symlink loop
        raise CheckpointError(f"{path}: cannot be read ({err})") from None
    if not inside:
        raise CheckpointError(f"{path}: a link to a file outside the model directory; only files inside it are read")
    limit = MAX_FILE_BYTES.get(name) if limit is None else limit
    if limit is not None and size > limit:
        raise CheckpointError(f"{path}: {size:,} bytes, more than the {limit:,} a {name} may have "
                              "(a damaged or foreign file?)")
    return path


def optional_json(directory: str | Path, name: str, limit: int, error: type[Exception]) -> object | None:
    """The parsed JSON file `name` of a model directory, None when there is none; a file that fails the checks of
    `model_file` or is no JSON raises `error` naming it (each optional metadata file has its own error type)."""
    path = Path(directory) / name
    if not path.is_file():
        return None
    try:
        model_file(Path(directory), name, limit)  # inside the directory, bounded size
    except CheckpointError as err:
        raise error(str(err)) from None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise error(f"{path}: cannot be read as JSON ({err})") from None


def is_decoder_only(directory: str | Path) -> bool:
    """Whether a model directory holds a decoder-only language model (its config.json's kind); False where the
    config cannot be read (the full load then names the fault)."""
    return model_kind(directory) == "decoder"


def model_kind(directory: str | Path) -> str | None:
    """The kind of network a model directory holds (its config.json's ``kind``: seq2seq, decoder, encoder); None
    where the config cannot be read (the full load then names the fault)."""
    try:
        return ModelConfig.load(Path(directory) / CONFIG).kind
    except ConfigError:
        return None


def read_card(directory: Path) -> str:
    """The model card's text ("" when there is none), read under the same checks as every model file, without the
    figure check's markers."""
    if not (directory / CARD).is_file():
        return ""
    return FIGURE_MARKER.sub("", model_file(directory, CARD).read_text(encoding="utf-8", errors="replace"))


def load_tokenizer(directory: Path) -> tuple[Tokenizer | PretrainedTokenizer, dict[str, Path]]:
    """The directory's tokenizer (an imported model's files when they are there, else ``tokenizer.model``),
    with its files, each read under `model_file`'s checks."""
    pretrained = pretrained_tokenizer_class(directory)
    paths = {name: model_file(directory, name) for name in (pretrained.FILES if pretrained else (TOKENIZER,))}
    try:
        return (pretrained.load(directory) if pretrained else Tokenizer.load(paths[TOKENIZER])), paths
    except TokenizerError as err:
        raise CheckpointError(str(err)) from None


def check_model_dir(directory: str | Path) -> tuple[ModelConfig, Tokenizer | PretrainedTokenizer]:
    """Everything about a model directory that can be checked without reading its weights: the config against the
    weights' header (and the size limit), the tokenizer, the recorded digests; every problem is a
    `CheckpointError` naming the file, so a damaged or mixed directory fails before any allocation."""
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: model directory not found")
    config_path = model_file(directory, CONFIG)
    source = weight_source(directory)
    weights = directory / WEIGHT_SOURCE if source is not None else model_file(directory, WEIGHTS)
    try:
        config = ModelConfig.load(config_path)
    except ConfigError as err:
        raise CheckpointError(str(err)) from None
    expected, needed = planned_model(config)
    if source is None and needed > MAX_MODEL_BYTES:  # weights read where they are are mapped, not loaded
        raise CheckpointError(f"{config_path}: this config describes a model of {needed / 1024**3:.1f} GiB, above the "
                              f"{MAX_MODEL_BYTES / 1024**3:.0f} GiB limit (a damaged or foreign config?)")
    tokenizer, tokenizer_files = load_tokenizer(directory)
    tokenizer_path = next(iter(tokenizer_files.values())) if len(tokenizer_files) == 1 else directory / "vocab.json"
    if tokenizer.vocab_size != config.vocab_size:
        raise CheckpointError(f"{tokenizer_path}: vocabulary of {tokenizer.vocab_size} pieces, but "
                              f"{CONFIG} says vocab_size {config.vocab_size}: tokenizer from another model?")
    if source is None:
        with _reading(weights), safe_open(str(weights), framework="pt") as f:
            check_header(weights, f, expected)
            metadata = f.metadata() or {}
    else:  # the names are the source's: the import's mapping checks them as it places them
        metadata = source.digests
    recorded = metadata.get(CONFIG_DIGEST)
    if recorded is not None and recorded != config_digest(config):
        raise CheckpointError(f"{config_path}: differs from the config {weights.name} was saved with (an edited or "
                              "damaged file?)")
    recorded = metadata.get(TOKENIZER_DIGEST)
    if recorded is not None and recorded != tokenizer_digest({n: p.read_bytes() for n, p in tokenizer_files.items()}):
        raise CheckpointError(f"{tokenizer_path}: not the tokenizer {weights.name} was saved with (SHA-256 differs): "
                              "a tokenizer from another model, or a damaged file?")
    return config, tokenizer


def has_weight_source(directory: Path) -> bool:
    """Whether a model directory reads its weights where they are (``weight_source.json``, no weights file)."""
    return (directory / WEIGHT_SOURCE).is_file() and not (directory / WEIGHTS).exists()


def weight_source(directory: Path) -> WeightSource | None:
    """The checked `WeightSource` of a directory whose weights are read where they are (None where it holds its own
    weights file); a missing, changed or malformed source is a `CheckpointError` in one line."""
    if not has_weight_source(directory):
        return None
    model_file(directory, WEIGHT_SOURCE, MAX_SOURCE_BYTES)  # inside the directory, bounded size
    try:
        return read_weight_source(directory)
    except WeightSourceError as err:
        raise CheckpointError(str(err)) from None


def load_model_dir(directory: str | Path) -> tuple[Transformer, Tokenizer | PretrainedTokenizer, ModelConfig]:
    """Load and validate a model directory (`check_model_dir`, then the weights); every problem is a
    `CheckpointError` naming the file. A decoder-only directory's network is a `CausalLM`; one whose weights are
    read where they are is loaded by `viz_model.hf.mapped_load` (it knows the source's names)."""
    config, tokenizer = check_model_dir(directory)  # first: a config it cannot run (a RoPE scaling) says so
    if weight_source(Path(directory)) is not None:
        raise CheckpointError(f"{directory}: its weights are read from the folder it was imported from; load it "
                              "with viz_model.load")
    model = network_class(config).for_loading(config)
    load_weights(model, Path(directory) / WEIGHTS)
    model.eval()
    return model, tokenizer, config
