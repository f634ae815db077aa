"""Learn: watch attention form (issue 25), in AppTest: a short training, its snapshots and scrubber, the side-by-side
run without positional encoding, a learner's own sequence, the exports, Stop, and the server-wide training slots
(two sessions training at once: tests/library/test_watch.py)."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
from support.app import arr, charts, messages, ok, open_page, start, switch_to

from app import sessions


def page(tiny):
    at = start(sentence="A man runs.")
    switch_to(at, "watch").run()
    return ok(at)


def train(at, **settings):
    """`at` after a click on Train with these settings: the least time budget and steps (ending by its step count
    on an idle machine, not by the budget; what these tests read does not need a longer run)."""
    for key, value in {"watch_seconds": 5, "watch_steps": 200, **settings}.items():
        widget = next(w for w in [*at.slider, *at.select_slider, *at.selectbox, *at.number_input, *at.checkbox]
                      if w.key == key)
        widget.set_value(value)
    next(b for b in at.button if b.label == "Train").click()
    return ok(at.run(timeout=240))


def test_the_invitation_states_the_time_budget_set(tiny):
    """Before training, the page says how long it takes from the budget set, not a fixed "half a minute"."""
    assert "time budget (30 s" in messages(page(tiny))
    at = open_page("watch", straight=True, timeout=180, beam="1", sentence="A man runs.", seconds="12")  # a link
    assert "time budget (12 s" in messages(at)  # straight onto the page


@pytest.mark.slow
def test_a_short_training_draws_curves_snapshots_and_both_runs(tiny):
    at = train(page(tiny), watch_task="reverse")
    runs = at.session_state["watch_runs"]
    assert list(runs) == ["with sinusoidal PE", "without PE"]
    assert not [b for b in at.button if b.key == "watch_stop"]  # shown while the run goes on, gone after it
    subplot_titles = [a.get("text", "") for c in charts(at) for a in c["layout"].get("annotations", [])]
    assert sum(t.startswith("training loss") for t in subplot_titles) == 1  # the live curves made way
    for result in runs.values():
        assert result.config.seconds == pytest.approx(2.5) and len(result.snapshots) >= 2
    titles = [c["layout"].get("title", {}).get("text", "") for c in charts(at)]
    assert any(t.startswith("cross attention, layer 1") for t in titles)
    maps = next(c for c in charts(at) if c["layout"].get("title", {}).get("text", "").startswith("cross attention"))
    assert len(maps["data"]) == 2  # the two runs side by side
    last = runs["with sinusoidal PE"].snapshots[-1].cross[0].mean(axis=0)
    np.testing.assert_allclose(arr(maps["data"][0]["z"]), last, atol=1e-6)
    scrubber = at.select_slider(key="watch_snapshot")
    scrubber.set_value(0).run()
    ok(at)
    first = next(c for c in charts(at) if c["layout"].get("title", {}).get("text", "").startswith("cross attention"))
    assert "step 0" in first["layout"]["annotations"][0]["text"]
    assert "Why the model without positional encoding fails" in "\n".join(m.value for m in at.markdown)
    animation = next(c for c in charts(at) if c["layout"].get("title", {}).get("text", "").endswith("over training"))
    assert len(animation["frames"]) == len(runs["with sinusoidal PE"].snapshots)


@pytest.mark.slow
def test_own_sequence_and_its_errors(tiny):
    at = train(page(tiny), watch_compare=False)
    own = at.text_input(key="watch_own")
    own.set_value("B A D C").run()
    ok(at)
    assert len(at.session_state["watch_runs"]) == 1
    own.set_value("B A Z!").run()
    assert "not in this model's alphabet" in messages(at)
    own.set_value("AB" * 20).run()
    assert "symbols; the model was trained on 4 to 8" in messages(at)


@pytest.mark.slow
def test_the_npz_export_holds_every_snapshot(tiny):
    at = train(page(tiny), watch_compare=False)
    result = at.session_state["watch_runs"]["with sinusoidal PE"]
    arrays = result.to_npz()
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    buffer.seek(0)
    loaded = np.load(buffer)
    assert loaded["steps"].tolist() == [s.step for s in result.snapshots]
    assert loaded["cross_layer1"].shape[0] == len(result.snapshots)
    labels = [str(b.proto.label) for b in at.get("download_button")]
    assert any("NPZ" in label for label in labels) and any("animation (HTML)" in label for label in labels)


@pytest.mark.slow
def test_a_stopped_run_keeps_what_it_learned(tiny):
    at = train(page(tiny), watch_compare=False)
    at.session_state["watch_running"] = True  # as a Stop click leaves it: the run was cut short
    ok(at.run())
    assert "Training was stopped" in messages(at) and at.session_state["watch_runs"]


def test_training_slots_are_shared_by_every_session(tiny):
    with contextlib.ExitStack() as others:  # every slot taken by other sessions
        assert all(others.enter_context(sessions.training_slot()) for _ in range(sessions.TRAINING_SLOTS))
        at = train(page(tiny), watch_compare=False)
        assert "already training" in messages(at)
        assert not [b for b in at.button if b.key == "watch_stop"]  # no training started
    with sessions.training_slot() as free:  # released again
        assert free
