"""Attribution with a language model open: its continuation (greedy, or a forced one) attributed token by token to
the prompt and the continuation's earlier tokens (`viz_model.attribution.attribute_continuation`), cached."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from app.sessions import ModelRef, load_model
from viz_model.attribution import Attribution, attribute_continuation
from viz_model.attribution.scoring import CROSS_METHODS
from viz_model.plot import attribution_figures

NO_FOIL = ("The contrastive question (why this token and not another) is asked of a translation model only for now: "
           "a language model's attribution takes no foil.")
NO_DELETION = ("The deletion check replaces source tokens by padding, which a language model's prompt has none of: "
               "it runs with a translation model.")


def choices(all_choices: dict[str, str]) -> dict[str, str]:
    """The methods that apply to a language model (those reading cross-attention left out)."""
    return {m: label for m, label in all_choices.items() if m not in CROSS_METHODS}


@st.cache_data(show_spinner=False, max_entries=8)
def continuation_attribution(ref: ModelRef, prompt: str, continuation: str, new_tokens: int,
                             methods: tuple[str, ...], steps: int, tolerance: float) -> Attribution:
    """The attributions of the model's greedy continuation of `prompt` (`new_tokens` long), or of the forced
    `continuation` where it is not empty (as typed: a leading space is part of its first token)."""
    model = load_model(ref)
    result = attribute_continuation(model, prompt, continuation or None, methods, steps, tolerance, new_tokens)
    result.model_name = ref.name
    return result


def share_figure(result: Attribution) -> go.Figure:
    """ALTI+'s share of each continuation token from the prompt and from the continuation's earlier tokens."""
    fig = attribution_figures.share_figure(result)
    for bar, name in zip(fig.data, ("prompt", "earlier continuation")):
        bar.name = name
        bar.hovertemplate = f"%{{x}}<br>from the {name}: %{{y:.1%}}<extra></extra>"
    fig.update_layout(title=dict(text="ALTI+: where each continuation token's prediction comes from"))
    return fig
