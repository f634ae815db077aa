"""Masks with a language model open: the causal mask, each layer's sliding window, and the padding of a batch of two
prompts, padded on the side the tokenizer pads (what its files say, else transformers' default, the right)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from app import completion, state, texts, widgets
from app.page_settings import MASKS as own
from app.sessions import Session
from viz_model.analysis.map_summary import row_blocks
from viz_model.kinds.language_model import LanguageModel
from viz_model.nn.causal_lm import window_mask
from viz_model.plot import long_mask_figures, masking_figures
from viz_model.trace import AttentionTrace

PAD = "<pad>"
SIDES = {"left": "on the left (before the text)", "right": "on the right (after the text)"}


def padding_side(model: LanguageModel) -> str | None:
    """"left" or "right" where the tokenizer's own file sets its padding, None where it says nothing."""
    padding = getattr(getattr(model.tokenizer, "backend", None), "padding", None)
    return None if not isinstance(padding, dict) else ("left" if padding.get("direction") == "left" else "right")


def padded(rows: list[list[str]], side: str) -> tuple[list[list[str]], np.ndarray]:
    """The batch's token labels padded to one length with `PAD` on `side`, and its ``(batch, length)`` padding mask
    (True = a real token)."""
    length = max(len(r) for r in rows)
    tokens, mask = [], np.zeros((len(rows), length), dtype=bool)
    for b, row in enumerate(rows):
        pads = [PAD] * (length - len(row))
        tokens.append(pads + row if side == "left" else row + pads)
        if side == "left":
            mask[b, length - len(row):] = True
        else:
            mask[b, :len(row)] = True
    return tokens, mask


def layer_mask(length: int, window: int | None, keys: np.ndarray) -> np.ndarray:
    """``(length, length)`` what a layer lets each query of a padded row see: causal, within `window`, real keys."""
    return window_mask(length, 0, window, torch.device("cpu"))[0, 0].numpy() & keys[None, :]


def windows_line(windows: list[int | None]) -> str:
    """"Layers 1 and 3: a window of 4 tokens · layer 2: every earlier token"."""
    groups: dict[int | None, list[int]] = {}
    for layer, window in enumerate(windows):
        groups.setdefault(window, []).append(layer + 1)
    parts = [f"{'layers ' + ', '.join(map(str, layers)) if len(layers) > 1 else f'layer {layers[0]}'}: "
             + ("every earlier token" if window is None else f"a window of {texts.count(window, 'token')}")
             for window, layers in groups.items()]
    return " · ".join(parts)


def recorded_check(trace: AttentionTrace, layer: int, visible: np.ndarray, rows: slice | None = None
                   ) -> tuple[float, float, float]:
    """(largest weight on a masked cell, smallest and largest row sum) of every head of `layer` over query `rows`
    (None: all, each head's map read a block of rows at a time by `row_blocks`), read head by head: a long trace's
    maps made on demand are never held a layer at once."""
    hidden, low, high = 0.0, np.inf, -np.inf
    for head in range(trace.map_shape("decoder", layer)[0]):
        blocks = (row_blocks(trace, "decoder", layer, head) if rows is None
                  else [(rows.start, trace.head_map("decoder", layer, head, rows))])
        for start, block in blocks:
            masked = ~visible[start:start + len(block)]
            if masked.any():
                hidden = max(hidden, float(np.abs(block[masked]).max()))
            sums = block.sum(axis=-1)
            low, high = min(low, float(sums.min())), max(high, float(sums.max()))
    return hidden, low, high


def mask_figures(mask: np.ndarray, rows: list[str], keys: list[str], title: str, around: int, name: str,
                 key: str, trace: AttentionTrace | None = None) -> None:
    """`mask` drawn as `long_mask_figures.mask_drawings` draws it: cell by cell, or as blocks and a window of its
    cells around position `around` (`trace`: the prompt's end marked on each)."""
    figures = long_mask_figures.mask_drawings(mask, rows, keys, title, around)
    for fig, suffix in figures:
        fig_name, fig_key = name + suffix, key + suffix.replace("-", "_")
        if trace is not None:
            completion.mark_boundary(fig, trace)
        widgets.chart(fig, fig_name, key=fig_key)
        widgets.exports(fig, fig_name, fig_key.removesuffix("_chart"))
    if len(figures) > 1:
        st.caption(f"{len(rows):,} tokens: the whole mask as blocks (each coloured by the share of its cells that may "
                   f"attend), then every cell of the {long_mask_figures.MASK_WINDOW_TOKENS} positions around "
                   f"position {around}.")


@dataclass(frozen=True)
class MaskCheck:
    """Which query rows the recorded weights are checked over, for maps read whole (all) or by rows (the window's),
    and what the metric's label and help add."""

    rows: Callable[[int, int], slice | None]
    label: Callable[[slice | None], str]
    help: str


CHECKS = {"whole": MaskCheck(lambda n, around: None, lambda rows: "", ""),
          "rows": MaskCheck(lambda n, around: slice(first := long_mask_figures.window_start(around, n),
                                                    first + long_mask_figures.MASK_WINDOW_TOKENS),
                            lambda rows: f", queries {rows.start}–{rows.stop - 1}",
                            " On a long prompt, over the window's queries drawn above (each head's rows read alone).")}


