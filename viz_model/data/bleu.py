"""Corpus BLEU and chrF with sacrebleu (cased, detokenized output against raw references), one or many references."""

from __future__ import annotations

import sacrebleu


def reference_streams(refs: list[list[str]]) -> list[list[str | None]]:
    """Per-sentence reference lists as sacrebleu's reference streams (stream j = every sentence's j-th reference).

    Sentences with fewer references are padded with None, which sacrebleu (2.x, ``_cache_references``) drops per
    sentence; an empty string would instead count as a real, empty reference.
    """
    width = max((len(r) for r in refs), default=0)
    if any(not r for r in refs):
        raise ValueError("every sentence needs at least one reference")
    return [[r[j] if j < len(r) else None for r in refs] for j in range(width)]


def corpus_scores(hypotheses: list[str], references: list[str] | list[list[str]] | list[list[str | None]]
                  ) -> dict[str, float]:
    """``{"bleu": ..., "chrf": ...}``; `references` is one list per reference stream (None = no reference in that
    stream for that sentence, see `reference_streams`), or a single list."""
    streams = [references] if references and isinstance(references[0], str) else references
    for stream in streams:  # type: ignore[union-attr]
        if len(stream) != len(hypotheses):
            raise ValueError(f"{len(hypotheses)} hypotheses but a reference stream of {len(stream)} lines")
    bleu = sacrebleu.corpus_bleu(hypotheses, streams)
    chrf = sacrebleu.corpus_chrf(hypotheses, streams)
    return {"bleu": round(bleu.score, 2), "chrf": round(chrf.score, 2)}
