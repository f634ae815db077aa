"""`ablate` of an encoder: its fill-mask predictions with and without some heads (the `HeadMask` its forced passes
take), registered in `ablation.ABLATE` under the encoder kind."""

from __future__ import annotations

import torch

from ..kinds.encoder import EncoderModel
from .ablation import ABLATE, AblationResult, Head, head_mask_for, token_diff


def predicted_ids(trace_settings: dict) -> list[int]:
    """The most probable id at each mask token of an encoder's trace (its ``settings``)."""
    return [found["ids"][0] for found in trace_settings["predictions"]]


@ABLATE.register("encoder")
@torch.inference_mode()
def ablate_fill_mask(model: EncoderModel, text: str, heads: list[Head], *, beam: int | None = None,
                     alpha: float | None = None, rule: str | None = None, max_new_tokens: int = 20
                     ) -> AblationResult:
    """`ablate` of an encoder: `text`'s mask tokens filled with and without `heads` (checked, ``("encoder", layer,
    head)``). The intact and ablated traces hold each side's predictions (``settings["predictions"]``); the
    "translation" is the text with each mask filled by its most probable token; the log-probabilities are of the
    intact model's choices. The search settings are a translator's, `max_new_tokens` a language model's."""
    if (beam, alpha, rule) != (None, None, None):
        raise ValueError("ablate fills an encoder's mask tokens: beam, alpha and rule are translation search settings")
    intact = model.trace(text)
    chosen = predicted_ids(intact.settings)
    if not chosen:
        raise ValueError(f"the text has no mask token: write {model.mask_token} where the model should fill in a word")
    mask = head_mask_for(model.config, heads, model.device)
    ablated = model.trace(text, text_pair=None, head_mask=mask)
    tokens = [model.tokenizer.token_text(i) for i in predicted_ids(ablated.settings)]
    before = [model.tokenizer.token_text(i) for i in chosen]
    scored = model.sequence_log_probs([intact.source_ids], [chosen], mask)
    return AblationResult(heads, intact, ablated, ablated.translation, tokens, token_diff(before, tokens),
                          intact.log_probability, float(scored[0]))
