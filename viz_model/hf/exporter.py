"""Write one of this project's models as a Hugging Face ``MarianMTModel`` folder that computes the same function.

What makes it the same network: a Marian model is this project's architecture with its sinusoids in two halves
(all sines, then all cosines) where ours interleave them (sin, cos, sin, ...). The two tables hold the same values,
permuted along the model dimension; permuting that dimension of every tensor that reads or writes the residual
stream (embeddings, the attention projections' inputs and outputs, the feed-forward network's, layer norms) gives
an equal network: attention maps and logits do not depend on the order of the residual basis.

The ids are renumbered so that ``<pad>`` is the last entry of the vocabulary, as CTranslate2's Marian converter
expects (it drops that entry); every other id keeps its order. ``vocab.json`` maps each piece to its new id, and
``source.spm`` / ``target.spm`` are the shared SentencePiece model. Nothing needs transformers to be installed.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from ..config import ModelConfig
from ..modeldir.checkpoint import CheckpointError, load_model_dir, read_card
from ..modeldir.languages import read_languages
from ..nn.model import Transformer
from ..search.settings import HFGeneration, export_generation
from ..tokenization.tokenizer import Tokenizer
from .arguments import argument
from .common import write_staged
from .fairseq import DECODER_NAMES, ENCODER_NAMES

MARIAN_ACTIVATIONS = {"relu": "relu", "silu": "swish", "gelu": "gelu"}
# the settings of imported families a Marian model has at their defaults only
LAYER_OPTIONS = ("normalization", "norm_eps", "scale_embeddings", "embedding_norm", "d_kv", "scale_scores",
                 "attention_bias", "ffn_bias", "gated_ffn", "tied_head", "head_rescale")


POSITION_WORDS = {"learned": "a learned table", "rope": "queries and keys rotated",
                  "alibi": "a linear distance penalty on the scores", "relative": "T5's learned bias on the scores"}


class HFExportError(ValueError):
    """The model cannot be written as a Marian folder, or the folder cannot be written; the message says why."""


def marian_refusal(config: ModelConfig, tokenizer: object) -> str | None:
    """Why a Marian model cannot express this one (None when it can)."""
    if not isinstance(tokenizer, Tokenizer):
        return (f"its tokenizer is {type(tokenizer).__name__}: an imported model is already a Hugging Face model; "
                "use the folder it was imported from")
    reasons = [
        (config.positional != "sinusoidal",
         f"its positions are {config.positional} ({POSITION_WORDS.get(config.positional, '')}; Marian adds fixed "
         "sinusoids to the input)"),
        (config.norm != "post", "it is pre-norm (Marian normalises after each residual block)"),
        (not config.share_embeddings, "its source, target and output embeddings are not one matrix (Marian ties them)"),
        (config.sinusoid_frequencies != "paper" or config.position_offset != 0,
         "its sinusoids are fairseq's, offset by a row (Marian's are the paper's, from position 0)"),
        (config.forced_first_id is not None, "it forces a first output token (M2M100's language code)"),
        (config.activation not in MARIAN_ACTIVATIONS, f"its activation {config.activation} has no Marian name"),
    ]
    defaults = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
    reasons += [(getattr(config, name) != defaults[name],
                 f"its {name} is {getattr(config, name)!r} (a Marian model has {defaults[name]!r})")
                for name in LAYER_OPTIONS]
    refused = [why for failed, why in reasons if failed]
    return "; ".join(refused) if refused else None


def residual_permutation(config: ModelConfig) -> torch.Tensor:
    """New dimension k of the residual stream = old dimension perm[k]: interleaved sinusoids to halves (identity
    when they already are in halves)."""
    d = config.d_model
    if config.sinusoid_layout == "halves":
        return torch.arange(d)
    return torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])


def id_order(config: ModelConfig) -> list[int]:
    """Old ids in their new order: every id but ``<pad>`` as it was, ``<pad>`` last."""
    return [i for i in range(config.vocab_size) if i != config.pad_id] + [config.pad_id]


def marian_state_dict(network: Transformer, perm: torch.Tensor, order: list[int]) -> dict[str, torch.Tensor]:
    """The Marian tensor names and values of `network`, the residual dimension permuted by `perm` and the
    vocabulary rows in `order`."""
    ours = {k: v.detach().float() for k, v in network.state_dict().items()}
    rows = torch.tensor(order)
    out = {"model.shared.weight": ours["src_embedding.weight"][rows][:, perm].contiguous()}
    bias = ours.get("output_bias", torch.zeros(network.config.vocab_size))
    out["final_logits_bias"] = bias[rows].reshape(1, -1).contiguous()
    cfg = network.config
    for side, count, names in (("encoder", cfg.encoder_layers, ENCODER_NAMES),
                               ("decoder", cfg.decoder_layers, DECODER_NAMES)):
        for i in range(count):
            for theirs, mine in names.items():
                weight, bias = ours[f"{side}_layers.{i}.{mine}.weight"], ours[f"{side}_layers.{i}.{mine}.bias"]
                if weight.dim() == 1 or mine.endswith(("w_o", "w_2")):  # a layer norm, or writes the stream
                    weight, bias = weight[perm], bias[perm]
                else:  # reads it (Q, K, V, the first feed-forward layer)
                    weight = weight[:, perm]
                prefix = f"model.{side}.layers.{i}.{theirs}"
                out[f"{prefix}.weight"], out[f"{prefix}.bias"] = weight.contiguous(), bias.contiguous()
    return out


def marian_config(config: ModelConfig, new_id: dict[int, int]) -> dict[str, Any]:
    """config.json of the Marian folder."""
    return {
        "architectures": ["MarianMTModel"], "model_type": "marian", "vocab_size": config.vocab_size,
        "decoder_vocab_size": config.vocab_size, "d_model": config.d_model,
        "encoder_layers": config.encoder_layers, "decoder_layers": config.decoder_layers,
        "encoder_attention_heads": config.heads, "decoder_attention_heads": config.heads,
        "encoder_ffn_dim": config.d_ff, "decoder_ffn_dim": config.d_ff,
        "activation_function": MARIAN_ACTIVATIONS[config.activation], "max_position_embeddings": config.max_positions,
        "scale_embedding": True, "static_position_embeddings": True, "normalize_embedding": False,
        "normalize_before": False, "add_final_layer_norm": False, "share_encoder_decoder_embeddings": True,
        "tie_word_embeddings": True, "dropout": config.dropout, "attention_dropout": config.attention_dropout,
        "activation_dropout": 0.0, "init_std": 0.02, "is_encoder_decoder": True, "use_cache": True,
        "pad_token_id": new_id[config.pad_id], "eos_token_id": new_id[config.eos_id],
        "decoder_start_token_id": new_id[config.bos_id], "forced_eos_token_id": new_id[config.eos_id],
    }


def marian_generation(generation: HFGeneration, config: ModelConfig, new_id: dict[int, int]) -> dict[str, Any]:
    """generation_config.json of the Marian folder: the model's transformers settings, in the new ids."""
    data: dict[str, Any] = {
        "num_beams": generation.num_beams, "max_length": generation.max_length,
        "decoder_start_token_id": new_id[config.bos_id], "eos_token_id": new_id[config.eos_id],
        "pad_token_id": new_id[config.pad_id],
        "bad_words_ids": [[new_id[i] for i in seq] for seq in generation.bad_words_ids]}
    if generation.forced_eos:
        data["forced_eos_token_id"] = new_id[config.eos_id]
    return data


