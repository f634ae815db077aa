"""Attribution's parts every kind of model shows: the methods and their settings, the share chart, every method for
one output token, the full matrix, the faithfulness heading and the download."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import state, widgets
from app.page_settings import ATTRIBUTION as own
from viz_model.attribution import METHODS, Attribution
from viz_model.attribution.gradients import DEFAULT_STEPS, DEFAULT_TOLERANCE, MAX_STEPS
from viz_model.plot import attribution_figures

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
CANNOT = "The attributions cannot be computed: "


def heading(what: str) -> None:
    """The page's title and what it measures: each input token's contribution to each output token of `what`."""
    st.title("Attribution")
    st.caption("Attention weights alone can mislead: a head may attend strongly to a token whose value vector is "
               "nearly zero, and the residual stream carries much of the signal past every head. These methods "
               "measure what each input token contributed to each output token of the " + what)


def pick_methods(choices: dict[str, str]) -> tuple[list[str], int, float]:
    """The methods picked of `choices` (the page stops with none), and integrated gradients' points and tolerance."""
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
                        help="Adaptive: points are added where the path integral is least accurate until every "
                             "output token's completeness gap is within the target, or the points run out.")
        with right:
            state.bound(st.slider, "Most points on the path" if own.tolerance.get() else "Points on the path",
                        own.steps, 16, MAX_STEPS, step=16,
                        help="Points on the path from all-zero token embeddings to the real ones: each is a forward "
                             "and a backward pass, so time grows with them.")
        steps, tolerance = int(own.steps.get()), float(own.tolerance.get())
    return chosen, steps, tolerance


def ranked_of(chosen: list[str]) -> tuple[str, ...]:
    """The methods whose scores rank the tokens (attention: its mean over heads and layers)."""
    return tuple("attention_mean" if m == "attention" else m for m in chosen)


def share_section(result: Attribution, title: str, fig: go.Figure, sides: tuple[str, str],
                  columns: tuple[str, str]) -> None:
    """ALTI+'s share of each prediction from the input's two `sides` (`columns`: their names in the CSV)."""
    st.subheader(title)
    widgets.chart(fig, "source-share", key="at_share_chart")
    share = result.source_share()
    st.caption(f"ALTI+ follows every layer's attention, residual connection and norm: on average {share.mean():.0%} "
               f"of a prediction comes from {sides[0]} and {1 - share.mean():.0%} from {sides[1]}. The two shares of "
               "each token sum to 1.")
    widgets.exports(fig, "source-share", "at_share", csv=lambda: pd.DataFrame(
        {"output": result.output_tokens, columns[0]: share, columns[1]: 1 - share}))


def pick_output(result: Attribution) -> int:
    """The output token every method is shown for."""
    st.subheader("Why this word? Every method side by side")
    outputs = list(range(len(result.output_tokens)))
    state.clamp_choice(own.output, outputs, 0, "Output token")
    state.bound(st.selectbox, "Output token", own.output, outputs,
                format_func=lambda i: f"{i}: {result.output_tokens[i]}")
    return int(own.output.get())


def computed_of(result: Attribution, ranked: tuple[str, ...]) -> tuple[str, ...]:
    """The methods of `ranked` the library computed; one line for each it could not (ALTI+ on a sandwich norm)."""
    for why in result.skipped.values():
        st.info(why)
    computed = tuple(m for m in ranked if m not in result.skipped)
    if not computed:
        st.info("None of the methods picked runs on this model: pick another.")
        st.stop()
    return computed


def methods_chart(result: Attribution, output: int, ranked: tuple[str, ...], over: str) -> go.Figure:
    """Every method's scores over the `over` tokens for output token `output`, side by side."""
    fig = attribution_figures.methods_figure(result, output, ranked)
    widgets.chart(fig, "methods", key="at_methods_chart")
    st.caption(f"Each method's scores over the {over} tokens for this output token, scaled so that its largest "
               "magnitude is 1 (hover for the raw score). Gradient methods are signed: negative = evidence against the "
               "token.")
    return fig


def methods_export_and_gap(fig: go.Figure, result: Attribution, output: int, ranked: tuple[str, ...]) -> None:
    """The methods figure's exports, and integrated gradients' completeness gap for the output token."""
    widgets.exports(fig, f"methods-output{output}", "at_methods_fig", csv=lambda: pd.DataFrame(
        {attribution_figures.method_label(m): result.source_scores(m)[output] for m in ranked},
        index=[f"{j}:{t}" for j, t in enumerate(result.source_tokens)]))
    if result.relative_gap is not None:
        gap = result.relative_gap
        st.metric("Integrated gradients: completeness gap for this token", f"{gap[output]:.1%}",
                  help="|sum of the attributions − (score(input) − score(baseline))|, relative to the score change.")
        note, met = result.completeness_note()
        (st.caption if met else st.warning)(note)


def matrix_section(ranked: tuple[str, ...], figure: Callable[[str], go.Figure], caption: str) -> None:
    """Every output token from every input token, by the method picked (`figure` draws it)."""
    st.subheader("Every output token from every input token")
    state.clamp_choice(own.matrix, list(ranked), "alti" if "alti" in ranked else ranked[0], "Method")
    state.bound(st.selectbox, "Method", own.matrix, list(ranked), format_func=attribution_figures.method_label)
    fig = figure(own.matrix.get())
    widgets.chart(fig, f"matrix-{own.matrix.get()}", key="at_matrix_chart")
    st.caption(caption)
    widgets.exports(fig, f"matrix-{own.matrix.get()}", "at_matrix_fig")


def faithfulness_heading() -> None:
    st.subheader("Which explanation is faithful?")
    st.caption("No gold data needed: remove the k source tokens a method ranks highest for an output token (they "
               "become padding) and measure how much that token's log-probability drops (higher = the method found "
               "what the prediction needs); keep only those k (lower = they suffice). Random tokens are the baseline.")


def download(result: Attribution) -> None:
    st.download_button("Download every score (NPZ)", result.to_npz(), file_name="attribution.npz",
                       mime="application/octet-stream", icon=":material/download:", key="at_npz")
