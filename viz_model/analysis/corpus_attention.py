"""Run a model over many sentences and collect every attention map, batched, for corpus-level statistics.

The sources are translated (batched search, `TranslationModel.translate_ids`, greedy by default) or, given
references, the references are forced; then one instrumented teacher-forced pass per length-grouped batch
(`TranslationModel.forced_passes`) records each layer's per-head maps, and the padding is stripped per sentence.
`iter_attentions` yields the maps sentence by sentence (nothing is kept), `analyze_corpus` turns them into the
per-head statistics and roles of `head_stats`.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from ..data import shard
from ..data.batching import DEFAULT_BATCH_TOKENS, decoder_input
from ..kinds.translator import Search, TranslationModel
from ..nn.arrays import to_numpy
from ..tokenization.tokenizer import word_ids
from .head_stats import corpus_statistics, head_roles, role_summary, sentence_statistics
from .inputs import check_corpus, reference_ids, require_cross_attention, source_ids


@dataclass
class SentenceAttention:
    """One sentence's teacher-forced maps and tokens; fields are named as in `AttentionTrace` (same axes).

    :ivar index: its position in the input list
    :ivar source_ids: the source piece ids, ending in ``</s>``
    :ivar source_tokens: the source pieces
    :ivar target_ids: the decoder's inputs ``<s> y1 .. y_{n-1}``
    :ivar target_tokens: their pieces
    :ivar output_ids: ``y1 .. y_n``, ending in ``</s>``
    :ivar output_tokens: their pieces
    :ivar encoder_attentions: per layer ``(heads, src_len, src_len)``
    :ivar decoder_attentions: per layer ``(heads, tgt_len, tgt_len)``
    :ivar cross_attentions: per layer ``(heads, tgt_len, src_len)``
    """

    index: int
    source_ids: list[int]
    source_tokens: list[str]
    target_ids: list[int]
    target_tokens: list[str]
    output_ids: list[int]
    output_tokens: list[str]
    encoder_attentions: list[np.ndarray]
    decoder_attentions: list[np.ndarray]
    cross_attentions: list[np.ndarray]

    @property
    def source_words(self) -> list[int]:
        """Per source token, the index of its word."""
        return word_ids(self.source_tokens)

    @property
    def target_words(self) -> list[int]:
        """Per target token, the index of its word."""
        return word_ids(self.target_tokens)


def output_ids_for(model: TranslationModel, sources: list[list[int]], references: Sequence[str] | None,
                   search: Search, progress: bool = False) -> list[list[int]]:
    """The outputs to force: the reference ids, or the model's own translations (batched search)."""
    if references is not None:
        return reference_ids(model, references)
    with tqdm(total=len(sources), desc="translating", unit="sent", disable=not progress, file=sys.stderr) as bar:
        return model.translate_ids(sources, search, progress=bar.update)


def _strip(maps: list[np.ndarray], row: int, q_len: int, k_len: int) -> list[np.ndarray]:
    return [np.ascontiguousarray(m[row, :, :q_len, :k_len]) for m in maps]


@torch.inference_mode()
def forced_attentions(model: TranslationModel, sources: list[list[int]], outputs: list[list[int]],
                      batch_tokens: int = DEFAULT_BATCH_TOKENS, progress: bool = False) -> Iterator[SentenceAttention]:
    """Every map of each (source ids, output ids) pair, batched by length; yields in batch order (see ``index``).
    Under torchrun (`viz_model.data.shard`) only this process's share of the batches."""
    pieces = model.tokenizer.pieces
    with tqdm(total=len(sources), desc="attention", unit="sent", disable=not progress, file=sys.stderr) as bar:
        bos = model.config.bos_id
        for batch, out in model.forced_passes(sources, outputs, batch_tokens, need_weights=True):
            encoder, decoder, cross = ([to_numpy(m) for m in maps] for maps in
                                       (out.encoder_attentions, out.decoder_attentions, out.cross_attentions))
            for row, i in enumerate(batch.indices):
                s, t = len(sources[i]), len(outputs[i])
                target = decoder_input(outputs[i], bos)
                yield SentenceAttention(
                    i, list(sources[i]), pieces(sources[i]), target, pieces(target), list(outputs[i]),
                    pieces(outputs[i]), _strip(encoder, row, s, s), _strip(decoder, row, t, t),
                    _strip(cross, row, t, s))
            bar.update(len(batch.indices))


