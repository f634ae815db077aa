"""T5 (v1.0, v1.1, Flan-T5) and mT5 (``model_type`` "mt5": v1.1's architecture, never rescaled): pre-norm with T5's
RMS norm (``normalization="rms"``) and a final norm on each stack, unscaled attention scores (``scale_scores``) of
heads ``d_kv`` wide, no biases, a learned relative bias on the self-attention scores (``positional="relative"``,
computed once per stack), a ReLU or gated-GELU feed-forward (``gated_ffn``), embeddings not scaled, the head tied and
the decoder's output rescaled by d_model^-0.5 (v1.0, ``head_rescale``) or a head of its own (v1.1, mT5,
``tied_head``), decoding from the pad id. Its tokenizer is read from tokenizer.json; the task prefix of its
translation task (``task_specific_params``, where it has one: mT5 has none; the first listed, or the first the
languages given match, where it has several) goes before every source."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import torch

from ..config import ModelConfig
from ..modeldir.languages import LanguagePair
from ..tokenization.imported import PretrainedTokenizer
from ..tokenization.tokenizer_json import JsonTokenizer
from .arguments import argument
from .common import Family, HFImportError, checked_config, need
from .fairseq import Taken
from .json_tokenizer import checked_class, json_tokenizer

ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_new", "silu": "silu", "swish": "silu"}
FEED_FORWARD_DEFAULT = {"t5": "relu", "mt5": "gated-gelu"}  # T5Config's and MT5Config's, where config.json has none
TASK = re.compile(r"translation_([A-Za-z]{2,3})_to_([A-Za-z]{2,3})")
MAX_POSITIONS = 512  # T5's n_positions: the bias has no limit, this project's model needs one
TOKENIZERS = ("T5Tokenizer", "T5TokenizerFast")
IGNORED = "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight"  # transformers ignores it too
# T5 names -> this project's, per block (encoder.block.N.layer. / decoder.block.N.layer.)
ATTENTION = {"q": "w_q", "k": "w_k", "v": "w_v", "o": "w_o"}
FFN = {"wi": "w_1", "wo": "w_2"}
GATED_FFN = {"wi_0": "w_1", "wi_1": "w_3", "wo": "w_2"}
BLOCKS = {"encoder": [("SelfAttention", "self_attn", "attn_residual")],  # layer j: (theirs, ours, residual)
          "decoder": [("SelfAttention", "self_attn", "self_residual"),
                      ("EncDecAttention", "cross_attn", "cross_residual")]}


def feed_forward(hf: dict[str, Any], path: Path) -> tuple[str, bool]:
    """(activation, gated) of config.json's feed_forward_proj, as T5Config / MT5Config read it ("gated-gelu" is
    gelu_new)."""
    value = hf.get("feed_forward_proj", FEED_FORWARD_DEFAULT.get(hf.get("model_type"), "relu"))
    parts = value.split("-") if isinstance(value, str) else []
    gated = len(parts) == 2 and parts[0] == "gated"
    name = "gelu_new" if value == "gated-gelu" else parts[-1] if parts else None
    if not (len(parts) == 1 or gated) or name not in ACTIVATIONS:
        raise HFImportError(f"{path}: feed_forward_proj {value!r} is not supported ("
                            f"{', '.join(ACTIVATIONS)}, each also gated-)")
    return ACTIVATIONS[name], gated


def head_rescaled(hf: dict[str, Any]) -> bool:
    """Whether transformers 5 multiplies the decoder's output by d_model^-0.5: never for mT5 (its model has no such
    step), else scale_decoder_outputs where the config has it, else unless tie_word_embeddings is false (T5Config's
    rule)."""
    if hf.get("model_type") == "mt5":
        return False
    if "scale_decoder_outputs" in hf:
        return bool(hf["scale_decoder_outputs"])
    return hf.get("tie_word_embeddings") is not False


def model_config(hf: dict[str, Any], path: Path, unk_id: int, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` for a T5 config, refusing what the instrumented model does not implement."""
    if hf.get("is_encoder_decoder", True) is not True:
        raise HFImportError(f"{path}: is_encoder_decoder {hf['is_encoder_decoder']!r}; only encoder-decoder T5 "
                            "models translate")
    activation, gated = feed_forward(hf, path)
    d_model, heads, d_kv = need(hf, "d_model", path), need(hf, "num_heads", path), hf.get("d_kv", 64)
    pad = hf.get("pad_token_id", 0)
    start = hf.get("decoder_start_token_id")
    dropout = float(hf.get("dropout_rate", 0.1))
    return checked_config(
        path, vocab_size=need(hf, "vocab_size", path), encoder_layers=need(hf, "num_layers", path),
        decoder_layers=hf.get("num_decoder_layers") or hf["num_layers"], d_model=d_model, heads=heads,
        d_ff=need(hf, "d_ff", path), dropout=dropout, attention_dropout=dropout,
        max_positions=hf.get("n_positions", MAX_POSITIONS), positional="relative", norm="pre",
        share_embeddings=True, pad_id=pad, activation=activation, bos_id=pad if start is None else start,
        eos_id=hf.get("eos_token_id", 1), unk_id=unk_id, forced_first_id=forced_first_id, normalization="rms",
        norm_eps=float(hf.get("layer_norm_epsilon", 1e-6)), scale_embeddings=False,
        d_kv=None if heads * d_kv == d_model else d_kv, scale_scores=False, attention_bias=False, ffn_bias=False,
        gated_ffn=gated, tied_head=hf.get("tie_word_embeddings") is not False, head_rescale=head_rescaled(hf),
        relative_buckets=hf.get("relative_attention_num_buckets", 32),
        relative_max_distance=hf.get("relative_attention_max_distance", 128))