def export_hf(model_dir: str | Path, out: str | Path) -> Path:
    """Write the model directory `model_dir` as a Hugging Face Marian folder `out` (which must not exist);
    `HFExportError` in one line otherwise, with nothing written."""
    model_dir, out = Path(model_dir), Path(out)
    if out.exists():
        raise HFExportError(f"{out}: already exists; choose another {argument('out')} or remove it first")
    try:
        network, tokenizer, config = load_model_dir(model_dir)
        languages = read_languages(model_dir)
    except (CheckpointError, ValueError) as err:
        raise HFExportError(str(err)) from None
    refusal = marian_refusal(config, tokenizer)
    if refusal is not None:
        raise HFExportError(f"{model_dir}: a Marian model cannot express this one: {refusal}")
    order = id_order(config)
    new_id = {old: new for new, old in enumerate(order)}
    vocab = {tokenizer.piece(old): new for new, old in enumerate(order)}
    if len(vocab) != config.vocab_size:
        raise HFExportError(f"{model_dir}: two ids share a piece; vocab.json cannot map pieces to ids")
    files = {
        "config.json": json.dumps(marian_config(config, new_id), indent=2) + "\n",
        "generation_config.json": json.dumps(marian_generation(export_generation(config), config, new_id),
                                             indent=2) + "\n",
        "vocab.json": json.dumps(vocab, ensure_ascii=False, indent=1) + "\n",
        "tokenizer_config.json": json.dumps({
            "tokenizer_class": "MarianTokenizer", "source_lang": languages.source, "target_lang": languages.target,
            "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>", "model_max_length": config.max_positions,
            "separate_vocabs": False}, indent=2) + "\n",
        "README.md": export_card(model_dir, config, languages.source, languages.target),
    }

    def write(staging: Path) -> None:
        save_file(marian_state_dict(network, residual_permutation(config), order), str(staging / "model.safetensors"),
                  metadata={"format": "pt"})
        for name, text in files.items():
            (staging / name).write_text(text, encoding="utf-8")
        for name in ("source.spm", "target.spm"):
            (staging / name).write_bytes(tokenizer.serialized())

    return write_staged(out, write, HFExportError)


