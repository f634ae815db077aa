"""The Positional encoding page's tabs on today's schemes: each scheme at its defaults (where position enters, its
part of the score by query and key position, RoPE's angles and decay, ALiBi's slopes, T5's buckets), why a head
of the loaded model looked where it did (its scores split into content and position), and the length experiment
(tiny models of each scheme trained side by side, tested beyond their training lengths)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app import sessions, state, widgets
from app.page_settings import POSITIONAL_ENCODING as own
from viz_model.config import ModelConfig
from viz_model.config.model import INPUT_POSITIONS, POSITIONAL_KINDS
from viz_model.kinds.translator import TranslationModel
from viz_model.lessons import pe_tables, position_parts
from viz_model.lessons import position_table as tables
from viz_model.lessons.position_experiment import TASKS, LengthExperiment, run_length_experiment
from viz_model.lessons.watch_trainer import WatchError
from viz_model.nn.alibi import alibi_slopes
from viz_model.plot import length_figures, lm_position_figures, pe_lab_figures, position_figures
from viz_model.trace import AttentionTrace

SCHEME_NAMES = {"sinusoidal": "Sinusoidal (the paper)", "learned": "Learned table (BERT, GPT-2, BART)",
                "rope": "RoPE (Llama, Qwen, Mistral, Gemma)", "alibi": "ALiBi (BLOOM, MPT)",
                "relative": "Relative bias (T5, Flan-T5)"}
DEFAULTS = ModelConfig()
OWN_TAB = {"sinusoidal": "The sinusoids", "learned": "On your sentence", "rope": "Today's schemes",
           "alibi": "Today's schemes", "relative": "Today's schemes"}  # the tab a translator's page opens on


def open_on_own_scheme(name: str, config: ModelConfig) -> None:
    """Point the schemes tab's choice at the loaded model's own scheme when the page meets a model for the first
    time (a choice made for this model stays)."""
    if own.scheme_model.get() != name:
        own.scheme_model.set(name)
        own.scheme.set(config.positional)


def scheme_caption(config: ModelConfig) -> str:
    """One line: this model's scheme and where its position enters."""
    where = position_parts.WHERE_POSITION_ENTERS[config.positional]
    return f"This model's positions: {SCHEME_NAMES[config.positional]}, {where}."


def content_term(config: ModelConfig) -> str:
    """The scores' content term in LaTeX: divided by √d_k unless the model leaves its scores unscaled (T5)."""
    return r"\frac{q_p \cdot k_j}{\sqrt{d_k}}" if config.scale_scores else r"q_p \cdot k_j"


def split_head_choice(layers: int, heads: int) -> tuple[int, int]:
    """The layer and head (0-based) whose scores are split, picked side by side."""
    state.clamp_choice(own.split_layer, list(range(1, layers + 1)), 1, "Layer")
    state.clamp_choice(own.split_head, list(range(1, heads + 1)), 1, "Head")
    c1, c2 = st.columns(2)
    with c1:
        state.bound(st.selectbox, "Layer", own.split_layer, list(range(1, layers + 1)),
                    format_func=lambda v: f"Layer {v} of {layers}")
    with c2:
        state.bound(st.selectbox, "Head", own.split_head, list(range(1, heads + 1)),
                    format_func=lambda v: f"Head {v} of {heads}")
    return int(own.split_layer.get()) - 1, int(own.split_head.get()) - 1