def page(session: Session) -> None:
    """The Masks page for the language model of `session`."""
    model: LanguageModel = session.model  # type: ignore[assignment]
    st.title("Masks")
    st.caption("A language model's decoder sees only the past: the causal mask keeps position t away from every later "
               "key, a sliding-window layer also from every key more than W − 1 back, and a batch of prompts of "
               "different lengths is padded, its `<pad>` keys masked. Masked scores become −∞ before the softmax, "
               "so their weights are exactly 0.")
    trace = completion.current_completion(session)
    if trace is None:
        st.stop()
    n = len(trace.target_tokens)
    windows = [model.network.window(i) for i in range(len(model.network.layers))]

    st.subheader("Causal mask and sliding windows")
    st.caption(f"This model's layers see: {windows_line(windows)}.")
    layers = list(range(1, len(windows) + 1))
    state.clamp_choice(own.layer, layers, 1, "Layer")
    state.bound(st.selectbox, "Layer", own.layer, layers, format_func=lambda v: f"Layer {v} of {len(layers)}" + (
        "" if windows[v - 1] is None else f" · window {windows[v - 1]}"))
    layer = int(own.layer.get()) - 1
    visible = window_mask(n, 0, windows[layer], torch.device("cpu"))[0, 0].numpy()
    what = ("causal: position t sees keys 0..t" if windows[layer] is None
            else f"causal and a sliding window of {windows[layer]}: position t sees keys t − {windows[layer] - 1}..t")
    mask_figures(visible, trace.target_tokens, trace.target_tokens,
                 f"Layer {layer + 1}'s mask over the prompt and its continuation ({what})",
                 completion.prompt_length(trace), f"layer{layer + 1}-mask", "lm_mask_chart", trace)
    check = CHECKS[trace.reading("decoder")]
    checked = check.rows(n, completion.prompt_length(trace))
    hidden, low, high = recorded_check(trace, layer, visible, checked)
    a, b = st.columns(2)
    a.metric(f"Largest weight on a masked cell (every head{check.label(checked)})", f"{hidden:.1e}",
             help="From the weights the model recorded for this prompt: exactly 0 where the mask hides a key."
             + check.help)
    b.metric("Row sums", f"{low:.6f}" if np.isclose(low, high, atol=5e-6)
             else f"{low:.4f}–{high:.4f}", help="Every query's weights sum to 1 over what it may see.")

    st.subheader("Padding: a batch of two prompts")
    ids = completion.prompt_length(trace)

    def token_count(text: str) -> int:
        try:
            return len(model.encode(text))
        except ValueError:
            return -1

    companion = own.other.get()
    if companion is None or (companion in texts.EXAMPLES and token_count(companion) == ids):
        own.other.set(next((e for e in texts.EXAMPLES if token_count(e) != ids), texts.EXAMPLES[0]))
    state.bound(st.text_input, "Second prompt of the batch (a different length makes the padding visible)", own.other)
    try:
        other = model.encode(own.other.get())
    except ValueError as err:
        st.error(f"The second prompt cannot be used: {err}.")
        st.stop()
    own_side = padding_side(model)
    own.padding_side.init(own_side or "right")
    state.bound(st.radio, "Pad", own.padding_side, list(SIDES), horizontal=True, format_func=SIDES.get,
                help="Generation pads on the left, so that every prompt's last token is the batch's last column.")
    side = own.padding_side.get()
    st.caption(f"This tokenizer pads on the {own_side} (its tokenizer.json says so)." if own_side else
               "This tokenizer's files set no padding side: transformers pads on the right unless told otherwise; "
               "generation with a batch pads on the left.")
    prompt_tokens = trace.target_tokens[:ids]
    rows, keys = padded([prompt_tokens, model.tokenizer.pieces(other)], side)
    if len(other) == ids:
        st.info(f"Both prompts have {ids} tokens, so nothing is padded: type a shorter or longer second prompt to "
                "see the padding mask at work.")
    fig = masking_figures.padding_mask_figure(rows, keys, f"Padding mask of the keys, padded on the {side}: "
                                              "1 = real token, 0 = <pad>")
    long_mask_figures.token_axis(fig, keys.shape[1], "key position (hover for the token)")
    widgets.chart(fig, "padding-mask", key="pad_chart")
    widgets.exports(fig, "padding-mask", "pad")
    shorter = 0 if ids <= len(other) else 1
    state.clamp_choice(own.row, [0, 1], shorter, "Prompt")
    state.bound(st.radio, "Prompt", own.row, [0, 1], horizontal=True, format_func=lambda r: f"#{r + 1}")
    row = int(own.row.get())
    combined = layer_mask(keys.shape[1], windows[layer], keys[row])
    edge = int(np.flatnonzero(keys[row])[0]) if side == "left" else int(keys[row].sum())  # where its pads meet it
    mask_figures(combined, rows[row], rows[row], f"The mask layer {layer + 1} applies to prompt #{row + 1} (causal "
                 "AND " + ("" if windows[layer] is None else "window AND ") + "padding)",
                 edge, "combined-mask", "combined_chart")
    st.caption("Right padding: the prompt keeps its positions and the pads come after it (their rows are ignored). "
               "Left padding: every prompt ends in the last column, where the next token is read; a pad's own row "
               "sees nothing, and the real tokens' positions are counted from the first real token.")
