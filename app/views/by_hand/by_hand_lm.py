"""Attention by hand with a language model open: one head of the model on the prompt and its continuation, step by
step from the layer's own weights (`head_steps`), the weights checked against the recorded map."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import streamlit as st

from app import completion, state, token_picker, widgets
from app.page_settings import BY_HAND as own
from app.sessions import ModelRef, Session, load_model
from app.views.by_hand.head_steps import HeadSteps, every_query, head_steps, pick_head, query_table
from viz_model.lessons import typed_matrices
from viz_model.plot import long_mask_figures, row_strip_figures
from viz_model.trace import AttentionTrace

TOP_KEYS = 16  # a long prompt's query row: the keys it weighs most, listed first
KEY_WINDOW = 64  # a long prompt's tables: this many tokens around the picked one


@st.cache_data(show_spinner=False, max_entries=8)
def cached_steps(ref: ModelRef, ids: tuple[int, ...], layer: int, head: int,
                 rows: tuple[int, int] | None = None) -> HeadSteps:
    """`head_steps` of the model `ref` names (`rows`: those query rows alone), cached."""
    return head_steps(load_model(ref), list(ids), layer, head, rows)  # type: ignore[arg-type]


def around(position: int, n: int, size: int = KEY_WINDOW) -> list[int]:
    """`size` positions of `n` around `position` (fewer where `n` is shorter)."""
    first = long_mask_figures.window_start(position, n, size)
    return list(range(first, min(n, first + size)))


def page(session: Session) -> None:
    """The Attention by hand page for the language model of `session`."""
    st.title("Attention by hand")
    st.caption("One head of the open language model, worked through on your prompt and its continuation with the "
               "layer's own weights: the query and key projections, the norms and the rotation the model applies, "
               "the scaled scores, the causal mask and the softmax. The result is checked against the map the model "
               "recorded.")
    st.latex(r"\mathrm{weights} = \mathrm{softmax}\!\left(\frac{q_i\,k_j^\top}{\sqrt{d_k}} + M_{ij}\right),"
             r"\qquad M_{ij} = 0 \text{ if } j \le i \text{ (and within the window)},\; -\infty \text{ otherwise}")
    completion.prompt_form()
    trace = completion.current_completion(session)
    if trace is None:
        st.stop()
    cfg = session.model.config
    layers, heads, n = trace.num_layers["decoder"], trace.num_heads, len(trace.target_tokens)
    reading = READINGS[trace.reading("decoder")]  # by rows: one query row worked out, read alone from the trace
    labels = [f"{j}: {t}" for j, t in enumerate(trace.target_tokens)]
    a, b, c = st.columns(3)
    pick_head((a, b), own.lm_layer, own.lm_head, layers, heads, completion.grouped_head_label(trace))
    i = reading.pick(trace, labels, c)
    layer, head = int(own.lm_layer.get()) - 1, int(own.lm_head.get()) - 1
    with st.spinner("Working the head through…"):
        steps = cached_steps(session.ref.stored, tuple(trace.target_ids), layer, head, reading.rows(i))
    # checked against the map the trace recorded while it continued the prompt (the one Complete & explore draws;
    # a long prompt's: the query's row alone, made on demand)
    recorded = trace.head_map("decoder", layer, head, reading.recorded(i))
    steps = dataclasses.replace(steps, recorded=np.asarray(recorded, dtype=np.float64))
    shown = reading.shown(i, n)  # the tokens the tables of q and k list

    st.subheader("1. Queries and keys")
    kv = ("" if steps.kv_head is None else
          f" Query heads share key/value heads here: head {head + 1} reads key/value head {steps.kv_head + 1}, so "
          "its keys are the same as those of every query head in its group.")
    st.caption(f"x: the layer's input after its {cfg.normalization} norm ({n} tokens × d_model = {cfg.d_model}). "
               f"q = x W_q and k = x W_k, this head's {steps.q.shape[1]} columns (d_k)." + kv + reading.note(shown, i))
    stages_q = [("x W_q", steps.q_projected)] + ([("after the query norm", steps.q_normed)]
                                                 if steps.q_normed is not None else [])
    stages_k = [("x W_k", steps.k_projected)] + ([("after the key norm", steps.k_normed)]
                                                 if steps.k_normed is not None else [])
    if steps.rotated:
        stages_q.append(("after RoPE", steps.q))
        stages_k.append(("after RoPE", steps.k))
    tabs = st.tabs([f"q: {name}" for name, _ in stages_q] + [f"k: {name}" for name, _ in stages_k])
    for tab, (_, values), prefix in zip(tabs, stages_q + stages_k, ["q"] * len(stages_q) + ["k"] * len(stages_k)):
        with tab:
            widgets.matrix_table(typed_matrices.labelled(values[shown], [labels[j] for j in shown], f"{prefix}·"),
                                 digits=3, height=300)
    if steps.rotated:
        before = steps.q_projected if steps.q_normed is None else steps.q_normed
        st.caption(f"RoPE turns each pair of q's and k's coordinates by an angle that grows with the token's "
                   f"position, so q_i · k_j depends on i − j. A rotation keeps lengths: |q| of token {i} is "
                   f"{np.linalg.norm(before[i]):.4f} before and {np.linalg.norm(steps.q[i]):.4f} after.")
    elif steps.bias is not None:
        st.caption("This model puts position into the scores with ALiBi: a penalty proportional to the distance, "
                   "added after the scaling (its column below).")
    else:
        st.caption(f"This model adds {cfg.positional} positions to its input: they are in x already, so q and k are "
                   "not rotated.")

    st.subheader(f"2. The scores of token {i}'s query, masked, and the softmax")
    window = "" if steps.window is None else f" and a sliding window of {steps.window} (keys i − {steps.window - 1}..i)"
    st.caption(f"Each key's score q·k ÷ {'√d_k' if steps.divisor != 1 else '1 (unscaled)'} = {steps.divisor:.4g}; "
               f"the causal mask{window} sets every hidden key's score to −∞, so its weight is exactly 0; the "
               + ("softmax of the rest sums to 1." if steps.sink is None else
                  f"softmax runs over the rest and this head's learned sink logit ({steps.sink:.4f}), whose share is "
                  "dropped: the row sums to less than 1."))
    reading.query(trace, steps, labels, layer, head, i)


def pick_in_column(trace: AttentionTrace, labels: list[str], column) -> int:
    """The query followed, picked in `column` among every token."""
    n = len(labels)
    with column:
        state.clamp_choice(own.lm_query, list(range(n)), completion.prompt_length(trace) - 1, "Query")
        state.bound(st.selectbox, "Follow the query of token", own.lm_query, list(range(n)),
                    format_func=lambda i: labels[i])
    return int(own.lm_query.get())


def pick_by_search(trace: AttentionTrace, labels: list[str], column) -> int:
    """The query followed, picked by search or on the strip (a long prompt's: no list of every token)."""
    own.lm_token.init(f"q{completion.prompt_length(trace) - 1}")
    return token_picker.token_picker(trace.target_tokens, own.lm_token, what="query token",
                                     default=completion.prompt_length(trace) - 1)


def whole_query(trace: AttentionTrace, steps: HeadSteps, labels: list[str], layer: int, head: int, i: int) -> None:
    """Maps read whole: the query's row as a table, then every query at once, worked out and recorded."""
    st.dataframe(query_table(steps, labels, i).style.format(precision=4), hide_index=True, width="stretch")

    every_query(steps, trace.target_tokens, "decoder", layer, head, "abh_lm",
                "while it continued the prompt (the one Complete & explore draws)")


def row_query(trace: AttentionTrace, steps: HeadSteps, labels: list[str], layer: int, head: int, i: int) -> None:
    """Maps read by rows (a long prompt's): the query row's tables, then the row over the whole prompt."""
    row_query_tables(trace, steps, labels, i)
    row_query_strip(trace, steps, layer, head, i)


def row_query_tables(trace: AttentionTrace, steps: HeadSteps, labels: list[str], i: int) -> None:
    """A long prompt's query row: the keys it weighs most, then a window of keys picked by search or on the strip."""
    r = i - steps.first_row
    top = [int(j) for j in np.argsort(-steps.weights[r], kind="stable")[:TOP_KEYS]]
    st.markdown(f"**The {len(top)} keys token {i} weighs most** (of {len(labels)})")
    st.dataframe(query_table(steps, labels, i, top).style.format(precision=4), hide_index=True, width="stretch")
    st.markdown("**Any other keys: find a word or scroll to it**")
    own.lm_key.init(f"k{i}")
    key = token_picker.token_picker(trace.target_tokens, own.lm_key, prefix="k", what="key", default=i)
    window = around(key, len(labels))
    st.dataframe(query_table(steps, labels, i, window).style.format(precision=4), hide_index=True, width="stretch")
    st.caption(f"Keys {window[0]}–{window[-1]} around key {key}; the weights of the row's {len(labels)} keys sum to "
               f"{steps.weights[r].sum():.6f}.")


def row_query_strip(trace: AttentionTrace, steps: HeadSteps, layer: int, head: int, i: int) -> None:
    """A long prompt's step 3: the query's row worked out here and the one recorded, as strips over the prompt."""
    st.subheader(f"3. Token {i}'s row over the whole prompt")
    r = i - steps.first_row
    fig = row_strip_figures.strip_figure(
        np.stack([steps.weights[r], steps.recorded[r]]), trace.target_tokens,
        ["worked out here", "recorded (made on demand)"],
        f"Layer {layer + 1}, head {head + 1}: the softmax weights of token {i}'s query over every key",
        completion.prompt_length(trace))
    widgets.chart(fig, f"weights-layer{layer + 1}-head{head + 1}-token{i}", key="abh_lm_row_chart")
    st.caption(f"A prompt of {len(trace.target_tokens)} tokens: one query row is worked out (every query at once "
               "would be an n x n map of each stage; Complete & explore draws this head's whole map in blocks).")
    st.metric("Largest difference from the row the model recorded", f"{steps.difference:.1e}",
              help="The row above, worked out step by step in float64, against the same row of the attention map "
                   "the trace records (made on demand from the layer's queries and keys).")


@dataclass(frozen=True)
class QueryReading:
    """How the page follows a query, for maps read whole or by rows: the picker, the query rows worked out and those
    of the recorded map read (None: all), the tokens the q and k tables list, the caption's note on them and the
    query's tables and figures."""

    pick: Callable[[AttentionTrace, list[str], Any], int]
    rows: Callable[[int], tuple[int, int] | None]
    recorded: Callable[[int], slice | None]
    shown: Callable[[int, int], list[int]]
    note: Callable[[list[int], int], str]
    query: Callable[[AttentionTrace, HeadSteps, list[str], int, int, int], None]


READINGS = {  # per `AttentionTrace.reading`
    "whole": QueryReading(pick_in_column, lambda i: None, lambda i: None, lambda i, n: list(range(n)),
                          lambda shown, i: "", whole_query),
    "rows": QueryReading(pick_by_search, lambda i: (i, i + 1), lambda i: slice(i, i + 1), around,
                         lambda shown, i: f" The tables list the {len(shown)} tokens {shown[0]}–{shown[-1]} around "
                                          f"token {i}.", row_query)}
