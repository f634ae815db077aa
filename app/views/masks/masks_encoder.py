"""Masks with an encoder open: no causal mask; the padding of a batch of two texts (checked against each text read
alone), the token types of a pair, and the band of keys a windowed layer sees (ModernBERT's local layers)."""

import numpy as np
import streamlit as st

from app import fill_in, sessions, state, widgets
from app.page_settings import MASKS as own
from app.texts import MASKED_EXAMPLES, count, md_escape
from viz_model.lessons.encoder_masks import layer_bands
from viz_model.plot import masking_figures

session = sessions.require_session()
model = session.model
mask = model.mask_token
st.title("Masks")
st.caption("An encoder reads its whole text at once, both ways: every token sees every other, with no causal mask. "
           "What it masks is padding (a batch pads its texts to one length and masks the pad keys) and, in "
           "ModernBERT's local layers, every key beyond the window. Masked scores become −∞ before the softmax, so "
           "their weights are exactly 0. Token types are no mask: they tell sentence A from sentence B.")
trace = fill_in.reading_or_stop(session)
tokens, n = trace.source_tokens, len(trace.source_tokens)
bands = layer_bands(model, n)
layers = list(range(1, len(bands) + 1))
state.clamp_choice(own.layer, layers, 1, "Layer")
state.bound(st.selectbox, "Layer", own.layer, layers, format_func=lambda v: f"Layer {v} of {len(layers)}" + (
    "" if bands[v - 1] is None else " · local (a window of keys)"))
layer = int(own.layer.get()) - 1


def token_count(text: str) -> int:
    try:
        return len(model.encode(text))
    except ValueError:
        return -1


# --- padding -----------------------------------------------------------------------------------------------------
st.subheader("Padding: a batch of two texts")
examples = [example.format(mask=mask) for example in MASKED_EXAMPLES]
pair = trace.settings.get("text_pair")
companion = own.other.get()
if companion is None or (companion in examples and token_count(companion) == n):
    own.other.set(next((e for e in examples if token_count(e) != n), examples[0]))
state.bound(st.text_input, "Second text of the batch (a different length makes the padding visible)", own.other)
texts, pairs = [trace.source_text, own.other.get()], [pair, None]
if pair is not None:
    st.caption("The batch reads your pair (sentences A and B, with their token types) beside the second text.")
try:
    batch = session.padded_batch(texts, pairs)
    alone = [session.encoder_trace(text, second).encoder_attentions for text, second in zip(texts, pairs)]
except ValueError as err:
    st.error(md_escape(f"The second text cannot be used: {err}."))
else:
    pad = model.pieces([model.config.pad_id])[0]
    if batch.real.all():
        st.info(f"Both texts have {count(n, 'token')}, so nothing is padded: type a shorter or longer second text "
                "to see the padding mask at work.")
    fig = masking_figures.padding_mask_figure(batch.tokens, batch.real, f"Padding mask of the keys, padded on the "
                                              f"right: 1 = real token, 0 = {pad}")
    widgets.chart(fig, "padding-mask", key="pad_chart")
    widgets.exports(fig, "padding-mask", "pad")
    shorter = int(batch.real[1].sum() < batch.real[0].sum())
    state.clamp_choice(own.row, [0, 1], shorter, "Text")
    state.bound(st.radio, "Text", own.row, [0, 1], horizontal=True, format_func=lambda r: f"#{r + 1}")
    row = int(own.row.get())
    keys = batch.real[row][None, :].repeat(len(batch.tokens[row]), axis=0)
    band = layer_bands(model, len(batch.tokens[row]))[layer]
    combined = keys if band is None else keys & band
    fig = masking_figures.mask_matrix_figure(combined, batch.tokens[row], batch.tokens[row],
                                             f"The mask layer {layer + 1} applies to text #{row + 1} (padding"
                                             + (")" if band is None else " AND the window)"))
    widgets.chart(fig, "combined-mask", key="combined_chart")
    widgets.exports(fig, "combined-mask", "combined")
    a, b = st.columns(2)
    a.metric("Largest weight on a pad key (every layer and head)", f"{batch.pad_weight():.1e}",
             help="From the weights of the padded batch's pass: exactly 0 where the mask hides a key.")
    b.metric("Max difference from each text read alone", f"{max(batch.difference(r, alone[r]) for r in (0, 1)):.1e}",
             help="Every real token's weights in the batch against the same text's maps read on its own: the "
                  "padding, masked, changes nothing.")
    st.caption("The pads come after each text (on the right), so every text keeps its positions; a pad's own row "
               "is computed and ignored.")

# --- token types -------------------------------------------------------------------------------------------------
st.subheader("Token types of a pair")
type_ids = trace.settings.get("type_ids", [0] * n)
if trace.settings.get("text_pair") is None:
    st.info("One sentence: every token has type 0. Add a second sentence (Change the sentence → A second sentence) "
            "to see the token types of a pair.")
else:
    fig = masking_figures.token_type_figure(tokens, type_ids, "Token types: 0 = sentence A, 1 = sentence B")
    widgets.chart(fig, "token-types", key="types_chart")
    widgets.exports(fig, "token-types", "types")
    if model.config.type_vocab_size < 2:
        st.caption("This model reads no token types: sentence B is told apart by the separator tokens alone (every "
                   "type is 0).")
    else:
        st.caption("Each token's type embedding is added to its token and position embeddings; no key is masked: "
                   "sentence A's tokens attend to sentence B's and back.")

# --- local window ------------------------------------------------------------------------------------------------
st.subheader("Local layers: a window of keys")
if all(band is None for band in bands):
    st.info("Every layer of this model sees every key: it has no local layers (ModernBERT's see only a window).")
else:
    visible = np.ones((n, n), dtype=bool) if bands[layer] is None else bands[layer]
    radius = model.config.window_radius
    st.caption(f"Local layers: {', '.join(str(i + 1) for i, band in enumerate(bands) if band is not None)} · a "
               f"query sees the keys at most {count(radius, 'token')} away on either side; the other layers see "
               "every key.")
    fig = masking_figures.mask_matrix_figure(visible, tokens, tokens, f"Layer {layer + 1}'s mask" + (
        " (every key)" if bands[layer] is None else f" (a band of ±{radius} tokens)"))
    widgets.chart(fig, "window-mask", key="window_chart")
    widgets.exports(fig, "window-mask", "window")
    outside = trace.encoder_attentions[layer][:, ~visible]
    st.metric("Largest recorded weight outside the band (every head)",
              f"{float(np.abs(outside).max()) if outside.size else 0.0:.1e}",
              help="From the weights the model recorded for this text: exactly 0 beyond the window.")
