"""Import a Hugging Face translation checkpoint into this project's instrumented model, exactly.

Each architecture is a `Family` in its own module (`marian`, `m2m100`, `t5` (T5 and mT5), `bart`); `FAMILIES` is the
registry this module dispatches on by config.json's ``model_type``. What is shared lives here: finding the folder,
reading its config and weights, the model card, and writing the model directory.
Nothing from the folder is executed: ``config.json`` is read as JSON, weights with safetensors (or
``torch.load(weights_only=True)`` for ``pytorch_model.bin``). The output directory is written beside its final
place and renamed into it: a failure leaves nothing behind.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import torch

from ..config import ModelConfig
from ..modeldir.checkpoint import MAX_WEIGHTS_BYTES, planned_model, save_model_dir
from ..modeldir.languages import LANGUAGES
from ..nn.model import Transformer
from ..search.settings import GENERATION, GenerationError, HFGeneration, ModelGeneration, read_hf_generation
from ..tokenization.imported import decoder_start
from . import (
    albert,
    bart,
    bert,
    bloom,
    deberta_v2,
    distilbert,
    electra,
    gemma,
    gemma2,
    gemma3,
    gpt2,
    gpt_neo,
    gpt_neox,
    gpt_oss,
    llama,
    m2m100,
    marian,
    mistral,
    mixtral,
    modernbert,
    olmo2,
    opt,
    phi,
    phi3,
    qwen2,
    qwen3,
    roberta,
    t5,
)
from .arguments import argument
from .common import MAX_HF_CONFIG_BYTES, Family, HFImportError, checked_config, read_json_file, write_staged
from .encoder_only import import_encoder
from .lm_import import import_language_model

FAMILIES: dict[str, Family] = {"marian": marian.FAMILY, "m2m_100": m2m100.FAMILY, "t5": t5.FAMILY, "mt5": t5.MT5,
                               "bart": bart.BART, "mbart": bart.MBART, "gpt2": gpt2.FAMILY, "llama": llama.FAMILY,
                               "mistral": mistral.FAMILY, "qwen2": qwen2.FAMILY, "qwen3": qwen3.FAMILY,
                               "gemma": gemma.FAMILY, "gemma2": gemma2.FAMILY,
                               "gemma3_text": gemma3.FAMILY, "bloom": bloom.FAMILY, "bert": bert.FAMILY,
                               "roberta": roberta.ROBERTA, "xlm-roberta": roberta.XLM_ROBERTA,
                               "distilbert": distilbert.FAMILY, "electra": electra.FAMILY, "albert": albert.FAMILY,
                               "modernbert": modernbert.FAMILY, "deberta-v2": deberta_v2.FAMILY}
# the research families' language models (issue 60)
FAMILIES.update({"gpt_neox": gpt_neox.FAMILY, "gpt_neo": gpt_neo.FAMILY, "opt": opt.FAMILY,
                 "phi": phi.FAMILY, "olmo2": olmo2.FAMILY,
                 "mixtral": mixtral.FAMILY, "gpt_oss": gpt_oss.FAMILY, "phi3": phi3.FAMILY})
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
IMPORT_DTYPES = {"fp32": torch.float32, "fp16": torch.float16}
HUB_FILES = ("*.json", "*.spm", "*.model", "merges.txt", "*.md")
"""What the import reads from a hub repository besides the weights: configs, tokenizers (a byte-level BPE's merges
too), the card; the weights are its safetensors, else its ``*.bin`` (never both: many repositories publish both)."""
__all__ = ["FAMILIES", "HFImportError", "check_dtype", "import_model", "model_config"]


def resolve_source(source: str, revision: str | None = None) -> Path:
    """A local folder as it is; a hub id (``owner/name``) through ``huggingface_hub`` when it is installed and the
    hub answers, else an error that says how to fetch the folder elsewhere. `revision` (a branch, tag or commit of
    the hub repository, such as Pythia's ``step1000``) is fetched in place of its main branch; a folder has none."""
    path = Path(source)
    if path.is_dir():
        if revision is not None:
            raise HFImportError(f"{argument('revision', revision)}: {source} is a folder here; a revision names a "
                                "version of a hub repository (owner/name)")
        return path
    if not HUB_ID.fullmatch(source):
        raise HFImportError(f"{source}: no such folder (give a Hugging Face model folder or a hub id owner/name)")
    fetch = (f"download it where the hub can be reached (`hf download {source} --local-dir DIR`, or "
             f"git clone https://huggingface.co/{source}) and pass that folder instead")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise HFImportError(f"{source}: not a folder here, and huggingface_hub is not installed "
                            f'(pip install "viz-model[hf]"), or {fetch}') from None
    try:
        folder = Path(snapshot_download(source, revision=revision, allow_patterns=[*HUB_FILES, "*.safetensors"]))
        if not any(folder.glob("*.safetensors")):  # published as pytorch_model.bin only: fetched where no other
            folder = Path(snapshot_download(source, revision=revision, allow_patterns=[*HUB_FILES, "*.bin"]))
        return folder
    except Exception as err:  # offline, unknown repository or revision, gated model: one line either way
        if type(err).__name__ == "RevisionNotFoundError":
            raise HFImportError(f"{source}: the hub has no revision {revision!r} of it (a branch, tag or commit, "
                                "such as Pythia's step1000)") from None
        raise HFImportError(f"{source}: the hub could not be reached or has no such model "
                           f"({type(err).__name__}); {fetch}") from None


def read_hf_config(folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    if not path.is_file():
        raise HFImportError(f"{path}: missing (a Hugging Face model folder has config.json)")
    data = read_json_file(path, MAX_HF_CONFIG_BYTES, "not a model config")
    if not isinstance(data, dict):
        raise HFImportError(f"{path}: expected a JSON object")
    kind = data.get("model_type")
    if kind not in FAMILIES:
        raise HFImportError(f"{path}: model_type {kind!r} is not an architecture this project can import "
                            f"({', '.join(f'{k}: {f.label}' for k, f in FAMILIES.items())})")
    return data


def model_config(hf: dict[str, Any], path: Path, unk_id: int, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` for the config.json `hf` (of a `model_type` of `FAMILIES`), refusing what the instrumented
    model does not implement."""
    return FAMILIES[hf["model_type"]].model_config(hf, path, unk_id, forced_first_id)


def read_weights(folder: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """The checkpoint's tensors: ``model.safetensors``, else ``pytorch_model.bin`` read with weights_only."""
    safetensors_path, bin_path = folder / "model.safetensors", folder / "pytorch_model.bin"
    try:
        if safetensors_path.is_file():
            from safetensors.torch import load_file

            return load_file(str(safetensors_path)), safetensors_path
        if bin_path.is_file():
            state = torch.load(bin_path, map_location="cpu", weights_only=True)
            if not isinstance(state, dict):
                raise HFImportError(f"{bin_path}: not a state dict")
            return state, bin_path
    except HFImportError:
        raise
    except Exception as err:  # truncated or foreign files raise many types
        name = safetensors_path if safetensors_path.is_file() else bin_path
        raise HFImportError(f"{name}: cannot be read ({type(err).__name__}: {err})") from None
    raise HFImportError(f"{folder}: no model.safetensors or pytorch_model.bin")


def model_card(source: str, folder: Path, hf: dict[str, Any], cfg: ModelConfig, weights: Path,
               generation: HFGeneration, dtype: str = "fp32") -> str:
    """What was imported from where, under which licence, and what was checked."""
    family = FAMILIES[hf["model_type"]]
    licence = "not stated in the folder"
    readme = folder / "README.md"
    if readme.is_file():
        found = re.search(r"^license:\s*(\S+)", readme.read_text(encoding="utf-8", errors="replace")[:4000], re.M)
        if found:
            licence = found.group(1)
    return "\n".join([
        f"# {source} (imported)", "",
        f"Imported from the Hugging Face model `{source}` ({hf.get('model_type')}, {weights.name}) by "
        "`viz-model import`. Licence: " + licence + ". Its own model card, training data and scores are the "
        "source model's: see its page on the Hugging Face hub.", "",
        "## Conversion", "",
        f"- {cfg.encoder_layers} + {cfg.decoder_layers} layers, d_model {cfg.d_model}, {cfg.heads} heads, "
        f"d_ff {cfg.d_ff}, vocabulary {cfg.vocab_size:,}, {cfg.max_positions} positions.",
        *family.conversion_lines(cfg),
        *([f"- The last token a length limit allows is forced to be </s> (id {cfg.eos_id}), as the source's "
           "forced_eos_token_id makes Hugging Face's generate do."] if cfg.eos_at_limit else []),
        *(["- Weights stored in fp16 (`--dtype fp16`), loaded into fp32: close to the source model's outputs, "
           "not equal to them."] if dtype == "fp16" else []), "",
        "## Decoding", "",
        *generation_lines(generation), "",
        "## Checked at import", "",
        "- every tensor of the checkpoint has exactly one place in the instrumented model, with the shape its "
        "config implies" + ("; the checkpoint's position tables equal the recomputed sinusoids;"
                            if cfg.positional == "sinusoidal" else " (but what the conversion above leaves out);"),
        "- the tokenizer's vocabulary size equals the embeddings'.",
        "- Exactness against Hugging Face (logits, every attention map, greedy output, tokenizer ids) is tested in "
        f"`tests/library/test_hf_import*.py` on {family.tested}.", ""])


def generation_lines(generation: HFGeneration) -> list[str]:
    """How the imported model searches, for its card."""
    lines = [
        f"- Translations are searched as transformers' `generate` searches them, with the settings of the folder's "
        f"{generation.source}: beam {generation.num_beams}, length_penalty {generation.length_penalty:g}, "
        f"early_stopping {json.dumps(generation.early_stopping)}, max_length {generation.max_length}"
        + (f", min_length {generation.min_length}" if generation.min_length else "")
        + (f", no_repeat_ngram_size {generation.no_repeat_ngram_size}" if generation.no_repeat_ngram_size else "")
        + (f", bad_words_ids {[list(w) for w in generation.bad_words_ids]}" if generation.bad_words_ids else "")
        + (", forced_eos_token_id" if generation.forced_eos else "")
        + (", renormalize_logits" if generation.renormalize_logits else "") + ".",
        "- The search runs in full precision by default, so the translation is `generate`'s (tested against it on "
        "trained weights); the int8 search (`precision=\"int8\"`) is faster and can change it. The rule can be "
        "switched to this project's (GNMT length penalty, OpenNMT stop) per call (`rule=\"project\"`) or in the "
        "sidebar."]
    lines += [f"- Not implemented, so `generate` can differ: {note}." for note in generation.notes]
    return lines


def check_dtype(dtype: object) -> None:
    """`HFImportError` naming the argument unless `dtype` is one the import stores weights in."""
    if not (isinstance(dtype, str) and dtype in IMPORT_DTYPES):
        raise HFImportError(f"{argument('dtype')} must be one of {', '.join(IMPORT_DTYPES)}, got {dtype!r}")


def import_model(source: str, out: str | Path, source_lang: str | None = None,
                 target_lang: str | None = None, dtype: str = "fp32", label: str | None = None,
                 copy: bool = False, revision: str | None = None) -> Path:
    """Import `source` (a folder or hub id) as this project's model directory `out`; `HFImportError` otherwise.
    The generation settings transformers would use for it go into ``generation.json`` (see `viz_model.search.settings`):
    the imported model translates as ``generate`` does.

    `source_lang` / `target_lang`: the language pair of an M2M100 model (default: its tokenizer_config.json's).
    `dtype` "fp16" stores the weights in half precision (loaded into fp32; no longer exact): for models whose fp32
    weights exceed the weight-file limit, such as NLLB-600M. `label`: the name the card and the language guess give
    the source (default `source`). A decoder-only language model's safetensors weights are read where they are
    (the directory names them, see `viz_model.modeldir.weight_source`) unless `copy` asks for a self-contained
    directory. `revision`: the hub repository's version to import (`resolve_source`)."""
    out = Path(out)
    check_dtype(dtype)
    if out.exists():
        raise HFImportError(f"{out}: already exists; choose another {argument('out')} or remove it first")
    folder = resolve_source(source, revision)
    hf = read_hf_config(folder)
    family, path = FAMILIES[hf["model_type"]], folder / "config.json"
    if family.encoder_only:
        return import_encoder(family, folder, hf, out, source if label is None else label, read_weights, dtype,
                              source_lang, target_lang)
    if family.decoder_only:
        return import_language_model(family, folder, hf, out, source if label is None else label, read_weights, dtype,
                                     source_lang, target_lang, copy)
    family.model_config(hf, path, 0, None)  # config.json's faults are named before the tokenizer's
    tokenizer = family.tokenizer(folder, hf, source_lang, target_lang)
    cfg = family.model_config(hf, path, tokenizer.unk_id, tokenizer.target_code)
    try:
        generation = read_hf_generation(folder, hf, cfg)
    except GenerationError as err:
        raise HFImportError(str(err)) from None
    forced = cfg.forced_first_id
    if forced is None and family.forced_bos_from_generation:
        forced = generation.forced_bos_token_id
    # this project's rule forces them likewise; the original mBART decodes from the target language's code (its
    # generation config was checked against config.json's own start)
    cfg = checked_config(path, **{**dataclasses.asdict(cfg), "eos_at_limit": generation.forced_eos,
                                  "forced_first_id": forced, "bos_id": decoder_start(tokenizer, cfg.bos_id)})
    if tokenizer.vocab_size != cfg.vocab_size:
        named = folder / family.tokenizer_file if (folder / family.tokenizer_file).is_file() else folder
        raise HFImportError(f"{named}: {tokenizer.vocab_size:,} ids in its tokenizer, but config.json says "
                            f"vocab_size {cfg.vocab_size:,}: a tokenizer of another model?")
    # the size the weight file will have, from the config alone: refused before gigabytes of weights are read
    stored = sum(math.prod(shape) for shape in planned_model(cfg)[0].values()) * IMPORT_DTYPES[dtype].itemsize
    if stored > MAX_WEIGHTS_BYTES:
        raise HFImportError(f"{folder}: {stored / 1024**3:.2f} GiB of {dtype} weights, above the "
                           f"{MAX_WEIGHTS_BYTES / 1024**3:.0f} GiB weight-file limit"
                           + (f"; import with {argument('dtype', 'fp16', quoted=False)} (half the size, no longer "
                              "exact)" if dtype == "fp32" else ""))
    state, weights = read_weights(folder)
    if family.from_weights is not None:
        cfg = family.from_weights(cfg, state)
    mapped = family.map_weights(state, cfg, weights)
    model = Transformer(cfg)
    model.load_state_dict(mapped, strict=True)
    model.eval()
    label = source if label is None else label
    languages = family.languages(label, folder, tokenizer)

    def write(staging: Path) -> None:
        save_model_dir(model, tokenizer, staging, card=model_card(label, folder, hf, cfg, weights, generation, dtype),
                       dtype=IMPORT_DTYPES[dtype])
        (staging / GENERATION).write_text(ModelGeneration("transformers", generation).to_json(), encoding="utf-8")
        if languages is not None:
            (staging / LANGUAGES).write_text(json.dumps({"source": languages.source, "target": languages.target}))

    return write_staged(out, write)