def table_views(table: np.ndarray) -> None:
    """A learned table of positions (GPT-2's, BERT's) in the sinusoid tabs' views: the table, the similarity of its
    positions, its principal components."""
    rows, width = table.shape
    st.caption(f"This model adds one vector of {width} numbers per position to each token's embedding: {rows} rows, "
               f"trained with the rest of the model; nothing exists past position {rows - 1}.")
    fig = pe_lab_figures.pe_matrix_figure(table, f"Its table: {rows} positions × {width} dimensions")
    widgets.chart(fig, "lm-position-table", key="pe_lm_table_chart")
    left, right = st.columns(2)
    with left:
        fig = pe_lab_figures.similarity_figure(tables.cosine_similarity(table),
                                               f"cos(PE(p), PE(q)) for positions 0–{rows - 1}")
        widgets.chart(fig, "lm-position-similarity", key="pe_lm_sim_chart")
        widgets.exports(fig, "lm-position-similarity", "pe_lm_sim")
    with right:
        profile = pe_tables.similarity_profile(pe_tables.dot_similarity(table))
        fig = pe_lab_figures.profile_figure(profile, width)
        fig.update_layout(title=dict(text="Its PE(p)·PE(q) against the distance |p − q|: mean and range"))
        widgets.chart(fig, "lm-position-profile", key="pe_lm_profile_chart")
        spread = float((profile["max"] - profile["min"]).max())
        st.caption(f"Unlike the sinusoids' PE(p)·PE(q), a learned table's depends on where the pair sits, not only "
                   f"on their distance: pairs at one distance differ by up to {spread:.3g} here.")
    coordinates, explained = tables.principal_components(table, 3)
    fig = lm_position_figures.components_figure(coordinates, explained,
                                                f"Its principal components ({explained.sum():.0%} of the variance "
                                                f"in the first {len(explained)})")
    widgets.chart(fig, "lm-position-components", key="pe_lm_pca_chart")
    widgets.exports(fig, "lm-position-components", "pe_lm_pca")
    st.caption("Each component is one direction of the table's rows, largest spread first. Where its curve is "
               "smooth, neighbouring positions have similar vectors, as the sinusoids' low frequencies give them; "
               "a table of random weights shows noise.")


