"""What every family's import shares: the error, reading a folder's JSON, `Family`, the registry's entry, and
writing a folder whole (`write_staged`, the export's too)."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import ConfigError, ModelConfig
from ..modeldir.checkpoint import CheckpointError
from ..modeldir.languages import LanguagePair
from ..tokenization.imported import PretrainedTokenizer
from .arguments import argument

MAX_HF_CONFIG_BYTES = 1024**2
MAX_TOKENIZER_JSON_BYTES = 64 * 1024**2  # NLLB's: 17 MB


class HFImportError(ValueError):
    """The folder cannot be imported; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Family:
    """One architecture `viz-model import` reads: how its folder becomes this project's tokenizer, config and weights.

    :ivar label: its name in messages ("Marian / opus-mt")
    :ivar tokenizer: the folder's tokenizer, for the language pair asked for (folder, config.json, source, target)
    :ivar model_config: our `ModelConfig` of its config.json (config, its path, the unknown piece's id, the forced
        first output or None)
    :ivar map_weights: our state dict from its tensors, every tensor used once (tensors, config, the weights' path)
    :ivar conversion_lines: how the checkpoint maps onto the instrumented model, for the model card
    :ivar languages: the language pair it translates (hub id or folder given, folder, tokenizer), None if unknown
    :ivar tokenizer_file: the file whose ids a vocabulary mismatch names
    :ivar tested: what the model card says the tests compare
    :ivar forced_bos_from_generation: the generation config's forced_bos_token_id becomes the config's forced first
        output (so this project's rule forces it too)
    :ivar from_weights: what the checkpoint's tensors decide of the config (T5: whether the head has its own
        matrix), else None
    :ivar decoder_only: a decoder-only language model (GPT-2, Llama), imported by `viz_model.hf.lm_import`
    :ivar encoder_only: an encoder-only masked language model (BERT), imported by `viz_model.hf.encoder_only`
    """

    label: str
    tokenizer: Callable[[Path, dict[str, Any], str | None, str | None], PretrainedTokenizer]
    model_config: Callable[[dict[str, Any], Path, int, int | None], ModelConfig]
    map_weights: Callable[[dict[str, Tensor], ModelConfig, Path], dict[str, Tensor]]
    conversion_lines: Callable[[ModelConfig], list[str]]
    languages: Callable[[str, Path, PretrainedTokenizer], LanguagePair | None]
    tokenizer_file: str
    tested: str
    forced_bos_from_generation: bool = False
    from_weights: Callable[[ModelConfig, dict[str, Tensor]], ModelConfig] | None = None
    decoder_only: bool = False
    encoder_only: bool = False


def write_staged(out: Path, write: Callable[[Path], None], error: type[ValueError] = HFImportError) -> Path:
    """`write` a folder (a model directory, an exported one) into a folder beside `out`, make it as readable as the
    umask allows, then rename it to `out`: a failure leaves nothing behind (`error` naming `out` in one line where the
    disk refuses)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        write(staging)
        umask = os.umask(0)
        os.umask(umask)
        for path in (staging, *staging.iterdir()):  # mkdtemp and safetensors make them private (0700 / 0600)
            path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)
        staging.rename(out)
    except (OSError, CheckpointError) as err:
        shutil.rmtree(staging, ignore_errors=True)
        raise error(f"{out}: could not be written ({err})") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def read_json_file(path: Path, limit: int, what: str) -> Any:
    """`path` parsed as JSON; one line naming it when it is larger than `limit` bytes (then it is `what`) or not
    JSON. A missing file raises OSError."""
    if path.stat().st_size > limit:
        raise HFImportError(f"{path}: larger than {limit:,} bytes; {what}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:  # UnicodeDecodeError included
        raise HFImportError(f"{path}: not valid JSON ({err})") from None


def need(hf: dict[str, Any], key: str, path: Path) -> Any:
    """``hf[key]``; one line naming the file when the key is missing."""
    if key not in hf:
        raise HFImportError(f"{path}: no {key!r}")
    return hf[key]


def checked_config(path: Path, **values: Any) -> ModelConfig:
    """`ModelConfig(**values)`; a value it refuses is one line naming the file."""
    try:
        return ModelConfig(**values)
    except ConfigError as err:
        raise HFImportError(f"{path}: {err}") from None


def tokenizer_settings(folder: Path) -> dict[str, Any]:
    """The folder's tokenizer_config.json ({} when it has none, or one too large to be a tokenizer's settings)."""
    path = folder / "tokenizer_config.json"
    if path.is_file() and path.stat().st_size < MAX_HF_CONFIG_BYTES:
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            return loaded if isinstance(loaded, dict) else {}
        except ValueError as err:
            raise HFImportError(f"{path}: not valid JSON ({err})") from None
    return {}


def language_pair(codes: dict[str, int], source: str | None, target: str | None, settings: dict[str, Any],
                  settings_path: Path) -> dict[str, str]:
    """{"source": code, "target": code} of a many-to-many model: the languages given, else its tokenizer settings'
    (src_lang / tgt_lang), each one of `codes`."""
    pair = {"source": source or settings.get("src_lang"), "target": target or settings.get("tgt_lang")}
    for side, code in pair.items():
        if not code:
            raise HFImportError(f"{settings_path}: names no {side} language; give {argument(side + '_lang')} (one of "
                                f"{', '.join(codes)})")
        if code not in codes:
            raise HFImportError(f"{argument(side + '_lang', code)} is not one of the model's languages "
                                f"({', '.join(codes)})")
    return pair


def added_codes(data: Any, pattern: re.Pattern[str]) -> dict[str, int]:
    """The ids of tokenizer.json's added tokens that are language codes (`pattern`), by code."""
    added = data.get("added_tokens") if isinstance(data, dict) else None
    if not isinstance(added, list):
        return {}
    return {t["content"]: t["id"] for t in added if isinstance(t, dict) and isinstance(t.get("content"), str)
            and pattern.fullmatch(t["content"]) and isinstance(t.get("id"), int)}
