"""Import a Hugging Face Marian (opus-mt) or M2M100 checkpoint into this project's instrumented model, exactly.

A Marian model is the paper's architecture with four differences that `ModelConfig` names: sinusoids in two halves
(``sinusoid_layout="halves"``), a SiLU feed-forward (``activation``), a bias on the output logits
(``output_bias``), and decoding that starts from the pad id, which it never outputs (``bos_id``,
``never_emitted``). Its tokenizer is `MarianTokenizer`. An M2M100 model is pre-norm with a final layer norm on
each stack (``norm="pre"``), its sinusoids are fairseq's (halves, ``sinusoid_frequencies="fairseq"``, counted from
row 2: ``position_offset``), decoding starts from ``</s>`` and its first output is forced to the target language's
code (``forced_first_id``); its tokenizer is `M2M100Tokenizer`, for the language pair chosen at import.
Nothing from the folder is executed: ``config.json`` is read as JSON, weights with safetensors (or
``torch.load(weights_only=True)`` for ``pytorch_model.bin``). The output directory is written beside its final
place and renamed into it: a failure leaves nothing behind.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from ..config import ConfigError, ModelConfig
from ..modeldir.checkpoint import MAX_WEIGHTS_BYTES, CheckpointError, planned_model, save_model_dir
from ..modeldir.languages import LANGUAGES, LanguagePair, guess_languages
from ..nn.model import Transformer
from ..nn.positional import sinusoidal_table
from ..search.settings import GENERATION, GenerationError, HFGeneration, ModelGeneration, read_hf_generation
from ..tokenization.pretrained import (
    M2M100_LANGUAGE_CODES,
    M2M100Tokenizer,
    MarianTokenizer,
    PretrainedTokenizer,
    id_table,
)
from ..tokenization.tokenizer import TokenizerError

SUPPORTED = {"marian": "Marian / opus-mt", "m2m_100": "M2M100 / NLLB"}
ACTIVATIONS = {"relu": "relu", "silu": "silu", "swish": "silu", "gelu": "gelu"}
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
MAX_HF_CONFIG_BYTES = 1024**2
IMPORT_DTYPES = {"fp32": torch.float32, "fp16": torch.float16}
MAX_TOKENIZER_JSON_BYTES = 64 * 1024**2  # NLLB's: 17 MB
NLLB_CODE = re.compile(r"[a-z]{3}_[A-Z][a-z]{3}")  # eng_Latn, zho_Hans, ...
# Hugging Face Marian names -> this project's, per layer (the prefix model.encoder.layers.N. / model.decoder.layers.N.)
ENCODER_NAMES = {"self_attn.q_proj": "self_attn.w_q", "self_attn.k_proj": "self_attn.w_k",
                 "self_attn.v_proj": "self_attn.w_v", "self_attn.out_proj": "self_attn.w_o",
                 "self_attn_layer_norm": "attn_residual.norm", "fc1": "ffn.w_1", "fc2": "ffn.w_2",
                 "final_layer_norm": "ffn_residual.norm"}
DECODER_NAMES = {**ENCODER_NAMES, "self_attn_layer_norm": "self_residual.norm",
                 "encoder_attn.q_proj": "cross_attn.w_q", "encoder_attn.k_proj": "cross_attn.w_k",
                 "encoder_attn.v_proj": "cross_attn.w_v", "encoder_attn.out_proj": "cross_attn.w_o",
                 "encoder_attn_layer_norm": "cross_residual.norm"}
TIED = ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
        "lm_head.weight")
POSITIONS = ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight",
             "model.encoder.embed_positions.weights", "model.decoder.embed_positions.weights")
FINAL_NORMS = {"model.encoder.layer_norm": "encoder_norm", "model.decoder.layer_norm": "decoder_norm"}
M2M100_POSITION_OFFSET = 2  # fairseq numbers positions from the pad id (1) + 1


class HFImportError(ValueError):
    """The folder cannot be imported; the message names the file and what is wrong."""


def resolve_source(source: str) -> Path:
    """A local folder as it is; a hub id (``owner/name``) through ``huggingface_hub`` when it is installed and the
    hub answers, else an error that says how to fetch the folder elsewhere."""
    path = Path(source)
    if path.is_dir():
        return path
    if not HUB_ID.fullmatch(source):
        raise HFImportError(f"{source}: no such folder (give a Hugging Face model folder or a hub id owner/name)")
    fetch = (f"download it where the hub can be reached (`huggingface-cli download {source} --local-dir DIR`, or "
             f"git clone https://huggingface.co/{source}) and pass that folder instead")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise HFImportError(f"{source}: not a folder here, and huggingface_hub is not installed: {fetch}") from None
    try:
        return Path(snapshot_download(source, allow_patterns=["*.json", "*.spm", "*.model", "*.safetensors", "*.bin",
                                                                "*.md"]))
    except Exception as err:  # offline, unknown repository, gated model: one line either way
        raise HFImportError(f"{source}: the hub could not be reached or has no such model "
                           f"({type(err).__name__}); {fetch}") from None


def read_json_file(path: Path, limit: int, what: str) -> Any:
    """`path` parsed as JSON; one line naming it when it is larger than `limit` bytes (then it is `what`) or not
    JSON. A missing file raises OSError."""
    if path.stat().st_size > limit:
        raise HFImportError(f"{path}: larger than {limit:,} bytes; {what}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:  # UnicodeDecodeError included
        raise HFImportError(f"{path}: not valid JSON ({err})") from None


def read_hf_config(folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    if not path.is_file():
        raise HFImportError(f"{path}: missing (a Hugging Face model folder has config.json)")
    data = read_json_file(path, MAX_HF_CONFIG_BYTES, "not a model config")
    if not isinstance(data, dict):
        raise HFImportError(f"{path}: expected a JSON object")
    kind = data.get("model_type")
    if kind not in SUPPORTED:
        raise HFImportError(f"{path}: model_type {kind!r} is not an architecture this project can import "
                           f"({', '.join(f'{k}: {v}' for k, v in SUPPORTED.items())} translation models)")
    return data


def model_config(hf: dict[str, Any], path: Path, unk_id: int, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` for a Marian or M2M100 config, refusing what the instrumented model does not implement."""
    def need(key: str) -> Any:
        if key not in hf:
            raise HFImportError(f"{path}: no {key!r}")
        return hf[key]

    marian = hf["model_type"] == "marian"
    same = {("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")}
    for a, b in same:
        if need(a) != need(b):
            raise HFImportError(f"{path}: {a} = {hf[a]} but {b} = {hf[b]}; the instrumented model has one value")
    checks: dict[str, Any] = {"scale_embedding": True}
    if marian:
        checks.update({"share_encoder_decoder_embeddings": True, "normalize_before": False,
                       "add_final_layer_norm": False, "normalize_embedding": False, "static_position_embeddings": True})
    for key, wanted in checks.items():
        if hf.get(key, wanted) != wanted:
            raise HFImportError(f"{path}: {key} = {hf[key]!r}; only {wanted!r} is supported")
    if hf.get("decoder_vocab_size") not in (None, need("vocab_size")):
        raise HFImportError(f"{path}: decoder_vocab_size {hf['decoder_vocab_size']} differs from vocab_size "
                            f"{hf['vocab_size']}; separate target vocabularies are not supported")
    activation = ACTIVATIONS.get(need("activation_function"))
    if activation is None:
        raise HFImportError(f"{path}: activation_function {hf['activation_function']!r} is not supported "
                           f"({', '.join(ACTIVATIONS)})")
    pad = need("pad_token_id")
    start = hf.get("decoder_start_token_id")
    if marian:
        layout = {"norm": "post", "sinusoid_layout": "halves", "output_bias": True,
                  "bos_id": pad if start is None else start, "never_emitted": (pad,)}
    else:  # fairseq's M2M100: pre-norm with final norms, fairseq sinusoids from row 2, the language code forced
        if hf.get("pad_token_id") != 1:
            raise HFImportError(f"{path}: pad_token_id {pad}; M2M100 positions are counted from pad id 1")
        layout = {"norm": "pre", "sinusoid_layout": "halves", "sinusoid_frequencies": "fairseq",
                  "position_offset": M2M100_POSITION_OFFSET, "bos_id": need("eos_token_id") if start is None else start,
                  "forced_first_id": forced_first_id}
    try:
        return ModelConfig(
            vocab_size=need("vocab_size"), encoder_layers=need("encoder_layers"),
            decoder_layers=need("decoder_layers"), d_model=need("d_model"), heads=hf["encoder_attention_heads"],
            d_ff=hf["encoder_ffn_dim"], dropout=float(hf.get("dropout", 0.1)),
            attention_dropout=float(hf.get("attention_dropout", 0.0)),
            max_positions=need("max_position_embeddings"), positional="sinusoidal", share_embeddings=True,
            pad_id=pad, activation=activation, eos_id=need("eos_token_id"), unk_id=unk_id, **layout)
    except ConfigError as err:
        raise HFImportError(f"{path}: {err}") from None


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