@dataclass
class PreparedCorpus:
    """Checked sentences with their ids: what `forced_attentions` reads."""

    texts: list[str]
    references: list[str] | None
    sources: list[list[int]]
    outputs: list[list[int]]


def prepare_corpus(model: TranslationModel, sources: Sequence[str], references: Sequence[str] | None = None, *,
                   beam: int = 1, alpha: float | None = None, limit: int | None = None, progress: bool = False,
                   rule: str | None = None) -> PreparedCorpus:
    """Check the first `limit` sentences (a bad one raises `ValueError` naming it) before any work, tokenize them
    (sources longer than max_positions are truncated, as `viz-model eval` does) and translate or force them (the
    search: `rule`, `beam`, `alpha`, see `TranslationModel.search_settings`)."""
    search = model.search_settings(rule, beam, alpha)
    texts, refs = check_corpus(sources, references, limit)
    src = source_ids(model, texts)
    return PreparedCorpus(texts, refs, src, output_ids_for(model, src, refs, search, progress))


def iter_attentions(model: TranslationModel, sources: Sequence[str], references: Sequence[str] | None = None, *,
                    beam: int = 1, alpha: float | None = None, limit: int | None = None,
                    batch_tokens: int = DEFAULT_BATCH_TOKENS, progress: bool = False, rule: str | None = None
                    ) -> Iterator[SentenceAttention]:
    """Translate `sources` (or force `references`) and yield each sentence's maps, in batch order (see ``index``)."""
    require_cross_attention(model, "iter_attentions", "translates sources (not implemented for decoder-only models)")
    prepared = prepare_corpus(model, sources, references, beam=beam, alpha=alpha, limit=limit, progress=progress,
                              rule=rule)
    yield from forced_attentions(model, prepared.sources, prepared.outputs, batch_tokens, progress)


@dataclass
class CorpusAnalysis:
    """Per-head attention statistics of a corpus with the role of each head (see `head_stats`).

    :ivar sources: the source sentences
    :ivar outputs: the translations, or the references when forced
    :ivar forced: True when `outputs` are the given references
    :ivar per_sentence: one row per sentence and head: sentence, kind, layer, head, statistics
    :ivar heads: one row per head: kind, layer, head, sentences, statistics, role, role_score, example_sentence,
        example_value
    """

    sources: list[str]
    outputs: list[str]
    forced: bool
    per_sentence: pd.DataFrame
    heads: pd.DataFrame

    def summary(self, top: int = 3) -> pd.DataFrame:
        """The roles table: per role its head count, best heads and an example sentence (see `role_summary`)."""
        return role_summary(self.heads, self.sources, top)


def analyze_corpus(model: TranslationModel, sources: Sequence[str], references: Sequence[str] | None = None, *,
                   beam: int = 1, alpha: float | None = None, limit: int | None = None,
                   batch_tokens: int = DEFAULT_BATCH_TOKENS, progress: bool = False, rule: str | None = None
                   ) -> CorpusAnalysis:
    """Statistics of every head over the first `limit` `sources` (translated, or teacher-forced on `references`)."""
    require_cross_attention(model, "analyze_corpus", "translates sources (not implemented for decoder-only models)")
    prepared = prepare_corpus(model, sources, references, beam=beam, alpha=alpha, limit=limit, progress=progress,
                              rule=rule)
    records = forced_attentions(model, prepared.sources, prepared.outputs, batch_tokens, progress)
    first = next(records, None)  # under torchrun a process can have no batch of its own
    parts = shard.gather_list([] if first is None else [sentence_statistics(itertools.chain([first], records))])
    per_sentence = pd.concat(parts, ignore_index=True)  # every process's rows
    per_sentence = per_sentence.sort_values("sentence", kind="stable", ignore_index=True)
    heads = head_roles(corpus_statistics(per_sentence), per_sentence)
    refs = prepared.references
    outputs = refs if refs is not None else [model.tokenizer.decode(o) for o in prepared.outputs]
    return CorpusAnalysis(prepared.texts, outputs, refs is not None, per_sentence, heads)
