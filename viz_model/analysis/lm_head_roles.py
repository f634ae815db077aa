"""Head roles of a decoder-only language model: previous-token, induction, duplicate-token, first-token share and
entropy per layer and head, measured on a prompt, a small corpus or repeated random tokens (Olsson et al., 2022),
and what switching heads off does to the prompt's next-token log-probabilities.

Each score reads one causal map ``(heads, n, n)`` (row i: query i's weights over keys 0..i) and the ids it was made
of, and is a mean over the rows it is defined for; a head with no such row gets NaN. Over several sequences a head's
score is the mean of its per-sequence scores (NaN skipped).
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from ..config.checks import check_int
from ..config.data_root import data_root
from ..kinds.language_model import LanguageModel
from ..modeldir.shipped import ASSETS_DIR, DEFAULT_MODEL
from ..tokenization.tokenizer import SPECIAL_IDS
from .ablation import Head, check_heads, head_mask_for
from .store import HEAD_STATS_SENTENCES_FILE

ROLE_SCORES = ("previous_token", "induction", "duplicate_token", "first_token", "entropy")
ROLE_COLUMNS = ["layer", "head", *ROLE_SCORES]
SHARE_SCORES = ("previous_token", "induction", "duplicate_token", "first_token")  # shares of attention: 0 to 1
CORPUS_FILES = ("multi30k/val.en.gz", "multi30k/test_2016_flickr.en.gz")  # under the data root, first found
CORPUS_SENTENCES = 32
REPEATED_LENGTH, REPEATED_COPIES, REPEATED_SAMPLES = 25, 4, 10  # Olsson et al.: 25 random tokens x4, 10 examples
LOGIT_COLUMNS = ["position", "token", "next_token", "log_prob_intact", "log_prob_ablated", "change", "kl"]


def check_map(weights: np.ndarray, ids: Sequence[int] | None = None) -> np.ndarray:
    """`weights` as float64 when it is a non-empty ``(heads, n, n)`` map of finite non-negative weights (over
    `ids`, where given); else one line."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 3 or w.shape[1] != w.shape[2] or 0 in w.shape:
        raise ValueError(f"a causal attention map is a non-empty (heads, n, n) array, got shape {w.shape}")
    if ids is not None and len(ids) != w.shape[1]:
        raise ValueError(f"{len(ids)} token ids for a map over {w.shape[1]} tokens")
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("attention weights must be finite and non-negative")
    return w