def map_weights(state: dict[str, torch.Tensor], cfg: ModelConfig, path: Path) -> dict[str, torch.Tensor]:
    """This project's state dict from a Marian one; every tensor used exactly once, shapes checked."""
    out: dict[str, torch.Tensor] = {}
    used: set[str] = set()

    def take(name: str) -> torch.Tensor:
        if name not in state:
            raise HFImportError(f"{path}: no tensor {name!r}")
        used.add(name)
        return state[name].float()

    shared = take(next((n for n in TIED if n in state), TIED[0]))
    for name in TIED:  # the source, target and output embeddings are one matrix in a Marian model
        if name in state:
            used.add(name)
            if state[name].shape != shared.shape or not torch.equal(state[name].float(), shared):
                raise HFImportError(f"{path}: {name} differs from the shared embedding matrix; untied embeddings "
                                    "are not supported")
    out["src_embedding.weight"] = out["tgt_embedding.weight"] = shared
    for side, count, names in (("encoder", cfg.encoder_layers, ENCODER_NAMES),
                               ("decoder", cfg.decoder_layers, DECODER_NAMES)):
        for i in range(count):
            for theirs, ours in names.items():
                for part in ("weight", "bias"):
                    out[f"{side}_layers.{i}.{ours}.{part}"] = take(f"model.{side}.layers.{i}.{theirs}.{part}")
    if cfg.output_bias:
        bias = take("final_logits_bias") if "final_logits_bias" in state else torch.zeros(1, cfg.vocab_size)
        out["output_bias"] = bias.reshape(-1)
    if cfg.norm == "pre":
        for theirs, ours in FINAL_NORMS.items():
            for part in ("weight", "bias"):
                out[f"{ours}.{part}"] = take(f"{theirs}.{part}")
    offset = cfg.position_offset
    table = sinusoidal_table(cfg.max_positions + offset, cfg.d_model, layout=cfg.sinusoid_layout,
                             frequencies=cfg.sinusoid_frequencies)[offset:]
    for name in POSITIONS:  # fixed sinusoids, recomputed by the model: check the checkpoint's are the same
        if name in state:
            used.add(name)
            theirs = state[name].float()[offset:offset + cfg.max_positions]
            if theirs.shape != table.shape or not torch.allclose(theirs, table, atol=1e-5):
                raise HFImportError(f"{path}: {name} is not the sinusoid table of this config ({cfg.sinusoid_layout}, "
                                    f"{cfg.sinusoid_frequencies} frequencies, from row {offset})")
    unused = sorted(set(state) - used)
    if unused:
        raise HFImportError(f"{path}: tensors the instrumented model has no place for: {', '.join(unused[:5])}"
                           + (f" and {len(unused) - 5} more" if len(unused) > 5 else ""))
    expected = {k: tuple(v.shape) for k, v in Transformer(cfg).state_dict().items()}
    for name, tensor in out.items():
        if tuple(tensor.shape) != expected.get(name):
            raise HFImportError(f"{path}: {name} has shape {tuple(tensor.shape)}, config.json implies "
                               f"{expected.get(name)}")
    return out


