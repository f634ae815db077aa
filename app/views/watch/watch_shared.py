"""Learn: watch attention form while a tiny Transformer trains on a synthetic task, with and without positional
encoding side by side (`viz_model.lessons.watch_trainer`), or while induction heads form in a 2-layer attention-only
language model (`induction_watch`). Training runs on the server, bounded in time and size, one per session. Or a
real model's own checkpoints across its training, measured step by step (`series_watch`)."""

import dataclasses
import io

import numpy as np
import streamlit as st

from app import figure_files, registry, sessions, state, widgets
from app.page_settings import EXPERIMENTS, HEAD_CHOICES, LAYER_CHOICES, STEP_CHOICES, WIDTH_CHOICES
from app.page_settings import WATCH as own
from app.views.watch import induction_watch, series_watch
from viz_model.lessons.watch_trainer import (
    LIMITS,
    POSITIONAL,
    TASKS,
    WatchConfig,
    WatchError,
    expected_source,
    parse_sequence,
    probe_maps,
    train_watch,
)
from viz_model.plot import watch_figures

TASK_LABELS = {"copy": "copy (y = x)", "reverse": "reverse", "sort": "sort", "shift": "shift (rotate left by k)",
               "every_other": "every other symbol"}
PE_LABELS = {"sinusoidal": "sinusoidal (the paper's)", "learned": "learned", "rope": "RoPE (rotated q and k)",
             "alibi": "ALiBi (distance penalty)", "relative": "relative bias (T5)", "none": "none"}
WITHOUT = "without PE"
EXPERIMENT_LABELS = {"task": "A task (encoder-decoder)", "induction": "Induction heads (a language model)",
                     "series": "A model's own checkpoints (a series)"}

st.title("Watch attention form")
st.caption("Every other page shows a finished model. Here a tiny Transformer learns a task from scratch while you "
           "watch: its maps start uniform and sharpen into the pattern the task needs (a diagonal for copy, an "
           "anti-diagonal for reverse). Train it with and without positional encoding to see what positions buy.")

for setting in own.linked():  # the training form
    setting.init()
state.page_link(own)
st.radio("Experiment", EXPERIMENTS, key=own.experiment.key, horizontal=True, format_func=EXPERIMENT_LABELS.get)
if own.experiment.get() == "induction":
    induction_watch.induction_experiment()
    st.stop()
if own.experiment.get() == "series":
    series_watch.series_experiment()
    st.stop()

with st.form("watch_form"):
    left, middle, right = st.columns(3)
    task = left.selectbox("Task", TASKS, format_func=TASK_LABELS.get, key=own.task.key,
                          help="Sequences of random letters; the output is this function of the input.")
    lengths = left.slider("Sequence lengths", *LIMITS["length"], key=own.lengths.key)
    shift = left.number_input("k (shift task)", 1, LIMITS["length"][1] - 1, key=own.shift.key)
    layers = middle.select_slider("Layers", LAYER_CHOICES, key=own.layers.key)
    heads = middle.select_slider("Heads", HEAD_CHOICES, key=own.heads.key)
    d_model = middle.select_slider("d_model", WIDTH_CHOICES, key=own.d_model.key)
    positional = right.selectbox("Positional encoding", POSITIONAL, format_func=PE_LABELS.get, key=own.positional.key)
    compare = right.checkbox("Also train it without positional encoding (side by side)", key=own.compare.key)
    steps = middle.select_slider("Training steps", STEP_CHOICES, key=own.steps.key,
                                 help="The learning rate decays to zero over these steps.")
    seconds = right.slider("Time budget (seconds, for all runs together)", 5, 60, key=own.seconds.key)
    seed = right.number_input("Seed", 0, 1_000_000, key=own.seed.key, help="The same seed gives the same run.")
    submitted = st.form_submit_button("Train", icon=":material/play_arrow:", type="primary")


def configs() -> dict[str, WatchConfig]:
    """The runs the form asks for (a WatchError names a wrong setting)."""
    runs = [positional] + (["none"] if compare and positional != "none" else [])
    base = WatchConfig(task=task, shift=int(shift), min_length=lengths[0], max_length=lengths[1], layers=layers,
                       heads=heads, d_model=d_model, steps=steps, seconds=seconds / len(runs), seed=int(seed))
    return {(f"with {positional} PE" if pe != "none" else WITHOUT): dataclasses.replace(base, positional=pe)
            for pe in runs}


def train(plans: dict[str, WatchConfig]) -> None:
    """Run each plan in turn, drawing progress and curves after every snapshot; the results stay in the session."""
    own.runs.set({})
    own.running.set(True)
    stop = st.empty()
    stop.button("Stop", icon=":material/stop:", key="watch_stop", help="Stops training; what was learned so far stays.")
    bar, curves = st.progress(0.0, text="Training…"), st.empty()
    for number, (name, cfg) in enumerate(plans.items()):
        def progress(result, name=name, number=number, cfg=cfg) -> None:
            own.runs.get()[name] = result
            done = max(result.snapshots[-1].step / cfg.steps, result.seconds / cfg.seconds)
            bar.progress(min(1.0, (number + min(done, 1.0)) / len(plans)),
                         text=f"{name}: step {result.snapshots[-1].step}, held-out accuracy "
                              f"{100 * result.history[-1]['sequence_accuracy']:.0f}%")
            curves.plotly_chart(watch_figures.curves_figure(own.runs.get()), width="stretch")
        train_watch(cfg, on_progress=progress)
    for live in (stop, bar, curves):  # the finished run is drawn below, with the scrubber
        live.empty()
    own.running.set(False)


