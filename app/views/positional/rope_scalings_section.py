"""RoPE's scalings on the Positional page: the frequencies tab's comparison (the loaded model's wavelengths beside
linear's, llama3's, YaRN's and dynamic NTK's at a chosen factor on the same RoPE: illustrations where the model was
not trained with them) and the length experiment's switch of the scaling the config names."""

from __future__ import annotations

import streamlit as st

from app import widgets
from app.page_settings import POSITIONAL_ENCODING as own
from viz_model.config import ModelConfig
from viz_model.kinds.language_model import LanguageModel
from viz_model.lessons import position_rope
from viz_model.plot import lm_position_figures

MAX_FACTOR = 64.0


def comparison_section(config: ModelConfig, marks: dict[str, float]) -> None:
    """The scalings picked and their factor, the chart of every rotating pair's wavelength under each, and what the
    lines are."""
    st.subheader("Beside the other scalings")
    own.lm_compared.init()
    own.lm_compare_factor.init(min(MAX_FACTOR, max(1.0, config.rope_factor)) if config.rope_scaling != "default"
                               else own.lm_compare_factor.default)  # the model's own factor where it has one
    left, right = st.columns([2, 1])
    left.multiselect("Scalings drawn", list(position_rope.ILLUSTRATED), key=own.lm_compared.key,
                     format_func=position_rope.SCALING_NAMES.get)
    right.number_input("Factor", 1.0, MAX_FACTOR, step=1.0, key=own.lm_compare_factor.key,
                       help="How far each drawn scaling stretches: a factor of 4 aims at 4× the trained length.")
    factor = float(own.lm_compare_factor.get())
    table = position_rope.scaling_comparison(config, own.lm_compared.get(), factor)
    fig = lm_position_figures.scalings_figure(table, marks)
    widgets.chart(fig, "rope-scalings", key="pe_lm_scalings_chart")
    widgets.exports(fig, "rope-scalings", "pe_lm_scalings")
    trained = position_rope.trained_length(config)
    if config.rope_scaling == "default":
        said = ("This model has no scaling: every coloured line is an illustration, what that scaling would do to "
                "its frequencies (it was not trained with any)")
    else:
        said = (f"Solid: {position_rope.own_label(config)}, as its config says; dashed: the other scalings as "
                "illustrations (the model was not trained with them)")
    st.caption(f"{said}. Each illustration applies its scaling at ×{factor:g} to this model's {config.rope_base:g} "
               f"base and rotating dimensions from its trained length of {trained}, the scaling's other settings at "
               f"transformers' defaults; dynamic NTK is drawn at {factor:g} × {trained} tokens, the length its factor "
               "aims at (its frequencies grow with the length a pass reaches). Linear stretches every pair, llama3 "
               "and YaRN keep the fast pairs and stretch the slow ones, dynamic NTK stretches every pair but the "
               "first, the slowest most.")


def scaling_switch(config: ModelConfig) -> bool:
    """In the length experiment's form, where the config names a RoPE scaling: whether to measure with it (the
    model as loaded) or without it (plain RoPE at its base, in a copy); True elsewhere."""
    if config.positional != "rope" or config.rope_scaling == "default":
        return True
    own.lm_own_scaling.init()
    named = position_rope.own_label(config).removeprefix("this model: ")
    st.checkbox(f"With this model's {named} scaling (its config's)", key=own.lm_own_scaling.key,
                help="Off: the same weights with plain RoPE at its base, to see what the scaling does past the "
                     "trained length.")
    return bool(own.lm_own_scaling.get())


def measured_model(model: LanguageModel, scaled: bool) -> LanguageModel:
    """The model the loss is measured on: as loaded, or a copy with its scaling off; remembered for the caption."""
    own.lm_measured_scaling.set(scaled)
    return model if scaled else position_rope.without_scaling(model)


def switch_caption(config: ModelConfig) -> None:
    """Which RoPE the drawn loss was measured with, where the config names a scaling."""
    if config.positional != "rope" or config.rope_scaling == "default":
        return
    named = position_rope.own_label(config).removeprefix("this model: ")
    if own.lm_measured_scaling.get():
        st.caption(f"Measured with the model's {named} scaling, as its config says.")
    else:
        st.caption(f"Measured with the {named} scaling switched off: plain RoPE at base {config.rope_base:g} on the "
                   "same weights (a copy; the loaded model is unchanged).")
