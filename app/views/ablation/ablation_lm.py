"""Ablation with a language model open: the continuation and the prompt's next-token log-probabilities with heads
switched off."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import sessions, widgets
from viz_model.analysis import ablation, lm_head_roles
from viz_model.analysis.ablation import AblationResult, Head
from viz_model.plot import logit_figures


@st.cache_data(show_spinner=False, max_entries=8)
def compute_ablation(ref: sessions.ModelRef, prompt: str | list[dict[str, str]], heads: tuple[Head, ...],
                     new_tokens: int) -> tuple[AblationResult, pd.DataFrame]:
    """The continuation with and without `heads`, and the prompt's (text, or chat turn) per-position
    `logit_change`."""
    model = sessions.load_model(ref)
    result = ablation.ablate(model, prompt, heads, max_new_tokens=new_tokens)
    return result, lm_head_roles.logit_change(model, model.encode(prompt), heads)


def logit_change_section(table: pd.DataFrame, off: str) -> None:
    """The prompt's next-token log-probabilities with every head on and with `off` ("2 heads") off, and the KL."""
    st.subheader("Along the prompt")
    fig = logit_figures.logit_change_figure(table, f"The prompt's next tokens, every head on and {off} off")
    widgets.chart(fig, "ablation-logits", key="abl_lm_logits")
    measured = table.dropna(subset=["change"])
    a, b = st.columns(2)
    a.metric("Mean change of log P(next token)", f"{measured['change'].mean():+.3f}" if len(measured) else "–",
             help="Over the prompt's positions that have a next token: negative when the heads helped predict it.")
    b.metric("Mean KL, nats", f"{table['kl'].mean():.4f}",
             help="KL(every head on ‖ heads off) of the next-token distributions, averaged over the prompt.")
    st.caption("Each position reads its token and predicts the next one of the prompt (the last predicts the first "
               "new token: its KL is drawn, it has no next token to score).")
    widgets.exports(fig, "ablation-logits", "abl_lm_logits_export", csv=lambda: table)
    st.dataframe(table.assign(position=table["position"] + 1), hide_index=True, width="stretch")
