"""Faithfulness over a corpus: for every sentence, each method's comprehensiveness and sufficiency (the means over
the sentence's output tokens) at each k, and a random baseline (what `viz-model attribute` writes)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any, NamedTuple

import pandas as pd
from tqdm import tqdm

from ..analysis.inputs import require_cross_attention
from ..analysis.word_alignment import Alignment
from ..config.checks import check_int
from ..data import shard
from ..workers import worker_model
from .faithfulness import DEFAULT_KS, RANDOM, RANDOM_DRAWS, deletion_scores
from .gradients import DEFAULT_STEPS, DEFAULT_TOLERANCE, check_steps, check_tolerance
from .method_aer import AerCounter
from .record import Attribution
from .scoring import attribute_ids, check_methods

CORPUS_DEFAULT_METHODS = ("value_weighted", "alti")
MAX_WORKERS = 16
MAX_DRAWS = 64  # random baseline sets per sentence and k
COLUMNS = ["sentence", "method", "k", "comprehensiveness", "sufficiency", "outputs"]
COMPLETENESS_COLUMNS = ["sentence", "output", "token", "points", "score_change", "gap", "relative_gap"]


class CorpusAttribution(NamedTuple):
    """What `corpus_faithfulness` returns."""

    faithfulness: pd.DataFrame  # one row per sentence, ranking method and k
    aer: pd.DataFrame | None  # with gold alignments: the AER of every method and layer
    completeness: pd.DataFrame | None  # with integrated gradients: one row per sentence and output token


def completeness_rows(number: int, result: Attribution) -> list[dict]:
    """Integrated gradients' completeness of sentence `number`, one row per output token."""
    relative, gap, change = result.relative_gap, result.completeness_gap, result.score_change
    if relative is None or gap is None or change is None:
        return []
    return [{"sentence": number, "output": i, "token": token, "points": result.steps, "score_change": float(change[i]),
             "gap": float(gap[i]), "relative_gap": float(relative[i])} for i, token in enumerate(result.output_tokens)]


def ranking_methods(methods: Sequence[str], layers: int) -> list[str]:
    """The source rankings the chosen methods give: "attention" is the layer mean and every layer."""
    names: list[str] = []
    for method in methods:
        if method == "attention":
            names += ["attention_mean", *(f"attention_layer{i + 1}" for i in range(layers))]
        else:
            names.append(method)
    return names


def _sentence(network: Any, pieces: Any, src: list[int], out: list[int], methods: Sequence[str],
              names: Sequence[str], ks: Sequence[int], steps: int, draws: int, tolerance: float
              ) -> tuple[list[dict], Attribution]:
    """One sentence's rows (method, k, mean comprehensiveness and sufficiency over its outputs) and attribution."""
    result = attribute_ids(network, src, out, methods, steps, pieces=pieces, tolerance=tolerance)
    deletions = deletion_scores(network, src, out, {m: result.source_scores(m) for m in names}, ks, draws)
    means = deletions.groupby(["method", "k"], sort=False)[["comprehensiveness", "sufficiency"]].mean()
    return [{"method": method, "k": k, "comprehensiveness": row.comprehensiveness, "sufficiency": row.sufficiency,
             "outputs": len(out)} for (method, k), row in means.iterrows()], result


def _work(job: tuple) -> tuple[list[dict], Attribution]:
    model = worker_model()  # in a process of `TranslationModel.worker_pool`
    return _sentence(model.network, model.tokenizer.pieces, *job)


def check_draws(draws: int, name: str = "draws") -> int:
    """The random baseline's sets per sentence and k, bounded (each is a full decoder pass); `name` for the message."""
    return check_int(name, draws, 1, MAX_DRAWS, error=ValueError,
                     message=f"{name} must be from 1 to {MAX_DRAWS}, got {draws}")


def default_workers(model: Any) -> int:
    """Worker processes for a corpus run: one per core on the CPU (each with one thread: the small matrices of one
    sentence keep two threads of one process half idle), one on a GPU or for a model with no directory to load."""
    if getattr(model, "directory", None) is None or model.device.type != "cpu":
        return 1
    return max(1, min(os.cpu_count() or 1, MAX_WORKERS))