def schemes_tab(config: ModelConfig) -> None:
    """Each scheme at its defaults, at the loaded model's width and head count."""
    heads, d_model, d_head = config.heads, config.d_model, config.d_head
    own.scheme_length.init()
    state.bound(st.slider, "Positions", own.scheme_length, 8, 128, step=8)
    length = int(own.scheme_length.get())
    st.caption(f"Each scheme at its defaults, nothing trained, at this model's width (d_model {d_model}, {heads} "
               "heads): the part of the score between query position p and key position j that comes from "
               "position. Sinusoidal and learned: PE(p)·PE(j)/√d_model before any projection (the model's W_Q and "
               "W_K then mix it with the tokens). RoPE: one all-ones query and key. ALiBi: head 1's penalty. T5: the "
               "bucket of each pair (its value per bucket is learned).")
    panels = [(s, position_parts.default_offset_part(s, length, heads, d_model)[0]) for s in POSITIONAL_KINDS]
    fig = position_figures.offset_parts_figure(panels[:3],
                                               "Position in the score, each scheme at its defaults (1 of 2)")
    widgets.chart(fig, "schemes-absolute", key="pe_schemes_a_chart")
    fig = position_figures.offset_parts_figure(panels[3:],
                                               "Position in the score, each scheme at its defaults (2 of 2)")
    widgets.chart(fig, "schemes-relative", key="pe_schemes_b_chart")
    st.caption("Along every diagonal (p − j fixed) RoPE, ALiBi and T5's values are constant: the score's positional "
               "part depends on the offset only. PE(p)·PE(j) of the sinusoids also does, but the projections let "
               "absolute position into the scores; a learned table starts as noise.")
    state.clamp_choice(own.scheme, list(POSITIONAL_KINDS), "rope", "Scheme")
    state.bound(st.radio, "Scheme", own.scheme, list(POSITIONAL_KINDS), format_func=SCHEME_NAMES.get,
                horizontal=True)
    scheme = own.scheme.get()
    st.markdown(f"**Where position enters:** {position_parts.WHERE_POSITION_ENTERS[scheme]}.")
    if scheme == "rope":
        st.latex(r"q_p \cdot k_j = (R_{p\theta}\, q)\cdot(R_{j\theta}\, k) = q \cdot R_{(j-p)\theta}\, k,\qquad "
                 r"\theta_i = \mathrm{base}^{-2i/d_{head}}")
        fig = position_figures.rope_angles_figure(position_parts.rope_angles_table(length, d_head, DEFAULTS.rope_base))
        widgets.chart(fig, "rope-angles", key="pe_rope_angles_chart")
        widths = sorted({d_head, 128})
        decays = {width: position_parts.rope_decay(width, DEFAULTS.rope_base, max(length, 256)) for width in widths}
        fig = position_figures.rope_decay_figure(decays, DEFAULTS.rope_base)
        widgets.chart(fig, "rope-decay", key="pe_rope_decay_chart")
        wavelengths = position_parts.rope_wavelengths(d_head, DEFAULTS.rope_base)
        wide = decays[128] / decays[128][0]
        st.caption(f"Each of the {d_head // 2} pairs of this model's heads turns by its own angle per position "
                   f"(wavelengths from {wavelengths[0]:.2f} to {wavelengths[-1]:,.0f} positions); this project pairs "
                   "dimension i with i + d_head/2, as Llama does. For Llama's head width (128) the score of a "
                   f"vector with itself falls to {wide[16]:.2f} of its value at distance 16 and {wide[128]:.2f} at "
                   "128, with ripples: nearby tokens score higher, all else equal. Narrow heads have few pairs and "
                   "mostly oscillate.")
    elif scheme == "alibi":
        st.latex(rf"\mathrm{{score}}_h(p, j) = {content_term(config)} - m_h\,|p - j|")
        fig = position_figures.alibi_slopes_figure(alibi_slopes(heads, DEFAULTS.alibi_max_bias).numpy())
        widgets.chart(fig, "alibi-slopes", key="pe_alibi_chart")
        st.caption("Steep heads look near, flat heads far. Built for causal attention (the distance to earlier "
                   "tokens); this project's encoder uses the same distance in both directions.")
    elif scheme == "relative":
        st.latex(rf"\mathrm{{score}}_h(p, j) = {content_term(config)} + b_h[\mathrm{{bucket}}(j - p)]")
        buckets = position_parts.relative_buckets_by_offset(DEFAULTS, max(length, 160))
        fig = position_figures.relative_buckets_figure(buckets)
        widgets.chart(fig, "relative-buckets", key="pe_buckets_chart")
        divides = "this model divides it by √d_k" if config.scale_scores else "so does this model"
        st.caption(f"T5 leaves q·k undivided; {divides}. "
                   f"{DEFAULTS.relative_buckets} buckets: the encoder gives half to each direction; small distances "
                   f"get a bucket each, larger ones share log-spaced buckets up to {DEFAULTS.relative_max_distance}, "
                   "beyond which all share the last. One table per stack, shared by its layers (T5).")
    else:
        st.caption("Position is added to the input: see the first tabs for the sinusoids and the learned table.")


def model_scheme_part(network_config: ModelConfig, model: TranslationModel, trace: AttentionTrace | None) -> None:
    """The loaded model's own positional part of its encoder's first-layer scores per head, whatever its scheme
    (RoPE's on the translated sentence), or, where no head has one, why and what can be shown."""
    heads = network_config.heads
    own.split_head.init()
    state.clamp_choice(own.split_head, list(range(1, heads + 1)), 1, "Head")
    if network_config.positional == "rope":
        if trace is None:
            return
        shown = position_parts.model_position_part(model.network, "encoder", len(trace.source_ids), trace.source_ids,
                                       trace.target_ids)
    else:
        shown = position_parts.model_position_part(model.network, "encoder",
                                       min(int(own.scheme_length.get()), network_config.max_positions))
    head = int(own.split_head.get()) - 1
    if shown.exact:
        panels = [(f"this model's encoder, head {head + 1}", shown.part[head]),
                  ("mean over heads", shown.part.mean(axis=0))]
    else:
        st.info(shown.note)
        panels = [("this model's encoder", shown.part[0])]
    fig = position_figures.offset_parts_figure(panels, f"This model's encoder: {shown.what}")
    widgets.chart(fig, "model-positional-part", key="pe_model_part_chart")
    if shown.exact:
        st.caption(shown.note)
    if network_config.positional == "relative":
        fig = position_figures.relative_values_figure(position_parts.relative_values(model.network, "encoder"),
                                                      "encoder")
        widgets.chart(fig, "relative-values", key="pe_rel_values_chart")


