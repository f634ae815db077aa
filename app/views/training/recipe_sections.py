"""The training recipe's sections every kind of model shows: the learning-rate schedule and label smoothing, the
model's curves and card, and why self-attention (measured live)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from app import state, widgets
from app.page_settings import TRAINING as own
from viz_model.lessons import layer_memory, lesson_inputs, training_recipe
from viz_model.modeldir.checkpoint import TRAINING_LOG
from viz_model.modeldir.training_facts import TRAINING_FACTS, TrainingFacts
from viz_model.plot import training_figures
from viz_model.trace import AttentionTrace


def read_log(directory: Path | None) -> tuple[list[dict], str | None]:
    """The training log's events and, where the log fails the model-file checks, why it is not read (drawn as no
    log)."""
    try:
        return (training_recipe.training_events(directory) if directory is not None else []), None
    except lesson_inputs.InputError as err:
        return [], str(err)


def logged_run(model, no_log_line: Callable[[], str], caption: str, facts: TrainingFacts | None, imported: bool,
               examples: str, scored: str = "target token") -> list[dict]:
    """The page's title and a language model's or an encoder's run from its training log (`caption` says how it
    trained): the schedule and smoothing, the curves with perplexity (loss per `scored`) and the card; where it has
    no log, one line (`no_log_line`'s) and the page stops (a log that fails the model-file checks is said first,
    then read as none)."""
    events, log_problem = read_log(model.directory)
    st.title("The training recipe")
    if log_problem:
        st.warning(f"The training log is not read: {log_problem}")
    if not events:
        st.info(no_log_line())
        st.stop()
    st.caption(caption)
    schedule_and_smoothing(model.config, facts, events)
    curves_and_card(model, events, facts, imported, perplexity=True, examples=examples, scored=scored)
    return events


def shapes_section(subject: str, read: Callable[[], AttentionTrace | None], summary: Callable[[AttentionTrace], str],
                   stages: Callable[[AttentionTrace], list[dict[str, str]]]) -> None:
    """The stack's stages with their tensor shapes for the trace `read` gives (of the user's `subject`: "prompt",
    "text"), under a line (`summary`); the heading alone where there is none (`read` says why)."""
    st.subheader(f"The architecture, with the shapes for your {subject}")
    trace = read()
    if trace is not None:
        st.caption(summary(trace))
        st.dataframe(stages(trace), hide_index=True, width="stretch")


def schedule_and_smoothing(config, facts: TrainingFacts | None, events: list[dict]) -> None:
    """The learning-rate schedule (with the logged rates) and label smoothing, set from the model's recipe."""
    # --- learning rate -----------------------------------------------------------------------------------------------
    st.subheader("Learning-rate schedule")
    st.latex(r"lrate = d_{model}^{-0.5}\cdot\min\left(step^{-0.5},\; step\cdot warmup^{-1.5}\right)")
    st.caption("The curve is `viz_model.config.recipe.learning_rate`, the function the trainer calls every step. "
               "With a peak "
               "learning rate set, the same shape is rescaled so that its top (at step = warm-up) is that peak. With "
               "cooldown epochs set, the trainer multiplies it by `cooldown_factor`: a linear decay to zero over the "
               "run's last epochs, where the inverse-square-root tail alone would still be far from zero.")
    own.init_from(config, facts)
    a, b, c, d = st.columns(4)
    with a:
        state.bound(st.number_input, "d_model", own.d_model, min_value=1, max_value=16_384, step=64,
                     help="Only the paper formula (no peak set) depends on it.")
    with b:
        state.bound(st.number_input, "Warm-up steps", own.warmup, min_value=1, max_value=1_000_000, step=100)
    with c:
        state.bound(st.radio, "Scale", own.mode, ["scale", "peak"], horizontal=True,
                     format_func={"scale": "paper formula", "peak": "peak lr"}.get)
        if own.mode.get() == "peak":
            state.bound(st.number_input, "Peak learning rate", own.peak, min_value=1e-6, max_value=1.0, step=1e-4,
                         format="%.6f")
        else:
            state.bound(st.number_input, "lr scale (× the formula)", own.scale, min_value=0.0, max_value=1000.0,
                        step=0.1)
    with d:
        state.bound(st.number_input, "Steps to draw", own.steps, min_value=10, max_value=10_000_000, step=1000,
                    disabled=own.cooldown.get() > 0,
                    help="With a cooldown the curve ends with the run: epochs × steps.")
    a, b, c, _ = st.columns(4)
    with a:
        state.bound(st.number_input, "Cooldown epochs", own.cooldown, min_value=0, max_value=100_000, step=1,
                     help="`cooldown_epochs`: the learning rate decays linearly to zero over the run's last epochs "
                          "(0: none, the paper's schedule).")
    with b:
        state.bound(st.number_input, "Epochs", own.epochs, min_value=1, max_value=100_000, step=1,
                     disabled=own.cooldown.get() == 0, help="The run's length; only a cooldown depends on it.")
    with c:
        state.bound(st.number_input, "Steps per epoch", own.epoch_steps, min_value=1, max_value=10_000_000, step=100,
                    disabled=own.cooldown.get() == 0,
                    help="Optimizer steps in one epoch; only a cooldown depends on it.")
    logged = pd.DataFrame([{"step": e["step"], "lr": e["lr"]} for e in events
                           if e.get("event") == "train" and isinstance(e.get("step"), int) and "lr" in e])
    try:
        cooldown = int(own.cooldown.get())
        cfg = training_recipe.schedule_config(own.d_model.get(), own.warmup.get(),
                                              lr_scale=own.scale.get() if own.mode.get() == "scale" else 1.0,
                                              lr_peak=own.peak.get() if own.mode.get() == "peak" else 0.0,
                                              epochs=own.epochs.get() if cooldown else 1, cooldown_epochs=cooldown)
        epoch_steps = int(own.epoch_steps.get())
        cooldown_start = (cfg.epochs - cooldown) * epoch_steps if cooldown else None
        last = int(logged["step"].max()) if len(logged) else 0
        total = cfg.epochs * epoch_steps if cooldown else max(int(own.steps.get()), last)
        marks = [cfg.warmup_steps] + ([cooldown_start + 1] if cooldown else [])
        steps = training_recipe.schedule_steps(total, marks=marks)
        lr = training_recipe.schedule(cfg, steps, epoch_steps)
    except lesson_inputs.InputError as err:
        widgets.input_problem(err)
    else:
        label = ((f"peak {cfg.lr_peak:g}, warm-up {cfg.warmup_steps}" if cfg.lr_peak else
                  f"d_model {cfg.model.d_model}, warm-up {cfg.warmup_steps}, × {cfg.lr_scale:g}")
                 + (f", cooldown {cooldown} of {cfg.epochs} epochs" if cooldown else ""))
        fig = training_figures.lr_figure(steps, lr, label, logged if len(logged) else None, cfg.warmup_steps,
                                         cooldown_start)
        widgets.chart(fig, "learning-rate", key="tr_lr_chart")
        widgets.exports(fig, "learning-rate", "tr_lr")
        top = int(np.argmax(lr))
        st.caption(f"Peak {lr[top]:.3e} at step {int(steps[top])}."
                   + (f" The cooldown starts after step {cooldown_start:,} and decays linearly to zero at the end of "
                      f"the run's last step, {total:,}." if cooldown else ""))
        if len(logged):
            expected = training_recipe.schedule(cfg, logged["step"].to_numpy(), epoch_steps)
            gap = float(np.abs(expected - logged["lr"].to_numpy()).max())
            st.metric(f"Largest gap between this curve and the {len(logged)} learning rates the model logged",
                      f"{gap:.1e}",
                      help="0 when the settings above are the ones the model was trained with.")
            if facts:
                st.caption(f"This model's {TRAINING_FACTS}: {training_recipe.recipe_summary(facts)}. The red dots are "
                           "the learning rates its training log recorded.")
        else:
            st.info(f"This model directory has no {TRAINING_LOG}, so its actual schedule cannot be drawn.")

    # --- label smoothing ---------------------------------------------------------------------------------------------
    st.subheader("Label smoothing")
    st.caption("Instead of all probability on the correct token, the training target keeps 1 − ε on it and spreads ε "
               "over the whole vocabulary. The model becomes less sure (perplexity gets worse) but BLEU improves. The "
               "distribution below is read off the trainer's own loss (its gradient at uniform logits).")
    a, b, c = st.columns(3)
    with a:
        state.bound(st.slider, "ε", own.epsilon, 0.0, 0.99, step=0.01)
    with b:
        state.bound(st.number_input, "Vocabulary size V", own.vocab, min_value=2, max_value=1_000_000, step=1,
                     help=f"The loaded model's vocabulary has {config.vocab_size:,} pieces.")
    with c:
        state.bound(st.number_input, "Correct token id", own.target, min_value=1, max_value=999_999, step=1,
                     help="Token 0 is <pad>, which the loss skips.")
    try:
        target = training_recipe.smoothed_target(own.epsilon.get(), own.vocab.get(), own.target.get())
    except lesson_inputs.InputError as err:
        widgets.input_problem(err)
    else:
        fig = training_figures.smoothing_figure(target, int(own.target.get()))
        widgets.chart(fig, "label-smoothing", key="tr_ls_chart")
        widgets.exports(fig, "label-smoothing", "tr_ls")
        st.caption(f"q(correct) = 1 − ε + ε/V = {target[int(own.target.get())]:.6f}; every other token ε/V = "
                   f"{float(own.epsilon.get()) / int(own.vocab.get()):.3e}; the sum is {target.sum():.6f}.")


