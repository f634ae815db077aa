"""Compare with a language model open: a translation model and the language model on the same text, the language
model prompted to translate; the translator's cross-attention beside the language model's self-attention onto the
text's span of its prompt."""

from __future__ import annotations

import numpy as np
import streamlit as st

from app import completion, sessions, state, texts, widgets
from app.page_settings import COMPARE as own
from app.page_settings import EXPLORE
from app.sessions import LANGUAGE_MODEL, ModelRef, Session
from viz_model.data.typed_text import check_text
from viz_model.kinds.language_model import LanguageModel
from viz_model.modeldir.checkpoint import CheckpointError
from viz_model.plot import analysis_figures, figure_style, map_figures
from viz_model.trace import AttentionTrace

SOURCE = "{src}"


def translators() -> list[str]:
    """The translation models of the assets folders (the picker's models that are no language model)."""
    return [m for m in sessions.model_names() if sessions.model_languages(ModelRef.of(m).directory) != LANGUAGE_MODEL]


def models_or_stop(names: list[str], what: str, session: Session) -> list[str]:
    """`names` (the models the open one can be compared with), or one line saying there is no `what` and the page
    stops."""
    if not names:
        st.info(f"No {what} is available: put one into {sessions.roots_label()} to compare it with {session.name}.")
        st.stop()
    return names


def lm_prompt(template: str, text: str) -> tuple[str, int, int]:
    """The language model's prompt (`template` with `SOURCE` replaced by `text`) and the characters of `text` in it;
    one line where the template does not hold `SOURCE` exactly once."""
    if template.count(SOURCE) != 1:
        raise ValueError(f"the prompt template must hold {SOURCE} exactly once (where the text goes), as in "
                         "\"English: {src}\\nGerman:\"")
    start = template.index(SOURCE)
    return template.replace(SOURCE, text), start, start + len(text)


def source_span(model: LanguageModel, prompt: str, start: int, end: int) -> tuple[int, int]:
    """The token positions ``[first, last)`` of `prompt` that hold its characters `start` .. `end` (by the tokenizer's
    offsets; a tokenizer without them: by the token counts of the prompt cut there)."""
    backend = getattr(model.tokenizer, "backend", None)
    if backend is not None and hasattr(backend, "encode"):
        offsets = backend.encode(prompt).offsets
        inside = [i for i, (a, b) in enumerate(offsets) if b > a and b > start and a < end]
        if inside:
            return inside[0], inside[-1] + 1
    first = len(model.encode(prompt[:start])) if prompt[:start].strip() else 1
    return first, len(model.encode(prompt[:end]))


def continuation_map(trace: AttentionTrace, layer: int, head: map_figures.Head,
                     span: tuple[int, int]) -> map_figures.AttentionMap:
    """The language model's rows that write the continuation (each reads a token, predicts the next) over the
    prompt's text span only."""
    amap = map_figures.attention_map(trace, "decoder", layer, head)
    p, n = completion.prompt_length(trace), len(trace.target_tokens)
    rows = slice(p - 1, max(n - 1, p))
    return map_figures.AttentionMap(amap.weights[rows, span[0]:span[1]], amap.query_labels[rows],
                                    amap.key_labels[span[0]:span[1]], amap.query_notes[rows], "decoder", layer,
                                    head, "piece", "continuation (row t reads token t, predicts t + 1)")


def map_column(title: str, text: str, amap: map_figures.AttentionMap, name: str, key: str,
               heading: str | None = None) -> None:
    """One side of the comparison: the output, then its map (`heading`: its title in place of the map's own)."""
    widgets.show_text(title, text)
    fig = analysis_figures.column_heatmap(amap)
    if heading is not None:
        fig.update_layout(title=dict(text=figure_style.escape(heading)))
    widgets.chart(fig, name, key=f"{key}_chart")
    widgets.exports(fig, name, key, csv=lambda: map_figures.map_dataframe(amap))