def model_card(source: str, folder: Path, hf: dict[str, Any], cfg: ModelConfig, weights: Path,
               generation: HFGeneration, dtype: str = "fp32") -> str:
    """What was imported from where, under which licence, and what was checked."""
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
        *conversion_lines(cfg),
        *([f"- The last token a length limit allows is forced to be </s> (id {cfg.eos_id}), as the source's "
           "forced_eos_token_id makes Hugging Face's generate do."] if cfg.eos_at_limit else []),
        *(["- Weights stored in fp16 (`--dtype fp16`), loaded into fp32: close to the source model's outputs, "
           "not equal to them."] if dtype == "fp16" else []), "",
        "## Decoding", "",
        *generation_lines(generation), "",
        "## Checked at import", "",
        "- every tensor of the checkpoint has exactly one place in the instrumented model, with the shape its "
        "config implies; the checkpoint's position tables equal the recomputed sinusoids;",
        "- the tokenizer's vocabulary size equals the embeddings'.",
        "- Exactness against Hugging Face (logits, every attention map, greedy output, tokenizer ids) is tested in "
        "`tests/library/test_hf_import*.py` on small random Marian, M2M100 and NLLB models (Marian also with two "
        "published opus-mt tokenizers and configs).", ""])


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
        "trained weights); the int8 search (`search=\"int8\"`) is faster and can change it. The rule can be switched "
        "to this project's (GNMT length penalty, OpenNMT stop) per call (`rule=\"project\"`) or in the sidebar."]
    lines += [f"- Not implemented, so `generate` can differ: {note}." for note in generation.notes]
    return lines


