"""Compare with an encoder open: the encoder beside a language model on the same sentence (the text with its masks
filled in by the encoder); the encoder reads both ways, the language model left to right. Each side's map, layer and
head picked on its own, and how much weight each puts on the tokens after the query (the encoder's side alone, and
one line, where the assets folders hold no language model)."""

import numpy as np
import streamlit as st

from app import fill_in, sessions, state, texts
from app.page_settings import COMPARE as own
from app.sessions import LANGUAGE_MODEL, ModelRef
from app.views.compare import compare_lm
from viz_model.modeldir.checkpoint import CheckpointError
from viz_model.plot import map_figures


def language_models() -> list[str]:
    """The language models of the assets folders (the picker's decoder-only models)."""
    return [m for m in sessions.model_names() if sessions.model_languages(ModelRef.of(m).directory) == LANGUAGE_MODEL]


def ahead(weights: np.ndarray) -> float:
    """The mean over a map's rows of the weight on the keys after the query (0 for a causal map)."""
    return float(np.triu(weights, 1).sum(axis=1).mean()) if weights.size else 0.0


session = sessions.require_session()
st.title("Compare")
st.caption("This encoder beside a language model on the same sentence: the encoder reads the whole text at once, "
           "every token seeing every other, while a language model reads left to right, each token seeing only the "
           "tokens before it. Where does each look?")
names = language_models()
trace = fill_in.reading_or_stop(session)
sentence = trace.translation if fill_in.predictions(trace) else trace.source_text
if names:
    state.clamp_choice(own.model, names, names[0], "Language model")
    state.bound(st.selectbox, "Language model", own.model, names)
try:
    with st.spinner("Reading the sentence…"):
        read = session.encoder_trace(sentence)
        written = sessions.compute_completion(ModelRef.of(own.model.get()), sentence, 0, session.top_k) \
            if names else None
except (CheckpointError, OSError, ValueError, RuntimeError) as err:
    st.error(texts.md_escape(f"The sentence cannot be read by both models: {err}"))
    st.stop()
if fill_in.predictions(trace):
    st.caption(texts.md_escape(f"Both read the text with each mask filled by the encoder's first choice: "
                               f"“{sentence}”."))
elif not session.model.has_head:
    st.info(f"{fill_in.no_head_line(session.model)} Both read the text as it is typed.")

left, right = st.columns(2)
with left:
    layer, head = compare_lm.layer_and_head(read, "encoder", own.layer, own.head, "Encoder")
    amap = map_figures.attention_map(read, "encoder", layer, head)
    compare_lm.map_column(f"{session.name}: encoder (both ways)", sentence, amap, "encoder-self", "cmp_enc")
    st.caption(f"On average {ahead(amap.weights):.0%} of a row's weight lands on the tokens after the query.")
with right:
    if written is None:
        st.info(f"No language model is available: put one into {sessions.roots_label()} to see it beside "
                f"{session.name} on this sentence.")
    else:
        lm_layer, lm_head = compare_lm.layer_and_head(written, "decoder", own.lm_layer, own.lm_head,
                                                      "Language model")
        lm_map = map_figures.attention_map(written, "decoder", lm_layer, lm_head)
        compare_lm.map_column(f"{own.model.get()}: language model (left to right)", sentence, lm_map, "lm-self",
                              "cmp_lm")
        st.caption(f"The causal mask hides every later token: {ahead(lm_map.weights):.0%} of a row's weight lies "
                   "after the query.")
st.caption("The two tokenizers split the sentence their own ways, and the encoder adds its [CLS] and [SEP]: the maps "
           "are side by side, not cell by cell.")
