"""Small Llama, Qwen2 and Gemma 3 configs whose RoPE is scaled by YaRN (with and without an explicit attention factor,
mscale / mscale_all_dim, other betas, truncate off) or by dynamic NTK, all trained at 16 positions, for
`support.hf_lm.build_lm_folder(..., configs=CONFIGS)`."""

from __future__ import annotations

from support.hf_lm import CONFIGS as FAMILIES
from support.hf_lm import SMALL

TRAINED = 16  # yarn's original_max_position_embeddings, dynamic's max_position_embeddings
LLAMA = ("LlamaConfig", "LlamaForCausalLM", {**SMALL, "num_key_value_heads": 2, "tie_word_embeddings": False})
QWEN2 = ("Qwen2Config", "Qwen2ForCausalLM", {**SMALL, "num_key_value_heads": 2})
GEMMA3 = FAMILIES["gemma3"]  # sliding layers with their own unscaled base, the full ones scaled


def scaled(family: tuple, max_positions: int, **rope) -> tuple:
    """`family`'s config with these rope parameters (Gemma 3: its full layers') and `max_positions`."""
    name, model, settings = family
    rope = {"rope_theta": 10000.0, **rope}
    if "layer_types" in settings:
        rope = {"full_attention": rope, "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}
    return name, model, {**settings, "max_position_embeddings": max_positions, "rope_parameters": rope}


def full_rope(settings: dict) -> dict:
    """The rope parameters of a config's settings (Gemma 3: its full layers')."""
    rope = settings["rope_parameters"]
    return rope.get("full_attention", rope)


YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": TRAINED}
CONFIGS = {
    "llama-yarn": scaled((LLAMA[0], LLAMA[1], {**LLAMA[2], "head_dim": 16}), 4 * TRAINED,
                         **{**YARN, "rope_theta": 100.0}),  # a pair on the ramp, between kept and stretched
    "llama-yarn-given": scaled(LLAMA, 4 * TRAINED, **YARN, attention_factor=0.8, beta_fast=8.0, beta_slow=2.0,
                               truncate=False),
    "qwen2-yarn-mscale": scaled(QWEN2, 4 * TRAINED, **YARN, mscale=1.0, mscale_all_dim=0.5),
    "qwen2-yarn": scaled(QWEN2, 4 * TRAINED, **{**YARN, "factor": 2.5, "rope_theta": 1e6}),
    "gemma3-yarn": scaled(GEMMA3, 4 * TRAINED, **YARN, attention_factor=1.3),
    "llama-dynamic": scaled(LLAMA, TRAINED, rope_type="dynamic", factor=2.0),
    "gemma3-dynamic": scaled(GEMMA3, TRAINED, rope_type="dynamic", factor=2.0),
    "qwen2-dynamic": scaled(QWEN2, TRAINED, rope_type="dynamic", factor=3.0),
}
