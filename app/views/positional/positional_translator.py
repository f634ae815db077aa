"""Positional encoding lab: the sinusoids, their wavelengths, similarity and shift-linearity, positions beyond
training, learned vs sinusoidal, the encodings on the user's sentence with an experiment without them, today's
schemes (RoPE, ALiBi, T5's relative bias) and why a head of the loaded model looked where it did."""

import functools

import numpy as np
import streamlit as st

from app import sessions, state, texts, tracing, widgets
from app.page_settings import POSITIONAL_ENCODING as own
from app.shared_settings import SHARED
from app.views.positional import position_tabs
from viz_model.lessons import lesson_inputs, pe_tables
from viz_model.nn.arrays import to_numpy
from viz_model.nn.positional import wave
from viz_model.plot import pe_lab_figures, positional_trace_figures

session = sessions.require_session()
config = session.model.config
d_model, max_positions = config.d_model, config.max_positions
sinusoidal = config.positional == "sinusoidal"
adds_positions = config.positional in ("sinusoidal", "learned")

st.title("Positional encoding")
st.caption("Attention by itself ignores word order: it sees a set of vectors. The paper adds a position vector to "
           "each token's embedding; today's models often put position into the attention scores instead. "
           + position_tabs.scheme_caption(config)
           + ("" if sinusoidal else " The sinusoid lessons below use the paper's formula at this model's width."))
st.latex(r"PE_{(p,\,2i)} = \sin\!\left(\frac{p}{10000^{2i/d_{model}}}\right),\qquad "
         r"PE_{(p,\,2i+1)} = \cos\!\left(\frac{p}{10000^{2i/d_{model}}}\right)")
layout = config.sinusoid_layout
st.caption(f"Here d_model = {d_model} (from the loaded model's config): {d_model // 2} sin/cos pairs, "
           f"at most {max_positions} positions in the model's table."
           + (f" This model (Marian's layout) stores the same values in another order: the sines of every "
              f"frequency in dimensions 0–{d_model // 2 - 1}, their cosines in {d_model // 2}–{d_model - 1}; "
              "the figures below draw its own order, the shift lesson the paper's." if layout == "halves" else "")
           + (f" Its frequencies are fairseq's, exp(−i·ln 10000 / (d_model/2 − 1)) (the last pair's wavelength is "
              f"exactly 10000·2π), and position p reads row p + {config.position_offset} of the table (fairseq counts "
              "from the pad id); the first two tabs draw the model's own values."
              if config.sinusoid_frequencies == "fairseq" else ""))
own_table = functools.partial(pe_tables.pe_table, layout=layout, frequencies=config.sinusoid_frequencies,
                              first=config.position_offset)
trace = tracing.sentence_and_trace(session)

labels = ["The sinusoids", "Similarity and shifts", "Beyond the training length", "On your sentence", "Experiment",
          "Today's schemes", "Why did this head look there", "Longer than trained"]
position_tabs.open_on_own_scheme(session.name, config)
theory, shift, beyond, sentence_tab, experiment, schemes_tab, why_tab, length_tab = st.tabs(
    labels, default=position_tabs.OWN_TAB[config.positional])

