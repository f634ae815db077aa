"""Masks: the padding and causal masks of a two-sentence batch, and one head's scores step by step (a language
model's: `masks_lm`)."""

import numpy as np
import streamlit as st

from app import sessions, state, texts, tracing, widgets
from app.page_settings import MASKS as own
from app.shared_settings import SHARED
from viz_model.data.typed_text import check_text
from viz_model.nn import kinds
from viz_model.nn.attention import causal_mask
from viz_model.plot import masking_figures

session = sessions.require_session()

st.title("Masks")
st.caption("A batch pads its sentences to the same length; the padding mask keeps every query away from the "
           "`<pad>` keys, and the decoder's causal mask keeps position t away from the future. Masked scores become "
           "−∞ before the softmax, so their weights are exactly 0.")
trace = tracing.trace_or_stop(session)

def token_count(text: str) -> int:
    """Source tokens of `text` (pieces + </s>), or -1 when it cannot be encoded."""
    try:
        return len(session.model.encode(text, truncate=True))
    except ValueError:
        return -1


length = len(trace.source_ids)
# an example companion (not one the user typed) is re-picked whenever it has as many tokens as the sentence:
# the padding mask then always shows padding
companion = own.other.get()
if companion is None or (companion in texts.EXAMPLES and token_count(companion) == length):
    own.other.set(next((e for e in texts.EXAMPLES if token_count(e) != length), texts.EXAMPLES[0]))
state.bound(st.text_input, "Second sentence of the batch (a different length makes the padding visible)", own.other)
try:
    check_text(own.other.get(), "the second sentence")
    other = session.trace(own.other.get())
except ValueError as err:
    st.error(f"The second sentence cannot be used: {err}")
    st.stop()
if len(other.source_ids) == length:
    st.info(f"Both sentences have {length} tokens, so nothing is padded: type a shorter or longer second sentence "
            "to see the padding mask at work.")

columns = st.columns(4)
with columns[0]:
    state.clamp_choice(own.kind, list(kinds.KIND_LABELS), SHARED.kind.get(), "Attention kind")
    state.bound(st.selectbox, "Attention", own.kind, list(kinds.KIND_LABELS), format_func=kinds.KIND_LABELS.get)
kind = own.kind.get()
layer_count, head_count = trace.num_layers[kind], trace.num_heads
with columns[1]:
    state.clamp_choice(own.layer, list(range(1, layer_count + 1)), 1, "Layer")
    state.bound(st.selectbox, "Layer", own.layer, list(range(1, layer_count + 1)),
                format_func=lambda v: f"Layer {v} of {layer_count}")
with columns[2]:
    state.clamp_choice(own.head, list(range(1, head_count + 1)), 1, "Head")
    state.bound(st.selectbox, "Head", own.head, list(range(1, head_count + 1)),
                format_func=lambda v: f"Head {v} of {head_count}")
with columns[3]:
    shorter = 0 if len(trace.source_ids) <= len(other.source_ids) else 1  # the one with padding
    state.clamp_choice(own.row, [0, 1], shorter, "Sentence")
    state.bound(st.radio, "Sentence", own.row, [0, 1], horizontal=True, format_func=lambda r: f"#{r + 1}")

traces = [trace, other]
layer = int(own.layer.get())
try:
    scores = session.layer_scores([list(t.source_ids) for t in traces], [list(t.target_ids) for t in traces],
                                  kind, layer - 1)
except ValueError as err:
    st.error(f"The scores cannot be computed: {err}")
    st.stop()

pieces = session.model.tokenizer.pieces
key_tokens = [pieces(int(i) for i in row) for row in scores.key_ids]
query_tokens = [pieces(int(i) for i in row) for row in scores.query_ids]
row, head = int(own.row.get()), int(own.head.get()) - 1

st.subheader("The masks")
side = "target (decoder inputs)" if kind == "decoder" else "source"
fig = masking_figures.padding_mask_figure(key_tokens, scores.padding_mask,
                                          f"Padding mask of the keys ({side}): 1 = real token, 0 = <pad>")
widgets.chart(fig, "padding-mask", key="pad_chart")
widgets.exports(fig, "padding-mask", "pad")
longest = max(traces, key=lambda t: len(t.target_ids)).target_tokens
causal = causal_mask(len(longest))[0, 0].numpy()
fig = masking_figures.mask_matrix_figure(causal, longest, longest,
                                         "Causal mask of the decoder (position t sees keys 0..t)")
widgets.chart(fig, "causal-mask", key="causal_chart")
widgets.exports(fig, "causal-mask", "causal")

fig = masking_figures.mask_matrix_figure(scores.mask[row], query_tokens[row], key_tokens[row],
                                         f"The mask this layer applies to sentence #{row + 1} "
                                         + ("(causal AND padding)" if kind == "decoder" else "(padding)"))
widgets.chart(fig, "combined-mask", key="combined_chart")
widgets.exports(fig, "combined-mask", "combined")

st.subheader(f"Head {head + 1}: from scores to weights")
fig = masking_figures.score_steps_figure(scores, row, head, query_tokens[row], key_tokens[row])
widgets.chart(fig, "score-steps", key="steps_chart")
widgets.exports(fig, f"{kind}-layer{layer}-head{head + 1}-score-steps", "steps")

# --- checks: the four steps reproduce the model's own weights ----------------------------------------------------
weights = scores.weights[row, head]
recorded = traces[row].attentions(kind)[layer - 1][head]
q, k = recorded.shape
difference = float(np.abs(weights[:q, :k] - recorded).max())
masked_total = float(np.abs(weights[~scores.mask[row]]).sum()) if (~scores.mask[row]).any() else 0.0
row_sums = weights[:q].sum(axis=-1)
a, b, c = st.columns(3)
a.metric("Max difference from the model's own weights", f"{difference:.1e}",
         help="The four steps above, recomputed from the layer's queries and keys, against the weights the model "
              "recorded while translating.")
b.metric("Weight on masked cells", f"{masked_total:.1e}", help="Exactly 0: the softmax of −∞ is 0.")
c.metric("Row sums", f"{row_sums.min():.6f}" if np.isclose(row_sums.min(), row_sums.max(), atol=5e-7)
         else f"{row_sums.min():.4f}–{row_sums.max():.4f}", help="Every query's weights sum to 1.")
