"""Streamlit AppTest tests of a gpt-oss and a Mixtral open in the app (issue 60; CPU, fp32): the Attention sinks
page draws each gpt-oss head's learned-sink share beside the first token's and says in one line why its rows sum to
less than 1; Complete & explore says what its rows sum to and draws each token's experts and router weights in the
chosen layer and the chosen head's attention split by routing, as the library computes them; an expert count too
large to draw gets one line."""

from __future__ import annotations

import numpy as np
import pytest
from support.app import arr, charts, messages, ok, open_page, titles
from support.hf_lm import build_lm_folder, import_lm

from app.views.explore import routing_section
from app.views.sinks.learned_sink_section import WHY_ROWS
from viz_model.analysis.expert_routing import attention_by_routing, routing_matrix
from viz_model.analysis.sink_logits import learned_sink_shares

PROMPT = "a man plays in the snow and the dog runs"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A models folder holding a tiny gpt-oss and a tiny Mixtral imported with ``viz-model import``; both loaded."""
    root = tmp_path_factory.mktemp("moe-app-models")
    loaded = {family: import_lm(build_lm_folder(tmp_path_factory.mktemp("hf-lm"), family), root)
              for family in ("gpt_oss", "mixtral")}
    return root, loaded


@pytest.fixture
def moe_app(models, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(models[0]))
    return models[1]


def test_the_sinks_page_draws_the_learned_sinks_share_beside_the_first_tokens(moe_app):
    at = open_page("sinks", straight=True, timeout=180, beam="1", model="gpt_oss", sentence=PROMPT, new_tokens="4")
    expected = learned_sink_shares(moe_app["gpt_oss"].trace(PROMPT, 4))
    shown = {title: chart for title, chart in zip(titles(at), charts(at))}
    learned = shown["Share the learned sink takes (1 − row sum, mean over rows)"]
    assert np.allclose(arr(learned["data"][0]["z"]), expected, atol=1e-6)
    assert "Share on the first token (emergent sink)" in shown
    assert WHY_ROWS in messages(at)
    assert {m.label: m.value for m in at.metric}["Mean learned-sink share"] == f"{expected.mean():.3f}"


def test_a_model_without_learned_sinks_shows_no_such_section(moe_app):
    at = open_page("sinks", straight=True, timeout=180, beam="1", model="mixtral", sentence=PROMPT, new_tokens="4")
    assert WHY_ROWS not in messages(at) and "Learned sinks" not in [h.value for h in at.subheader]


def test_explore_draws_each_tokens_experts_and_the_heads_attention_by_routing(moe_app):
    at = open_page("explore", timeout=180, beam="1", model="gpt_oss", sentence=PROMPT, new_tokens="4")
    at.selectbox(key="w_moe_layer").set_value(2).run()
    at.selectbox(key="w_moe_head").set_value(3).run()
    ok(at)
    assert any("each row sums to 1 minus the share its head's learned sink took" in c.value for c in at.caption)
    assert sum(c.value.startswith("Memory:") for c in at.caption) == 1  # the completion drawn once
    trace = moe_app["gpt_oss"].trace(PROMPT, 4)
    shown = {title: chart for title, chart in zip(titles(at), charts(at))}
    heatmap = shown["Layer 2: each token's experts and their router weights"]
    matrix = routing_matrix(trace, 1)
    assert np.allclose(np.nan_to_num(arr(heatmap["data"][0]["z"])), matrix, atol=1e-6)
    table = at.dataframe[-1].value
    for row, split in zip(table.to_dict("records"), attention_by_routing(trace, 1, 2)):
        assert (row["pairs (query, earlier key)"], row["count"]) == (split.name, split.pairs)
        shown_mean = float("nan") if row["mean attention"] is None else float(row["mean attention"])
        assert np.isclose(shown_mean, round(split.mean_weight, 4), equal_nan=True)  # NaN: no such pair


def test_an_expert_count_too_large_to_draw_gets_one_line(moe_app, monkeypatch):
    monkeypatch.setattr(routing_section, "MAX_DRAWN_EXPERTS", 3)  # the tiny Mixtral has 4
    at = open_page("explore", timeout=180, beam="1", model="mixtral", sentence=PROMPT, new_tokens="4")
    assert "This model has 4 experts a layer, more than the 3 columns this page draws" in messages(at)
    assert not [t for t in titles(at) if "each token's experts" in t]
    assert any("each row sums to 1." in c.value for c in at.caption)  # no learned sinks
    assert at.dataframe[-1].value["pairs (query, earlier key)"].tolist()[0] == "same first expert"
