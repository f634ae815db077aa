"""Small Llama and Qwen2 configs whose RoPE is scaled by YaRN (with and without an explicit attention factor,
mscale / mscale_all_dim, other betas, truncate off) or by dynamic NTK, all trained at 16 positions, for
`support.hf_lm.build_lm_folder(..., configs=CONFIGS)`."""

from __future__ import annotations

from support.hf_lm import SMALL

TRAINED = 16  # yarn's original_max_position_embeddings, dynamic's max_position_embeddings
LLAMA = ("LlamaConfig", "LlamaForCausalLM", {**SMALL, "num_key_value_heads": 2, "tie_word_embeddings": False})
QWEN2 = ("Qwen2Config", "Qwen2ForCausalLM", {**SMALL, "num_key_value_heads": 2})


def scaled(family: tuple, max_positions: int, **rope) -> tuple:
    """`family`'s config with these rope parameters and `max_positions`."""
    name, model, settings = family
    return name, model, {**settings, "max_position_embeddings": max_positions,
                         "rope_parameters": {"rope_theta": 10000.0, **rope}}


YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": TRAINED}
CONFIGS = {
    "llama-yarn": scaled((LLAMA[0], LLAMA[1], {**LLAMA[2], "head_dim": 16}), 4 * TRAINED,
                         **{**YARN, "rope_theta": 100.0}),  # a pair on the ramp, between kept and stretched
    "llama-yarn-given": scaled(LLAMA, 4 * TRAINED, **YARN, attention_factor=0.8, beta_fast=8.0, beta_slow=2.0,
                               truncate=False),
    "qwen2-yarn-mscale": scaled(QWEN2, 4 * TRAINED, **YARN, mscale=1.0, mscale_all_dim=0.5),
    "qwen2-yarn": scaled(QWEN2, 4 * TRAINED, **{**YARN, "factor": 2.5, "rope_theta": 1e6}),
    "llama-dynamic": scaled(LLAMA, TRAINED, rope_type="dynamic", factor=2.0),
    "qwen2-dynamic": scaled(QWEN2, TRAINED, rope_type="dynamic", factor=3.0),
}