def curves_and_card(model, events: list[dict], facts: TrainingFacts | None, imported: bool, perplexity: bool,
                    examples: str, scored: str = "target token") -> None:
    """How the model trained (its curves: loss per `scored` with `perplexity` or BLEU; `examples`: what it
    trained on) and its card."""
    # --- training curves and the card --------------------------------------------------------------------------------
    st.subheader("How this model trained")
    if imported and not events:
        st.info("Its source documents how it trained: see the model card below.")
    elif events:
        fig = training_figures.training_curves_figure(events, perplexity=perplexity, scored=scored)
        widgets.chart(fig, "training-curves", key="tr_curves_chart")
        widgets.exports(fig, "training-curves", "tr_curves")
        start = next((e for e in events if e.get("event") == "start"), {})
        if facts and facts.precision:
            st.caption("Precision: " + facts.precision_summary() + f" ({TRAINING_FACTS}).")
        if isinstance(start.get("params"), int):
            st.caption(f"{start['params']:,} parameters · {start.get('train_pairs', '?')} training "
                       f"{examples} · "
                       f"device {start.get('device', '?')}, {start.get('threads', '?')} threads")
    else:
        st.info(f"This model directory has no training log ({TRAINING_LOG}), so there are no curves to draw.")
    with st.expander("Model card", expanded=False):
        if model.card:
            st.markdown(model.card)
        else:
            st.info("This model directory has no MODEL_CARD.md.")


