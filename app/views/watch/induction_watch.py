"""Watch attention form's second experiment: induction heads forming in a 2-layer attention-only language model
(`viz_model.lessons.induction_run`), trained on the server within the page's time budget, one run per slot."""

from __future__ import annotations

import dataclasses
import time

import streamlit as st

from app import sessions, widgets
from app.page_settings import INDUCTION_STEPS
from app.page_settings import WATCH as own
from viz_model.lessons.induction_run import InductionConfig, InductionResult, summary, train_induction
from viz_model.lessons.watch_trainer import WatchError
from viz_model.plot import induction_figures

REDRAW_SECONDS = 1.0  # the live curves are redrawn at most this often (drawing costs training time)
DEFAULTS = InductionConfig()


def explanation() -> None:
    st.markdown(
        "An **induction head** completes patterns: having seen `… A B … A`, it attends from the second `A` to the "
        "token after the first one and predicts `B` (Olsson et al., *In-context Learning and Induction Heads*, "
        "2022). It takes two layers: a head in layer 1 writes each token's predecessor into it, and a head in "
        f"layer 2 matches the current token against those. Here a model of {DEFAULTS.layers} attention-only layers "
        f"({DEFAULTS.heads} heads, width {DEFAULTS.d_model}, no feed-forward network) trains on sequences of "
        f"{DEFAULTS.min_length} to {DEFAULTS.length} random symbols (from {DEFAULTS.symbols}) repeated "
        f"{DEFAULTS.copies} times. The first copy cannot be predicted; the repeats can, once the circuit forms.")
    st.caption("The length of the random part varies from sequence to sequence: with one length a head can attend "
               "a fixed distance back by position alone, and it then scores as an induction head while reading no "
               "token (a model trained so fails on every other length).")


def train(cfg: InductionConfig) -> None:
    """One run, drawing progress and (at most every `REDRAW_SECONDS`) the curves; the result stays in the session."""
    own.induction.set(None)
    own.ind_running.set(True)
    stop = st.empty()
    stop.button("Stop", icon=":material/stop:", key="ind_stop", help="Stops training; what was learned so far stays.")
    bar, curves = st.progress(0.0, text="Training…"), st.empty()
    drawn = [0.0]

    def progress(result: InductionResult) -> None:
        own.induction.set(result)
        shot = result.snapshots[-1]
        done = max(shot.step / cfg.steps, result.seconds / cfg.seconds)
        bar.progress(min(1.0, done), text=f"step {shot.step}: loss on the repeats {shot.loss_repeat:.2f}, strongest "
                                          f"induction score {shot.induction.max():.2f}")
        if time.perf_counter() - drawn[0] > REDRAW_SECONDS:
            curves.plotly_chart(induction_figures.training_figure(result), width="stretch")
            drawn[0] = time.perf_counter()

    train_induction(cfg, on_progress=progress)
    for live in (stop, bar, curves):
        live.empty()
    own.ind_running.set(False)


def induction_experiment() -> None:
    """The form, the run and what it shows."""
    explanation()
    with st.form("induction_form"):
        left, middle, right = st.columns(3)
        steps = left.select_slider("Training steps", INDUCTION_STEPS, key=own.ind_steps.key)
        seconds = middle.slider("Time budget (seconds)", 5, 120, key=own.ind_seconds.key)
        seed = right.number_input("Seed", 0, 1_000_000, key=own.ind_seed.key, help="The same seed gives the same run.")
        submitted = st.form_submit_button("Train", icon=":material/play_arrow:", type="primary")
    if own.ind_running.get():
        own.ind_running.set(False)
        st.info("Training was stopped; what follows is from the last measurement before it stopped.")
    if submitted:
        try:
            cfg = dataclasses.replace(DEFAULTS, steps=int(steps), seconds=float(seconds), seed=int(seed))
        except WatchError as err:
            st.error(f"Cannot train: {err}")
            return
        with sessions.training_slot() as slot:
            if slot:
                train(cfg)
            else:
                st.warning(sessions.TRAINING_BUSY)
    result = own.induction.get()
    if result is None:
        st.info(f"Press Train: training stops after the steps or the time budget ({own.ind_seconds.get()} s), "
                "whichever comes first.")
        return
    widgets.chart(induction_figures.training_figure(result), "induction-training", key="ind_curves")
    st.markdown(summary(result))
    st.caption(f"{result.snapshots[-1].step} steps in {result.seconds:.1f} s (stopped by "
               f"{ {'steps': 'the step count', 'seconds': 'the time budget', 'stopped': 'Stop'}[result.stopped] }). "
               "Scores are measured on 8 fixed probe sequences of distinct symbols; the loss on them too.")
    best_layer, best_head = result.best_head()
    cfg = result.config
    layer_default = own.ind_layer.get() if 0 <= own.ind_layer.get() < cfg.layers else best_layer
    head_default = own.ind_head.get() if 0 <= own.ind_head.get() < cfg.heads else best_head
    left, right = st.columns(2)
    layer = left.selectbox("Layer", list(range(cfg.layers)), layer_default, format_func=lambda i: str(i + 1),
                           key="ind_layer_box")
    head = right.selectbox("Head", list(range(cfg.heads)), head_default, format_func=lambda i: str(i + 1),
                           key="ind_head_box")
    own.ind_layer.set(layer)
    own.ind_head.set(head)
    widgets.chart(induction_figures.maps_figure(result, layer, head), "induction-maps", key="ind_maps")
    st.caption("Before training every head spreads its attention evenly. After it, an induction head's map shows "
               "stripes one step right of the diagonals where the sequence repeats (each token looks at the token "
               "after its earlier copy); a previous-token head in layer 1 shows the line just below the diagonal.")
