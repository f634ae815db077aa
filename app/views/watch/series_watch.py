"""Watch attention form's third experiment: a real language model's own checkpoints across its training (a series
folder, `viz_model.modeldir.series`, or the hub id's series the sidebar opened), each measured on repeated random
tokens: the phase change where induction heads form, the previous-token heads they need, the sink, and the loss on the
repeats."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import streamlit as st

from app import sessions, widgets
from app.page_settings import WATCH as own
from viz_model.analysis.checkpoint_scores import STEP_SCORES, CheckpointScores
from viz_model.analysis.lm_head_roles import REPEATED_COPIES, REPEATED_LENGTH, REPEATED_SAMPLES
from viz_model.modeldir.checkpoint import CheckpointError
from viz_model.modeldir.series import Series
from viz_model.plot import series_figures

FORMED = 0.3  # an induction score above this marks a head as formed (the shipped model's card uses the same bar)


def explanation() -> None:
    st.markdown(
        "Here the model is not trained on the server: it is a real language model saved at several steps of its "
        "own training (a **checkpoint series**). Each checkpoint reads the same "
        f"{REPEATED_SAMPLES} sequences of {REPEATED_LENGTH} random tokens repeated {REPEATED_COPIES} times, as the "
        "Head roles page does, and each head gets its **induction** score (attention from a token to the one after "
        "its earlier copy), its **previous-token** score and its **first-token share** (the attention sink). "
        "The loss on the repeats falls when induction heads form: the *phase change* of Olsson et al. (2022).")
    st.caption("A series is a folder of checkpoint folders named for their steps (step-000100/, or checkpoint-100/ "
               "as transformers' Trainer saves them) in a folder the explorer reads (`viz-model app --models DIR`). "
               "`viz-model train` writes one with `series_every_steps` set.")


def summary(found: dict[int, CheckpointScores]) -> str:
    """The phase change in words: the first step where some head's induction score passes `FORMED`, and the loss on
    the repeats before and at the last step."""
    steps = list(found)
    best = [found[s].best("induction") for s in steps]
    formed = next((s for s, b in zip(steps, best) if b > FORMED), None)
    first, last = found[steps[0]], found[steps[-1]]
    loss = (f"The loss on the repeats went from {first.loss_repeats:.2f} to {last.loss_repeats:.2f} nats per token "
            f"(the first copy's: {first.loss_first:.2f} to {last.loss_first:.2f}).")
    if formed is None:
        return (f"No head's induction score passes {FORMED} in these {len(steps)} checkpoints (the best: "
                f"{max(best):.2f}, at step {steps[int(np.argmax(best))]}). {loss}")
    score = best[steps.index(formed)]
    return (f"An induction head has formed by step {formed}: the best induction score is {score:.2f} there, from "
            f"{best[0]:.2f} at step {steps[0]}. {loss}")


def measured(name: str, folders: dict[str, Path], hub: Series | None) -> dict[int, CheckpointScores]:
    """The scores of every checkpoint of the series `name`: a series folder of `folders`, else the hub series `hub`
    the sidebar opened."""
    if name in folders:
        folder = folders[name] / name
        return sessions.compute_series_scores(str(folder), sessions.series_stamp(folder))
    return sessions.compute_hub_series_scores(hub.source, hub.steps, hub.places)


def series_experiment() -> None:
    """The series picker, the scores of every checkpoint and the figures."""
    explanation()
    folders, hub = sessions.series_folders(), sessions.open_hub_series()
    names = list(folders) + ([hub.source] if hub is not None else [])  # a hub id has a "/": never a folder's name
    if not names:
        st.info(f"No checkpoint series in {sessions.roots_label()}. Add a folder that holds one "
                "(`viz-model app --models DIR`, where DIR holds the series folder).")
        return
    if own.series.get() not in names:
        own.series.set(names[0])
    name = st.selectbox("Series", names, index=names.index(own.series.get()), key="series_pick")
    own.series.set(name)
    try:
        with st.spinner("Measuring every checkpoint…"):
            found = measured(name, folders, hub)
    except (CheckpointError, ValueError, OSError) as err:
        st.error(f"This series cannot be shown: {err}")
        return
    widgets.chart(series_figures.series_figure(found), "series-scores", key="series_lines")
    st.markdown(summary(found))
    labels = {"induction": "induction", "previous_token": "previous token", "first_token": "first-token share"}
    score = st.radio("Every head", STEP_SCORES, index=STEP_SCORES.index(own.series_score.get()), horizontal=True,
                     format_func=labels.get, key="series_score_pick")
    own.series_score.set(score)
    widgets.chart(series_figures.heads_figure(found, score), "series-heads", key="series_heads")
    st.caption("Each row is a checkpoint, each column a head (L1 H1: layer 1, head 1), on one fixed scale from 0 to "
               "1. Induction heads light up in a later layer once previous-token heads exist in an earlier one.")