def own_head(cfg: ModelConfig, state: dict[str, torch.Tensor]) -> ModelConfig:
    """The head has its own matrix where the checkpoint's lm_head differs from the shared embeddings (transformers
    5 then leaves them untied, whatever the config says), else it is the shared matrix."""
    head, shared = state.get("lm_head.weight"), state.get("shared.weight")
    untied = head is not None and shared is not None and not torch.equal(head, shared)
    return dataclasses.replace(cfg, tied_head=not untied)


def map_weights(state: dict[str, torch.Tensor], cfg: ModelConfig, path: Path) -> dict[str, torch.Tensor]:
    """This project's state dict from a T5 one; every tensor used exactly once (but `IGNORED`), shapes checked."""
    take = Taken(state, path)
    shared = take("shared.weight")
    for name in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight",
                 *(("lm_head.weight",) if cfg.tied_head else ())):
        if name in state:
            take.used.add(name)
            if state[name].shape != shared.shape or not torch.equal(state[name].float(), shared):
                raise HFImportError(f"{path}: {name} differs from shared.weight; only the head may have its own")
    out = {"src_embedding.weight": shared, "tgt_embedding.weight": shared}
    if not cfg.tied_head:
        out["output_projection.weight"] = take("lm_head.weight")
    take.used.add(IGNORED)
    for side, count in (("encoder", cfg.encoder_layers), ("decoder", cfg.decoder_layers)):
        blocks = BLOCKS[side]
        for i in range(count):
            prefix = f"{side}.block.{i}.layer"
            for j, (theirs, ours, residual) in enumerate(blocks):
                for t, o in ATTENTION.items():
                    out[f"{side}_layers.{i}.{ours}.{o}.weight"] = take(f"{prefix}.{j}.{theirs}.{t}.weight")
                out[f"{side}_layers.{i}.{residual}.norm.weight"] = take(f"{prefix}.{j}.layer_norm.weight")
            j = len(blocks)
            for t, o in (GATED_FFN if cfg.gated_ffn else FFN).items():
                out[f"{side}_layers.{i}.ffn.{o}.weight"] = take(f"{prefix}.{j}.DenseReluDense.{t}.weight")
            out[f"{side}_layers.{i}.ffn_residual.norm.weight"] = take(f"{prefix}.{j}.layer_norm.weight")
        out[f"{side}_norm.weight"] = take(f"{side}.final_layer_norm.weight")
        bias = take(f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight")
        out[f"{side}_position_bias.embedding.weight"] = bias
    return take.finish(out, cfg)


def translation_tasks(hf: dict[str, Any]) -> list[dict[str, str]]:
    """The translation tasks of config.json's task_specific_params, in the order it lists them: each a dict of
    source, target and prefix."""
    params = hf.get("task_specific_params")
    if not isinstance(params, dict):
        return []
    return [{"source": found.group(1), "target": found.group(2), "prefix": str(task.get("prefix", ""))}
            for name, task in params.items() if (found := TASK.fullmatch(name)) and isinstance(task, dict)]


def translation_task(hf: dict[str, Any], path: Path, source: str | None,
                     target: str | None) -> tuple[str, LanguagePair | None]:
    """(the task prefix, the pair) of the first translation task of config.json's task_specific_params that the
    languages given match (t5-small's en to de without them): ("", None) where it has none."""
    tasks = translation_tasks(hf)
    given = " and ".join(argument(name, value) for name, value in (("source_lang", source), ("target_lang", target))
                         if value)
    if not tasks:
        if given:
            raise HFImportError(f"{path}: names no translation task (task_specific_params) for {given} to choose")
        return "", None
    chosen = [t for t in tasks if source in (None, t["source"]) and target in (None, t["target"])]
    if not chosen:
        named = ", ".join(f"{t['source']} to {t['target']}" for t in tasks)
        raise HFImportError(f"{path}: task_specific_params translates {named}; none matches {given}")
    return chosen[0]["prefix"], LanguagePair(chosen[0]["source"], chosen[0]["target"])


def tokenizer(folder: Path, hf: dict[str, Any], source: str | None, target: str | None) -> JsonTokenizer:
    """The folder's tokenizer (``X </s>``), the task prefix of the translation task chosen before the source; every
    translation task of the config kept (`JsonTokenizer.tasks`) where it names several."""
    settings = checked_class(folder, TOKENIZERS)
    prefix, pair = translation_task(hf, folder / "config.json", source, target)
    tasks = translation_tasks(hf)
    start = hf.get("decoder_start_token_id")
    return json_tokenizer(folder, hf, settings, hf.get("pad_token_id", 0) if start is None else start,
                          text_prefix=prefix, task_prefix=True, source=pair and pair.source,
                          target=pair and pair.target, **({"tasks": tasks} if len(tasks) > 1 else {}))


def languages(source: str, folder: Path, tokenizer: PretrainedTokenizer) -> LanguagePair | None:
    """The pair of the translation task chosen, None where the config names none (Flan-T5 takes instructions)."""
    assert isinstance(tokenizer, JsonTokenizer)
    if tokenizer.source_language and tokenizer.target_language:
        return LanguagePair(tokenizer.source_language, tokenizer.target_language)
    return None


def conversion_lines(cfg: ModelConfig) -> list[str]:
    """How a T5 checkpoint maps onto the instrumented model, for its card."""
    ffn = f"gated {cfg.activation} (act(x wi_0) * x wi_1)" if cfg.gated_ffn else cfg.activation
    head = ("the head is the shared embedding matrix" if cfg.tied_head else "the head has its own matrix (lm_head)")
    return [f"- T5: pre-norm with T5's RMS norm (eps {cfg.norm_eps:g}) and a final norm on each stack; unscaled "
            f"attention scores, {cfg.heads} heads of d_kv {cfg.d_head}, no biases; the relative position bias "
            f"({cfg.relative_buckets} buckets, up to {cfg.relative_max_distance}) of each stack's first layer added "
            f"to every self-attention layer's scores; {ffn} feed-forward; embeddings shared and not scaled; {head}"
            + ("; the decoder's output multiplied by d_model^-0.5 before it" if cfg.head_rescale else "")
            + f"; decoding starts from the pad id ({cfg.bos_id}); {cfg.max_positions} positions at most (the "
            "config's n_positions; the bias itself has no limit). A cross-attention relative_attention_bias, where "
            "an older checkpoint has one, is left out: transformers ignores it too.",
            "- Tokenizer: tokenizer.json as transformers 5 builds it (where installed; else the folder's); "
            "tokenizer_rules.json holds the task prefix put before every "
            "source (task_specific_params' translation task, as transformers 4's translation pipeline did; none where "
            "the config names none, as Flan-T5's and mT5's), every translation task the config lists (where it "
            "lists several, to switch between) and the model's id table."]


FAMILY = Family("T5 / Flan-T5", tokenizer, model_config, map_weights, conversion_lines, languages, "tokenizer.json",
                "small random T5 v1.0 and v1.1 models (v1.0 also with t5-small's published tokenizer and config)",
                from_weights=own_head)
MT5 = dataclasses.replace(FAMILY, label="mT5", tested="small random mT5 models")
