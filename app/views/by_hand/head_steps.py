"""One head of a language model worked through by hand on a prompt: the layer's normed input, its query and the key
of the key/value head it reads (projected, normed where the model norms them, rotated where it uses RoPE), the
scaled scores, the causal (and window) mask and the softmax; built from the layer's own weights and checked against
the map the network records."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st
import torch
from torch import Tensor

from app import state, widgets
from app.setting_types import Setting
from viz_model.kinds.language_model import LanguageModel
from viz_model.nn.causal_lm import window_mask
from viz_model.nn.rotary import Rotary, rotate
from viz_model.on_demand import recipe_maps
from viz_model.plot import analysis_figures


@dataclass
class HeadSteps:
    """Every intermediate of one head on ``n`` tokens (float64 copies of what the layer computed).

    :ivar x: ``(n, d_model)`` the layer's input after its norm: what W_q and W_k read
    :ivar q_projected: ``(n, d_head)`` x W_q (+ bias), this head's columns
    :ivar k_projected: ``(n, d_head)`` x W_k (+ bias), the columns of the key/value head it reads
    :ivar q_normed: ``(n, d_head)`` after the per-head query norm, None where the model has none (the same for k)
    :ivar q: ``(n, d_head)`` the query the scores use (after the norm and the rotation where there are)
    :ivar k: ``(n, d_head)`` the key the scores use
    :ivar kv_head: the key/value head read (0-based); None where every query head has its own
    :ivar divisor: what the dot products are divided by (sqrt(d_head); 1 for unscaled scores)
    :ivar dots: ``(rows, n)`` q_i · k_j (every row: ``(n, n)``; the same for the arrays below)
    :ivar softcap: the scores' cap (Gemma 2), else None
    :ivar bias: ``(n, n)`` the position bias added to the scores (ALiBi), else None
    :ivar scores: ``(n, n)`` dots / divisor (capped, plus the bias): what the mask and softmax see
    :ivar visible: ``(n, n)`` True = may attend (causal, within the window)
    :ivar weights: ``(n, n)`` the softmax of the visible scores of each row
    :ivar recorded: ``(n, n)`` the map the network recorded for this head in the same pass
    :ivar rotated: whether RoPE turned q and k
    :ivar window: the layer's sliding window, else None
    :ivar first_row: the query row the ``(rows, n)`` arrays start at (0: every row, ``(n, n)``)
    :ivar values: ``(n, d_head)`` x W_v (+ bias), this head's columns, where they are worked through (an encoder's)
    :ivar sink: the head's learned sink logit, in the softmax beside the keys and its share dropped (gpt-oss), else
        None
    """

    x: np.ndarray
    q_projected: np.ndarray
    k_projected: np.ndarray
    q_normed: np.ndarray | None
    k_normed: np.ndarray | None
    q: np.ndarray
    k: np.ndarray
    kv_head: int | None
    divisor: float
    dots: np.ndarray
    softcap: float | None
    bias: np.ndarray | None
    scores: np.ndarray
    visible: np.ndarray
    weights: np.ndarray
    recorded: np.ndarray
    rotated: bool
    window: int | None
    first_row: int = 0
    values: np.ndarray | None = None
    sink: float | None = None

    @property
    def difference(self) -> float:
        """The largest gap between the weights worked out here and the recorded map."""
        return float(np.abs(self.weights - self.recorded).max())


def f64(t: Tensor) -> np.ndarray:
    return t.detach().double().cpu().numpy()


def head_steps(model: LanguageModel, ids: list[int], layer: int, head: int, rows: tuple[int, int] | None = None
               ) -> HeadSteps:
    """Query head `head` (0-based) of `layer` worked through on the tokens `ids` (one pass, from position 0); `rows`
    ``(first, stop)``: those query rows alone (a long prompt: the pass keeps no map, the recorded rows are made from
    the layer's recipe), every other intermediate still over every token."""
    network = model.network
    if not 0 <= layer < len(network.layers):
        raise ValueError(f"layer must be from 0 to {len(network.layers) - 1}, got {layer}")
    attn = network.layers[layer].self_attn
    if not 0 <= head < attn.heads:
        raise ValueError(f"head must be from 0 to {attn.heads - 1}, got {head}")
    n = len(ids)
    first, stop = (0, n) if rows is None else rows
    if not 0 <= first < stop <= n:
        raise ValueError(f"rows must be (first, stop) with 0 <= first < stop <= {n}, got {rows}")
    captured: dict[str, Tensor] = {}

    def grab(_module: object, args: tuple) -> None:  # returns None: the call goes on with its own arguments
        captured.setdefault("x", args[0])

    handle = attn.register_forward_pre_hook(grab)
    try:
        with torch.inference_mode():
            out = network(torch.tensor([ids], device=model.device), need_weights=True if rows is None else "recipe")
    finally:
        handle.remove()
    x = captured["x"]
    owners = attn.query_kv_heads()
    kv_head = None if owners is None else owners[head]
    with torch.inference_mode():
        own = head if kv_head is None else kv_head  # the key/value head this query head reads
        q_all, k_all = attn.split_heads(attn.w_q(x)), attn.split_heads(attn.w_k(x))
        q, k = q_projected, k_projected = q_all[:, head:head + 1], k_all[:, own:own + 1]
        q_normed = k_normed = None
        if attn.q_norm is not None and attn.k_norm is not None:  # each head's (Qwen3) or all heads' at once (OLMo 2)
            q_all, k_all = attn.normed_queries_keys(q_all, k_all)
            q = q_normed = q_all[:, head:head + 1]
            k = k_normed = k_all[:, own:own + 1]
        window = network.window(layer)
        scheme = network.local_scheme if network.local_scheme is not None and window is not None else network.scheme
        where = torch.arange(n, device=x.device)[None]
        position = None if scheme is None else scheme.score_position(where[:, first:stop], where, False)
        rotated = isinstance(scheme, Rotary)
        if rotated:
            turn = scheme.score_position(where, where, False).rotation
            q, k = rotate(q, *turn), rotate(k, *turn)
        q64, k64 = f64(q[0, 0]), f64(k[0, 0])
        recorded = (f64(out.records[layer].weights[0, head]) if rows is None else
                    f64(recipe_maps(out.recipes[layer], [head], slice(first, stop))[0]))
        sinks = (out.records[layer] if rows is None else out.recipes[layer]).sinks  # the call's, as it saw them
        sink = None if sinks is None else float(sinks[head])
    divisor = 1.0 if attn.scale is False else math.sqrt(q64.shape[-1] if attn.scale is True else attn.scale)
    dots = q64[first:stop] @ k64.T
    scores = dots / divisor
    if attn.softcap is not None:
        scores = np.tanh(scores / attn.softcap) * attn.softcap
    bias = None if position is None or position.bias is None else f64(position.bias[0, head])
    if bias is not None:
        scores = scores + bias
    visible = window_mask(stop - first, first, window, torch.device("cpu"))[0, 0].numpy()
    visible = np.pad(visible, ((0, 0), (0, n - stop)))  # keys after the last row: hidden
    masked = np.where(visible, scores, -np.inf)
    top = masked.max(axis=1, keepdims=True) if sink is None else np.maximum(masked.max(axis=1, keepdims=True), sink)
    weights = np.exp(masked - top)
    weights /= weights.sum(axis=1, keepdims=True) + (0.0 if sink is None else np.exp(sink - top))  # the sink's share
    return HeadSteps(f64(x[0]), f64(q_projected[0, 0]), f64(k_projected[0, 0]),
                     None if q_normed is None else f64(q_normed[0, 0]),
                     None if k_normed is None else f64(k_normed[0, 0]), q64, k64, kv_head, divisor, dots,
                     attn.softcap, bias, scores, visible, weights, recorded, rotated, window, first, sink=sink)


# --- drawn by every kind's page ----------------------------------------------------------------------------------
def query_table(steps: HeadSteps, labels: list[str], i: int, keys: list[int] | None = None,
                bias: str = "+ position bias (ALiBi)") -> pd.DataFrame:
    """Query `i`'s row, one line per key (`keys`: those alone, in that order): the dot product, the scaled (capped,
    biased: the `bias` column) score, the mask, the weight worked out here and the recorded one."""
    r = i - steps.first_row
    keys = list(range(len(labels))) if keys is None else keys
    dots = steps.dots[r, keys]
    row = {"key": [labels[j] for j in keys], "q·k": dots, f"÷ {steps.divisor:.4g}": dots / steps.divisor}
    if steps.softcap is not None:
        row[f"capped ({steps.softcap:g}·tanh(s/{steps.softcap:g}))"] = np.tanh(
            dots / steps.divisor / steps.softcap) * steps.softcap
    if steps.bias is not None:
        row[bias] = steps.scores[r, keys]
    row["may attend"] = steps.visible[r, keys]
    row["softmax weight"] = steps.weights[r, keys]
    row["recorded weight"] = steps.recorded[r, keys]
    return pd.DataFrame(row)


def pick_head(columns: tuple, layer: Setting[int], head: Setting[int], layers: int, heads: int,
              head_label: Callable[[int], str]) -> None:
    """The layer and head pickers (1-based, kept in `layer` and `head`), in the first two of `columns`."""
    with columns[0]:
        state.clamp_choice(layer, list(range(1, layers + 1)), 1, "Layer")
        state.bound(st.selectbox, "Layer", layer, list(range(1, layers + 1)),
                    format_func=lambda v: f"Layer {v} of {layers}")
    with columns[1]:
        state.clamp_choice(head, list(range(1, heads + 1)), 1, "Head")
        state.bound(st.selectbox, "Head", head, list(range(1, heads + 1)), format_func=head_label)


def every_query(steps: HeadSteps, tokens: list[str], kind: str, layer: int, head: int, key: str, recorded: str) -> None:
    """Step 3: the masked scores and the weights worked out here, every query at once, and their largest difference
    from the map the model recorded (`recorded`: when, in words; `key`: the charts' key prefix)."""
    st.subheader("3. Every query at once")
    left, right = st.columns(2)
    with left:
        scores = np.where(steps.visible, steps.scores, np.nan)
        fig = analysis_figures.token_map_figure(scores, tokens, tokens, kind, layer,
                                                f"Masked scores, layer {layer + 1}, head {head + 1}")
        fig.update_traces(zmin=float(np.nanmin(scores)), zmax=float(np.nanmax(scores)), colorscale="RdBu_r",
                          colorbar=dict(title=dict(text="score")), selector=dict(type="heatmap"),
                          hovertemplate="query %{customdata[0]}<br>key %{customdata[1]}<br>score %{z:.4f}"
                                        "<extra>masked: blank</extra>")
        widgets.chart(fig, f"scores-layer{layer + 1}-head{head + 1}", key=f"{key}_scores_chart")
    with right:
        fig = analysis_figures.token_map_figure(steps.weights, tokens, tokens, kind, layer,
                                                f"Softmax weights worked out here, layer {layer + 1}, head {head + 1}")
        widgets.chart(fig, f"weights-layer{layer + 1}-head{head + 1}", key=f"{key}_weights_chart")
    st.metric("Largest difference from the map the model recorded", f"{steps.difference:.1e}",
              help=f"The weights above, worked out step by step in float64, against the attention map the model "
                   f"recorded {recorded}.")
