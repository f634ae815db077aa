"""Streamlit AppTest of Alignment & rollout, Attention by hand and Attribution on a long prompt (CPU, fp32): the tiny
imported Llama with room for 4,608 positions and test_app_long_prompt's ~1,000-token prompt (maps made on demand);
each page draws instead of refusing, reads one row of a head or a block of rows at a time, and its numbers equal what
the trace records."""

from __future__ import annotations

import time

import numpy as np
import pytest
from support.app import arr, charts, ok, titles
from test_app_long_prompt import captions, explore, lm_app, models  # noqa: F401 (fixtures)

from app import sessions
from viz_model.analysis.rollout import rollout_rows
from viz_model.on_demand import OnDemandMaps


def open_page(page: str):
    at = explore("heatmap")
    started = time.perf_counter()
    at.switch_page(f"views/{page}.py").run()
    print(f"{page}: {time.perf_counter() - started:.2f} s")  # the page's own work (the trace is cached)
    return ok(at)


def the_trace():
    """The trace the pages read: the one the app's cache holds (maps on demand)."""
    traces = [t for t, _ in sessions.trace_cache()._traces.values() if len(t.target_tokens) > 512]
    assert traces and isinstance(traces[-1].decoder_attentions, OnDemandMaps)
    return traces[-1]


def test_rollout_draws_the_last_tokens_row_as_a_strip():
    at = open_page("alignment")
    assert not [i.value for i in at.info if "draws every cell of whole maps" in i.value]
    chart = charts(at)[0]
    raw, rolled = arr(chart["data"][0]["z"])
    trace = the_trace()
    n = len(trace.target_tokens)
    assert chart["layout"]["title"]["text"].startswith(f"Token {n - 1} ") and len(rolled) == n
    np.testing.assert_allclose(rolled, rollout_rows(trace, "decoder", [n - 1], 2)[0], atol=1e-9)
    assert rolled.sum() == pytest.approx(1.0)
    assert "the rollout of the picked token alone" in captions(at)
    assert any("Attention flow is shown for up to" in i.value for i in at.info)


def test_rollout_follows_the_picked_token_and_layer():
    at = open_page("alignment")
    at.slider(key="ro_token_scroll").set_value(300).run()
    at.selectbox(key="w_ro_layer").select(1).run()
    ok(at)
    assert at.session_state["ro_token"] == "q300"
    assert titles(at)[0].startswith("Token 300 ")
    rolled = arr(charts(at)[0]["data"][0]["z"])[1]
    np.testing.assert_allclose(rolled, rollout_rows(the_trace(), "decoder", [300], 1)[0], atol=1e-9)
    assert rolled[301:].max() == 0.0  # causal: nothing from later tokens