def why_tab(session: sessions.Session, trace: AttentionTrace | None) -> None:
    """One head's scores on the sentence, split into what content and position contribute."""
    config = session.model.config
    st.caption(scheme_caption(config))
    model_scheme_part(config, session.model, trace)
    if trace is None:
        st.info("Translate a sentence (above) to split its scores.")
        return
    stacks = {"encoder": "Encoder self-attention", "decoder": "Decoder self-attention"}
    state.clamp_choice(own.split_stack, list(stacks), "encoder", "Attention")
    c1, c2, c3 = st.columns(3)
    with c1:
        state.bound(st.selectbox, "Attention", own.split_stack, list(stacks), format_func=stacks.get)
    stack = own.split_stack.get()
    layers = config.encoder_layers if stack == "encoder" else config.decoder_layers
    first_only = config.positional in INPUT_POSITIONS
    layer_options = [1] if first_only else list(range(1, layers + 1))
    state.clamp_choice(own.split_layer, layer_options, 1, "Layer")
    state.clamp_choice(own.split_head, list(range(1, config.heads + 1)), 1, "Head")
    with c2:
        state.bound(st.selectbox, "Layer", own.split_layer, layer_options, format_func=lambda v: f"Layer {v}")
    with c3:
        state.bound(st.selectbox, "Head", own.split_head, list(range(1, config.heads + 1)),
                    format_func=lambda v: f"Head {v}")
    if first_only and config.norm == "post" and not config.embedding_norm:  # else the split says why not
        st.caption("Position is added to the input, so content and position can be told apart in the first layer "
                   "only: later layers read a stream where both are mixed.")
    layer, head = int(own.split_layer.get()) - 1, int(own.split_head.get()) - 1
    try:
        split = sessions.compute_score_split(session.ref, tuple(trace.source_ids), tuple(trace.target_ids), stack,
                                             layer, head)
    except position_parts.LessonError as err:
        st.info(str(err))
        return
    queries, keys = trace.axes(stack)
    fig = position_figures.score_split_figure(split, queries, keys,
                                              f"{stacks[stack]}, layer {layer + 1}, head {head + 1}: "
                                              "score = sum of the parts")
    widgets.chart(fig, "score-split", key="pe_split_chart")
    widgets.exports(fig, "score-split", "pe_split")
    state.clamp_choice(own.split_query, list(range(len(queries))), 0, "Query")
    state.clamp_choice(own.split_key, list(range(len(keys))), 0, "Key")
    c1, c2 = st.columns(2)
    with c1:
        state.bound(st.selectbox, "Query token", own.split_query, list(range(len(queries))),
                    format_func=lambda i: f"{i}: {queries[i]}")
    with c2:
        state.bound(st.selectbox, "Key token", own.split_key, list(range(len(keys))),
                    format_func=lambda i: f"{i}: {keys[i]}")
    i, j = int(own.split_query.get()), int(own.split_key.get())
    weights = trace.attentions(stack)[layer][head]
    rows = [{"part": name, "value": float(part[i, j])} for name, part in split.parts.items()]
    rows += [{"part": "sum of the parts", "value": float(sum(p[i, j] for p in split.parts.values()))},
             {"part": "the score the softmax saw", "value": float(split.score[i, j])}]
    widgets.matrix_table(pd.DataFrame(rows).set_index("part"), digits=5)
    visible = int(trace.mask(stack, layer)[i].sum())
    st.caption(f"{split.note}. Query {i} ({queries[i]}) gives key {j} ({keys[j]}) weight {weights[i, j]:.4f} after "
               f"the softmax over its {visible} visible keys.")
    if split.adds_up:
        st.caption(f"Each part is computed from the layer's input and weights, apart from the score; they add up to "
                   f"the score the model's forward recorded to {split.residual:.1e}.")
    else:
        st.warning(f"The parts, each computed from the layer's input and weights, differ from the score the model's "
                   f"forward recorded by up to {split.residual:.1e}: this split does not describe this model.")


