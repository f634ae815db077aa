"""Attention sinks with an encoder open: each head's share on [SEP] and on [CLS] (layer x head grids; Clark et al.,
2019: [SEP] as a "no-op"), and the switch that hides [SEP] from every query and shows how the fill-mask predictions
move (each mask's top tokens before and after, with their probabilities)."""

import numpy as np
import streamlit as st

from app import fill_in, fill_in_changes, sessions, state, widgets
from app.page_settings import SINKS as own
from viz_model.analysis.encoder_head_roles import ROLE_THRESHOLD as NO_OP  # the Head roles page's threshold
from viz_model.analysis.encoder_sinks import SepSwitch, SpecialShares, hide_sep, trace_special_shares
from viz_model.plot import analysis_figures


@st.cache_data(show_spinner=False, max_entries=8)
def compute_switch(ref: sessions.ModelRef, text: str, pair: str | None) -> SepSwitch:
    """`hide_sep` of the loaded encoder, cached."""
    return hide_sep(sessions.load_model(ref), text, 5, pair)


def grid(values: np.ndarray, name: str, key: str) -> None:
    """A layer x head grid of one special token's share."""
    labels = np.vectorize(lambda v: f"{v:.2f}")(values)
    fig = analysis_figures.head_grid({"encoder": values}, f"Share of attention on {name}", f"{name} share", "Blues",
                                     labels={"encoder": labels}, unit=True)
    widgets.chart(fig, f"{key}-share", key=f"sk_enc_{key}")
    widgets.exports(fig, f"{key}-share", f"sk_enc_{key}_export")


def shares_section(shares: SpecialShares) -> None:
    """The [SEP] and [CLS] grids and their means."""
    a, b, c = st.columns(3)
    a.metric("Mean share on [SEP]", f"{shares.sep.mean():.3f}")
    b.metric("Mean share on [CLS]", f"{shares.cls.mean():.3f}")
    c.metric(f"Heads with at least {NO_OP:.0%} on [SEP]", f"{(shares.sep >= NO_OP).mean():.0%}")
    left, right = st.columns(2)
    with left:
        grid(shares.sep, "[SEP]", "sep")
    with right:
        grid(shares.cls, "[CLS]", "cls")
    st.caption("A head's share on a token is the weight its queries put on it, averaged over every query (an encoder's "
               "queries see every key); with a pair, [SEP] counts each separator. Clark et al. found heads in BERT's "
               "middle layers putting most of their weight on [SEP], and argued it is a no-op: where a head's job "
               "does not apply, it rests there, since its weights must sum to 1 (the gradients of the loss with "
               "respect to that attention are small). Layers and heads count from 1.")


def switch_section(text: str, pair: str | None) -> None:
    """The switch: [SEP] hidden from every query; each mask's predictions before and after."""
    st.subheader("Hide [SEP]")
    state.bound(st.toggle, "Hide [SEP] from every query", own.switch)
    if not own.switch.get():
        st.caption("Switch it on to read the text again with every [SEP] masked for every query but its own (each "
                   "layer's mask gains those columns; the weights are not edited), and compare the predictions at "
                   "each mask.")
        return
    try:
        with st.spinner("Reading the text without [SEP]…"):
            result = compute_switch(session.ref.stored, text, pair)
    except ValueError as err:
        widgets.input_problem(err, "The switch cannot run: ")
        return
    st.metric("Largest KL(intact ‖ hidden) at a mask", f"{max(m.kl for m in result.masks):.4f} nats",
              help="How far the distribution over the vocabulary at a mask moved: 0 when it did not change.")
    fill_in_changes.changes_table([vars(m.intact) for m in result.masks], [vars(m.switched) for m in result.masks],
                                  "with [SEP] hidden")


session = sessions.require_session()
state.page_link(own)
for setting in own.settings():
    setting.init()
st.title("Attention sinks")
st.caption("How much of each head's attention lands on [SEP] and on [CLS], the encoder's own sinks, and what the "
           "model fills in when [SEP] is hidden from every query.")
trace = fill_in.reading_or_stop(session)
shares_section(trace_special_shares(session.model, trace))
if not fill_in.has_head_or_say(session.model, "The switch that hides [SEP]"):
    st.stop()
if not fill_in.predictions(trace):
    fill_in_changes.no_mask_line(session, " to see how hiding [SEP] moves its predictions")
    st.stop()
switch_section(trace.source_text, trace.settings.get("text_pair"))
