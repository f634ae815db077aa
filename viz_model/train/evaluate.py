"""Score a model on an evaluation set: translate it, then corpus BLEU and chrF (`viz_model.data.bleu`)."""

from __future__ import annotations

import torch

from ..data.bleu import corpus_scores, reference_streams
from ..nn.model import Transformer
from ..search.batched import encode_source, translate_ids
from ..tokenization.tokenizer import EOS_ID, Tokenizer
from .data import EvalSet


def evaluate_bleu(model: Transformer, tokenizer: Tokenizer, data: EvalSet, beam: int,
                  device: torch.device) -> dict[str, float]:
    """Translate `data` (sources longer than the model's positions are truncated) and score it against all its
    references."""
    model.eval()
    limit = model.config.max_positions
    sources = [ids if len(ids) <= limit else ids[:limit - 1] + [EOS_ID]
               for ids in (encode_source(tokenizer, text) for text in data.src)]
    hyps = translate_ids(model, sources, beam=beam, alpha=0.6, device=device)
    return corpus_scores([tokenizer.decode(h.tokens) for h in hyps], reference_streams(data.refs))
