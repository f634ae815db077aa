"""The Positional encoding page with a language model open, in the model's own scheme: a learned table's similarity
and principal components (GPT-2), RoPE's frequencies, the decay of q·k with distance and each head's frequency
bands (Llama, Qwen, ...), ALiBi's slopes and bias (BLOOM), one head's scores split into content and position, and
the loss at each position of a long text, past the trained length."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import streamlit as st
import torch

import app.views.positional.rope_scalings_section as rope_scalings
from app import state, widgets
from app.page_settings import POSITIONAL_ENCODING as own
from app.sessions import Session
from app.setting_types import Setting
from app.shared_settings import SHARED
from app.texts import count
from app.views.positional import position_tabs, scaling_section
from viz_model.kinds.language_model import LanguageModel
from viz_model.lessons import position_alibi, position_length, position_rope, position_split
from viz_model.lessons import position_table as tables
from viz_model.lessons.position_parts import LessonError
from viz_model.lessons.position_text import TITLE
from viz_model.plot import lm_position_figures, position_figures

MEASURED_TOKENS = 256  # the text's first tokens RoPE's decay and bands are measured on
SPLIT_TOKENS = 48  # the most of the prompt the score split draws
TABS = {"learned": ["Its table of positions"], "sinusoidal": ["Its table of positions"],
        "rope": ["RoPE frequencies", "q·k by distance", "Frequency bands by head"], "alibi": ["ALiBi slopes"]}
COMMON_TABS = ["Score split", "Longer than trained", "Today's schemes"]


def tab_labels(positional: str) -> list[str]:
    """The page's tabs for a language model with `positional` positions: its own scheme's first."""
    return TABS[positional] + COMMON_TABS


@st.cache_data(max_entries=4, show_spinner="Measuring RoPE in every head…")
def _rope_measures(key: str, _model: LanguageModel, ids: tuple[int, ...],
                   distances: int) -> position_rope.RopeMeasures:
    return position_rope.rope_measures(_model, ids, distances)


@st.cache_data(max_entries=16, show_spinner=False)
def _score_split(key: str, _model: LanguageModel, ids: tuple[int, ...], layer: int,
                 head: int) -> position_split.ScoreSplit:
    return position_split.split_lm_scores(_model, ids, layer, head)


def measured_ids(model: LanguageModel) -> list[int]:
    """The first tokens of the page's text that the per-head measures read (within a learned table's rows)."""
    ids = position_length.text_ids(model)
    return ids[:min(MEASURED_TOKENS, model.config.max_positions)]


def layer_choice(setting: Setting[int], layers: int) -> int:
    """The layer picked (0-based) with `setting` for a tab's per-head figures."""
    state.clamp_choice(setting, list(range(1, layers + 1)), 1, "Layer")
    state.bound(st.selectbox, "Layer", setting, list(range(1, layers + 1)),
                format_func=lambda v: f"Layer {v} of {layers}")
    return int(setting.get()) - 1


def table_tab(model: LanguageModel) -> None:
    """GPT-2's learned table in the sinusoid tabs' views (`position_tabs.table_views`)."""
    position_tabs.table_views(tables.learned_table(model))


