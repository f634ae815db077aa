"""What the fairseq-born families share (Marian, M2M100 / NLLB, BART, mBART): config.json's keys, the tensor names
of their layers, and the map of their checkpoints onto the instrumented model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..config import ModelConfig
from ..nn.model import Transformer
from ..nn.positional import sinusoidal_table
from .common import HFImportError, checked_config, need

ACTIVATIONS = {"relu": "relu", "silu": "silu", "swish": "silu", "gelu": "gelu"}
# Hugging Face names -> this project's, per layer (the prefix model.encoder.layers.N. / model.decoder.layers.N.)
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
EMBEDDING_NORMS = {"model.encoder.layernorm_embedding": "encoder_embedding_norm",
                   "model.decoder.layernorm_embedding": "decoder_embedding_norm"}


def checked_activation(hf: dict[str, Any], path: Path, checks: dict[str, Any]) -> str:
    """Our activation of a fairseq-style config.json, after checking what the instrumented model has one value
    for (heads, FFN width), the settings in `checks` (key: the only value supported) and one vocabulary."""
    same = {("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")}
    for a, b in same:
        if need(hf, a, path) != need(hf, b, path):
            raise HFImportError(f"{path}: {a} = {hf[a]} but {b} = {hf[b]}; the instrumented model has one value")
    for key, wanted in checks.items():
        if hf.get(key, wanted) != wanted:
            raise HFImportError(f"{path}: {key} = {hf[key]!r}; only {wanted!r} is supported")
    if hf.get("decoder_vocab_size") not in (None, need(hf, "vocab_size", path)):
        raise HFImportError(f"{path}: decoder_vocab_size {hf['decoder_vocab_size']} differs from vocab_size "
                            f"{hf['vocab_size']}; separate target vocabularies are not supported")
    activation = ACTIVATIONS.get(need(hf, "activation_function", path))
    if activation is None:
        raise HFImportError(f"{path}: activation_function {hf['activation_function']!r} is not supported "
                            f"({', '.join(ACTIVATIONS)})")
    return activation


def fairseq_config(hf: dict[str, Any], path: Path, unk_id: int, activation: str, **layout: Any) -> ModelConfig:
    """Our `ModelConfig` of a fairseq-style config.json: its sizes and ids, with the family's `layout`."""
    return checked_config(
        path, vocab_size=need(hf, "vocab_size", path), encoder_layers=need(hf, "encoder_layers", path),
        decoder_layers=need(hf, "decoder_layers", path), d_model=need(hf, "d_model", path),
        heads=hf["encoder_attention_heads"], d_ff=hf["encoder_ffn_dim"], dropout=float(hf.get("dropout", 0.1)),
        attention_dropout=float(hf.get("attention_dropout", 0.0)),
        max_positions=need(hf, "max_position_embeddings", path), share_embeddings=True,
        pad_id=need(hf, "pad_token_id", path), activation=activation, eos_id=need(hf, "eos_token_id", path),
        unk_id=unk_id, **{"positional": "sinusoidal", **layout})


class Taken:
    """The checkpoint's tensors as the map takes them: each one named once, the rest reported at the end."""

    def __init__(self, state: dict[str, torch.Tensor], path: Path) -> None:
        self.state, self.path, self.used = state, path, set()

    def __call__(self, name: str) -> torch.Tensor:
        if name not in self.state:
            raise HFImportError(f"{self.path}: no tensor {name!r}")
        self.used.add(name)
        return self.state[name].float()

    def finish(self, out: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
        """`out`, after checking that every tensor found a place and has the shape `cfg` implies."""
        unused = sorted(set(self.state) - self.used)
        if unused:
            more = f" and {len(unused) - 5} more" if len(unused) > 5 else ""
            raise HFImportError(f"{self.path}: tensors the instrumented model has no place for: "
                                f"{', '.join(unused[:5])}{more}")
        expected = {k: tuple(v.shape) for k, v in Transformer(cfg).state_dict().items()}
        for name, tensor in out.items():
            if tuple(tensor.shape) != expected.get(name):
                raise HFImportError(f"{self.path}: {name} has shape {tuple(tensor.shape)}, config.json implies "
                                    f"{expected.get(name)}")
        return out


def map_weights(state: dict[str, torch.Tensor], cfg: ModelConfig, path: Path) -> dict[str, torch.Tensor]:
    """This project's state dict from a fairseq-style one; every tensor used exactly once, shapes checked."""
    out: dict[str, torch.Tensor] = {}
    take = Taken(state, path)
    shared = take(next((n for n in TIED if n in state), TIED[0]))
    for name in TIED:  # the source, target and output embeddings are one matrix in a Marian model
        if name in state:
            take.used.add(name)
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
    norms = {**(FINAL_NORMS if cfg.norm == "pre" else {}), **(EMBEDDING_NORMS if cfg.embedding_norm else {})}
    for theirs, ours in norms.items():
        for part in ("weight", "bias"):
            out[f"{ours}.{part}"] = take(f"{theirs}.{part}")
    if cfg.positional == "learned":  # BART's tables, row p + 2 for position p
        out["src_positions.embedding.weight"] = take(POSITIONS[0])
        out["tgt_positions.embedding.weight"] = take(POSITIONS[1])
    else:
        check_sinusoids(state, cfg, take)
    return take.finish(out, cfg)


def check_sinusoids(state: dict[str, torch.Tensor], cfg: ModelConfig, take: Taken) -> None:
    """The checkpoint's position tables (fixed sinusoids, recomputed by the model) equal this config's."""
    offset = cfg.position_offset
    table = sinusoidal_table(cfg.max_positions + offset, cfg.d_model, layout=cfg.sinusoid_layout,
                             frequencies=cfg.sinusoid_frequencies)[offset:]
    for name in POSITIONS:
        if name in state:
            take.used.add(name)
            theirs = state[name].float()[offset:offset + cfg.max_positions]
            if theirs.shape != table.shape or not torch.allclose(theirs, table, atol=1e-5):
                kind = f"{cfg.sinusoid_layout}, {cfg.sinusoid_frequencies} frequencies, from row {offset}"
                raise HFImportError(f"{take.path}: {name} is not the sinusoid table of this config ({kind})")
