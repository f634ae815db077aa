"""Faithfulness over a corpus: for every sentence, each method's comprehensiveness and sufficiency (the means over
the sentence's output tokens) at each k, and a random baseline (what `viz-model attribute` writes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
from tqdm import tqdm

from ..analysis.alignment import Alignment
from ..inference import translate_ids
from . import DEFAULT_STEPS, attribute_ids, check_methods
from .alignment import AerCounter
from .faithfulness import DEFAULT_KS, RANDOM, RANDOM_DRAWS, deletion_scores

CORPUS_DEFAULT_METHODS = ("value_weighted", "alti")
COLUMNS = ["sentence", "method", "k", "comprehensiveness", "sufficiency", "outputs"]


def ranking_methods(methods: Sequence[str], layers: int) -> list[str]:
    """The source rankings the chosen methods give: "attention" is the layer mean and every layer."""
    names: list[str] = []
    for method in methods:
        if method == "attention":
            names += ["attention_mean", *(f"attention_layer{i + 1}" for i in range(layers))]
        else:
            names.append(method)
    return names


def corpus_faithfulness(model: Any, sources: Sequence[str], targets: Sequence[str] | None = None,
                        methods: Sequence[str] = CORPUS_DEFAULT_METHODS, ks: Sequence[int] = DEFAULT_KS,
                        steps: int = DEFAULT_STEPS, draws: int = RANDOM_DRAWS, beam: int = 4, alpha: float = 0.6,
                        progress: bool = False, gold: Sequence[Alignment] | None = None
                        ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """One row per sentence (1-based), ranking method (plus ``random``) and k; each sentence is teacher-forced on
    its translation by the full-precision network of `model` (a `TranslationModel`; the network every attribution
    and deletion reads, decoding in batches), or on `targets` when given (a reference per line).

    Returns ``(faithfulness, aer)``: with `gold` alignments (of `targets`, which they need) `aer` is the AER of
    every method and layer (`alignment.AerCounter`), else None."""
    methods = check_methods(methods)
    if targets is not None and len(targets) != len(sources):
        raise ValueError(f"{len(sources)} source sentences but {len(targets)} target sentences")
    if not sources:
        raise ValueError("no sentences to attribute")
    if gold is not None and (targets is None or len(gold) != len(sources)):
        raise ValueError("gold alignments need the target sentences they align (--tgt), one per source sentence; "
                         f"got {len(gold)} alignments for {len(sources)} sentences"
                         + ("" if targets is not None else " and no targets"))
    source_ids = [model.encode(text) for text in sources]
    if targets is None:
        outputs = [h.tokens for h in translate_ids(model.network, source_ids, beam, alpha, device=model.device)]
    else:
        outputs = [model.tokenizer.encode_target(t) + [model.config.eos_id] for t in targets]
    names = ranking_methods(methods, model.config.decoder_layers)
    rows = []
    aer = AerCounter()
    for number, (src, out) in enumerate(tqdm(list(zip(source_ids, outputs)), desc="attributing", unit="sentence",
                                             disable=not progress), 1):
        result = attribute_ids(model.network, src, out, methods, steps, pieces=model.tokenizer.pieces)
        deletions = deletion_scores(model.network, src, out, {m: result.source_scores(m) for m in names}, ks, draws)
        means = deletions.groupby(["method", "k"], sort=False)[["comprehensiveness", "sufficiency"]].mean()
        rows += [{"sentence": number, "method": method, "k": k, "comprehensiveness": row.comprehensiveness,
                  "sufficiency": row.sufficiency, "outputs": len(out)} for (method, k), row in means.iterrows()]
        if gold is not None:
            aer.add(result, gold[number - 1])
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table, None if gold is None else aer.table()


def faithfulness_table(per_sentence: pd.DataFrame) -> pd.DataFrame:
    """Per method: the mean comprehensiveness and sufficiency over sentences and k, and the share of sentences on
    which it is more comprehensive than random; the most comprehensive first."""
    random = per_sentence[per_sentence["method"] == RANDOM].set_index(["sentence", "k"])["comprehensiveness"]
    rows = []
    for method, group in per_sentence.groupby("method", sort=False):
        keyed = group.set_index(["sentence", "k"])["comprehensiveness"]
        rows.append({"method": method, "comprehensiveness": keyed.mean(), "sufficiency": group["sufficiency"].mean(),
                     "beats_random": float("nan") if method == RANDOM else float((keyed > random.reindex(
                         keyed.index)).mean()), "sentences": group["sentence"].nunique()})
    return pd.DataFrame(rows).sort_values("comprehensiveness", ascending=False, ignore_index=True)
