"""What the Analyze pages share: the model directory's precomputed tables, cached analyses (keyed by the
`sessions.ModelRef` like `sessions.compute_trace`), the parsing of what the user types, and text renderings.

Nothing here changes the shared model: ablation goes through a head mask per call (`viz_model.analysis.ablation`).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from app import sessions, texts
from viz_model.analysis import ablation, rollout, store, word_alignment
from viz_model.analysis.ablation import AblationResult, Head, TokenEdit
from viz_model.analysis.corpus_attention import CorpusAnalysis, analyze_corpus
from viz_model.modeldir.checkpoint import CheckpointError
from viz_model.nn import kinds

MAX_LIVE_SENTENCES = 200
MAX_LIVE_CHARS = 40_000  # what the head-roles box accepts at once (200 sentences of 200 characters), checked here
MAX_GOLD_CHARS = 4000
FLOW_MAX_TOKENS = 48  # attention flow solves one maximum-flow problem per (input, output) pair: n² of them
TABLE_READERS = {"stats": store.read_head_stats, "importance": store.read_head_importance}
TABLE_FILES = {"stats": store.HEAD_STATS_FILE, "importance": store.HEAD_IMPORTANCE_FILE}
SWAPS = {"dog": "cat", "dogs": "cats", "cat": "dog", "cats": "dogs", "man": "woman", "woman": "man",
         "men": "women", "women": "men", "boy": "girl", "girl": "boy", "snow": "rain", "street": "road",
         "red": "blue", "blue": "red", "big": "small", "small": "big", "two": "three", "three": "two"}


# --- the model directory's tables --------------------------------------------------------------------------------
def file_stamp(path: Path) -> str:
    """Size and modification time of a file ("-" when absent): a changed table gets a fresh cache entry."""
    try:
        info = path.stat()
    except OSError:
        return "-"
    return f"{info.st_size}:{info.st_mtime_ns}"


@st.cache_data(show_spinner=False, max_entries=8)
def _stored_table(ref: sessions.ModelRef, which: str, table_stamp: str) -> pd.DataFrame | None:
    del table_stamp  # part of the cache key only
    return TABLE_READERS[which](ref.directory, sessions.load_model(ref).config)


@st.cache_data(show_spinner=False, max_entries=4)
def _stored_sentences(ref: sessions.ModelRef, table_stamp: str) -> list[str] | None:
    del table_stamp
    return store.read_head_stats_sentences(ref.directory)


def stored_table(session: sessions.Session, which: str) -> tuple[pd.DataFrame | None, str | None]:
    """("stats" or "importance") the model directory's table and None, or None and why it cannot be used."""
    ref = session.ref.stored
    try:
        return _stored_table(ref, which, file_stamp(ref.directory / TABLE_FILES[which])), None
    except (CheckpointError, OSError) as err:
        return None, str(err)


def stored_sentences(session: sessions.Session) -> list[str] | None:
    """The sentences of the stored head statistics (for the role examples), None when absent or unreadable."""
    ref = session.ref.stored
    try:
        return _stored_sentences(ref, file_stamp(ref.directory / store.HEAD_STATS_SENTENCES_FILE))
    except (CheckpointError, OSError):
        return None


# --- cached analyses ---------------------------------------------------------------------------------------------
@st.cache_data(show_spinner=False, max_entries=4)
def compute_head_stats(ref: sessions.ModelRef, sentences: tuple[str, ...]) -> CorpusAnalysis:
    return analyze_corpus(sessions.load_model(ref), list(sentences))


@st.cache_data(show_spinner=False, max_entries=8)
def compute_ablation(ref: sessions.ModelRef, text: str, heads: tuple[Head, ...], beam: int, alpha: float,
                     rule: str | None = None) -> AblationResult:
    return ablation.ablate(sessions.searching_model(ref), text, heads, beam=beam, alpha=alpha, rule=rule)


def ablate(session: sessions.Session, text: str, heads: tuple[Head, ...]) -> AblationResult:
    """`text` translated with and without `heads` with the session's search (its target language and task
    prefix)."""
    return compute_ablation(session.ref, text, heads, session.beam, session.alpha, session.rule)


@st.cache_data(show_spinner=False, max_entries=8)
def compute_flow(maps: list[np.ndarray], residual: float) -> np.ndarray:
    return rollout.attention_flow(maps, residual)


