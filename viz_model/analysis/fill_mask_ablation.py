"""`ablate` and `head_importance` of an encoder: its fill-mask predictions with and without some heads (the `HeadMask`
its forced passes take), and the masked tokens' NLL over a corpus with each head off; registered in
`ablation.ABLATE` and `ablation.IMPORTANCE` under the encoder kind."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import pandas as pd
import torch
from tqdm import tqdm

from ..data.batching import DEFAULT_BATCH_TOKENS
from ..kinds.encoder import EncoderModel
from ..nn.model import HeadMask
from .ablation import ABLATE, IMPORTANCE, AblationResult, Head, all_heads, head_mask_for, token_diff
from .inputs import check_corpus


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


def masked_pairs(model: EncoderModel, texts: Sequence[str], references: Sequence[str]
                 ) -> tuple[list[list[int]], list[list[int]]]:
    """Each masked text's ids and, per mask token, the reference's id there (the reference is the text with every
    mask filled, one token each); one line naming the pair where they do not line up or a text has no mask."""
    inputs, outputs = [], []
    for i, (text, reference) in enumerate(zip(texts, references), 1):
        ids, filled = model.encode(text), model.encode(reference)
        positions = model.mask_positions(ids)
        if not positions:
            raise ValueError(f"text {i} has no mask token: write {model.mask_token} where the reference has the word "
                             "to score")
        if len(ids) != len(filled) or any(a != b for a, b in zip(ids, filled) if a != model.tokenizer.mask_id):
            raise ValueError(f"reference {i} is not text {i} with each mask filled by one token: they give "
                             f"{len(filled)} and {len(ids)} tokens")
        inputs.append(ids)
        outputs.append([filled[p] for p in positions])
    return inputs, outputs


@IMPORTANCE.register("encoder")
def fill_mask_importance(model: EncoderModel, sources: Sequence[str], references: Sequence[str], *,
                         limit: int | None = None, bleu: bool = False, beam: int = 1, alpha: float | None = None,
                         batch_tokens: int = DEFAULT_BATCH_TOKENS, progress: bool = False, rule: str | None = None
                         ) -> pd.DataFrame:
    """`head_importance` of an encoder: `sources` are texts with mask tokens, `references` the same texts with each
    mask filled (one token each); the NLL per masked token of the reference's tokens, with each head off (BLEU and
    the search settings are a translator's; one text at a time)."""
    if bleu or (beam, alpha, rule) != (1, None, None):
        raise ValueError("head_importance of an encoder measures the NLL of the masked tokens: bleu, beam, alpha and "
                         "rule are translation settings")
    texts, checked = check_corpus(sources, references, limit, ("text", "reference"))
    inputs, outputs = masked_pairs(model, texts, checked or [])
    tokens = sum(len(o) for o in outputs)

    def nll(mask: HeadMask | None) -> float:
        return float(-model.sequence_log_probs(inputs, outputs, mask).sum() / tokens)

    base = nll(None)
    rows = [{"kind": kind, "layer": layer, "head": head, "nll": value, "nll_intact": base, "nll_rise": value - base}
            for kind, layer, head in tqdm(all_heads(model.config), desc="heads", unit="head", disable=not progress,
                                          file=sys.stderr)
            for value in [nll(head_mask_for(model.config, [(kind, layer, head)], model.device))]]
    return pd.DataFrame(rows)


@torch.inference_mode()
def text_importance(model: EncoderModel, text: str) -> pd.DataFrame:
    """Per head of the encoder, switched off alone: the change in the log-probability of the intact model's first
    choices at `text`'s mask tokens (summed over the masks; negative: the head helped them). Columns: kind, layer,
    head, log_prob_intact, log_prob_ablated, change; one line where the text has no mask token."""
    ids = model.encode(text)
    positions = model.mask_positions(ids)
    if not positions:
        raise ValueError(f"the text has no mask token: write {model.mask_token} where the model should fill in a word")
    chosen = model.forced_pass(ids).logits[0, positions].argmax(dim=-1).tolist()
    intact = float(model.sequence_log_probs([ids], [chosen])[0])
    rows = []
    for kind, layer, head in all_heads(model.config):
        ablated = float(model.sequence_log_probs([ids], [chosen], head_mask_for(model.config, [(kind, layer, head)],
                                                                                   model.device))[0])
        rows.append({"kind": kind, "layer": layer, "head": head, "log_prob_intact": intact,
                     "log_prob_ablated": ablated, "change": ablated - intact})
    return pd.DataFrame(rows)