# --- the sinusoids -----------------------------------------------------------------------------------------------
with theory:
    # the sentence's own positions by default (rounded up to the slider's step): 512 curves are a wall of lines
    sentence_length = len(trace.source_tokens) if trace is not None else 32
    own.length.init(min(512, max(16, -(-sentence_length // 8) * 8)))
    state.bound(st.slider, "Positions to draw", own.length, 8, 512, step=8,
                 help="Sinusoids exist for every position; the model's own table stops at max_positions.")
    length = int(own.length.get())
    table = own_table(length, d_model)
    marks = {f"max_positions = {max_positions}": max_positions} if length > max_positions else None
    fig = pe_lab_figures.pe_matrix_figure(table, f"PE matrix: {length} positions × {d_model} dimensions", marks, layout)
    widgets.chart(fig, "pe-matrix", key="pe_matrix_chart")
    widgets.exports(fig, "pe-matrix", "pe_matrix")
    st.caption("Low dimensions oscillate fast (short wavelengths), high dimensions barely move: each position gets a "
               "unique pattern, like the digits of a number in many bases.")

    dims = list(range(d_model))
    half = d_model // 2
    default_dims = (sorted({0, 1, min(6, d_model - 2), min(7, d_model - 1), half, half + 1}) if layout != "halves"
                    else sorted({0, half, min(3, half - 1), half + min(3, half - 1), half - 1, d_model - 1}))
    own.dims.init(default_dims)
    own.dims.set([d for d in own.dims.get() if d in dims])
    state.bound(st.multiselect, "Dimensions", own.dims, dims, max_selections=12,
                 format_func=lambda d: f"{d} ({wave(d, d_model, layout)})")
    if own.dims.get():
        fig = positional_trace_figures.sinusoid_figure(table, own.dims.get(),
                                                       marked=len(trace.source_tokens) if trace else 0, layout=layout)
        widgets.chart(fig, "sinusoids", key="sin_chart")
        widgets.exports(fig, "sinusoids", "sin")
    else:
        st.info("Pick at least one dimension.")

    wl = pe_tables.pair_wavelengths(d_model, config.sinusoid_frequencies)
    fig = pe_lab_figures.wavelength_figure(wl, {f"max_positions = {max_positions}": max_positions}, layout,
                                           config.sinusoid_frequencies)
    widgets.chart(fig, "wavelengths", key="wl_chart")
    widgets.exports(fig, "wavelengths", "wl")
    fairseq = config.sinusoid_frequencies == "fairseq"
    formula = "2π·10000^(i/(d_model/2 − 1)) (fairseq)" if fairseq else "2π·10000^(2i/d_model)"
    longest = f"10000·2π = {10000 * 2 * np.pi:,.1f}"
    limit = longest if fairseq else f"→ {longest} as d_model grows"
    st.caption(f"Pair i has wavelength {formula}: from {wl[0]:.4f} (= 2π) to {wl[-1]:,.1f} ({limit}), "
               "a geometric progression.")

# --- similarity and shift-linearity ------------------------------------------------------------------------------
with shift:
    length = int(own.length.get())
    table = pe_tables.pe_table(length, d_model)
    similarity = pe_tables.dot_similarity(table)
    left, right = st.columns(2)
    with left:
        fig = pe_lab_figures.similarity_figure(similarity, f"PE(p)·PE(q) for positions 0–{length - 1}")
        widgets.chart(fig, "pe-similarity", key="pe_sim_chart")
        widgets.exports(fig, "pe-similarity", "pe_sim")
    with right:
        profile = pe_tables.similarity_profile(similarity)
        fig = pe_lab_figures.profile_figure(profile, d_model)
        widgets.chart(fig, "pe-similarity-profile", key="pe_profile_chart")
        widgets.exports(fig, "pe-similarity-profile", "pe_profile")
        spread = float((profile["max"] - profile["min"]).max())
        st.caption(f"PE(p)·PE(q) = Σᵢ cos(ωᵢ (p − q)): it depends on the distance only (largest spread between "
                   f"pairs at the same distance: {spread:.1e}). It is largest (d_model/2) at distance 0 and falls "
                   "off for nearby distances, so neighbouring positions look alike.")

    st.subheader("Shift-linearity: PE(p + k) = M_k · PE(p)")
    st.caption("For a fixed offset k, one matrix M_k moves every position k steps: a 2×2 rotation by k·ωᵢ for each "
               "sin/cos pair (sin(a+b) = sin a cos b + cos a sin b). Relative positions are a linear function of "
               "the encodings, which attention can learn.")
    own.offset.init()
    own.zoom.init(min(16, d_model))
    c1, c2 = st.columns(2)
    with c1:
        state.bound(st.number_input, "Offset k", own.offset, min_value=-1000, max_value=1000, step=1,
                     help="Any whole number; negative k moves positions back.")
    with c2:
        state.bound(st.slider, "Dimensions of M_k to draw", own.zoom, 2, d_model, step=2)
    try:
        check = pe_tables.shift_check(own.offset.get(), length, d_model)
    except lesson_inputs.InputError as err:
        widgets.input_problem(err, "the shift cannot be checked: ")
    else:
        left, right = st.columns(2)
        with left:
            fig = pe_lab_figures.shift_matrix_figure(check.matrix, check.k, int(own.zoom.get()))
            widgets.chart(fig, "shift-matrix", key="shift_matrix_chart")
            widgets.exports(fig, "shift-matrix", "shift_matrix")
        with right:
            fig = pe_lab_figures.shift_error_figure(check)
            widgets.chart(fig, "shift-error", key="shift_error_chart")
            widgets.exports(fig, "shift-error", "shift_error")
        a, b = st.columns(2)
        a.metric("Largest error, float32 table (what the model adds)", f"{check.error32.max():.1e}")
        b.metric("Largest error, float64 table", f"{check.error64.max():.1e}")
        st.caption(f"Checked for every p from {int(check.positions[0])} to {int(check.positions[-1])} and all "
                   f"{d_model} dimensions; what remains is floating-point rounding.")

# --- beyond the training length ----------------------------------------------------------------------------------
with beyond:
    longest, where = pe_tables.training_max_length(session.model.directory, session.model.training_facts,
                                                   session.model.training_stats)
    if longest is not None:
        st.caption(f"The longest training sequence had {longest} tokens (from {where}).")
    else:
        st.info(f"This model directory does not record the longest training sentence (neither its "
                f"training log nor its model card says), so only the hard limit is marked: the model's position "
                f"table has {max_positions} rows (max_positions) and longer inputs are refused.")
    horizon = max(2 * max_positions, (longest or 0) * 2, 64)
    far = own_table(horizon, d_model)
    marks = {f"max_positions = {max_positions}": max_positions}
    if longest is not None:
        marks = {f"longest training sentence = {longest}": longest, **marks}
    chosen = own.dims.get() or [0, 1]
    fig = pe_lab_figures.dimension_curves_figure(far, chosen, marks,
                                                 title=f"The chosen dimensions for positions 0–{horizon - 1}",
                                                 layout=layout)
    widgets.chart(fig, "pe-extrapolation", key="pe_far_chart")
    widgets.exports(fig, "pe-extrapolation", "pe_far")
    seen = longest or max_positions
    window = min(seen, 128)
    inside = pe_tables.similarity_profile(pe_tables.dot_similarity(far[:window]))
    outside = pe_tables.similarity_profile(pe_tables.dot_similarity(far[seen:seen + window]))
    difference = float(np.abs(inside["mean"].to_numpy() - outside["mean"].to_numpy()).max())
    st.metric(f"Distance profile of positions {seen}–{seen + window - 1} vs 0–{window - 1}: largest difference",
              f"{difference:.1e}")
    st.caption("The sinusoids are defined for every position, and beyond the training length they keep the same "
               "distance structure as inside it: that is why the paper hoped they extrapolate. The trained model has "
               "still never seen those positions, and this model's table ends at max_positions. Learned position "
               "vectors have no rows at all past max_positions.")

    st.subheader("Learned vs sinusoidal")
    kinds = {}
    for model_name in sessions.model_names():
        kinds |= pe_tables.positional_kinds(sessions.root_of(model_name), [model_name])
    learned = sorted(name for name, kind in kinds.items() if kind == "learned")
    if not learned:
        st.info("No learned-position model is shipped yet, so there is nothing to compare with (training one takes "
                "hours on a laptop CPU). One command line trains the default recipe with learned positions and puts "
                "it in the models folder, where this section finds it:")
        st.code("viz-model train --config configs/mixed-en-de.toml --run-dir ../runs/learned model.positional=learned"
                " && viz-model export ../runs/learned --out assets/mixed-en-de-learned", language="bash")
        st.caption("The paper found learned position embeddings nearly identical in BLEU (Table 3, row E).")
    else:
        own.learned.init(learned[0])
        if own.learned.get() not in learned:
            own.learned.set(learned[0])
        state.bound(st.selectbox, "Learned-position model", own.learned, learned)
        name = own.learned.get()
        try:
            other = sessions.load_model(sessions.ModelRef.of(name))
        except (OSError, ValueError, RuntimeError) as err:
            st.error(f"The model {name} cannot be loaded: {err}")
        else:
            rows = min(other.config.max_positions, int(own.length.get()))
            learned_table = to_numpy(other.network.positional_encodings(rows, "source"))
            reference = pe_tables.pe_table(rows, other.config.d_model)
            fig = pe_lab_figures.side_by_side_figure([(f"learned ({name})", learned_table),
                                                     (f"sinusoidal (d_model {other.config.d_model})", reference)])
            widgets.chart(fig, "learned-vs-sinusoidal", key="learned_chart")
            widgets.exports(fig, "learned-vs-sinusoidal", "learned")
            panels = [("learned: PE(p)·PE(q)", pe_tables.dot_similarity(learned_table)),
                      ("sinusoidal: PE(p)·PE(q)", pe_tables.dot_similarity(reference))]
            fig = pe_lab_figures.side_by_side_figure(panels, x_title="position", height=440)
            widgets.chart(fig, "learned-vs-sinusoidal-similarity", key="learned_sim_chart")
            widgets.exports(fig, "learned-vs-sinusoidal-similarity", "learned_sim")
            st.caption("Paper Table 3, row E: learned position embeddings instead of sinusoids gave nearly identical "
                       "BLEU. The learned table has no rows beyond max_positions.")

# --- on the user's sentence --------------------------------------------------------------------------------------
with sentence_tab:
    if trace is None:
        st.info("Translate a sentence (above) to see its encodings.")
    elif not adds_positions:
        st.info(f"This model adds nothing to its input: {position_tabs.scheme_caption(config)} See the last two tabs.")
    else:
        state.clamp_choice(own.side, ["source", "target"], "source", "Side")
        state.bound(st.radio, "Side", own.side, ["source", "target"], horizontal=True,
                     format_func={"source": "Source (encoder input)", "target": "Target (decoder input)"}.get)
        side = own.side.get()
        tokens = trace.source_tokens if side == "source" else trace.target_tokens
        pe = trace.source_positional if side == "source" else trace.target_positional
        embeddings = trace.source_embeddings if side == "source" else trace.target_embeddings
        fig = positional_trace_figures.positional_heatmap(pe, tokens,
                                                          f"Positional encodings of the {len(tokens)} {side} positions "
                                                          f"(d_model = {pe.shape[1]})", layout)
        widgets.chart(fig, f"{side}-positional-encodings", key="pe_chart")
        widgets.exports(fig, f"{side}-positional-encodings", "pe")
        options = list(range(len(tokens)))
        state.clamp_choice(own.token, options, min(1, len(tokens) - 1), "Token")
        state.bound(st.selectbox, "Token", own.token, options, format_func=lambda i: f"{i}: {tokens[i]}")
        index = int(own.token.get())
        fig = positional_trace_figures.embedding_figure(embeddings[index], pe[index], tokens[index], index,
                                                        config.scale_embeddings)
        widgets.chart(fig, "embedding-vs-pe", key="emb_chart")
        widgets.exports(fig, "embedding-vs-pe", "emb")
        st.caption("The first layer reads the sum. "
                   + ("Embeddings are scaled by √d_model so that the position signal does not drown the token's "
                      "meaning." if config.scale_embeddings else
                      "This model does not scale its embeddings by √d_model (BART's choice); its learned positions "
                      "are trained at their scale."))
        fig = positional_trace_figures.positional_similarity(pe, tokens)
        widgets.chart(fig, "positional-similarity", key="sim_chart")
        widgets.exports(fig, "positional-similarity", "sim")

# --- the experiment ----------------------------------------------------------------------------------------------
EXPERIMENTS = {"no_pe": "Remove the positional encodings", "shuffle": "Shuffle the source words",
               "shuffle_no_pe": "Shuffle the words and remove the encodings"}
with experiment:
    if trace is None:
        st.info("Translate a sentence (above) to run the experiment on it.")
    else:
        st.caption("The same model translates the sentence again, changed one way; compare the translations and the "
                   "attention maps. Without encodings the encoder cannot tell word order apart: shuffling the words "
                   "then only reorders its maps.")
        state.clamp_choice(own.experiment, list(EXPERIMENTS), "no_pe", "Experiment")
        state.bound(st.radio, "Experiment", own.experiment, list(EXPERIMENTS), format_func=EXPERIMENTS.get,
                     horizontal=True)
        mode = own.experiment.get()
        text = SHARED.sentence.get("")
        target = SHARED.target.get() or None
        changed_text = text
        problem = None
        if mode != "no_pe":
            own.shuffle_seed.init()
            state.bound(st.number_input, "Shuffle seed", own.shuffle_seed, min_value=0, max_value=2**31 - 1, step=1)
            try:
                changed_text = pe_tables.shuffle_words(text, own.shuffle_seed.get())
            except lesson_inputs.InputError as err:
                problem = f"The words cannot be shuffled: {err}."
        if problem:
            st.warning(texts.md_escape(problem))
        else:
            try:
                with st.spinner("Translating again…"):
                    changed = session.trace(changed_text, target, positions=mode == "shuffle")
            except ValueError as err:
                st.error(f"The experiment cannot run on this sentence: {err}")
            else:
                left, right = st.columns(2)
                with left:
                    widgets.show_text("Original sentence", text)
                    widgets.show_text("Its translation", trace.translation)
                with right:
                    widgets.show_text("Shuffled sentence" if mode != "no_pe" else "Same sentence, no positional "
                                     "encodings", changed_text)
                    widgets.show_text("Its translation", changed.translation)
                kinds_shown = {"encoder": "Encoder self-attention", "cross": "Cross-attention"}
                c1, c2 = st.columns(2)
                with c1:
                    state.clamp_choice(own.experiment_kind, list(kinds_shown), "encoder", "Attention kind")
                    state.bound(st.selectbox, "Attention", own.experiment_kind, list(kinds_shown),
                                 format_func=kinds_shown.get)
                kind = own.experiment_kind.get()
                layer_count = trace.num_layers[kind]
                with c2:
                    state.clamp_choice(own.experiment_layer, list(range(1, layer_count + 1)), layer_count, "Layer")
                    state.bound(st.selectbox, "Layer", own.experiment_layer, list(range(1, layer_count + 1)),
                                 format_func=lambda v: f"Layer {v} of {layer_count}")
                layer = int(own.experiment_layer.get()) - 1
                panels = []
                for label, t in (("original", trace), (EXPERIMENTS[mode].lower(), changed)):
                    queries, keys = t.axes(kind)
                    panels.append((label, t.attentions(kind)[layer].mean(axis=0), queries, keys))
                fig = pe_lab_figures.attention_pair_figure(panels,
                                                           f"{kinds_shown[kind]}, layer {layer + 1}, mean over the "
                                                           f"{trace.num_heads} heads")
                widgets.chart(fig, "pe-experiment", key="pe_exp_chart")
                widgets.exports(fig, "pe-experiment", "pe_exp")

# --- today's schemes, and why a head looked where it did ---------------------------------------------------------
with schemes_tab:
    position_tabs.schemes_tab(config)
with why_tab:
    position_tabs.why_tab(session, trace)
with length_tab:
    position_tabs.length_tab()