def conversion_lines(cfg: ModelConfig) -> list[str]:
    """How the checkpoint maps onto the instrumented model, for its card."""
    if cfg.norm == "post":
        return [f"- Post-norm, embeddings tied and scaled by sqrt(d_model); sinusoids in halves; {cfg.activation} FFN; "
                "final_logits_bias as the output bias; decoding starts from the pad id, which is never emitted.",
                "- Tokenizer: source.spm, target.spm and vocab.json copied as they are."]
    return [f"- Pre-norm with a final layer norm on each stack, embeddings tied and scaled by sqrt(d_model); fairseq "
            f"sinusoids (halves, exp(-i ln(10000) / (d_model/2 - 1))) from row {cfg.position_offset}; "
            f"{cfg.activation} FFN; decoding starts from </s> (id {cfg.bos_id}) and the first output is forced to "
            f"the target language's code (id {cfg.forced_first_id}).",
            "- Tokenizer: sentencepiece.bpe.model and vocab.json copied as they are; language_codes.json holds the "
            "language codes' ids and the language pair chosen at import."]


def m2m100_tokenizer(folder: Path, vocab_size: int, source: str | None, target: str | None) -> M2M100Tokenizer:
    """The M2M100 tokenizer of `folder` for the language pair given (else the one its tokenizer_config.json
    names): M2M100's own files, or an NLLB model's (the same architecture; its ids read from tokenizer.json)."""
    settings: dict[str, Any] = {}
    path = folder / "tokenizer_config.json"
    if path.is_file() and path.stat().st_size < MAX_HF_CONFIG_BYTES:
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            settings = loaded if isinstance(loaded, dict) else {}
        except ValueError as err:
            raise HFImportError(f"{path}: not valid JSON ({err})") from None
    if (folder / "vocab.json").is_file() or not (folder / "tokenizer.json").is_file():
        files, codes = m2m100_files(folder, settings.get("language_codes", "m2m100"), path)
    else:
        files, codes = nllb_files(folder)
    pair = {"source": source or settings.get("src_lang"), "target": target or settings.get("tgt_lang")}
    for side, code in pair.items():
        if not code:
            raise HFImportError(f"{path}: names no {side} language; give --{side}-lang (one of "
                               f"{', '.join(codes)})")
        if code not in codes:
            raise HFImportError(f"--{side}-lang {code!r} is not one of the model's languages ({', '.join(codes)})")
    files["language_codes.json"] = M2M100Tokenizer.language_file(codes, pair["source"], pair["target"], vocab_size)
    try:
        return M2M100Tokenizer.from_files(files, folder)
    except TokenizerError as err:
        raise HFImportError(str(err)) from None


