"""GPT-Neo (the TinyStories models): GPT-2's layer with scores not divided by sqrt(head width), global layers
alternating with local ones (``attention_types``: a local layer sees its last ``window_size`` keys, itself included),
learned positions, unbiased Q, K and V projections (the output's biased), a tanh-GELU MLP, the head tied."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import ModelConfig
from .common import Family, HFImportError, need
from .decoder_only import conversion_lines, decoder_config, end_ids, lm_tokenizer, placed
from .gpt2 import ACTIVATIONS, gpt_names

LAYER_PARTS = {"ln_1": "attn_residual.norm", "ln_2": "ffn_residual.norm", "attn.attention.q_proj": "self_attn.w_q",
               "attn.attention.k_proj": "self_attn.w_k", "attn.attention.v_proj": "self_attn.w_v",
               "attn.attention.out_proj": "self_attn.w_o", "mlp.c_fc": "ffn.w_1", "mlp.c_proj": "ffn.w_2"}
LAYER_KINDS = ("global", "local")


def local_layers(hf: dict[str, Any], path: Path, layers: int) -> tuple[int, ...]:
    """The layers ``attention_types`` makes local (``[[["global", "local"], 12]]``: every other layer, from the
    second); one line where it names another kind or does not list `layers` layers."""
    types = hf.get("attention_types") or [[list(LAYER_KINDS), 12]]
    try:
        kinds = [kind for item in types for _ in range(int(item[1])) for kind in item[0]]
    except (TypeError, ValueError, IndexError):
        raise HFImportError(f"{path}: attention_types must list [[kinds], repeats] pairs, got {types!r}") from None
    if len(kinds) != layers or not set(kinds) <= set(LAYER_KINDS):
        raise HFImportError(f"{path}: attention_types must give one of {', '.join(LAYER_KINDS)} for each of the "
                            f"{layers} layers, got {kinds!r}")
    return tuple(i for i, kind in enumerate(kinds) if kind == "local")


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` of a GPT-Neo config.json."""
    act = hf.get("activation_function", "gelu_new")
    if act not in ACTIVATIONS:
        raise HFImportError(f"{path}: activation_function {act!r} is not implemented ({', '.join(ACTIVATIONS)} are)")
    d_model, layers = int(need(hf, "hidden_size", path)), int(need(hf, "num_layers", path))
    local = local_layers(hf, path, layers)
    window = {"sliding_window": int(hf.get("window_size", 256)), "sliding_layers": local} if local else {}
    return decoder_config(hf, path, end_ids(path.parent, hf), decoder_layers=layers, d_model=d_model,
                          heads=int(need(hf, "num_heads", path)), d_ff=int(hf.get("intermediate_size") or 4 * d_model),
                          max_positions=int(need(hf, "max_position_embeddings", path)), positional="learned",
                          norm_eps=float(hf.get("layer_norm_epsilon", 1e-5)), activation=ACTIVATIONS[act],
                          scale_scores=False, qkv_bias=False, tied_head=bool(hf.get("tie_word_embeddings", True)),
                          **window)


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of GPT-Neo's tensors (``transformer.`` prefix or none)."""
    return placed(state, *gpt_names(state, cfg, LAYER_PARTS, ("q_proj", "k_proj", "v_proj")), path)


FAMILY = Family("GPT-Neo", lm_tokenizer, model_config, map_weights, conversion_lines, lambda *_: None,
                "tokenizer.json", "small random GPT-Neo models (unscaled scores, local layers)", decoder_only=True)
