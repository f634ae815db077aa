"""What a step shows agrees with what it chose: the trace re-scores every step in full precision, so where the search
(int8 weights, a beam, a forced target) chose a token that this pass does not rank first, the step carries a note
saying why; with a full-precision greedy search no step needs one.

Run on the shipped default model, over 50 sentences of the kind a newcomer types.
"""

from __future__ import annotations

import itertools

import pytest
from streamlit.testing.v1 import AppTest
from support.app import APP, switch_to  # noqa: E402

import viz_model  # noqa: E402

SUBJECTS = ["My grandmother", "The old man", "A little girl", "Two dogs", "My brother", "The teacher", "We",
            "The woman in the red coat", "A group of children", "Our neighbours"]
ACTIONS = ["bakes bread every Sunday morning.", "is reading a book on the beach.", "plays football in the park.",
           "walks to the station in the rain.", "has lived in Berlin for ten years."]
SENTENCES = [f"{s} {a}" for s, a in itertools.islice(itertools.product(SUBJECTS, ACTIONS), 50)]
FLAGGED = "My grandmother bakes bread every Sunday morning."  # int8 greedy picks "Brot" at step 7, fp32 "jeden"


@pytest.fixture(scope="module")
def shipped() -> viz_model.TranslationModel:
    return viz_model.load(device="cpu")


def test_every_greedy_step_shows_its_choice_first_or_says_why(shipped):
    searches = {"int8": shipped.with_precision("int8"), "fp32": shipped.with_precision("fp32")}
    flagged = 0
    for text in SENTENCES:
        for precision, model in searches.items():
            trace = model.trace(text, beam=1)
            assert trace.settings["search"] == precision
            for t, step in enumerate(trace.steps):
                note = trace.step_note(t)
                if step.token_id == step.top_ids[0]:
                    assert note is None, (text, t)
                    continue
                assert precision == "int8", f"fp32 greedy chose a token its own pass ranks lower: {text} step {t}"
                assert note is not None and "int8" in note and step.token in note and step.top_tokens[0] in note
                flagged += 1
    assert flagged >= 1  # the int8 search does disagree somewhere, so the check above was exercised


def test_beam_and_forced_steps_name_their_reason(shipped):
    trace = shipped.trace(FLAGGED, target="Meine Großmutter isst Äpfel.")
    notes = [trace.step_note(t) for t in range(len(trace.steps))]
    assert any(n and n.startswith("the output was forced") for n in notes)
    beams = [shipped.trace(text, beam=4) for text in SENTENCES[:20]]
    beam_notes = [tr.step_note(t) for tr in beams for t in range(len(tr.steps))]
    assert all(n is None or n.startswith("beam search keeps") for n in beam_notes)


def test_decoding_page_flags_the_step_and_the_search_precision_travels_in_the_link():
    at = AppTest.from_file(str(APP), default_timeout=240)
    at.query_params.update({"beam": "1", "sentence": FLAGGED, "search": "int8"})
    at.run()
    switch_to(at, "decoding").run()
    assert not at.exception
    at.slider(key="w_dec_step").set_value(7).run()
    warnings = " ".join(w.value for w in at.warning).replace("\\", "")
    assert "Not the top candidate" in warnings and "int8" in warnings and "▁Brot" in warnings
    assert at.query_params["search"] == "int8"
    at.radio(key="w_search").set_value("fp32").run()
    assert not at.exception and at.query_params["search"] == "fp32"
    at.slider(key="w_dec_step").set_value(7).run()
    assert not any("Not the top candidate" in w.value for w in at.warning)
    assert "searched with fp32 weights" in " ".join(c.value for c in at.caption)


def test_a_bad_search_precision_in_the_link_is_reported():
    at = AppTest.from_file(str(APP), default_timeout=240)
    at.query_params.update({"sentence": "I love you.", "search": "int4"})
    at.run()
    assert not at.exception
    text = " ".join(w.value for w in at.warning).replace("\\", "")
    assert "search=int4" in text and "auto, int8, fp32" in text