LENGTH_KINDS = {"cross": "Cross-attention", "decoder": "Decoder self-attention", "encoder": "Encoder self-attention"}


def length_settings() -> LengthExperiment | None:
    """The experiment the form asks for (None, with the reason shown, when a setting is wrong)."""
    try:
        return LengthExperiment(task=own.length_task.get(), schemes=tuple(own.length_schemes.get()),
                                seconds=float(own.length_seconds.get()), seed=int(own.length_seed.get()))
    except WatchError as err:
        st.error(f"Cannot run the experiment: {err}")
        return None


def run_length(settings: LengthExperiment) -> None:
    """Train and test, drawing a progress bar; the result stays in the session."""
    bar = st.progress(0.0, text="Training…")
    with sessions.training_slot() as slot:
        if not slot:
            bar.empty()
            st.warning(sessions.TRAINING_BUSY)
            return
        own.length_result.set(run_length_experiment(settings, progress=lambda done, text: bar.progress(
            min(1.0, done), text=text)))
    bar.empty()


def length_tab() -> None:
    """The length generalisation experiment: the form, then accuracy by length and the maps at an unseen length."""
    for setting in (own.length_task, own.length_schemes, own.length_seconds, own.length_seed):
        setting.init()
    defaults = LengthExperiment()
    st.caption(f"One tiny model per scheme ({defaults.layers} layers of {defaults.heads} heads, d_model "
               f"{defaults.d_model}) learns the same task on the same sequences of lengths {defaults.min_length}–"
               f"{defaults.max_length}, then copies fresh sequences of every length up to {defaults.test_length}: "
               "lengths it never saw. Each scheme trains for its time budget or "
               f"{defaults.steps} steps, whichever comes first.")
    with st.form("pe_length_form"):
        left, middle, right = st.columns(3)
        left.selectbox("Task", TASKS, key=own.length_task.key)
        middle.multiselect("Schemes", list(POSITIONAL_KINDS), key=own.length_schemes.key,
                           format_func=SCHEME_NAMES.get)
        right.slider("Seconds per scheme", 2, 20, key=own.length_seconds.key)
        right.number_input("Seed", 0, 1_000_000, key=own.length_seed.key)
        submitted = st.form_submit_button("Train and test", icon=":material/play_arrow:", type="primary")
    if submitted and (settings := length_settings()) is not None:
        run_length(settings)
    result = own.length_result.get()
    if result is None:
        st.info("Press Train and test: about a minute for the five schemes on a laptop CPU.")
        return
    fig = length_figures.accuracy_figure(result)
    widgets.chart(fig, "length-accuracy", key="pe_len_accuracy_chart")
    widgets.exports(fig, "length-accuracy", "pe_len_accuracy")
    st.markdown(result.summary())
    state.clamp_choice(own.length_kind, list(LENGTH_KINDS), "cross", "Attention")
    state.bound(st.selectbox, "Attention at the unseen length", own.length_kind, list(LENGTH_KINDS),
                format_func=LENGTH_KINDS.get)
    fig = length_figures.maps_figure(result, own.length_kind.get(), head=None)
    widgets.chart(fig, "length-maps", key="pe_len_maps_chart")
    widgets.exports(fig, "length-maps", "pe_len_maps")
