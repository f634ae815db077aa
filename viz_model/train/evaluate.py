"""Corpus BLEU and chrF with sacrebleu (cased, detokenized output against raw references)."""

from __future__ import annotations

import sacrebleu
import torch

from ..inference import translate_texts
from ..model import Transformer
from ..tokenizer import Tokenizer


def corpus_scores(hypotheses: list[str], references: list[str] | list[list[str]]) -> dict[str, float]:
    """``{"bleu": ..., "chrf": ...}``; `references` is one list per reference stream, or a single list."""
    streams = [references] if references and isinstance(references[0], str) else references
    for stream in streams:  # type: ignore[union-attr]
        if len(stream) != len(hypotheses):
            raise ValueError(f"{len(hypotheses)} hypotheses but a reference stream of {len(stream)} lines")
    bleu = sacrebleu.corpus_bleu(hypotheses, streams)
    chrf = sacrebleu.corpus_chrf(hypotheses, streams)
    return {"bleu": round(bleu.score, 2), "chrf": round(chrf.score, 2)}


def evaluate_bleu(model: Transformer, tokenizer: Tokenizer, src: list[str], ref: list[str], beam: int,
                  device: torch.device) -> dict[str, float]:
    model.eval()
    return corpus_scores(translate_texts(model, tokenizer, src, beam=beam, alpha=0.6, device=device), ref)
