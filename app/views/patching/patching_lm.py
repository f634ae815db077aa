"""Head patching with a language model open: a clean / corrupted prompt pair (a shipped one or the user's), the grid
of how much of the clean answer's logit difference each head restores when patched, and one head's maps in both
runs."""

from __future__ import annotations

from functools import partial

import numpy as np
import streamlit as st

from app import sessions, state, widgets
from app.page_settings import PATCHING as own
from viz_model.analysis import head_patching, lm_head_roles
from viz_model.analysis.head_patching import HeadPatching
from viz_model.analysis.prompt_pairs import BY_KEY, PROMPT_PAIRS, fitting
from viz_model.plot import patching_figures

OWN = "own"  # the user's own pair
PAIR_LABELS = {**{pair.key: pair.label for pair in PROMPT_PAIRS}, OWN: "My own pair"}
UNEVEN = " (token counts differ for this model)"  # a shipped pair this tokenizer splits unevenly
NO_EVEN_PAIR = ("This model's tokenizer splits each shipped pair into two different token counts (patching swaps "
                "head outputs position by position): type a clean and a corrupted prompt of one token count.")


@st.cache_data(show_spinner=False, max_entries=8)
def compute_patching(ref: sessions.ModelRef, clean: str, corrupted: str, answer: str, wrong: str) -> HeadPatching:
    """`head_patching.restored_by_head` of the pair, the answer and wrong tokens ("": the runs' top tokens)."""
    model = sessions.load_model(ref)
    answer_id, wrong_id = head_patching.answer_tokens(model, clean, corrupted, answer or None, wrong or None)
    return head_patching.restored_by_head(model, clean, corrupted, answer_id, wrong_id)


@st.cache_data(show_spinner=False, max_entries=8)
def run_maps(ref: sessions.ModelRef, ids: tuple[int, ...]) -> list[np.ndarray]:
    """Per layer ``(heads, n, n)`` the model's maps over `ids`."""
    return lm_head_roles.sequence_maps(sessions.load_model(ref), list(ids))


def pick_pair() -> None:
    """A shipped pair picked: its prompts in the boxes, the tokens back to the runs' top ones."""
    pair = BY_KEY.get(own.pair.get())
    if pair is not None:
        own.clean.set(pair.clean)
        own.corrupted.set(pair.corrupted)
        own.answer.set("")
        own.wrong.set("")
        own.head.set(None)


def typed_prompt() -> None:
    """A prompt edited: the pair is the user's own, the tokens back to the runs' top ones."""
    own.pair.set(OWN)
    own.answer.set("")
    own.wrong.set("")
    own.head.set(None)


def pick_head(chart_key: str) -> None:
    """A click on the grid draws that head's maps below."""
    point = state.selected_point(st.session_state.get(chart_key))
    if point is not None and len(point) == 3:
        own.head.set((int(point[1]), int(point[2])))
        own.redraws.set(own.redraws.get() + 1)


def prompt_form(model) -> set[str]:
    """The pair picker (first: the first shipped pair this model's tokenizer gives as many tokens; the others marked
    where it does not), the two prompts and the answer and wrong tokens; returns the keys of the even pairs."""
    fits = {pair.key for pair in fitting(lambda text: len(model.encode(text)))}
    first = next((pair for pair in PROMPT_PAIRS if pair.key in fits), PROMPT_PAIRS[0])
    own.pair.init(first.key)
    own.clean.init(first.clean)
    own.corrupted.init(first.corrupted)
    for setting in (own.answer, own.wrong, own.head, own.redraws):
        setting.init()
    labels = {key: label + ("" if key in fits or key == OWN else UNEVEN) for key, label in PAIR_LABELS.items()}
    state.clamp_choice(own.pair, list(labels), first.key, "Prompt pair")
    state.bound(st.selectbox, "Prompt pair", own.pair, list(labels), format_func=labels.get, then=pick_pair)
    left, right = st.columns(2)
    with left:
        state.bound(st.text_input, "Clean prompt", own.clean, max_chars=2000, then=typed_prompt)
    with right:
        state.bound(st.text_input, "Corrupted prompt (as many tokens)", own.corrupted, max_chars=2000,
                    then=typed_prompt)
    left, right = st.columns(2)
    with left:
        state.bound(st.text_input, "Answer token (blank: the clean run's top token)", own.answer, max_chars=100)
    with right:
        state.bound(st.text_input, "Wrong token (blank: the corrupted run's top other token)", own.wrong,
                    max_chars=100)
    return fits


def page(session: sessions.Session) -> None:
    """The Head patching page for a language model."""
    st.title("Head patching")
    st.caption("Which heads carry the answer? Each head's output (before the output projection) is copied from the "
               "clean prompt's run into the corrupted prompt's run, one head at a time; the grid shows how much of "
               "the clean answer's logit difference over the wrong token that restores: 0 is the corrupted run's, "
               "1 the clean run's.")
    fits = prompt_form(session.model)
    if not fits and own.pair.get() != OWN:
        st.info(NO_EVEN_PAIR)
        return
    try:
        with st.spinner("Patching every head…"):
            found = compute_patching(session.ref.stored, own.clean.get(), own.corrupted.get(), own.answer.get(),
                                     own.wrong.get())
    except ValueError as err:
        widgets.input_problem(err, "The heads cannot be patched: ")
        return
    model = session.model
    answer, wrong = model.tokenizer.piece(found.answer), model.tokenizer.piece(found.wrong)
    a, b, c = st.columns(3)
    a.metric("Answer / wrong token", f"{answer} / {wrong}")
    b.metric("Clean logit difference", f"{found.clean_difference:.3f}")
    c.metric("Corrupted logit difference", f"{found.corrupted_difference:.3f}")
    layers, heads = found.restored.shape
    best = np.unravel_index(int(np.nanargmax(found.restored)), found.restored.shape)
    chosen = own.head.get() or (int(best[0]), int(best[1]))
    chosen = chosen if chosen[0] < layers and chosen[1] < heads else (int(best[0]), int(best[1]))
    fig = patching_figures.restored_figure(found.restored, "Share of the logit difference each head restores",
                                           chosen)
    chart_key = f"pat_grid_{own.redraws.get()}"
    widgets.chart(fig, "head-patching", key=chart_key, on_select=partial(pick_head, chart_key))
    st.caption(f"logit({answer}) - logit({wrong}): {found.corrupted_difference:.3f} in the corrupted run, "
               f"{found.clean_difference:.3f} in the clean one. Each cell: the corrupted run with that head's output "
               "taken from the clean run. Below 0: the head pushes the other way. Click a head to see its maps.")
    every = [(layer, head) for layer in range(layers) for head in range(heads)]
    options = sorted(every, key=lambda h: -found.restored[h])
    own.head.set(chosen)
    state.bound(st.selectbox, "Head", own.head, options,
                format_func=lambda h: f"layer {h[0] + 1} · head {h[1] + 1} (restores {found.restored[h]:.2f})")
    layer, head = own.head.get()
    clean_maps = run_maps(session.ref.stored, tuple(found.clean_ids))
    corrupted_maps = run_maps(session.ref.stored, tuple(found.corrupted_ids))
    widgets.chart(patching_figures.head_maps_figure(
        clean_maps[layer][head], corrupted_maps[layer][head], model.pieces(found.clean_ids),
        model.pieces(found.corrupted_ids), layer, head), "head-patching-maps", key="pat_maps")
