"""Streamlit AppTest of Alignment & rollout, Attention by hand and Attribution on a long prompt (CPU, fp32): the tiny
imported Llama with room for 4,608 positions and test_app_long_prompt's ~1,000-token prompt (maps made on demand);
each page draws instead of refusing, reads one row of a head or a block of rows at a time, and its numbers equal what
the trace records."""

from __future__ import annotations

import time

import numpy as np
import pytest
from support.app import arr, charts, ok, open_page, titles
from test_app_long_prompt import captions, explore, lm_app, models  # noqa: F401 (fixtures)

import viz_model
from app import sessions
from app.views.by_hand import by_hand_lm
from viz_model.analysis.rollout import rollout_rows
from viz_model.attribution.scoring import attribute_continuation_ids
from viz_model.on_demand import OnDemandMaps


def long_page(page: str):
    at = explore("heatmap")
    started = time.perf_counter()
    open_page(page, at)
    print(f"{page}: {time.perf_counter() - started:.2f} s")  # the page's own work (the trace is cached)
    return at


def the_trace():
    """The trace the pages read: the one the app's cache holds (maps on demand)."""
    traces = [entry[0] for entry in sessions.trace_cache()._traces.values() if len(entry[0].target_tokens) > 512]
    assert traces and isinstance(traces[-1].decoder_attentions, OnDemandMaps)
    return traces[-1]


def test_rollout_draws_the_last_tokens_row_as_a_strip():
    at = long_page("alignment")
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
    at = long_page("alignment")
    at.slider(key="ro_token_scroll").set_value(300).run()
    at.selectbox(key="w_ro_layer").select(1).run()
    ok(at)
    assert at.session_state["ro_token"] == "q300"
    assert titles(at)[0].startswith("Token 300 ")
    rolled = arr(charts(at)[0]["data"][0]["z"])[1]
    np.testing.assert_allclose(rolled, rollout_rows(the_trace(), "decoder", [300], 1)[0], atol=1e-9)
    assert rolled[301:].max() == 0.0  # causal: nothing from later tokens


def test_attention_by_hand_works_one_query_row_out_and_lists_top_keys_and_a_window():
    at = long_page("by_hand")
    assert not [i.value for i in at.info if "draws every cell of whole maps" in i.value]
    assert not [s for s in at.selectbox if s.label == "Follow the query of token"]  # no select box of every token
    trace = the_trace()
    n, p = len(trace.target_tokens), int(trace.settings["prompt_length"])
    assert at.session_state["abh_lm_token"] == f"q{p - 1}"
    at.slider(key="abh_lm_token_scroll").set_value(700).run()
    at.selectbox(key="w_abh_lm_layer").select(2).run()
    at.selectbox(key="w_abh_lm_head").select(4).run()
    ok(at)
    recorded = trace.head_map("decoder", 1, 3, slice(700, 701))[0]
    top, window = (d.value for d in at.dataframe if "softmax weight" in d.value.columns)
    assert len(top) == 16 and top["softmax weight"].is_monotonic_decreasing
    keys = [int(k.split(":")[0]) for k in top["key"]]
    np.testing.assert_allclose(top["softmax weight"], recorded[keys], atol=1e-5)
    np.testing.assert_allclose(top["recorded weight"], recorded[keys], atol=0)
    np.testing.assert_allclose(recorded[keys], np.sort(recorded)[::-1][:16], atol=1e-6)  # the 16 largest
    positions = [int(k.split(":")[0]) for k in window["key"]]
    assert positions == by_hand_lm.around(p - 1, n) == list(range(n - 64, n))  # around the first query's key
    assert list(window["may attend"]) == [j <= 700 for j in positions]
    strip = charts(at)[0]
    worked, stored = arr(strip["data"][0]["z"])
    assert len(worked) == n and "token 700's query" in strip["layout"]["title"]["text"]
    np.testing.assert_allclose(worked, recorded, atol=1e-5)
    np.testing.assert_allclose(stored, recorded, atol=0)
    assert worked[701:].max() == 0.0
    assert float(at.metric[0].value) < 1e-5
    # the key window moves by search
    at.text_input(key="abh_lm_key_search").input("dogs").run()
    hit = at.selectbox(key="abh_lm_key_hit")
    hit.select_index(len(hit.options) - 1).run()
    ok(at)
    last = int(hit.options[-1].split(":")[0])
    window = [d.value for d in at.dataframe if "softmax weight" in d.value.columns][1]
    assert any(k.startswith(f"{last}: ") for k in window["key"])
    assert not window["may attend"][[int(k.split(":")[0]) > 700 for k in window["key"]]].any()


def test_attribution_draws_the_methods_that_run_and_names_those_left_out(lm_app):  # noqa: F811 (the fixture)
    at = long_page("attribution")
    assert not [i.value for i in at.info if "draws every cell of whole maps" in i.value]
    infos = [i.value for i in at.info]
    trace = the_trace()
    n, p = len(trace.target_tokens), int(trace.settings["prompt_length"])
    # the default methods: value-weighted, ALTI+ and saliency; 20 new tokens of a ~1,400-token prompt
    assert any(i.startswith(f"ALTI+ is left out: it splits each layer's output into one vector per query and key "
                            f"({n - 1:,}² x 32 values a layer here)") for i in infos), infos
    assert any(i.startswith(f"Saliency is left out: one backward pass over all {n - 1:,} tokens for each of the "
                            f"{n - p} continuation tokens") for i in infos), infos
    assert not [s for s in at.subheader if s.value.startswith("From the prompt, or")]  # the share needs ALTI+
    strips = charts(at)
    methods, matrix = strips[0], strips[1]
    assert methods["layout"]["title"]["text"].startswith("Why “")
    scores = arr(methods["data"][0]["z"])
    assert scores.shape == (1, p) and np.abs(scores).max() == pytest.approx(1.0)
    assert arr(matrix["data"][0]["z"]).shape == (n - p, p)  # value-weighted attention scores the prompt alone
    top = next(d.value for d in at.dataframe if "rank" in d.value.columns)
    first = int(top.iloc[0, 1].split(":")[0])
    assert scores[0, first] == pytest.approx(np.abs(scores).max())
    # the same value-weighted scores as the full computation's, every map kept (the page's are made from recipes)
    model = viz_model.load(lm_app / "llama", device="cpu")
    full = attribute_continuation_ids(model, trace.target_ids[:p], trace.target_ids[p:], ("value_weighted",))
    row = full.source_scores("value_weighted")[0]
    np.testing.assert_allclose(scores[0], row / np.abs(row).max(), atol=1e-5)
    assert "alti" in at.session_state["at_methods"]  # the choice is kept: a shorter prompt draws it again


def test_attribution_with_one_new_token_runs_saliency_too():
    at = explore("heatmap")
    at.session_state["lm_new_tokens"] = 1
    at.run()
    started = time.perf_counter()
    open_page("attribution", at)
    print(f"attribution, one new token: {time.perf_counter() - started:.2f} s")
    ok(at)
    infos = [i.value for i in at.info]
    assert any(i.startswith("ALTI+ is left out") for i in infos) and not any("Saliency" in i for i in infos), infos
    scores = arr(charts(at)[0]["data"][0]["z"])
    assert scores.shape[0] == 2  # value-weighted and saliency, one strip each
