"""Score a model on an evaluation set: a translator by translating it, then corpus BLEU and chrF
(`viz_model.data.bleu`); a language model by its loss on the set's lines."""

from __future__ import annotations

import math

import torch

from ..data.batching import DEFAULT_BATCH_TOKENS
from ..data.bleu import corpus_scores, reference_streams
from ..nn.causal_lm import CausalLM
from ..nn.model import Transformer
from ..search.batched import encode_source, translate_ids
from ..tokenization.tokenizer import EOS_ID, Tokenizer
from .data import EvalSet, encode_texts
from .objectives import mean_nll


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


def evaluate_loss(model: CausalLM, tokenizer: Tokenizer, data: EvalSet, device: torch.device) -> dict[str, float]:
    """A language model's negative log-likelihood per token of `data`'s lines (``y </s>`` after ``<s>``; lines
    longer than its positions are left out), its perplexity and the number of lines scored."""
    encoded = encode_texts(tokenizer, data.src, model.config.max_positions)
    nll = mean_nll(model, encoded, DEFAULT_BATCH_TOKENS, 0, device) if len(encoded) else math.nan
    return {"nll": round(nll, 4), "perplexity": round(math.exp(nll), 2), "lines": len(encoded)}
