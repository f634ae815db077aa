"""Attribution: beyond raw attention. What each source token and each target-prefix token contributed to every
output token, by several methods side by side, and a deletion check of which explanation is faithful."""

import pandas as pd
import streamlit as st

from app import completion, lm_attribution, sessions, state, texts, tracing, widgets
from app.page_settings import ATTRIBUTION as own
from app.page_settings import EXPLORE
from app.shared_settings import SHARED
from viz_model.attribution import METHODS
from viz_model.attribution.faithfulness import DEFAULT_KS, summarise
from viz_model.attribution.gradients import DEFAULT_STEPS, DEFAULT_TOLERANCE, MAX_STEPS
from viz_model.plot import attribution_figures, long_map_figures

CHOICES = {"attention": "Attention weights (cross, heads and layers averaged)",
           "rollout": "Attention rollout through the encoder",
           "value_weighted": "Value-weighted attention (Kobayashi et al. 2020)",
           "alti": "ALTI+ (Ferrando et al. 2022)",
           "saliency": "Saliency (gradient norm)",
           "input_x_gradient": "Input × gradient",
           "integrated_gradients": "Integrated gradients (slower)"}
TOLERANCES = {0.005: "adaptive, until every gap ≤ 0.5%", 0.01: "adaptive, until every gap ≤ 1%",
              0.02: "adaptive, until every gap ≤ 2%", 0.05: "adaptive, until every gap ≤ 5%",
              0.0: "fixed: exactly that many points (Gauss-Legendre)"}

session = sessions.require_session()
language_model = session.is_language_model
choices = lm_attribution.choices(CHOICES) if language_model else CHOICES

st.title("Attribution")
st.caption("Attention weights alone can mislead: a head may attend strongly to a token whose value vector is nearly "
           "zero, and the residual stream carries much of the signal past every head. These methods measure what "
           "each input token contributed to each output token of the "
           + ("continuation: each of its tokens from the prompt and the continuation's earlier tokens (teacher-forced "
              "on it, as inseq does for decoder-only models)." if language_model else
              "translation (teacher-forced on it)."))
if language_model:
    completion.prompt_form()
    trace = completion.current_completion(session)
    if trace is None:
        st.stop()
    own.target.init()
    state.bound(st.text_input, "Forced continuation (optional: attribute this text in place of the model's own)",
                own.target, max_chars=200, placeholder="e.g. in the park",
                help="Its tokens as they follow the prompt (a leading space counts); empty: the greedy continuation "
                     "above.")
    if EXPLORE.chat.get():
        st.info("Attribution reads the prompt as plain text: the chat template is not applied here.")
else:
    trace = tracing.trace_or_stop(session)

own.methods.init()
own.methods.set([m for m in own.methods.get() if m in choices])
state.bound(st.multiselect, "Methods", own.methods, list(choices), format_func=choices.get)
chosen = [m for m in METHODS if m in own.methods.get()]
if not chosen:
    st.info("Pick at least one method.")
    st.stop()
steps, tolerance = DEFAULT_STEPS, DEFAULT_TOLERANCE
if "integrated_gradients" in chosen:
    own.steps.init()
    state.clamp_choice(own.tolerance, list(TOLERANCES), DEFAULT_TOLERANCE, "Integrated gradients")
    left, right = st.columns(2)
    with left:
        state.bound(st.selectbox, "Integrated gradients", own.tolerance, list(TOLERANCES),
                    format_func=TOLERANCES.get,
                    help="Adaptive: points are added where the path integral is least accurate until every output "
                         "token's completeness gap is within the target, or the points run out.")
    with right:
        state.bound(st.slider, "Most points on the path" if own.tolerance.get() else "Points on the path", own.steps,
                    16, MAX_STEPS, step=16,
                    help="Points on the path from all-zero token embeddings to the real ones: each is a forward and "
                         "a backward pass, so time grows with them.")
    steps, tolerance = int(own.steps.get()), float(own.tolerance.get())
