"""Corpus-level analysis of the attention heads: statistics and roles, word alignment, rollout / flow, ablation.

    from viz_model.analysis import analyze_corpus, ablate, attention_rollout, corpus_aer
    analysis = analyze_corpus(model, sources)            # translate (greedy, batched), record every map
    analysis.heads                                       # DataFrame: kind, layer, head, statistics, role, example
    analysis.summary()                                   # one row per role: head count, best heads, an example
    ablate(model, "Two dogs ...", {("cross", 1, 3)})      # translation, token diff, log-probs without the head
    head_importance(model, sources, references)          # NLL rise per head switched off alone
    attention_rollout(trace.encoder_attentions)          # (layers, n, n); attention_flow(...) -> (n, n)
    corpus_aer(model, sources, references, read_pharaoh("gold.align"))   # AER per cross head and layer
    read_head_stats(model.directory, model.config)       # the model directory's analysis/head_stats.csv, or None

Modules: `head_stats` (per-head statistics of maps, roles), `corpus_attention` (batched maps of many sentences),
`word_alignment` (word alignment and AER), `rollout` (rollout and flow), `ablation` (head masks per call), `inputs`
(checks of sentence lists), `tables` (CSV / Parquet), `store` (the precomputed tables of a model directory,
``analysis/*.csv``), `layer_scores` (one layer's attention step by step), `lm_head_roles` (a language model's
previous-token, induction, duplicate-token, first-token and entropy scores, and an ablation's logit change),
`encoder_head_roles` (an encoder's shares on [CLS], [SEP], punctuation, the previous and next token, entropy: Clark et
al.'s findings), `encoder_sinks` (an encoder's shares on [SEP] and [CLS], and [SEP] hidden), `fill_mask_ablation`
(an encoder's `ablate`: its fill-mask predictions with heads off), `head_patching` (a language model's heads patched
from a clean run into a corrupted one: the share of the answer's logit difference each restores), `prompt_pairs` (the
shipped clean / corrupted pairs), `head_detectors` (TransformerLens's head_detector patterns scored on every head).
Heads are ``(kind, layer, head)`` with kind "encoder", "decoder" or "cross" and 0-based indices (head patching's, a
language model's alone, ``(layer, head)``); nothing here changes the model. What runs the model goes
through its door, `viz_model.TranslationModel` (`translate_ids`, `forced_passes`, `sequence_log_probs`, `trace`),
never around it to the search.
"""

from . import fill_mask_ablation  # noqa: F401  (registers the encoder's `ablate`)
from .ablation import AblationResult, HeadMaskedNetwork, ablate, all_heads, head_importance, head_mask_for
from .corpus_attention import CorpusAnalysis, SentenceAttention, analyze_corpus, iter_attentions
from .head_stats import (
    ROLE_RULES,
    STATISTICS,
    RoleRule,
    corpus_statistics,
    head_roles,
    map_statistics,
    role_summary,
    sentence_statistics,
)
from .rollout import attention_flow, attention_rollout
from .store import (
    HEAD_IMPORTANCE_FILE,
    HEAD_STATS_FILE,
    HEAD_STATS_SENTENCES_FILE,
    read_head_importance,
    read_head_stats,
    read_head_stats_sentences,
    write_head_importance,
    write_head_stats,
)
from .tables import write_table
from .word_alignment import (
    Alignment,
    alignment_error_rate,
    alignment_links,
    attention_aer,
    corpus_aer,
    format_pharaoh,
    parse_pharaoh,
    read_pharaoh,
    word_attention,
)

__all__ = ["AblationResult", "Alignment", "CorpusAnalysis", "HEAD_IMPORTANCE_FILE", "HEAD_STATS_FILE",
           "HEAD_STATS_SENTENCES_FILE", "HeadMaskedNetwork", "ROLE_RULES", "RoleRule",
           "STATISTICS", "SentenceAttention", "ablate", "alignment_error_rate", "alignment_links", "all_heads",
           "analyze_corpus", "attention_aer", "attention_flow", "attention_rollout", "corpus_aer",
           "corpus_statistics", "format_pharaoh", "head_importance", "head_mask_for", "head_roles", "iter_attentions",
           "map_statistics", "parse_pharaoh", "read_head_importance", "read_head_stats", "read_head_stats_sentences",
           "read_pharaoh", "role_summary", "sentence_statistics", "word_attention", "write_head_importance",
           "write_head_stats", "write_table"]
