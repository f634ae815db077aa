"""`attribute` of an encoder: which tokens each mask token's prediction depends on (value-weighted attention, ALTI
rolled out over the encoder's layers, gradients, integrated gradients), registered in `scoring.ATTRIBUTE` under the
encoder kind.

Output i is the most probable token at the text's i-th mask token, its score that token's log-probability there;
every method scores every token of the text (special tokens and the mask tokens included). The record's source is the
text, its prefix empty.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..kinds.encoder import EncoderModel
from .contributions import self_alti, value_weighted
from .gradients import DEFAULT_STEPS, DEFAULT_TOLERANCE, GRADIENT_METHODS, GradientResult, read_gradients
from .record import Attribution
from .scoring import (
    ATTRIBUTE,
    DEFAULT_METHODS,
    LANGUAGE_MODEL_DEFAULTS,
    check_methods,
    check_self_attention_methods,
    float64_array,
)

ENCODER = "an encoder (encoder-only)"


@ATTRIBUTE.register("encoder")
def attribute_fill_mask(model: EncoderModel, text: str, target: str | None = None, *,
                        methods: Sequence[str] = DEFAULT_METHODS, steps: int = DEFAULT_STEPS, foil: str | None = None,
                        beam: int | None = None, alpha: float | None = None, rule: str | None = None,
                        tolerance: float = DEFAULT_TOLERANCE) -> Attribution:
    """`attribute` of an encoder: the prediction at each mask token of `text` attributed to the text's tokens
    (`DEFAULT_METHODS`: `LANGUAGE_MODEL_DEFAULTS`, no cross-attention); one line where the text has no mask token.
    A forced `target`, `foil` and the search settings are a translator's."""
    if (target, foil, beam, alpha, rule) != (None, None, None, None, None):
        raise ValueError("attribute of an encoder explains its own prediction at each mask token: target, foil, "
                         "beam, alpha and rule do not apply")
    methods = check_methods(LANGUAGE_MODEL_DEFAULTS if methods is DEFAULT_METHODS else methods)
    check_self_attention_methods(methods, ENCODER)
    encoded = model.encoded(text)
    ids, rows = encoded.ids, model.mask_positions(encoded.ids)
    if not rows:
        raise ValueError(f"the text has no mask token: write {model.mask_token} where the model should fill in a word")
    with torch.inference_mode():
        out = model.forced_pass(ids, encoded.type_ids, need_weights=True)
        log_probs = torch.log_softmax(out.logits[0, rows].float(), dim=-1)
        chosen = log_probs.argmax(dim=-1)
        network = model.network
        vw = ({"encoder": [float64_array(value_weighted(network, record, "encoder", layer)[0][:, rows])
                           for layer, record in enumerate(out.records)]} if "value_weighted" in methods else {})
        alti, alti_layers = None, {}
        if "alti" in methods:
            rolled, blocks = self_alti(network, out, "encoder")
            alti = float64_array(rolled[0, rows])
            alti_layers = {"encoder": [float64_array(block[0]) for block in blocks]}
        maps = [float64_array(weights[0]) for weights in out.attentions]
        del out
    outputs = chosen.tolist()
    gradient_methods = tuple(m for m in methods if m in GRADIENT_METHODS)
    grads = (read_gradients(model, ids, rows, outputs, gradient_methods, steps, None, tolerance)
             if gradient_methods else GradientResult({}, 0, None, None))
    pieces = model.tokenizer.pieces
    return Attribution(
        source_tokens=pieces(ids), prefix_tokens=[], output_tokens=pieces(outputs), source_ids=list(ids),
        output_ids=outputs, log_probs=float64_array(log_probs.max(dim=-1).values), attentions=[],
        encoder_attentions=maps, value_weighted=vw, alti=alti, alti_layers=alti_layers, gradients=grads.scores,
        steps=grads.steps, completeness_gap=grads.completeness_gap, score_change=grads.score_change,
        tolerance=grads.tolerance, model_name=model.name)