def frequencies_tab(model: LanguageModel) -> None:
    """The model's RoPE frequencies, which ones its scaling stretched, and their bands."""
    config = model.config
    table = position_rope.frequency_table(config)
    trained = position_rope.trained_length(config)
    factor = position_rope.attention_factor(config)
    scaling = {"default": "no scaling: every pair turns at base^(−2i/d_head)",
               "linear": f"linear scaling: every frequency divided by {config.rope_factor:g}",
               "llama3": f"Llama 3's scaling: wavelengths longer than {config.rope_original_max_positions} / "
                         f"{config.rope_low_freq_factor:g} positions divided by {config.rope_factor:g}, shorter "
                         f"than {config.rope_original_max_positions} / {config.rope_high_freq_factor:g} kept, a "
                         "smooth ramp between",
               "yarn": f"YaRN: a pair that turns more than {config.rope_beta_fast:g}× within "
                       f"{config.rope_original_max_positions} positions kept, one that turns under "
                       f"{config.rope_beta_slow:g}× divided by {config.rope_factor:g}, a linear ramp between; cos "
                       f"and sin × {factor:.4g}, so every score × {factor ** 2:.4g}",
               "dynamic": f"dynamic NTK scaling: past {config.rope_original_max_positions} tokens the base grows "
                          "with the length a pass reaches, so every pair but the first turns slower, the slow ones "
                          f"most; shown at {position_rope.shown_length(config)} tokens"}[config.rope_scaling]
    turned = config.rope_dims or config.d_head
    st.caption(f"Each head: {position_rope.rotation_note(config)}. They turn {turned // 2} pairs (dimension i with "
               f"i + {turned // 2}, Llama's pairing), base {config.rope_base:g}; {scaling}.")
    marks = {f"trained length {trained}": trained}
    if config.max_positions != trained:
        marks[f"max_position_embeddings {config.max_positions}"] = config.max_positions
    fig = lm_position_figures.frequency_figure(table, marks)
    widgets.chart(fig, "rope-frequencies", key="pe_lm_freq_chart")
    widgets.exports(fig, "rope-frequencies", "pe_lm_freq")
    kept = int((table["scaling"] == position_rope.KEPT).sum())
    st.caption(f"{count(kept, 'pair')} kept, {count(len(table) - kept, 'pair')} stretched or smoothed. The band "
               f"column: a pair that turns at least once within the {trained} trained positions is high (it can "
               "tell positions apart); one that turns less is low (nearly constant: free to carry meaning).")
    if model.network.local_scheme is not None:
        st.caption(f"Its sliding-window layers rotate with their own base ({model.network.local_scheme.base:g}), "
                   "unscaled.")
    shown = table.rename(columns={"unscaled theta": "θ before scaling", "theta": "θ",
                                  "unscaled wavelength": "wavelength before", "wavelength": "wavelength"})
    st.dataframe(shown.set_index("pair"), width="stretch")
    rope_scalings.comparison_section(config, marks)


def decay_tab(model: LanguageModel, measures: position_rope.RopeMeasures) -> None:
    """q·k by distance in the model's real heads: measured on the text, and the rotation alone."""
    layer = layer_choice(own.lm_layer, model.config.decoder_layers)
    st.caption(f"Measured on the first {count(measures.tokens, 'token')} of the page's text ({TITLE}).")
    measured = (measures.measured[layer], f"Layer {layer + 1}: mean score of a query on the key that far back",
                "mean score", "rope-measured-decay", "pe_lm_measured")
    rotated = (measures.rotation[layer], f"Layer {layer + 1}: the mean query and mean key, turned Δ apart", "score",
               "rope-rotation-decay", "pe_lm_rotation")
    for curves, title, y_title, name, key in (measured, rotated):
        fig = lm_position_figures.head_curves_figure(curves, title, y_title)
        widgets.chart(fig, name, key=f"{key}_chart")
        widgets.exports(fig, name, key)
        if name == "rope-measured-decay":
            st.caption("What the model computed: the score of every query on the key Δ tokens before it, averaged "
                       "over the text (rotation and tokens together).")
    st.caption("The rotation alone: each head's average query against its average key, rotated as if they sat Δ "
               "positions apart (RoFormer's long-term decay, for this head's real vectors instead of all-ones). A "
               "curve that falls favours near keys; a flat one ignores distance; ripples come from fast pairs.")


def bands_tab(model: LanguageModel, measures: position_rope.RopeMeasures) -> None:
    """Which heads use which frequency bands."""
    high = int((measures.bands == "high").sum())
    st.caption(f"Each pair's share of Σᵢ mean|qᵢ|·mean|kᵢ|, the most its term of q·k can reach (Barbero et al. 2024, "
               f"\"Round and Round We Go! What makes Rotary Positional Encodings useful?\"). {count(high, 'pair')} "
               f"of {len(measures.bands)} {'is' if high == 1 else 'are'} high (turning within the trained length), "
               "the rest low. Measured on "
               f"the first {count(measures.tokens, 'token')} of the page's text.")
    fig = lm_position_figures.band_share_figure(measures.band_share("low"),
                                                "Share of each head's q·k in the low (semantic) band",
                                                "low-band share")
    widgets.chart(fig, "rope-band-shares", key="pe_lm_bands_chart")
    widgets.exports(fig, "rope-band-shares", "pe_lm_bands")
    layer = layer_choice(own.lm_band_layer, model.config.decoder_layers)
    fig = lm_position_figures.pair_share_figure(measures.shares[layer], list(measures.bands), layer)
    widgets.chart(fig, "rope-pair-shares", key="pe_lm_pairs_chart")
    widgets.exports(fig, "rope-pair-shares", "pe_lm_pairs")
    low = measures.band_share("low")
    top = np.unravel_index(int(np.argmax(low)), low.shape)
    bottom = np.unravel_index(int(np.argmin(low)), low.shape)
    st.caption(f"Most semantic: layer {top[0] + 1}, head {top[1] + 1} ({low[top]:.0%} low band). Most positional: "
               f"layer {bottom[0] + 1}, head {bottom[1] + 1} ({1 - low[bottom]:.0%} high band). Barbero et al. report "
               "that Gemma 7B prefers its lowest frequencies (they suspect: to carry meaning) and builds positional "
               "heads from its highest.")