def m2m100_files(folder: Path, kind: str, settings_path: Path) -> tuple[dict[str, bytes], dict[str, int]]:
    """An M2M100 tokenizer's files and its language codes' ids (after the vocabulary, in fairseq's order)."""
    if kind not in M2M100_LANGUAGE_CODES:
        raise HFImportError(f"{settings_path}: language_codes {kind!r} is not one this project knows "
                           f"({', '.join(M2M100_LANGUAGE_CODES)})")
    names = ("sentencepiece.bpe.model", "vocab.json")
    try:
        files = {name: (folder / name).read_bytes() for name in names}
    except OSError as err:
        raise HFImportError(f"{folder}: an M2M100 tokenizer needs {' and '.join(names)} ({err})") from None
    try:
        size = len(id_table(files["vocab.json"], folder / "vocab.json"))
    except TokenizerError as err:
        raise HFImportError(str(err)) from None
    return files, {code: size + i for i, code in enumerate(M2M100_LANGUAGE_CODES[kind])}


def nllb_files(folder: Path) -> tuple[dict[str, bytes], dict[str, int]]:
    """An NLLB tokenizer (``tokenizer.json`` beside ``sentencepiece.bpe.model``, no vocab.json): the pieces' ids
    from its BPE vocabulary and the language codes' ids (``eng_Latn``, ...) from its added tokens, as they are."""
    path = folder / "tokenizer.json"
    try:
        spm_model = (folder / "sentencepiece.bpe.model").read_bytes()
        data = read_json_file(path, MAX_TOKENIZER_JSON_BYTES, "not a tokenizer")
    except OSError as err:
        raise HFImportError(f"{folder}: an NLLB tokenizer needs sentencepiece.bpe.model and tokenizer.json "
                           f"({err})") from None
    model = data.get("model") if isinstance(data, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) else None
    added = data.get("added_tokens") if isinstance(data, dict) else None
    if not (isinstance(vocab, dict) and isinstance(added, list) and all(isinstance(t, dict) for t in added)):
        raise HFImportError(f"{path}: expected a model vocabulary (model.vocab) and added_tokens")
    codes = {t["content"]: t["id"] for t in added if isinstance(t.get("content"), str)
             and NLLB_CODE.fullmatch(t["content"]) and isinstance(t.get("id"), int)}
    if not codes:
        raise HFImportError(f"{path}: no language code (such as eng_Latn) among its added tokens")
    return {"sentencepiece.bpe.model": spm_model, "vocab.json": json.dumps(vocab).encode()}, codes


def folder_languages(source: str, folder: Path) -> LanguagePair | None:
    """The language pair from tokenizer_config.json (source_lang / target_lang), else from an opus-mt name."""
    path = folder / "tokenizer_config.json"
    if path.is_file() and path.stat().st_size < MAX_HF_CONFIG_BYTES:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("source_lang") and data.get("target_lang"):
                pair = LanguagePair(str(data["source_lang"]), str(data["target_lang"]))
                if all(re.fullmatch(r"[A-Za-z]{2,3}(?:[_-][A-Za-z0-9]{2,8})?", c) for c in (pair.source, pair.target)):
                    return pair
        except ValueError:
            pass
    return guess_languages(source, folder.name)


