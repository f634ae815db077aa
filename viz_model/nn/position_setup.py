"""Where a config puts position, built once for both networks: a table added to the input (learned, sinusoidal) or
a rule on the self-attention scores (RoPE, ALiBi), the same for the translator and the language model."""

from __future__ import annotations

import torch
from torch import nn

from ..config import ModelConfig
from .alibi import ALiBi
from .dynamic_rotary import DynamicRotary
from .positional import LearnedPositions, SinusoidalPositions
from .rope_scaling import config_attention_factor, config_frequencies, rotary_dims
from .rotary import Rotary


def input_positions(cfg: ModelConfig) -> nn.Module | None:
    """The table of positions added to the input embeddings (``positional`` "learned" or "sinusoidal"), else None."""
    if cfg.positional == "learned":
        return LearnedPositions(cfg.max_positions, cfg.d_model, cfg.position_offset)
    if cfg.positional == "sinusoidal":
        return SinusoidalPositions(cfg.max_positions, cfg.d_model, cfg.sinusoid_layout, cfg.sinusoid_frequencies,
                                   cfg.position_offset)
    return None


def score_schemes(cfg: ModelConfig) -> tuple[Rotary | ALiBi | None, Rotary | None]:
    """RoPE's rotation (its frequencies scaled as the config says) or ALiBi's slopes, without parameters and built
    once, not at every decoding step; and the sliding layers' own RoPE (Gemma 3's local base). None where the config
    has none."""
    if cfg.positional == "rope":
        turned = rotary_dims(cfg)  # partial rotary: the first dimensions of each head
        local = None if cfg.local_rope_base is None else Rotary(turned, cfg.local_rope_base)
        if cfg.rope_scaling == "dynamic":  # recomputed for each pass's length
            return DynamicRotary(turned, cfg.rope_base, cfg.rope_factor, cfg.rope_original_max_positions), local
        with torch.device("cpu"):  # also where the model is built on the meta device to be loaded
            frequencies = config_frequencies(cfg)
        return Rotary(turned, cfg.rope_base, frequencies, config_attention_factor(cfg)), local
    if cfg.positional == "alibi":
        return ALiBi(cfg.heads, cfg.alibi_max_bias), None
    return None, None