def alibi_tab(model: LanguageModel) -> None:
    """BLOOM's slopes and the bias they put on distance."""
    config = model.config
    slopes = position_alibi.model_slopes(config)
    st.latex(rf"\mathrm{{score}}_h(p, j) = {position_tabs.content_term(config)} - m_h\,(p - j)")
    fig = position_figures.alibi_slopes_figure(slopes)
    widgets.chart(fig, "alibi-model-slopes", key="pe_lm_slopes_chart")
    distances = 64
    fig = lm_position_figures.head_curves_figure(position_alibi.distance_bias(config, distances),
                                                 "ALiBi: what each head adds to the score of a key Δ tokens back",
                                                 "bias −m·Δ")
    widgets.chart(fig, "alibi-bias", key="pe_lm_alibi_chart")
    widgets.exports(fig, "alibi-bias", "pe_lm_alibi")
    reach = position_alibi.half_distance(config)
    st.caption(f"{config.heads} heads, slopes from {slopes.max():.4g} to {slopes.min():.4g} (BLOOM's rule for "
               f"{config.heads} heads: a geometric sequence, with every other slope of the next power of two when "
               f"the count is not a power of two). A head's bias takes 1 off a score (a factor e off its weight, "
               f"all else equal) {reach.min():.3g} to {reach.max():,.0f} tokens back: steep heads look near, flat "
               "heads far.")


def split_prompt(model: LanguageModel) -> tuple[list[int], str]:
    """The ids whose scores are split: the prompt of Complete & explore, else the page text's first tokens."""
    prompt = SHARED.sentence.get("")
    if prompt.strip():
        try:
            with warnings.catch_warnings():  # Complete & explore says them
                warnings.simplefilter("ignore")
                ids = model.encode(prompt)
        except ValueError:
            ids = []
        if ids:
            return ids[:SPLIT_TOKENS], "the prompt of Complete & explore"
    return position_length.text_ids(model)[:min(24, model.config.max_positions)], "the page text's first tokens"


def split_tab(model: LanguageModel, key: str) -> None:
    """One head's scores on the prompt, split into content and position (cached under the model's `key`: a rerun
    draws them again without a forward pass)."""
    config = model.config
    ids, where = split_prompt(model)
    tokens = model.tokenizer.pieces(ids)
    layer, head = position_tabs.split_head_choice(config.decoder_layers, config.heads)
    try:
        split = _score_split(key, model, tuple(ids), layer, head)
    except LessonError as err:
        st.info(f"{str(err)[0].upper()}{str(err)[1:]}.")
        return
    st.caption(f"On {where} ({count(len(ids), 'token')}; type a prompt on Complete & explore to split its own).")
    fig = position_figures.score_split_figure(split, tokens, tokens,
                                              f"Layer {layer + 1}, head {head + 1}: score = sum of the parts")
    widgets.chart(fig, "lm-score-split", key="pe_lm_split_chart")
    widgets.exports(fig, "lm-score-split", "pe_lm_split")
    causal = np.tril(np.ones_like(split.score, dtype=bool))
    rows = [{"part": name, "mean over visible pairs": float(part[causal].mean()),
             "mean |part|": float(np.abs(part[causal]).mean())} for name, part in split.parts.items()]
    widgets.matrix_table(pd.DataFrame(rows).set_index("part"))
    st.caption(f"{split.note}. Above the diagonal the keys are in the future: masked, never attended.")
    if split.adds_up:
        st.caption(f"Each part is computed from the layer's input and weights, apart from the score; they add up to "
                   f"the score the model's forward recorded to {split.residual:.1e}.")
    else:
        st.warning(f"The parts differ from the score the model's forward recorded by up to {split.residual:.1e}: "
                   "this split does not describe this layer exactly.")