# --- what the user types -----------------------------------------------------------------------------------------
def parse_sentences(text: str, limit: int = MAX_LIVE_SENTENCES) -> list[str]:
    """One sentence per non-blank line (stripped); a `ValueError` for none, more than `limit` or more than
    MAX_LIVE_CHARS characters in all (the server's bound, whatever the browser sent)."""
    if len(text) > MAX_LIVE_CHARS:
        raise ValueError(f"{len(text):,} characters: at most {MAX_LIVE_CHARS:,} are analysed here; shorten the "
                         "list, or run `viz-model analyze` over a whole corpus")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise ValueError("type at least one sentence, one per line")
    if len(lines) > limit:
        raise ValueError(f"{len(lines)} sentences: at most {limit} are analysed here; remove {len(lines) - limit} "
                         "lines, or run `viz-model analyze` over a whole corpus")
    return lines


def parse_gold(text: str, source_words: int, target_words: int) -> word_alignment.Alignment:
    """A Pharaoh line (``0-0 1-2 ...``, source word - target word, from 0) for this sentence, checked against its
    word counts; a `ValueError` that says which link is wrong."""
    if len(text) > MAX_GOLD_CHARS:
        raise ValueError(f"the alignment is {len(text):,} characters long; at most {MAX_GOLD_CHARS:,}")
    gold = word_alignment.parse_pharaoh(text)
    if not gold.possible:
        raise ValueError("no links given: type pairs such as 0-0 1-2 (source word - target word, from 0)")
    outside = sorted((i, j) for i, j in gold.possible if i >= source_words or j >= target_words)
    if outside:
        shown = " ".join(f"{i}-{j}" for i, j in outside[:5]) + (" …" if len(outside) > 5 else "")
        raise ValueError(f"link {shown} is out of range: this sentence has {source_words} source words "
                         f"(0 to {source_words - 1}) and {target_words} target words (0 to {target_words - 1})")
    return gold


def one_word_changed(text: str) -> str:
    """`text` with one word swapped (the last one with a known counterpart, else the last word becomes "cat")."""
    words = re.findall(r"\w+|\W+", text)
    candidates = [i for i, w in enumerate(words) if w.isalpha()]
    if not candidates:
        return text + " cat"
    known = [i for i in candidates if words[i].lower() in SWAPS]
    index = known[-1] if known else candidates[-1]
    word = words[index]
    swap = SWAPS.get(word.lower(), "cat" if word.lower() != "cat" else "dog")
    words[index] = swap.capitalize() if word[:1].isupper() else swap
    return "".join(words)


# --- text renderings ---------------------------------------------------------------------------------------------
def head_label(head: Head) -> str:
    """A head as shown on screen, counted from 1: ``Cross-attention · layer 2 · head 3``."""
    kind, layer, index = head
    return f"{kinds.KIND_LABELS[kind]} · layer {layer + 1} · head {index + 1}"


def diff_markdown(diff: list[TokenEdit]) -> str:
    """The token diff as Markdown text: deleted pieces struck out on red, inserted ones on green."""
    out = []
    for edit in diff:
        if edit.operation == "equal":
            out += [texts.md_escape(t) for t in edit.intact]
            continue
        out += [f":red-background[~~{texts.md_escape(t)}~~]" for t in edit.intact]
        out += [f":green-background[{texts.md_escape(t)}]" for t in edit.ablated]
    return " ".join(out) if out else "*(no tokens)*"


def diff_table(diff: list[TokenEdit]) -> pd.DataFrame:
    """The changed blocks of the diff, one row each (pieces joined by spaces)."""
    rows = [{"change": e.operation, "intact model": " ".join(e.intact), "heads switched off": " ".join(e.ablated)}
            for e in diff if e.operation != "equal"]
    return pd.DataFrame(rows, columns=["change", "intact model", "heads switched off"])


def display_heads(table: pd.DataFrame) -> pd.DataFrame:
    """A per-head table for display: layer and head counted from 1, like every other label on screen."""
    return table.assign(layer=table["layer"] + 1, head=table["head"] + 1)


def display_aer(table: pd.DataFrame) -> pd.DataFrame:
    """An `attention_aer` table for display: layers and heads from 1, "mean" for the layer's mean over heads."""
    return table.assign(layer=table["layer"] + 1,
                        head=[str(int(h) + 1) if pd.notna(h) else "mean" for h in table["head"]])
