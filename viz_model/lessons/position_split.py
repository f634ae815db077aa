"""One head of a loaded language model, its scores on a prompt split into what content and position contribute
(RoPE: the unrotated q·k and what the rotation adds; ALiBi: q·k and the slope's penalty), checked against the
scores the model's forward recorded."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..kinds.language_model import INPUT_POSITIONS, LanguageModel
from ..nn.arrays import to_numpy
from .position_alibi import distance_bias
from .position_parts import LessonError, ScoreSplit, rotation_part
from .position_rope import layer_attention_factor, layer_frequencies, model_frequencies, unrotated_queries_keys


def check_layer_head(model: LanguageModel, layer: int, head: int) -> None:
    """Nothing where `layer` and `head` (0-based) are in the model; else one line naming the range."""
    config = model.config
    for name, value, count in (("layer", layer, config.decoder_layers), ("head", head, config.heads)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
            raise LessonError(f"{name} must be an integer from 1 to {count} (this model's {name}s), got "
                              f"{value + 1 if isinstance(value, int) else value!r}")


def split_lm_scores(model: LanguageModel, ids: Sequence[int], layer: int, head: int) -> ScoreSplit:
    """The scores of `head` in `layer` (0-based) over `ids`, split into content and position: computed from the
    layer's input and weights, not from the scores, so `ScoreSplit.adds_up` checks the split against the forward.
    A table added to the input (GPT-2) mixes with the tokens before the first norm: refused in one line."""
    config = model.config
    check_layer_head(model, layer, head)
    if config.positional in INPUT_POSITIONS:
        raise LessonError(f"this model adds a {config.positional} table of positions to its input and is pre-norm: "
                          "its first layer reads LayerNorm(token + position), which mixes the two, so no head's scores "
                          "split into content and position (its table is shown instead)")
    if not ids:
        raise LessonError("the prompt gives no tokens to split the scores of")
    tolerance = 1e-4 if model.network.embedding.weight.dtype in (torch.float32, torch.float64) else 2e-2
    with torch.no_grad():
        record = model.forced_pass(list(ids), need_weights=True).records[layer]
        q, k, divisor = unrotated_queries_keys(model, record.residual, layer)
        score = to_numpy(record.scores[0, head])
    content = (q[head] @ k[head].T / divisor).cpu().numpy()
    softcap = model.network.layers[layer].self_attn.softcap
    note_cap = (f"; this layer caps its scores (softcap {softcap:g}), so the parts, taken before the cap, do not add "
                "up to them") if softcap is not None else ""
    if config.positional == "alibi":
        length = score.shape[0]
        distance = abs(torch.arange(length)[:, None] - torch.arange(length)[None, :]).numpy()
        penalty = distance_bias(config, length)[head][distance]
        return ScoreSplit(score, {"content": content, "position bias": penalty},
                          f"ALiBi: q·k of the tokens' vectors, and −m·|p − j| with this head's slope{note_cap}",
                          tolerance)
    frequencies = torch.from_numpy(layer_frequencies(model, layer, model_frequencies(config, len(ids))))
    turned = config.rope_dims or config.d_head  # partial rotary: the dimensions left add nothing to the rotation
    part = rotation_part(q[head:head + 1, :, :turned], k[head:head + 1, :, :turned], config.rope_base, divisor,
                         frequencies, layer_attention_factor(model, layer) ** 2)[0]
    return ScoreSplit(score, {"content": content, "rotation": part},
                      f"RoPE: q·k of the unrotated queries and keys, and q·R(j−p)k − q·k{note_cap}", tolerance)
