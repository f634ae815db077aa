"""OPT: learned positions read two rows on (``OPTLearnedPositionalEmbedding``'s offset 2), pre-norm with a final norm
(``do_layer_norm_before``) or post-norm without one (OPT-350m), a ReLU MLP, biases everywhere (``enable_bias``), the
head tied; where ``word_embed_proj_dim`` differs from the hidden size the embeddings are projected in before the
positions are added (``project_in``) and the last hidden states back before the head (``project_out``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import ModelConfig
from .common import Family, HFImportError, need
from .decoder_only import conversion_lines, decoder_config, end_ids, lm_tokenizer, placed
from .gpt2 import ACTIVATIONS

POSITION_OFFSET = 2  # OPTLearnedPositionalEmbedding: position p reads row p + 2
LAYER_PARTS = {"self_attn.q_proj": "self_attn.w_q", "self_attn.k_proj": "self_attn.w_k",
               "self_attn.v_proj": "self_attn.w_v", "self_attn.out_proj": "self_attn.w_o", "fc1": "ffn.w_1",
               "fc2": "ffn.w_2", "self_attn_layer_norm": "attn_residual.norm", "final_layer_norm": "ffn_residual.norm"}


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` of an OPT config.json."""
    act = hf.get("activation_function", "relu")
    if act not in ACTIVATIONS:
        raise HFImportError(f"{path}: activation_function {act!r} is not implemented ({', '.join(ACTIVATIONS)} are)")
    if not hf.get("layer_norm_elementwise_affine", True):
        raise HFImportError(f"{path}: layer_norm_elementwise_affine = false is not implemented (norms with a gain "
                            "and a bias are)")
    d_model, pre = int(need(hf, "hidden_size", path)), bool(hf.get("do_layer_norm_before", True))
    width = int(hf.get("word_embed_proj_dim") or d_model)
    bias = bool(hf.get("enable_bias", True))
    return decoder_config(hf, path, end_ids(path.parent, hf), decoder_layers=int(need(hf, "num_hidden_layers", path)),
                          d_model=d_model, heads=int(need(hf, "num_attention_heads", path)),
                          d_ff=int(need(hf, "ffn_dim", path)), max_positions=int(need(hf, "max_position_embeddings",
                                                                                       path)),
                          positional="learned", position_offset=POSITION_OFFSET, activation=ACTIVATIONS[act],
                          norm="pre" if pre else "post", final_norm=pre and not hf.get("_remove_final_layer_norm"),
                          attention_bias=bias, ffn_bias=bias, embedding_size=None if width == d_model else width,
                          tied_head=bool(hf.get("tie_word_embeddings", True)))


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of OPT's tensors (``model.decoder.`` prefix, or ``decoder.`` as the original files have)."""
    prefix = "model.decoder." if any(k.startswith("model.decoder.") for k in state) else "decoder."
    names = {"embedding.weight": f"{prefix}embed_tokens.weight",
             "positions.embedding.weight": f"{prefix}embed_positions.weight"}
    if cfg.final_norm:
        names.update({"final_norm.weight": f"{prefix}final_layer_norm.weight",
                      "final_norm.bias": f"{prefix}final_layer_norm.bias"})
    if cfg.embedding_size is not None:
        names.update({"project_in.weight": f"{prefix}project_in.weight",
                      "project_out.weight": f"{prefix}project_out.weight"})
    if not cfg.tied_head:
        names["lm_head.weight"] = "lm_head.weight"
    for i in range(cfg.decoder_layers):
        for theirs, ours in LAYER_PARTS.items():
            for kind in ("weight", "bias"):
                if kind == "weight" or cfg.attention_bias or theirs.endswith("norm"):
                    names[f"layers.{i}.{ours}.{kind}"] = f"{prefix}layers.{i}.{theirs}.{kind}"
    return placed(state, names, {"lm_head.weight"} if cfg.tied_head else set(), path)


FAMILY = Family("OPT", lm_tokenizer, model_config, map_weights, conversion_lines, lambda *_: None, "tokenizer.json",
                "small random OPT models (positions offset by 2, pre- and post-norm, projected embeddings)",
                decoder_only=True)
