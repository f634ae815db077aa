"""Score a model on an evaluation set: a translator by translating it, then corpus BLEU and chrF
(`viz_model.data.bleu`); a language model by its loss on the set's lines; an encoder by the masked tokens it fills."""

from __future__ import annotations

import math

import torch

from ..data.batching import DEFAULT_BATCH_TOKENS
from ..data.bleu import corpus_scores, reference_streams
from ..nn.causal_lm import CausalLM
from ..nn.encoder_lm import MaskedLM
from ..nn.model import Transformer
from ..search.batched import encode_source, translate_ids
from ..tokenization.encoder_tokenizer import EncoderTokenizer
from ..tokenization.tokenizer import EOS_ID, PAD_ID, Tokenizer
from .data import EvalSet, encode_lines, encode_texts, make_batches
from .mlm_objective import ALL_MASKED, HELD_OUT, draw_seed, masked_batch
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


@torch.no_grad()
def evaluate_masked(model: MaskedLM, tokenizer: EncoderTokenizer, data: EvalSet, device: torch.device,
                    seed: int = 0) -> dict[str, float]:
    """An encoder's held-out masked-token scores on `data`'s lines (lines longer than its positions are left out):
    15% of the ordinary tokens chosen by a draw fixed by `seed`, each replaced by the mask token (`ALL_MASKED`, as a
    fill-mask user writes it); the share whose original token is the first prediction (``top1``) or among the
    first five (``top5``), the NLL per chosen token, and the lines and tokens scored."""
    model.eval()
    encoded = encode_lines(tokenizer, data.src, model.longest)
    vocab, hits1, hits5, nll, chosen = model.config.vocab_size, 0, 0, 0.0, 0
    for number, indices in enumerate(make_batches(encoded, DEFAULT_BATCH_TOKENS, seed, 0)):
        batch = masked_batch(encoded, indices, vocab, draw_seed(seed, HELD_OUT, number), ALL_MASKED).to(device)
        keep = batch.tgt_out != PAD_ID
        logits = model(batch.tgt_in, mask=(batch.tgt_in != PAD_ID)[:, None, None, :]).logits[keep].float()
        labels = batch.tgt_out[keep]
        top = logits.topk(5, dim=-1).indices
        hits1 += int((top[:, 0] == labels).sum())
        hits5 += int((top == labels[:, None]).any(dim=-1).sum())
        nll += float(torch.nn.functional.cross_entropy(logits, labels, reduction="sum"))
        chosen += int(keep.sum())
    return {"top1": round(hits1 / max(chosen, 1), 4), "top5": round(hits5 / max(chosen, 1), 4),
            "nll": round(nll / max(chosen, 1), 4), "lines": len(encoded), "masked": chosen}