def layer_and_head(trace: AttentionTrace, kind: str, layer_setting, head_setting, what: str) -> tuple[int, object]:
    """The layer and head pickers of one side (by default its last layer, the mean over heads)."""
    layers = list(range(1, trace.num_layers[kind] + 1))
    heads = state.head_options(trace.num_heads)
    a, b = st.columns(2)
    with a:
        state.clamp_choice(layer_setting, layers, layers[-1], f"{what} layer")
        state.bound(st.selectbox, f"{what} layer", layer_setting, layers,
                    format_func=lambda v: f"Layer {v} of {len(layers)}")
    with b:
        state.clamp_choice(head_setting, heads, "mean", f"{what} head")
        state.bound(st.selectbox, f"{what} head", head_setting, heads,
                    format_func=lambda v: state.head_label(v, trace.num_heads))
    return int(layer_setting.get()) - 1, state.head_index(head_setting.get())


def page(session: Session) -> None:
    """The Compare page for the language model of `session`."""
    st.title("Compare")
    st.caption("A translation model and this language model on the same text, the language model prompted to "
               "translate: where does each look in the text while it writes? The translator's cross-attention reads "
               "the source through its encoder; the language model's self-attention reads the same words as part "
               "of its own prompt.")
    names = models_or_stop(translators(), "translation model", session)
    own.source.init(texts.EXAMPLES[0])
    own.template.init()
    state.bound(st.text_input, "Text to translate", own.source)
    state.bound(st.text_area, "The language model's prompt ({src} stands for the text)", own.template, height=68,
                help="A base model continues text: a prompt that ends where the translation starts asks it to "
                     "translate.")
    state.clamp_choice(own.translator, names, names[0], "Translation model")
    state.bound(st.selectbox, "Translation model", own.translator, names)
    text, name = own.source.get(), own.translator.get()
    try:
        check_text(text, "the text")
        prompt, start, end = lm_prompt(own.template.get(), text)
    except ValueError as err:
        st.error(f"This comparison cannot run: {err}.")
        st.stop()
    try:
        with st.spinner(f"Translating with {name}…"):
            translated = sessions.compute_trace(ModelRef.of(name), text, session.beam, session.alpha, None,
                                                session.top_k, session.truncate)
    except (CheckpointError, OSError, ValueError, RuntimeError) as err:
        st.error(texts.md_escape(f"Model {name} cannot be used: {err}"))
        st.stop()
    completed = completion.completed(session, prompt, int(EXPLORE.new_tokens.get()))
    if completed is None:
        st.stop()
    span = source_span(session.model, prompt, start, end)  # type: ignore[arg-type]

    left, right = st.columns(2)
    with left:
        layer, head = layer_and_head(translated, "cross", own.layer, own.head, "Translator")
        map_column(f"{name}: translation", translated.translation,
                   map_figures.attention_map(translated, "cross", layer, head), "translator-cross", "cmp_tr")
        st.caption("Each row of the translator's cross-attention sums to 1 over the source.")
    with right:
        lm_layer, lm_head = layer_and_head(completed, "decoder", own.lm_layer, own.lm_head, "Language model")
        amap = continuation_map(completed, lm_layer, lm_head, span)
        map_column(f"{session.name}: continuation", completed.translation, amap, "lm-onto-source", "cmp_lm",
                   f"Self-attention of the continuation onto the text: layer {lm_layer + 1}, "
                   f"{map_figures.head_name(lm_head)}")
        share = float(amap.weights.sum(axis=1).mean()) if amap.weights.size else 0.0
        st.caption(f"The language model's rows over the text's {texts.count(span[1] - span[0], 'token')} of its "
                   f"prompt only: on average {share:.0%} of a row's attention lands there; the rest goes to the "
                   "template's words, the first token and what it has written so far.")
    if np.isclose(share, 0.0):
        st.info("The language model hardly looks at the text here: try another layer, or a prompt that asks more "
                "plainly for a translation.")