if own.running.get():  # the last run was cut short (Stop, or the page was left): keep what it learned
    own.running.set(False)
    st.info("Training was stopped; the maps below are from the last snapshot before it stopped.")

if submitted:
    try:
        plans = configs()
    except WatchError as err:
        st.error(f"Cannot train: {err}")
        plans = {}
    if plans:
        with sessions.training_slot() as slot:
            if slot:
                train(plans)
            else:
                st.warning(sessions.TRAINING_BUSY)

runs = own.runs.get() or {}
if not runs:
    st.info(f"Pick a task and press Train: training stops after the time budget ({own.seconds.get()} s, or "
            "sooner when the steps are done), and drawing the maps takes a few seconds more.")
    st.stop()

first = next(iter(runs.values()))
cfg = first.config
st.plotly_chart(watch_figures.curves_figure(runs), width="stretch", key="watch_curves")
st.caption(" · ".join(f"{name}: {100 * r.final_accuracy:.0f}% of held-out sequences exactly right after "
                      f"{r.history[-1]['step']} steps ({r.seconds:.1f} s)" for name, r in runs.items()))

count = max(len(r.snapshots) for r in runs.values())
snapshot_steps = [s.step for s in max(runs.values(), key=lambda r: len(r.snapshots)).snapshots]
left, middle, right = st.columns(3)
index = left.select_slider("Snapshot (training step)", list(range(count)), count - 1, key=own.snapshot.key,
                           format_func=lambda i: str(snapshot_steps[i]))
kind = middle.selectbox("Attention", ["cross", "decoder", "encoder"], key=own.kind.key,
                        format_func={"cross": "encoder-decoder (cross)", "decoder": "decoder self (masked)",
                                     "encoder": "encoder self"}.get)
layer = right.selectbox("Layer", list(range(cfg.layers)), cfg.layers - 1, key=own.layer.key,
                        format_func=lambda i: str(i + 1))
head_choice = right.selectbox("Head", ["mean", *range(cfg.heads)], key=own.head.key,
                              format_func=lambda h: "mean of heads" if h == "mean" else f"head {h + 1}")
head = None if head_choice == "mean" else int(head_choice)
fig = watch_figures.snapshot_figure(runs, index, kind, layer, head)
widgets.chart(fig, "watch-maps", key="watch_maps")
outputs = " · ".join(
    f"{name}: {''.join(watch_figures.symbol(t) for t in r.snapshots[min(index, len(r.snapshots) - 1)].output)}"
    for name, r in runs.items())
st.caption(f"Probe {''.join(watch_figures.symbol(t) for t in first.probe)} → {outputs}")
with st.expander("Play the snapshots as an animation", icon=":material/animation:"):
    shown = st.selectbox("Run", list(runs), key=own.animated.key)
    widgets.chart(watch_figures.animation_figure(runs[shown], kind, layer, head), "watch-animation",
                  key="watch_animation")
if WITHOUT in runs and len(runs) > 1:
    expected = expected_source(cfg.task, len(first.probe), cfg.shift)
    st.markdown("**Why the model without positional encoding fails.** Attention is a weighted sum over a *set*: "
                "without a position vector added to each embedding, two copies of a letter, or the first and the "
                "last token, look the same to every query, so its cross-attention cannot pick out "
                + ("the position the task copies from" if expected is not None else "where each letter must go")
                + " (its maps stay flat or follow the letters, not the positions). The Positional encoding page "
                  "shows what the sinusoids give each position instead.")
    registry.page_link("positional", "Positional encoding", ":material/timeline:")

st.subheader("Try your own sequence")
text = st.text_input(f"Letters A–{chr(ord('A') + cfg.symbols - 1)}, {cfg.min_length} to {cfg.max_length} of them",
                     "".join(watch_figures.symbol(t) for t in first.probe), max_chars=4 * LIMITS["length"][1],
                     key=own.own_sequence.key)
try:
    sequence = parse_sequence(text, cfg)
except WatchError as err:
    st.error(str(err))
else:
    mine = {}
    for name, result in runs.items():
        shot = probe_maps(result.model, result.config, sequence, result.snapshots[-1].step)
        mine[name] = dataclasses.replace(result, probe=sequence, snapshots=[shot])
        st.write(f"{name}: **{''.join(watch_figures.symbol(t) for t in shot.output)}**")
    widgets.chart(watch_figures.snapshot_figure(mine, 0, kind, layer, head), "watch-own", key="watch_own_maps")

st.subheader("Export the snapshots")
for name, result in runs.items():
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **result.to_npz())
    cols = st.columns(2)
    cols[0].download_button(f"{name}: maps of every snapshot (NPZ)", buffer.getvalue(),
                            file_name=f"watch-{cfg.task}-{name.replace(' ', '-')}.npz", key=f"watch_npz_{name}",
                            on_click="ignore", icon=":material/download:")
    cols[1].download_button(f"{name}: animation (HTML)", lambda r=result: figure_files.figure_html(
        watch_figures.animation_figure(r, kind, layer,
                                       head)), file_name=f"watch-{cfg.task}-{name.replace(' ', '-')}.html",
        mime="text/html", key=f"watch_html_{name}", on_click="ignore", icon=":material/animation:")
