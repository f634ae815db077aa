"""Which attribution method aligns words best: AER of every method (and of every layer, for the per-layer ones)
against gold Pharaoh alignments, with the alignment tooling of `viz_model.analysis.word_alignment`.

Each method's ``(outputs, source tokens)`` scores are merged into words (sum over source pieces, mean over target
pieces) and each target word is linked to its highest-scoring source word. Signed scores (input x gradient,
integrated gradients) are read by magnitude. Per-layer maps: cross-attention and value-weighted attention (heads
averaged) and the cross-attention sub-layer's ALTI contributions of the source; whole-model maps: the attention
layer mean, rollout, ALTI+ and the gradient methods (layer ``<NA>``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from ..analysis.word_alignment import (
    Alignment,
    aer_counts,
    aer_from_counts,
    alignment_links,
    check_gold_fits,
    word_attention,
)
from .record import Attribution

SIGNED = ("input_x_gradient", "integrated_gradients")


def method_maps(result: Attribution) -> dict[tuple[str, int | None], np.ndarray]:
    """``(method, layer or None) -> (outputs, source tokens)`` for every method the attribution holds."""
    src = len(result.source_tokens)
    maps: dict[tuple[str, int | None], np.ndarray] = {}
    for layer, weights in enumerate(result.attentions):
        maps[("attention", layer)] = weights.mean(axis=0)
    for layer, weights in enumerate(result.value_weighted.get("cross", [])):
        maps[("value_weighted", layer)] = weights.mean(axis=0)
    for layer, block in enumerate(result.alti_layers.get("cross", [])):
        maps[("alti", layer)] = block[:, :src]
    for method in ("attention_mean", "rollout", "alti", *result.gradients):
        if method in result.methods:
            scores = result.source_scores(method)
            maps[(method, None)] = np.abs(scores) if method in SIGNED else scores
    return maps


class AerCounter:
    """Link counts of every method and layer, summed sentence by sentence (`add`), and their AER (`table`)."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, int | None], np.ndarray] = {}
        self.sentences = 0

    def add(self, result: Attribution, gold: Alignment) -> None:
        """One sentence: `result` (teacher-forced on the gold alignment's target sentence) against `gold`."""
        for key, scores in method_maps(result).items():
            words = word_attention(scores, result.source_tokens, result.output_tokens)
            check_gold_fits(gold, self.sentences, len(words.source_words), len(words.target_words))
            self.counts[key] = self.counts.get(key, 0) + aer_counts(alignment_links(words.weights), gold)
        self.sentences += 1

    def table(self) -> pd.DataFrame:
        """Columns: method, layer (``<NA>``: the whole model; else 0-based), aer, precision, recall, links; the best
        (lowest AER) first."""
        rows = [{"method": method, "layer": layer, "aer": aer_from_counts(c),
                 "precision": c[3] / c[0] if c[0] else float("nan"), "recall": c[2] / c[1] if c[1] else float("nan"),
                 "links": int(c[0])} for (method, layer), c in self.counts.items()]
        table = pd.DataFrame(rows, columns=["method", "layer", "aer", "precision", "recall", "links"])
        table["layer"] = table["layer"].astype("Int64")
        return table.sort_values("aer", kind="stable", ignore_index=True)


def attribution_aer(results: Iterable[Attribution], gold: Sequence[Alignment]) -> pd.DataFrame:
    """AER, precision and recall of every method (and layer) over the sentences, the i-th result against the i-th
    gold alignment (whose target side is the result's output); see `AerCounter.table`."""
    counter = AerCounter()
    for index, result in enumerate(results):
        if index >= len(gold):
            raise ValueError(f"sentence {index + 1} has no gold alignment ({len(gold)} given)")
        if not result.attentions:
            raise ValueError("attribution_aer (word alignment) does not apply to a language model (decoder-only): "
                             "its attributions have no cross-attention")
        counter.add(result, gold[index])
    if counter.sentences != len(gold):
        raise ValueError(f"{counter.sentences} sentences but {len(gold)} gold alignments")
    return counter.table()