def export_card(model_dir: Path, config: ModelConfig, source: str, target: str) -> str:
    """The exported folder's README: where it comes from, how it differs from the original, its own card."""
    original = read_card(model_dir)
    return "\n".join([
        "---", "license: mit", "library_name: transformers", "pipeline_tag: translation",
        f"language: [{source}, {target}]", "---", "",
        f"# {model_dir.name} (exported by viz-model export-hf)", "",
        f"This project's model `{model_dir.name}` as a Hugging Face `MarianMTModel` folder: the same function "
        "(every attention map and logit equal up to float rounding; tested). Differences from the model directory:",
        "",
        "- The residual stream's dimensions are permuted so that its sinusoids are Marian's halves (all sines, then "
        "all cosines) instead of the paper's interleaving; maps and logits do not depend on that order.",
        f"- The ids are renumbered so that `<pad>` is last (id {config.vocab_size - 1}); the other pieces keep their "
        "order, one lower. `vocab.json` maps pieces to the new ids.",
        f"- `generation_config.json`: beam 4, max_length {config.max_positions}, `<pad>` banned, `</s>` forced at the "
        "limit, transformers' length penalty 1.0. `viz-model` searches its own models with GNMT's length penalty "
        "(alpha 0.6) and OpenNMT's stop by default, so its beam translations can differ from `generate`'s; imported "
        "back, this folder searches as `generate` does.",
        "- CTranslate2's Marian converter (`ct2-transformers-converter`) accepts the folder, but the model it writes "
        "starts the decoder from a zero vector where this model was trained (and transformers runs it) from the "
        "`<s>` embedding, so those translations are wrong. Convert with `viz_model.hf.exporter.to_ctranslate2(FOLDER, "
        "OUT)` instead: the same converter, starting from `<s>` (tested: greedy outputs equal transformers').",
        "", "## The original model card", "", original or "(none)", ""])


def to_ctranslate2(folder: str | Path, out: str | Path, quantization: str | None = None) -> Path:
    """Convert an exported Marian `folder` with CTranslate2 (installed separately) so that its decoder starts from
    the ``<s>`` embedding, as this project's models were trained and as transformers runs the folder.

    CTranslate2's stock Marian converter accepts the folder too, but its models start the decoder from a zero
    vector (right for opus-mt, whose start token's embedding is zero), which changes this model's translations."""
    try:
        import ctranslate2
        from ctranslate2.converters import transformers as ct2_transformers
    except ImportError:
        raise HFExportError("CTranslate2 is not installed (pip install ctranslate2)") from None

    class StartFromBos(ct2_transformers.MarianMTLoader):
        def set_config(self, config, model, tokenizer):  # CTranslate2's hooks
            super().set_config(config, model, tokenizer)
            config.decoder_start_token = "<s>"

        def set_decoder(self, spec, decoder):
            super().set_decoder(spec, decoder)
            spec.start_from_zero_embedding = False

    loaders = ct2_transformers._MODEL_LOADERS  # the converter picks its loader by config class name
    stock = loaders["MarianConfig"]
    loaders["MarianConfig"] = StartFromBos()
    try:
        return Path(ctranslate2.converters.TransformersConverter(str(folder)).convert(
            str(out), quantization=quantization))
    finally:
        loaders["MarianConfig"] = stock