def folder_tokenizer(folder: Path, hf: dict[str, Any], source_lang: str | None,
                     target_lang: str | None) -> PretrainedTokenizer:
    """The tokenizer of `folder`, of the kind its model_type uses (M2M100's for the language pair chosen)."""
    try:
        if hf["model_type"] == "m2m_100":
            return m2m100_tokenizer(folder, hf.get("vocab_size", 0), source_lang, target_lang)
        if source_lang or target_lang:
            raise HFImportError("--source-lang / --target-lang choose the pair of a many-to-many model (M2M100); "
                                "a Marian model translates one fixed pair")
        return MarianTokenizer.load(folder)
    except TokenizerError as err:
        raise HFImportError(str(err)) from None


def import_model(source: str, out: str | Path, source_lang: str | None = None,
                 target_lang: str | None = None, dtype: str = "fp32") -> Path:
    """Import `source` (a folder or hub id) as this project's model directory `out`; `HFImportError` otherwise.
    The generation settings transformers would use for it go into ``generation.json`` (see `viz_model.search.settings`):
    the imported model translates as ``generate`` does.

    `source_lang` / `target_lang`: the language pair of an M2M100 model (default: its tokenizer_config.json's).
    `dtype` "fp16" stores the weights in half precision (loaded into fp32; no longer exact): for models whose fp32
    weights exceed the weight-file limit, such as NLLB-600M."""
    out = Path(out)
    if dtype not in IMPORT_DTYPES:
        raise HFImportError(f"--dtype must be one of {', '.join(IMPORT_DTYPES)}, got {dtype!r}")
    if out.exists():
        raise HFImportError(f"{out}: already exists; choose another --out or remove it first")
    folder = resolve_source(source)
    hf = read_hf_config(folder)
    tokenizer = folder_tokenizer(folder, hf, source_lang, target_lang)
    forced = tokenizer.target_code if isinstance(tokenizer, M2M100Tokenizer) else None
    cfg = model_config(hf, folder / "config.json", tokenizer.unk_id, forced)
    try:
        generation = read_hf_generation(folder, hf, cfg)
    except GenerationError as err:
        raise HFImportError(str(err)) from None
    cfg = dataclasses.replace(cfg, eos_at_limit=generation.forced_eos)  # this project's rule forces it likewise
    if tokenizer.vocab_size != cfg.vocab_size:
        raise HFImportError(f"{folder / 'vocab.json'}: {tokenizer.vocab_size:,} ids, but config.json says vocab_size "
                           f"{cfg.vocab_size:,}: a tokenizer of another model?")
    # the size the weight file will have, from the config alone: refused before gigabytes of weights are read
    stored = sum(math.prod(shape) for shape in planned_model(cfg)[0].values()) * IMPORT_DTYPES[dtype].itemsize
    if stored > MAX_WEIGHTS_BYTES:
        raise HFImportError(f"{folder}: {stored / 1024**3:.2f} GiB of {dtype} weights, above the "
                           f"{MAX_WEIGHTS_BYTES / 1024**3:.0f} GiB weight-file limit"
                           + ("; import with --dtype fp16 (half the size, no longer exact)" if dtype == "fp32" else ""))
    state, weights = read_weights(folder)
    mapped = map_weights(state, cfg, weights)
    model = Transformer(cfg)
    model.load_state_dict(mapped, strict=True)
    model.eval()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    languages = (LanguagePair(tokenizer.source_language, tokenizer.target_language)
                 if isinstance(tokenizer, M2M100Tokenizer) else folder_languages(source, folder))
    try:
        save_model_dir(model, tokenizer, staging, card=model_card(source, folder, hf, cfg, weights, generation, dtype),
                       dtype=IMPORT_DTYPES[dtype])
        (staging / GENERATION).write_text(ModelGeneration("transformers", generation).to_json(), encoding="utf-8")
        if languages is not None:
            (staging / LANGUAGES).write_text(json.dumps({"source": languages.source, "target": languages.target}))
        staging.rename(out)
    except (OSError, CheckpointError) as err:
        shutil.rmtree(staging, ignore_errors=True)
        raise HFImportError(f"{out}: could not be written ({err})") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out