def why_self_attention() -> None:
    """Paper Table 1, and one layer of each kind timed on this machine."""
    # --- why self-attention ------------------------------------------------------------------------------------------
    st.subheader("Why self-attention")
    st.caption("Per layer, for n positions of width d (paper Table 1): self-attention connects every pair of positions "
               "in one step, at a cost quadratic in n; a recurrent layer needs n sequential steps.")
    st.dataframe(layer_memory.COMPLEXITY, hide_index=True, width="stretch")
    a, b, c, d = st.columns(4)
    with a:
        state.bound(st.multiselect, "Sequence lengths n", own.lengths, [8, 16, 32, 64, 128, 256, 512, 1024, 2048])
    with b:
        state.bound(st.number_input, "Width d", own.width, min_value=2, max_value=2048, step=32)
    with c:
        state.bound(st.number_input, "Heads", own.heads, min_value=1, max_value=256, step=1)
    with d:
        state.bound(st.number_input, "Kernel width k", own.kernel, min_value=1, max_value=31, step=2)
    if st.button("Measure on this machine", icon=":material/speed:", key="tr_measure"):
        bar = st.progress(0.0, text="Measuring…")
        try:
            own.measured.set(layer_memory.measure_layers(own.lengths.get(), own.width.get(), own.heads.get(),
                                                        own.kernel.get(),
                                                        progress=lambda f: bar.progress(f, text="Measuring…")))
        except lesson_inputs.InputError as err:
            widgets.input_problem(err)
        finally:
            bar.empty()
    measured = own.measured.get()
    if measured is not None:
        fig = training_figures.complexity_figure(measured)
        widgets.chart(fig, "why-self-attention", key="tr_complexity_chart")
        widgets.exports(fig, "why-self-attention", "tr_complexity", csv=lambda: measured)
        st.caption("Median of 5 forward passes, after a warm-up of every layer at every length, on the CPU of the "
                   "server (which may be busy), batch 1. Peak memory counts "
                   "the tensors the layer creates. The explicit path materialises the n × n weights of every head "
                   "(memory ∝ n²); the fused kernel computes the same attention without storing them.")
    else:
        st.caption("Press “Measure on this machine” to time one layer of each kind (a few seconds).")