computed = tuple(m for m in METHODS if m in {*chosen, "alti", *(() if language_model else ("attention",))})
# the share chart needs ALTI+
long = language_model and long_map_figures.is_long(trace, "decoder")  # maps on demand: some methods left out
try:
    if long:
        computed = lm_attribution.long_prompt_methods(
            session.model, SHARED.sentence.get(""), own.target.get(),
            len(trace.target_tokens) - completion.prompt_length(trace), computed, steps)
        chosen = [m for m in chosen if m in computed]
    ranked = tuple("attention_mean" if m == "attention" else m for m in chosen)
    if not ranked:
        st.info("None of the methods picked runs on a prompt this long: pick value-weighted attention.")
        st.stop()
    with st.spinner("Computing the attributions…"):
        if language_model:
            forced = own.target.get() if own.target.get().strip() else ""
            p = completion.prompt_length(trace)
            traced = None if forced or EXPLORE.chat.get() else (tuple(trace.target_ids[:p]),
                                                                   tuple(trace.target_ids[p:]))
            result = lm_attribution.continuation_attribution(
                session.ref.stored, SHARED.sentence.get(""), forced, len(trace.target_tokens) - p, computed, steps,
                tolerance, "on_demand" if long else "full", traced)
        else:
            result = session.attribution(trace, computed, steps, tolerance=tolerance)
except ValueError as err:
    widgets.input_problem(err, "The attributions cannot be computed: ")
    st.stop()

# --- source or prefix ----------------------------------------------------------------------------------------------
if result.alti is not None:
    st.subheader("From the prompt, or from the continuation so far?" if language_model else
                 "From the source, or from the translation so far?")
    fig = lm_attribution.share_figure(result) if language_model else attribution_figures.share_figure(result)
    widgets.chart(fig, "source-share", key="at_share_chart")
    share = result.source_share()
    sides = ("the prompt", "the continuation's earlier tokens") if language_model else (
        "the source", "the target prefix (the decoder's earlier outputs)")
    st.caption(f"ALTI+ follows every layer's attention, residual connection and norm: on average {share.mean():.0%} of "
               f"a prediction comes from {sides[0]} and {1 - share.mean():.0%} from {sides[1]}. The two shares of each "
               "token sum to 1.")
    columns = ("prompt_share", "continuation_share") if language_model else ("source_share", "prefix_share")
    widgets.exports(fig, "source-share", "at_share", csv=lambda: pd.DataFrame(
        {"output": result.output_tokens, columns[0]: share, columns[1]: 1 - share}))

# --- one output token, every method -----------------------------------------------------------------------------
st.subheader("Why this word? Every method side by side")
outputs = list(range(len(result.output_tokens)))
state.clamp_choice(own.output, outputs, 0, "Output token")
state.bound(st.selectbox, "Output token", own.output, outputs, format_func=lambda i: f"{i}: {result.output_tokens[i]}")
output = int(own.output.get())
if long:
    fig = lm_attribution.methods_strip(result, output, ranked)
    widgets.chart(fig, "methods", key="at_methods_chart")
    st.caption(f"Each method's scores over the {len(result.source_tokens)} prompt tokens for this output token, "
               "scaled so that its largest magnitude is 1, one strip a method (hover for the position and its token); "
               "the tokens each method ranks highest:")
    st.dataframe(lm_attribution.top_table(result, output, ranked), hide_index=True, width="stretch")
else:
    fig = attribution_figures.methods_figure(result, output, ranked)
    widgets.chart(fig, "methods", key="at_methods_chart")
    st.caption(f"Each method's scores over the {'prompt' if language_model else 'source'} tokens for this output "
               "token, scaled so that its largest magnitude is 1 (hover for the raw score). Gradient methods are "
               "signed: negative = evidence against the token.")
widgets.exports(fig, f"methods-output{output}", "at_methods_fig", csv=lambda: pd.DataFrame(
    {attribution_figures.method_label(m): result.source_scores(m)[output] for m in ranked},
    index=[f"{j}:{t}" for j, t in enumerate(result.source_tokens)]))
if result.relative_gap is not None:
    gap = result.relative_gap
    st.metric("Integrated gradients: completeness gap for this token", f"{gap[output]:.1%}",
              help="|sum of the attributions − (score(input) − score(baseline))|, relative to the score change.")
    note, met = result.completeness_note()
    (st.caption if met else st.warning)(note)