def length_tab(session: Session) -> None:
    """The loss at each position of the page's long text, past the trained length where there is one."""
    model = session.model
    ids = position_length.text_ids(model)
    limit = min(len(ids), position_length.MAX_TOKENS)
    trained = position_length.recorded_length(model)
    default = min(limit, 2 * trained if trained is not None else limit)
    own.lm_tokens.init(default)
    st.caption(f"The page's text: {TITLE}, {count(len(ids), 'token')} with this model's tokenizer. "
               + (f"This model's config records a trained length of {trained} (max_position_embeddings)."
                  if trained is not None else "This model's config records no trained length (BLOOM's names no "
                  "limit: ALiBi has no table)."))
    if trained is not None and len(ids) <= trained:
        st.caption(f"The text is shorter than this model's {trained} trained positions: the loss is drawn within "
                   "them only.")
    with st.form("pe_lm_length_form"):
        left, right = st.columns(2)
        left.number_input("Tokens of the text", 2, limit, key=own.lm_tokens.key,
                          help="The model reads the text's first tokens in one pass and scores each next token.")
        right.slider("Running mean over", 1, 128, key=own.lm_window.key)
        scaled = rope_scalings.scaling_switch(model.config)
        submitted = st.form_submit_button("Measure the loss", icon=":material/play_arrow:", type="primary")
    tokens = int(own.lm_tokens.get())
    if submitted:
        try:
            with st.spinner("Reading the text…"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = position_length.loss_by_position(rope_scalings.measured_model(model, scaled),
                                                          ids, tokens)
        except LessonError as err:
            own.lm_loss.set(None)
            st.error(f"The loss cannot be measured: {err}.")
            return
        except torch.cuda.OutOfMemoryError:
            raise  # the frame frees the GPU and says so
        own.lm_loss.set((session.name, tokens, result))
    kept = own.lm_loss.get()
    if kept is None or kept[0] != session.name:
        st.info("Press Measure the loss: one pass over the text.")
        return
    _, tokens, result = kept
    if result.warning:
        st.warning(f"{result.warning[0].upper()}{result.warning[1:]}.")
    marks = {} if trained is None else {f"trained length {trained}": trained}
    if model.config.positional == "rope" and position_rope.trained_length(model.config) != trained:
        marks[f"before scaling {position_rope.trained_length(model.config)}"] = \
            position_rope.trained_length(model.config)
    fig = lm_position_figures.loss_figure(result, int(own.lm_window.get()),
                                          {k: v for k, v in marks.items() if v < tokens})
    widgets.chart(fig, "lm-loss-by-position", key="pe_lm_loss_chart")
    widgets.exports(fig, "lm-loss-by-position", "pe_lm_loss")
    rope_scalings.switch_caption(model.config)
    inside, beyond = result.inside_beyond()
    a, b = st.columns(2)
    a.metric("Mean loss within the trained length" if trained is not None else "Mean loss", f"{inside:.3f} nats")
    if beyond is not None:
        b.metric(f"Mean loss past position {trained}", f"{beyond:.3f} nats", f"{beyond - inside:+.3f}",
                 delta_color="inverse")
    st.caption("A learned table has no rows past its length, so such a model refuses longer text. RoPE turns its "
               "pairs to angles never seen in training and its loss usually climbs past the trained length; ALiBi "
               "only lengthens a penalty it already applies and degrades more gently (Press et al. 2022). A model "
               "with random weights shows neither.")


def page(session: Session) -> None:
    """The whole page for a language model, its own scheme's tabs first."""
    model = session.model
    config = model.config
    st.title("Positional encoding")
    st.caption(f"{session.name}, a language model. {position_tabs.scheme_caption(config)}")
    position_tabs.open_on_own_scheme(session.name, config)  # Today's schemes too starts on the model's own
    labels = tab_labels(config.positional)
    tabs = dict(zip(labels, st.tabs(labels, default=labels[0])))
    if config.positional in ("learned", "sinusoidal"):
        with tabs[labels[0]]:
            table_tab(model)
    elif config.positional == "rope":
        ids = measured_ids(model)
        measures = _rope_measures(f"{session.ref}", model, tuple(ids), int(own.lm_distances.init()))
        with tabs["RoPE frequencies"]:
            frequencies_tab(model)
        with tabs["q·k by distance"]:
            decay_tab(model, measures)
        with tabs["Frequency bands by head"]:
            bands_tab(model, measures)
    else:
        with tabs["ALiBi slopes"]:
            alibi_tab(model)
    with tabs["Score split"]:
        split_tab(model, f"{session.ref}")
    with tabs["Longer than trained"]:
        length_tab(session)
        scaling_section.scaling_section(session)
    with tabs["Today's schemes"]:
        position_tabs.schemes_tab(config)
