"""A language model's attribution over a long prompt: which methods run at its length (`refusals`, one line for each
that does not), and value-weighted attention of the continuation's query rows alone, their weights made on demand
from each layer's `ScoreRecipe` (never a layer's n x n maps)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..nn.arrays import to_numpy
from ..nn.causal_lm import CausalLM, CausalLMOutput
from ..on_demand import recipe_maps
from .contributions import head_outputs

TOKEN_PASSES = 16_384
"""The most token-passes a long prompt's gradients may cost: one backward pass over all n tokens for each continuation
token (x the path's points for integrated gradients); 16,384 are about 4 s on 2 cores for a tiny model."""


def value_weighted_rows(network: CausalLM, out: CausalLMOutput, first: int) -> list[np.ndarray]:
    """Per layer ``(heads, len - first, len)`` float64: ``alpha_hij * ||f_h(x_j)||`` of query rows `first` on, from a
    pass `out` that kept recipes (``need_weights="recipe"``), not maps: a layer's rows made on demand, then let go."""
    if not out.recipes:
        raise ValueError("value_weighted_rows reads a pass run with need_weights='recipe'")
    length = out.recipes[0].shape[1]
    if not 0 <= first < length:
        raise ValueError(f"first must be a position from 0 to {length - 1}, got {first}")
    rows = []
    with torch.inference_mode():
        for layer, (recipe, kv) in enumerate(zip(out.recipes, out.cache)):
            attention, _ = network.attention_block(layer)
            norms = head_outputs(network, attention.query_heads(kv.value), "decoder", layer).norm(dim=-1)[0]
            weights = recipe_maps(recipe, rows=slice(first, None))
            rows.append(to_numpy(weights.to(norms.dtype) * norms[:, None, :], torch.float64))
    return rows


def refusals(methods: Sequence[str], tokens: int, outputs: int, steps: int, d_model: int) -> dict[str, str]:
    """For a long prompt (`tokens` in the pass, `outputs` continuation tokens), each of `methods` that does not run,
    with one line naming it and its limit (ALTI+ always: it splits every layer into n² vectors)."""
    found: dict[str, str] = {}
    if "alti" in methods:
        found["alti"] = (f"ALTI+ is left out: it splits each layer's output into one vector per query and key "
                         f"({tokens:,}² x {d_model} values a layer here) and multiplies every layer's {tokens:,} x "
                         f"{tokens:,} contributions; it runs on prompts whose maps are drawn whole, so the share of "
                         "the prompt and the continuation is not drawn either.")
    quick = [m for m in ("saliency", "input_x_gradient") if m in methods]
    if quick and outputs * tokens > TOKEN_PASSES:
        names = " and ".join({"saliency": "Saliency", "input_x_gradient": "input × gradient"}[m] for m in quick)
        found.update(dict.fromkeys(quick, (
            f"{names} {'are' if len(quick) > 1 else 'is'} left out: one backward pass over all {tokens:,} tokens for "
            f"each of the {outputs} continuation tokens ({outputs * tokens:,} token-passes; at most "
            f"{TOKEN_PASSES:,} run here): {max(1, TOKEN_PASSES // tokens)} new tokens or fewer at this length.")))
    if "integrated_gradients" in methods and steps * outputs * tokens > TOKEN_PASSES:
        found["integrated_gradients"] = (
            f"Integrated gradients are left out: up to {steps} points on the path, each one backward pass over all "
            f"{tokens:,} tokens for each of the {outputs} continuation tokens ({steps * outputs * tokens:,} "
            f"token-passes; at most {TOKEN_PASSES:,} run here).")
    return found
