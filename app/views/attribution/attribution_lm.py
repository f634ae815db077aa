"""Attribution with a language model open: its continuation (greedy, or a forced one) attributed token by token to
the prompt and the continuation's earlier tokens (`viz_model.attribution.attribute_continuation`), cached."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import widgets
from app.sessions import ModelRef, load_model
from app.views.attribution import attribution_sections as sections
from viz_model.attribution import Attribution, attribute_continuation
from viz_model.attribution.long_prompt import refusals
from viz_model.attribution.scoring import CROSS_METHODS, attribute_continuation_ids
from viz_model.kinds.language_model import LanguageModel
from viz_model.plot import attribution_figures, row_strip_figures

NO_FOIL = ("The contrastive question (why this token and not another) is asked of a translation model only for now: "
           "a language model's attribution takes no foil.")
NO_DELETION = ("The deletion check replaces source tokens by padding, which a language model's prompt has none of: "
               "it runs with a translation model.")


def choices(all_choices: dict[str, str]) -> dict[str, str]:
    """The methods that apply to a language model (those reading cross-attention left out)."""
    return {m: label for m, label in all_choices.items() if m not in CROSS_METHODS}


@st.cache_data(show_spinner=False, max_entries=8)
def continuation_attribution(ref: ModelRef, prompt: str, continuation: str, new_tokens: int,
                             methods: tuple[str, ...], steps: int, tolerance: float, maps: str = "full",
                             ids: tuple[tuple[int, ...], tuple[int, ...]] | None = None) -> Attribution:
    """The attributions of the model's greedy continuation of `prompt` (`new_tokens` long), or of the forced
    `continuation` where it is not empty (as typed: a leading space is part of its first token); `ids`: the prompt's
    and the continuation's ids, already traced (no second trace); `maps` "on_demand": a long prompt's."""
    model = load_model(ref)
    result = (attribute_continuation_ids(model, ids[0], ids[1], methods, steps, tolerance, maps) if ids else
              attribute_continuation(model, prompt, continuation or None, methods, steps, tolerance, new_tokens, maps))
    result.model_name = ref.name
    return result


def every_method(model: LanguageModel, prompt: str, continuation: str, new_tokens: int,
                 methods: tuple[str, ...], steps: int) -> tuple[str, ...]:
    """`methods`, every one: each runs on a prompt whose maps are read whole."""
    return methods


def long_prompt_methods(model: LanguageModel, prompt: str, continuation: str, new_tokens: int,
                        methods: tuple[str, ...], steps: int) -> tuple[str, ...]:
    """Of `methods`, those that run on this long prompt, after one line for each kind left out (the method and its
    limit, `long_prompt.refusals`)."""
    outputs = len(model.continuation_ids(continuation)) if continuation.strip() else new_tokens
    tokens = len(model.encode(prompt, outputs)) + outputs - 1
    left_out = refusals(methods, tokens, outputs, steps, model.config.d_model)
    for line in dict.fromkeys(left_out.values()):
        st.info(line)
    return tuple(m for m in methods if m not in left_out)


def methods_strip(result: Attribution, output: int, methods: tuple[str, ...]) -> go.Figure:
    """A long prompt's methods side by side: each method's scores over the prompt for output `output`, scaled to its
    largest magnitude, one strip a method."""
    rows = [result.source_scores(m)[output] for m in methods]
    scaled = np.stack([row / max(float(np.abs(row).max()), 1e-12) for row in rows])
    return row_strip_figures.strip_figure(
        scaled, result.source_tokens, [attribution_figures.method_label(m) for m in methods],
        f"Why “{result.output_tokens[output]}” (output {output}): each method's prompt scores, scaled to its largest")


def methods_strip_section(result: Attribution, output: int, methods: tuple[str, ...]) -> go.Figure:
    """A long prompt's methods side by side (`methods_strip`), drawn, with the tokens each ranks highest; the
    figure."""
    fig = methods_strip(result, output, methods)
    widgets.chart(fig, "methods", key="at_methods_chart")
    st.caption(f"Each method's scores over the {len(result.source_tokens)} prompt tokens for this output token, "
               "scaled so that its largest magnitude is 1, one strip a method (hover for the position and its token); "
               "the tokens each method ranks highest:")
    st.dataframe(top_table(result, output, methods), hide_index=True, width="stretch")
    return fig


def top_table(result: Attribution, output: int, methods: tuple[str, ...], k: int = row_strip_figures.TOP_TOKENS
              ) -> pd.DataFrame:
    """Per method (a column), the `k` prompt tokens it scores highest in magnitude for output `output`, first to
    last: "position: token (score)"."""
    columns = {}
    for method in methods:
        top = row_strip_figures.top_positions(result.source_scores(method)[output], result.source_tokens, k, "score")
        columns[attribution_figures.method_label(method)] = [
            f"{p}: {t} ({v:.4g})" for p, t, v in zip(top["position"], top["token"], top["score"])]
    return pd.DataFrame({"rank": range(1, k + 1), **columns})


def matrix_strip(result: Attribution, method: str) -> go.Figure:
    """A long prompt's every output token (a strip each) from every input token: the prompt, then the continuation's
    earlier tokens where the method scores them."""
    matrix = result.source_scores(method)
    tokens = list(result.source_tokens)
    try:
        matrix = np.concatenate([matrix, result.prefix_scores(method)], axis=1)
        tokens += result.prefix_tokens
    except ValueError:  # value-weighted attention scores the prompt alone
        pass
    return row_strip_figures.strip_figure(
        matrix, tokens, [f"{i}: {t}" for i, t in enumerate(result.output_tokens)],
        f"{attribution_figures.method_label(method)}: every output token (rows) from every input token (the prompt, "
        "then the continuation so far)", len(result.source_tokens))


def share_figure(result: Attribution) -> go.Figure:
    """ALTI+'s share of each continuation token from the prompt and from the continuation's earlier tokens."""
    fig = attribution_figures.share_figure(result)
    for bar, name in zip(fig.data, ("prompt", "earlier continuation")):
        bar.name = name
        bar.hovertemplate = f"%{{x}}<br>from the {name}: %{{y:.1%}}<extra></extra>"
    fig.update_layout(title=dict(text="ALTI+: where each continuation token's prediction comes from"))
    return fig


@dataclass(frozen=True)
class PromptReading:
    """How the page attributes a prompt whose maps are read whole or by rows: the methods that run (after a line for
    each left out), the maps the attribution reads ("full" or "on_demand"), the methods side by side for one output
    (drawn; the figure) and a method's every output token."""

    runs: Callable[[LanguageModel, str, str, int, tuple[str, ...], int], tuple[str, ...]]
    maps: str
    methods: Callable[[Attribution, int, tuple[str, ...]], go.Figure]
    matrix: Callable[[Attribution, str], go.Figure]


READINGS = {  # per `AttentionTrace.reading`
    "whole": PromptReading(every_method, "full", partial(sections.methods_chart, over="prompt"),
                           attribution_figures.contribution_figure),
    "rows": PromptReading(long_prompt_methods, "on_demand", methods_strip_section, matrix_strip)}
