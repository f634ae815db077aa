"""Decoding step by step, for a translator's page and a language model's: one step's top candidates beside each
head's attention row for its query and the causal mask so far; the beam tree and greedy against beam search."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import streamlit as st

from app import state, widgets
from app.page_settings import DECODING as own
from viz_model.plot import decoding_figures, long_mask_figures
from viz_model.search.hypotheses import BeamTree
from viz_model.trace import AttentionTrace

ROWS = {"cross": ("Cross-attention", "source"), "decoder": ("Self-attention", "earlier")}  # title, key side


def step_rows(trace: AttentionTrace, kind: str, layer: int, t: int, keys: int) -> np.ndarray:
    """``(heads, keys)``: query row `t` of each head of `layer`, over its first `keys` keys, each head's row read alone
    (`AttentionTrace.head_map`: a long trace's maps are never made a layer at once)."""
    heads = trace.map_shape(kind, layer)[0]
    return np.stack([trace.head_map(kind, layer, head, slice(t, t + 1))[0, :keys] for head in range(heads)])


def step_panels(trace: AttentionTrace, t: int, number: int, kind: str, keys: Sequence[str],
                note: Callable[[int], str], mask_note: str) -> None:
    """Step `number` (1-based), read at position `t`: its candidates (left) and each head's `kind` row over `keys`
    of the layer picked there (right, `note(layer)` under it), then the causal mask up to `t` (`mask_note` under it)."""
    step = trace.steps[t]
    left, right = st.columns([2, 3])
    with left:
        fig = decoding_figures.topk_figure(step.top_tokens, step.top_probabilities, step.token, number - 1)
        widgets.chart(fig, f"step{number}-top-k", key="dec_topk_chart")
        widgets.exports(fig, f"step{number}-top-k", "dec_topk")
        if step.token_id not in step.top_ids:
            st.caption(f"The chosen token is not among the top {len(step.top_tokens)} shown.")
    with right:
        title, side = ROWS[kind]
        layer_count = trace.num_layers[kind]
        layers = list(range(1, layer_count + 1))
        state.clamp_choice(own.layer, layers, layer_count, "Layer")
        state.bound(st.selectbox, f"{title} layer", own.layer, layers,
                    format_func=lambda v: f"Layer {v} of {layer_count}")
        layer = int(own.layer.get()) - 1
        rows = step_rows(trace, kind, layer, t, len(keys))
        fig = decoding_figures.cross_rows_figure(rows, keys, layer, number - 1, step.token, title, side)
        long_mask_figures.token_axis(fig, len(keys), f"{side} tokens (position; hover for the token)")
        name, short = f"step{number}-{title.lower()}", "cross" if kind == "cross" else "self"
        widgets.chart(fig, name, key=f"dec_{short}_chart")
        widgets.exports(fig, name, f"dec_{short}")
        st.caption(note(layer))
    fig = long_mask_figures.causal_step_figure(trace.target_tokens, t)
    widgets.chart(fig, f"step{number}-causal-mask", key="dec_mask_chart")
    widgets.exports(fig, f"step{number}-causal-mask", "dec_mask")
    st.caption(mask_note)


def search_results(tree: BeamTree, greedy: BeamTree, piece: Callable[[int], str], decode: Callable[[list[int]], str],
                   what: str, search: str = "") -> None:
    """The beam tree, greedy against beam search, and every finished hypothesis ranked (`what`: "translation" or
    "continuation"; `search`: the search's precision, said beside its log p)."""
    fig = decoding_figures.beam_tree_figure(tree, piece, int(own.pruned.get()) or None)
    widgets.chart(fig, "beam-tree", key="dec_tree_chart")
    widgets.exports(fig, "beam-tree", "dec_tree")
    left, right = st.columns(2)
    for column, result, label in ((left, greedy, "Greedy (beam 1)"),
                                  (right, tree, f"Beam {tree.beam}, α {tree.alpha:g}")):
        with column, st.container(border=True):
            widgets.show_text(label, decode(result.best.tokens))
            st.caption(f"{len(result.best.tokens)} tokens · log p = {result.best.log_prob:.3f}"
                       + (f" ({search} search)" if search else "") + f" · score (log p / lp) = "
                       f"{result.best.score:.3f} · {len(result.steps)} steps")
    finished = sorted(tree.finished, key=lambda h: -h.score)
    st.dataframe([{"rank": r + 1, what: decode(h.tokens), "tokens": len(h.tokens), "log p": round(h.log_prob, 4),
                   "length penalty": round(h.log_prob / h.score, 4) if h.score else None,
                   "score": round(h.score, 4), "chosen": h.tokens == tree.best.tokens}
                  for r, h in enumerate(finished)], hide_index=True, width="stretch")