def corpus_faithfulness(model: Any, sources: Sequence[str], targets: Sequence[str] | None = None,
                        methods: Sequence[str] = CORPUS_DEFAULT_METHODS, ks: Sequence[int] = DEFAULT_KS,
                        steps: int = DEFAULT_STEPS, draws: int = RANDOM_DRAWS, beam: int = 4,
                        alpha: float | None = None, progress: bool = False, gold: Sequence[Alignment] | None = None,
                        workers: int = 1, rule: str | None = None, tolerance: float = DEFAULT_TOLERANCE
                        ) -> CorpusAttribution:
    """One row per sentence (1-based), ranking method (plus ``random``) and k; each sentence is teacher-forced on
    its translation by the full-precision network of `model` (a `TranslationModel`; the network every attribution
    and deletion reads, decoding in batches, searching by `rule` with `beam` and `alpha`: see
    `TranslationModel.search_settings`), or on `targets` when given (a reference per line).

    `workers` > 1 attributes the sentences in that many processes (each loads the model from its directory, with
    one thread; see `default_workers`); the rows are the same, in the same order.
    Returns ``(faithfulness, aer, completeness)``: with `gold` alignments (of `targets`, which they need) `aer` is
    the AER of every method and layer (`alignment.AerCounter`), else None; with integrated gradients (at most
    `steps` points until every gap is within `tolerance`) `completeness` has every output token's gap, else None."""
    require_cross_attention(model, "corpus_faithfulness", "deletes source tokens from an encoder's input (not "
                            "implemented for decoder-only models)")
    methods = check_methods(methods)
    tolerance = check_tolerance(tolerance, check_steps(steps))
    if targets is not None and len(targets) != len(sources):
        raise ValueError(f"{len(sources)} source sentences but {len(targets)} target sentences")
    if not sources:
        raise ValueError("no sentences to attribute")
    if gold is not None and (targets is None or len(gold) != len(sources)):
        raise ValueError("gold alignments need the target sentences they align (--tgt), one per source sentence; "
                         f"got {len(gold)} alignments for {len(sources)} sentences"
                         + ("" if targets is not None else " and no targets"))
    check_draws(draws)
    search = model.search_settings(rule, beam, alpha)
    check_int("workers", workers, 1, MAX_WORKERS, error=ValueError,
              message=f"workers must be from 1 to {MAX_WORKERS}, got {workers}")
    if workers > 1 and getattr(model, "directory", None) is None:
        raise ValueError("several workers load the model from its directory; this model has none")
    source_ids = [model.encode(text) for text in sources]
    rows, gaps, aer = [], [], AerCounter()
    with contextlib.ExitStack() as stack:
        if workers > 1:  # started first: the workers load the model while this process translates
            pool = stack.enter_context(model.worker_pool(workers))
        if targets is None:  # searched by the full-precision network, which every attribution reads
            outputs = model.with_precision("fp32").translate_ids(source_ids, search)
        else:
            outputs = [model.tokenizer.encode_target(t) + [model.config.eos_id] for t in targets]
        names = ranking_methods(methods, model.config.decoder_layers)
        jobs = [(src, out, methods, names, ks, steps, draws, tolerance) for src, out in zip(source_ids, outputs)]
        mine = shard.share(jobs)  # under torchrun this process's share of the sentences (viz_model.data.shard)
        if workers > 1:
            done = pool.map(_work, [job for _, job in mine], chunksize=4)
        else:
            done = (_sentence(model.network, model.tokenizer.pieces, *job) for _, job in mine)
        results = dict(zip((i for i, _ in mine), tqdm(done, total=len(mine), desc="attributing", unit="sentence",
                                                      disable=not progress)))
        for number, (sentence_rows, result) in enumerate(shard.gather(results, len(jobs)), 1):
            rows += [{"sentence": number, **row} for row in sentence_rows]
            gaps += completeness_rows(number, result)
            if gold is not None:
                aer.add(result, gold[number - 1])
    completeness = pd.DataFrame(gaps, columns=COMPLETENESS_COLUMNS) if "integrated_gradients" in methods else None
    return CorpusAttribution(pd.DataFrame(rows, columns=COLUMNS), None if gold is None else aer.table(), completeness)


def completeness_summary(completeness: pd.DataFrame, tolerance: float) -> str:
    """One line on integrated gradients' completeness over a corpus: points used, gaps within the target, largest."""
    if completeness.empty:
        return "integrated gradients: no output tokens"
    per_sentence = completeness.groupby("sentence")["points"].first()
    worst = completeness.loc[completeness["relative_gap"].idxmax()]
    target = tolerance or DEFAULT_TOLERANCE
    within = int((completeness["relative_gap"] <= target).sum())
    return (f"integrated gradients: {int(per_sentence.median())} points per sentence (median, most "
            f"{int(per_sentence.max())}); {within} of {len(completeness)} output tokens have a completeness gap "
            f"within {target:.1%}; the largest is {worst['relative_gap']:.2%} (sentence {int(worst['sentence'])}, "
            f"output {int(worst['output'])})")


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