if language_model:
    st.caption(lm_attribution.NO_FOIL)
else:
    with st.expander("Contrastive: why this word and not another?"):
        own.foil.init()
        state.bound(st.text_input, "…and not (one piece of the target vocabulary)", own.foil, max_chars=40,
                    placeholder="e.g. Katze")
        foil_text = own.foil.get().strip()
        if foil_text:
            pieces = session.model.tokenizer.encode_target(foil_text)
            if len(pieces) != 1:
                st.error(texts.md_escape(f"“{foil_text}” is {len(pieces)} pieces "
                                          f"({' '.join(session.model.tokenizer.pieces(pieces))}); name a single piece, "
                                          "such as one of the alternatives in the steps table."))
            elif pieces[0] == result.output_ids[output]:
                st.warning(texts.md_escape(f"“{foil_text}” is the output token itself "
                                           f"({result.output_tokens[output]}): log p(y) − log p(y) is 0 for every "
                                           "input token. Name another piece, such as one of the alternatives in the "
                                           "steps table."))
            else:
                contrast_methods = tuple(m for m in ("saliency", "input_x_gradient", "integrated_gradients")
                                         if m in chosen) or ("input_x_gradient",)
                with st.spinner("Computing the contrastive attributions…"):
                    contrast = session.attribution(trace, contrast_methods, steps, pieces[0], tolerance)
                fig = attribution_figures.methods_figure(contrast, output, contrast_methods)
                widgets.chart(fig, "contrastive", key="at_contrast_chart")
                st.caption(f"Scores of log p({result.output_tokens[output]}) − log p({contrast.foil}) at output "
                           f"{output}: the source tokens that made this word more likely than the foil.")

# --- the full matrix ------------------------------------------------------------------------------------------------
st.subheader("Every output token from every input token")
state.clamp_choice(own.matrix, list(ranked), "alti" if "alti" in ranked else ranked[0], "Method")
state.bound(st.selectbox, "Method", own.matrix, list(ranked), format_func=attribution_figures.method_label)
fig = (lm_attribution.matrix_strip(result, own.matrix.get()) if long else
       attribution_figures.contribution_figure(result, own.matrix.get()))
widgets.chart(fig, f"matrix-{own.matrix.get()}", key="at_matrix_chart")
st.caption("ALTI+ and the gradient methods also score the continuation's earlier tokens (right of the line); "
           "value-weighted attention scores the prompt only." if language_model else
           "ALTI+ and the gradient methods also score the target prefix (right of the line); attention-based "
           "methods score the source only.")
widgets.exports(fig, f"matrix-{own.matrix.get()}", "at_matrix_fig")

# --- faithfulness ------------------------------------------------------------------------------------------------
st.subheader("Which explanation is faithful?")
st.caption("No gold data needed: remove the k source tokens a method ranks highest for an output token (they become "
           "padding) and measure how much that token's log-probability drops (higher = the method found what the "
           "prediction needs); keep only those k (lower = they suffice). Random tokens are the baseline.")
if language_model:
    st.info(lm_attribution.NO_DELETION)
else:
    if st.button("Check by deleting tokens", icon=":material/science:", key="at_check"):
        own.checked.set((tuple(trace.source_ids), tuple(trace.output_ids)))
    if own.checked.get() == (tuple(trace.source_ids), tuple(trace.output_ids)):
        with st.spinner("Deleting tokens…"):
            deletions = session.deletions(trace, computed, ranked, DEFAULT_KS, steps, tolerance)
        fig = attribution_figures.deletion_figure(deletions)
        widgets.chart(fig, "faithfulness", key="at_deletion_chart")
        table = summarise(deletions)
        table["method"] = table["method"].map(attribution_figures.method_label)
        st.dataframe(table, hide_index=True, width="stretch")
        widgets.exports(fig, "faithfulness", "at_deletion_fig", csv=lambda: deletions)

st.download_button("Download every score (NPZ)", result.to_npz(), file_name="attribution.npz",
                   mime="application/octet-stream", icon=":material/download:", key="at_npz")
