"""AppTest tests of the live experiments on the shipped language model (CPU, fp32): sink eviction on the Attention
sinks page and RoPE's scalings past the trained length on the Positional page, each table the library's numbers,
and the one-line errors of a text too short for the window."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from support.app import messages, ok, open_page, titles

import viz_model
from viz_model.analysis.sink_eviction import KEPT, sink_eviction
from viz_model.lessons import position_length
from viz_model.lessons.position_scaling import AS_LOADED, losses_by_scaling
from viz_model.modeldir.shipped import SHIPPED_LANGUAGE_MODEL


@pytest.fixture(scope="module")
def shipped():
    return viz_model.load(SHIPPED_LANGUAGE_MODEL, device="cpu")


@pytest.fixture
def shipped_app(monkeypatch):
    monkeypatch.delenv("VIZ_MODEL_ASSETS", raising=False)  # the shipped models


def evict(at: AppTest, tokens: int, window: int, text: str = "") -> AppTest:
    at.text_area(key="sk_evict_text").set_value(text)
    at.number_input(key="sk_evict_tokens").set_value(tokens)
    at.number_input(key="sk_evict_window").set_value(window)
    next(b for b in at.button if b.label == "Run").click()
    return ok(at.run())


def test_sink_eviction_runs_on_the_shipped_model_as_the_library_does(shipped_app, shipped):
    at = open_page("sinks", straight=True, beam="1", model=SHIPPED_LANGUAGE_MODEL)
    assert "Sink eviction, live" in [s.value for s in at.subheader]
    assert at.number_input(key="sk_evict_tokens").value == 256 and at.number_input(key="sk_evict_window").value == 32
    at = evict(at, 72, 12)
    expected = sink_eviction(shipped, position_length.text_ids(shipped)[:72], 12, KEPT).perplexities()
    table, paper = [d.value for d in at.dataframe][-2:]
    assert list(table["run"]) == ["full context", *[f"{n} kept" for n in KEPT]]
    np.testing.assert_allclose(table["perplexity"], [round(v, 2) for v in expected.values()], atol=0.011)
    assert "Perplexity with a window of 12 keys, by initial tokens kept" in titles(at)
    assert list(paper["perplexity (the paper's)"]) == [5158.07, 5.40] and set(paper["model"]) == {"Llama-2-13B"}
    assert "positions within the cache (StreamingLLM's)" in "\n".join(c.value for c in at.caption)
    at.radio(key="sk_evict_rule").set_value("text")
    at = evict(at, 72, 12)
    masked = sink_eviction(shipped, position_length.text_ids(shipped)[:72], 12, KEPT, rule="text").perplexities()
    table = [d.value for d in at.dataframe][-2]
    np.testing.assert_allclose(table["perplexity"], [round(v, 2) for v in masked.values()], atol=0.011)
    assert "positions in the text (one masked pass)" in "\n".join(c.value for c in at.caption)


def test_a_text_too_short_for_the_window_gets_one_line(shipped_app):
    at = open_page("sinks", straight=True, beam="1", model=SHIPPED_LANGUAGE_MODEL)
    at = evict(at, 40, 64)
    assert "The eviction cannot run: the text gives 40 tokens, too short for a window of 64" in \
        messages(at).replace("\\", "")
    at = evict(at, 200, 16, text="Two dogs play in the snow.")
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "too short for a window of 16" in errors[0] and "\n" not in errors[0]
    assert not any(t.startswith("Perplexity with a window") for t in titles(at))


def test_the_scalings_run_on_the_shipped_model_as_the_library_does(shipped_app, shipped):
    at = open_page("positional", straight=True, beam="1", model=SHIPPED_LANGUAGE_MODEL, sentence="")
    assert "With RoPE's scalings switched on" in [s.value for s in at.subheader]
    tokens, trained = at.number_input(key="pe_lm_tokens").value, shipped.config.max_positions
    assert tokens == 2 * trained  # twice the shipped model's trained positions
    at.multiselect(key="pe_lm_scalings").set_value(["linear", "yarn"])
    at.number_input(key="pe_lm_factor").set_value(2.0)
    next(b for b in at.button if b.label == "Measure with the scalings").click()
    at = ok(at.run())
    runs = losses_by_scaling(shipped, position_length.text_ids(shipped), tokens, 2.0, ["linear", "yarn"])
    table = [d.value for d in at.dataframe][-1]
    assert list(table["run"]) == [AS_LOADED, "linear × 2", "YaRN × 2"]
    np.testing.assert_allclose(table[f"mean loss past {trained}"], [round(float(r.losses[trained:].mean()), 3)
                                                                     for r in runs.values()], atol=1e-3)
    window = at.slider(key="pe_lm_window").value  # the running mean of the loss above
    assert f"Loss by position, mean of the last {window}, with each scaling" in titles(at)