def _rows_mean(share: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per head, the mean of ``share (heads, n)`` over the rows selected by `rows` (NaN where none is)."""
    return share[:, rows].mean(axis=1) if rows.any() else np.full(share.shape[0], np.nan)


def previous_token_score(weights: np.ndarray) -> np.ndarray:
    """Per head, the mean weight query i puts on key i - 1, over queries 1..n-1 (TransformerLens's
    "previous_token_head" pattern, averaged per row)."""
    w = check_map(weights)
    rows = np.arange(1, w.shape[1])
    return w[:, rows, rows - 1].mean(axis=1) if rows.size else np.full(w.shape[0], np.nan)


def duplicate_token_score(weights: np.ndarray, ids: Sequence[int]) -> np.ndarray:
    """Per head, the weight query i puts on the earlier keys j < i holding the same token (``ids[j] == ids[i]``),
    averaged over the queries that have such a key (TransformerLens's "duplicate_token_head" pattern, per row)."""
    w = check_map(weights, ids)
    tokens = np.asarray(ids)
    same = (tokens[:, None] == tokens[None, :]) & np.tri(len(tokens), k=-1, dtype=bool)  # j < i
    return _rows_mean((w * same).sum(axis=-1), same.any(axis=1))


def induction_score(weights: np.ndarray, ids: Sequence[int]) -> np.ndarray:
    """Per head, the weight query i puts on the keys j + 1 that followed an earlier copy of its token (j < i,
    ``ids[j] == ids[i]``), averaged over the queries that have one: Olsson et al.'s prefix matching. On repeats of
    distinct random tokens r_1..r_L it is TransformerLens's induction stripe (query L + i, key i + 1)."""
    w = check_map(weights, ids)
    tokens = np.asarray(ids)
    n = len(tokens)
    earlier = (tokens[:, None] == tokens[None, :]) & np.tri(n, k=-1, dtype=bool)  # [i, j]: j < i, same token
    after = np.zeros_like(earlier)
    after[:, 1:] = earlier[:, :-1]  # [i, j + 1]: the key after an earlier copy (j + 1 <= i)
    return _rows_mean((w * after).sum(axis=-1), after.any(axis=1))


def first_token_share(weights: np.ndarray) -> np.ndarray:
    """Per head, the mean weight on key 0 over queries 1..n-1 (query 0 sees key 0 alone): the attention sink's
    share (Xiao et al., 2023)."""
    w = check_map(weights)
    return w[:, 1:, 0].mean(axis=1) if w.shape[1] > 1 else np.full(w.shape[0], np.nan)


def entropy(weights: np.ndarray) -> np.ndarray:
    """Per head, the mean over queries 1..n-1 of the row's entropy in nats (0 log 0 = 0; query 0 sees one key)."""
    w = check_map(weights)[:, 1:]
    if not w.shape[1]:
        return np.full(w.shape[0], np.nan)
    return row_entropies(w).mean(axis=1)


def row_entropies(w: np.ndarray) -> np.ndarray:
    """``(heads, rows)`` each row's entropy in nats of weights ``(heads, rows, keys)`` (0 log 0 = 0)."""
    logs = np.log(w, where=w > 0, out=np.zeros_like(w))
    return -(w * logs).sum(axis=-1)


def map_scores(weights: np.ndarray, ids: Sequence[int]) -> dict[str, np.ndarray]:
    """Every score of `ROLE_SCORES` for each head of one causal map ``(heads, n, n)`` over `ids`."""
    return {"previous_token": previous_token_score(weights), "induction": induction_score(weights, ids),
            "duplicate_token": duplicate_token_score(weights, ids), "first_token": first_token_share(weights),
            "entropy": entropy(weights)}


def maps_table(sequences: Iterable[tuple[list[np.ndarray], Any]],
               score: Callable[[np.ndarray, Any], dict[str, np.ndarray]] = map_scores,
               columns: Sequence[str] = ROLE_COLUMNS) -> pd.DataFrame:
    """One row per (layer, head): each score's mean over `sequences` (per layer maps ``(heads, n, n)``, and what
    `score` reads beside a map: the ids), NaN skipped; a column ``sequences`` says over how many. `score`: a map's
    scores per head (`map_scores`), `columns`: the table's columns before ``sequences``."""
    scores: dict[tuple[int, int], list[dict[str, float]]] = {}
    for maps, ids in sequences:
        for layer, weights in enumerate(maps):
            values = score(weights, ids)
            for head in range(len(values["entropy"])):
                scores.setdefault((layer, head), []).append({k: float(v[head]) for k, v in values.items()})
    if not scores:
        raise ValueError("no sequences to score the heads on")
    rows = [{"layer": layer, "head": head, **pd.DataFrame(found).mean(skipna=True).to_dict(),
             "sequences": len(found)} for (layer, head), found in sorted(scores.items())]
    return pd.DataFrame(rows, columns=[*columns, "sequences"])


@torch.inference_mode()
def sequence_maps(model: LanguageModel, ids: Sequence[int]) -> list[np.ndarray]:
    """Per layer ``(query heads, n, n)`` float64: the full-precision network's maps over `ids` (one forced pass)."""
    out = model.forced_pass(ids, need_weights=True)
    return [weights[0].double().cpu().numpy() for weights in out.attentions]


def prompt_roles(model: LanguageModel, prompt: str) -> pd.DataFrame:
    """`maps_table` of the prompt's tokens (as `LanguageModel.encode` gives them, BOS included where the model adds
    one)."""
    ids = model.encode(prompt)
    return maps_table([(sequence_maps(model, ids), ids)])


def corpus_roles(model: LanguageModel, sentences: Sequence[str]) -> pd.DataFrame:
    """`maps_table` over `sentences` (each encoded as a prompt), each sentence weighing the same."""
    if not sentences:
        raise ValueError("no sentences to score the heads on")
    encoded = [model.encode(sentence) for sentence in sentences]
    return maps_table((sequence_maps(model, ids), ids) for ids in encoded)


def start_ids(model: LanguageModel) -> list[int]:
    """The ids the model's tokenizer puts before a text (its BOS), else its first end-of-text id (GPT-2's
    ``<|endoftext|>`` doubles as its start token), else none."""
    ids = model.tokenizer.encode("a")
    special = getattr(model.tokenizer, "skipped", None) or set(SPECIAL_IDS)  # this project's SentencePiece
    leading = []
    for token in ids:
        if token not in special:
            break
        leading.append(token)
    return leading or model.tokenizer.eos_ids[:1]


def repeated_tokens(vocab_size: int, length: int = REPEATED_LENGTH, copies: int = REPEATED_COPIES,
                    seed: int = 0, start: Sequence[int] = (), exclude: Iterable[int] = ()) -> list[int]:
    """`start`, then `length` distinct random ids (from ``0..vocab_size-1`` without `exclude`; `seed`) repeated
    `copies` times: Olsson et al.'s sequence for prefix matching."""
    check_int("length", length, 2, error=ValueError, message=f"length must be an integer >= 2, got {length!r}")
    check_int("copies", copies, 2, error=ValueError, message=f"copies must be an integer >= 2, got {copies!r}")
    allowed = np.setdiff1d(np.arange(vocab_size), np.fromiter(exclude, dtype=np.int64))
    if allowed.size < length:
        raise ValueError(f"{length} distinct random tokens asked for; the vocabulary offers {allowed.size}")
    tokens = np.random.default_rng(seed).choice(allowed, size=length, replace=False)
    return [*start, *(int(t) for t in np.tile(tokens, copies))]


def repeated_roles(model: LanguageModel, length: int = REPEATED_LENGTH, copies: int = REPEATED_COPIES,
                   samples: int = REPEATED_SAMPLES, seed: int = 0) -> pd.DataFrame:
    """`maps_table` over `repeated_sequences`: the induction score as Olsson et al. measured it."""
    sequences = repeated_sequences(model, length, copies, samples, seed)
    return maps_table((sequence_maps(model, ids), ids) for ids in sequences)


def repeated_sequences(model: LanguageModel, length: int = REPEATED_LENGTH, copies: int = REPEATED_COPIES,
                       samples: int = REPEATED_SAMPLES, seed: int = 0) -> list[list[int]]:
    """`samples` repeated random sequences for `model` (`repeated_tokens`, seeds ``seed..seed+samples-1``, its start
    token first, its special ids left out); one line where they do not fit its positions."""
    check_int("samples", samples, 1, 100, error=ValueError,
              message=f"samples must be an integer from 1 to 100, got {samples!r}")
    start = start_ids(model)
    needed = len(start) + length * copies
    if needed > model.config.max_positions:
        raise ValueError(f"{copies} copies of {length} tokens need {needed} positions; this model has "
                         f"{model.config.max_positions}")
    special = set(getattr(model.tokenizer, "skipped", None) or SPECIAL_IDS) | set(model.tokenizer.eos_ids) | set(start)
    vocab = min(model.tokenizer.vocab_size, model.config.vocab_size)
    return [repeated_tokens(vocab, length, copies, seed + i, start, special) for i in range(samples)]


def english_corpus(count: int = CORPUS_SENTENCES) -> tuple[list[str], str]:
    """The first `count` non-blank English sentences of a small corpus and where they are from: the data root's
    Multi30k (`CORPUS_FILES`), else the shipped translator's analysed sentences; one line where neither is there."""
    check_int("count", count, 1, 10_000, error=ValueError,
              message=f"count must be an integer from 1 to 10000, got {count!r}")
    candidates = [(data_root() / name, f"Multi30k ({Path(name).name}) from the data root") for name in CORPUS_FILES]
    candidates.append((ASSETS_DIR / DEFAULT_MODEL / HEAD_STATS_SENTENCES_FILE,
                       f"the sentences the shipped {DEFAULT_MODEL} translator's head statistics were computed on"))
    for path, label in candidates:
        if not path.is_file():
            continue
        opener = gzip.open if path.suffix == ".gz" else open
        sentences = []
        try:
            with opener(path, "rt", encoding="utf-8") as lines:
                for line in lines:
                    if line.strip():
                        sentences.append(line.strip())
                    if len(sentences) == count:
                        break
        except (OSError, EOFError, UnicodeDecodeError):
            continue
        if sentences:
            return sentences, label
    raise ValueError("no English corpus found: neither Multi30k under the data root (viz-model data fetch "
                     f"multi30k) nor the shipped {DEFAULT_MODEL} model's sentences are here")


@torch.inference_mode()
def logit_change(model: LanguageModel, ids: Sequence[int], heads: Iterable[Head]) -> pd.DataFrame:
    """With every head on and with `heads` (``("decoder", layer, head)``) switched off, one row per position of
    `ids`: the log-probability of the actual next token (NaN at the last position), its change (ablated - intact)
    and ``kl``, KL(intact || ablated) of the next-token distributions in nats."""
    chosen = check_heads(model.config, heads)
    if not chosen:
        raise ValueError("name at least one head to switch off, e.g. ('decoder', 0, 1)")
    if len(ids) < 1:
        raise ValueError("no tokens to measure the ablation on")
    intact = torch.log_softmax(model.forced_pass(ids).logits[0].double(), dim=-1)
    mask = head_mask_for(model.config, chosen, model.device)
    ablated = torch.log_softmax(model.forced_pass(ids, head_mask=mask).logits[0].double(), dim=-1)
    kl = (intact.exp() * (intact - ablated)).sum(dim=-1).clamp_min(0.0).cpu().numpy()
    nan = np.full(len(ids), np.nan)
    before, after = nan.copy(), nan.copy()
    following = torch.tensor(list(ids[1:]), device=intact.device, dtype=torch.long)
    steps = torch.arange(len(ids) - 1, device=intact.device)
    before[:-1] = intact[steps, following].cpu().numpy()
    after[:-1] = ablated[steps, following].cpu().numpy()
    pieces = model.tokenizer.pieces(ids)
    return pd.DataFrame({"position": np.arange(len(ids)), "token": pieces, "next_token": [*pieces[1:], ""],
                         "log_prob_intact": before, "log_prob_ablated": after, "change": after - before, "kl": kl},
                        columns=LOGIT_COLUMNS)
