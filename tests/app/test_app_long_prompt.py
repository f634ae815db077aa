"""Streamlit AppTest of Complete & explore on a long prompt (CPU, fp32): a tiny imported Llama with room for 4,608
positions, a ~1,000-token prompt (maps made on demand); every view draws from one head's map or the summaries and
says so, a token is picked by search and on the strip, the figures are let go with their trace, and the memory
estimate is shown before the run, which it refuses where the trace would not fit (the library's estimate, the
available memory set by the test)."""

from __future__ import annotations

import gc
import re
import shutil
import weakref

import pytest
from support.app import APP, charts, ok, start, titles
from support.hf_lm import import_lm
from support.long_lm import long_llama_folder, long_text

import viz_model
from app import long_views, token_picker
from viz_model.analysis import memory_estimate
from viz_model.analysis.memory_estimate import gb, model_estimate
from viz_model.modeldir.shipped import DEFAULT_MODEL

PROMPT = long_text(400)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("long-lm-models")
    shutil.copytree(APP.parents[1] / "assets" / DEFAULT_MODEL, root / DEFAULT_MODEL)  # Compare's translator
    import_lm(long_llama_folder(tmp_path_factory.mktemp("hf-lm")), root)
    return root


@pytest.fixture(autouse=True)
def lm_app(models, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(models))
    return models


def explore(view: str, prompt: str = PROMPT):
    at = ok(start(model="llama", sentence="a man", view=view))
    at.session_state["sentence"] = prompt
    return ok(at.run())


def captions(at) -> str:
    return "\n".join(c.value for c in at.caption)


def test_the_prompt_is_long_and_its_maps_on_demand():
    at = explore("heatmap")
    assert "prompt token" in captions(at)
    assert "drawn as blocks of up to" in titles(at)[0]
    assert "Downsampled: the" in captions(at)


def test_a_window_draws_every_weight_around_the_picked_token():
    at = explore("heatmap")
    at.radio(key="w_long_draw").set_value("window").run()
    ok(at)
    at.text_input(key="focus_token_search").input("dogs").run()
    hits = at.selectbox(key="focus_token_hit")
    assert hits.label.endswith("occurrences")
    assert all("dogs" in option.replace("[", "").replace("]", "") for option in hits.options)
    last = int(hits.options[-1].split(":")[0])
    hits.select_index(len(hits.options) - 1).run()
    assert at.session_state["focus_token"] == f"q{last}"
    title = titles(ok(at))[0]
    assert "exact weights of queries" in title and f"around token {last}" in captions(at)


def test_the_strip_and_the_slider_move_the_token():
    at = explore("focus")
    assert not [s for s in at.selectbox if s.label == "Token"]  # no select box of every token
    at.slider(key="focus_token_scroll").set_value(300).run()
    assert at.session_state["focus_token"] == "q300"
    strip = at.get("button_group")[0]
    assert strip is not None
    assert "token 300" in titles(ok(at))[0]
    assert "the right panel reads the 512 queries from the token on" in captions(at)


def test_the_model_view_is_drawn_from_block_means_and_says_so():
    at = explore("model")
    assert "block mean" in titles(at)[0]
    assert "drawn from a summary" in captions(at)


def test_the_head_view_draws_a_window_of_positions():
    at = explore("head")
    assert "positions" in titles(at)[0]
    assert "lines to keys outside them are left out" in captions(at)


def test_search_finds_a_word_split_into_tokens_at_its_first_token():
    tokens = ["▁a", "▁ri", "ding", "▁man", "Ġri", "ding"]
    assert token_picker.occurrences(tokens, "riding") == [1, 4]
    assert token_picker.occurrences(tokens, "DING") == [2, 5]
    assert token_picker.occurrences(tokens, "  ") == []
    assert token_picker.in_context(tokens, 3, 1) == "3: …ding[ man] ri…"


def test_figures_are_let_go_with_their_trace():
    class Trace:  # a stand-in: cached_figure keys on the trace's identity alone
        pass
    import plotly.graph_objects as go
    trace = Trace()
    before = long_views.held_traces()
    made = []
    long_views.cached_figure(trace, ("a",), lambda: made.append(1) or go.Figure())
    long_views.cached_figure(trace, ("a",), lambda: made.append(1) or go.Figure())
    assert made == [1] and long_views.held_traces() == before + 1
    ref = weakref.ref(trace)
    del trace
    gc.collect()
    assert ref() is None
    assert long_views.held_traces() == before


def available_now(monkeypatch, available: int) -> None:
    """The memory the app finds available: `available` bytes (the library's estimate itself is the real one)."""
    monkeypatch.setattr(memory_estimate, "available_bytes", lambda device="cpu": available)


def traced_tokens(at) -> int:
    return int(re.search(r"this ([\d,]+)-token trace", captions(at)).group(1).replace(",", ""))


def test_the_memory_estimate_is_shown_before_the_run(monkeypatch, lm_app):
    available_now(monkeypatch, 2**40)
    at = explore("heatmap", long_text(400, seed=5))  # a prompt no other test traced: a miss, so checked
    n = traced_tokens(at)
    estimate = model_estimate(viz_model.load(lm_app / "llama", device="cpu"), n)
    assert n > 512 and f"Memory: the model {gb(estimate.weights)} ({estimate.weights_held}), this {n:,}-token trace " \
        f"about {gb(estimate.trace_bytes)} ({gb(2**40)} available now)." in captions(at)
    assert charts(at)


def test_a_trace_that_would_not_fit_is_refused_naming_both_figures_and_a_cached_one_still_served(monkeypatch):
    available_now(monkeypatch, 2**40)
    at = explore("model")  # traced and cached with memory to spare (or cached already by an earlier test)
    memory = [c for c in captions(at).splitlines() if c.startswith("Memory: ")]
    assert charts(at) and len(memory) == 1
    available_now(monkeypatch, 2**10)
    ok(at.run())  # the same prompt: served from the cache, the memory not checked again; the caption as computed
    assert charts(at) and not at.error and memory[0] in captions(at)
    at.session_state["sentence"] = long_text(400, seed=6)  # a prompt not cached: checked, and refused
    ok(at.run())
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("This prompt is not run: ") and "would need about" in errors[0]
    assert f"but {gb(2**10)} is available on cpu" in errors[0] and "The model takes " in errors[0], errors
    assert "\n" not in errors[0]
    assert not charts(at) and at.title[0].value == "Complete & explore"  # the page and its form are still there
    assert [t.label for t in at.text_area] == ["Prompt"]
    at.session_state["sentence"] = PROMPT  # nothing else lost: the cached trace is still there
    ok(at.run())
    assert charts(at) and not at.error


