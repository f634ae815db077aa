"""Streamlit AppTest tests of the Attention sinks page (CPU, fp32): with an imported tiny Llama and a GPT-2 it draws
each head's first-token share as the library measures it, one head's share on every token, and the switch's change
in the next-token distribution and continuation; bad link values get one line; with a translator it measures the
decoder's self-attention and says in one line that the switch needs a language model."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from support.app import APP, arr, charts, messages, ok, open_page, titles
from support.hf_lm import build_lm_folder, import_lm

from viz_model.analysis.sink_eviction import KEPT, sink_eviction
from viz_model.analysis.sinks import remove_sink, trace_sink_shares
from viz_model.lessons.position_length import text_ids
from viz_model.modeldir.shipped import DEFAULT_MODEL

PROMPT = "a man plays in the snow and the dog runs"
PAGE = "sinks"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A models folder: the shipped translator (copied), a tiny Llama, a GPT-2, a Mistral (sliding window) and a
    SmolLM2 (a chat template) imported with ``viz-model import``; and the language models loaded here."""
    root = tmp_path_factory.mktemp("sink-app-models")
    shutil.copytree(APP.parents[1] / "assets" / DEFAULT_MODEL, root / DEFAULT_MODEL)
    loaded = {family: import_lm(build_lm_folder(tmp_path_factory.mktemp("hf-lm"), family), root)
              for family in ("llama", "gpt2", "mistral", "smollm2")}
    return root, loaded


@pytest.fixture
def lm_app(models, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(models[0]))
    return models[1]


def open_sinks(model: str, new_tokens: int | None = None, **params: str) -> AppTest:
    """A fresh session opening a link straight onto the page (greedy); `new_tokens`: the prompt form's slider set."""
    at = open_page(PAGE, straight=True, timeout=180, **{"beam": "1", "model": model, **params})
    if new_tokens is not None:
        at.slider(key="w_lm_new_tokens").set_value(new_tokens).run()
    return ok(at)


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_the_grid_holds_each_heads_first_token_share(lm_app, family):
    at = open_sinks(family, sentence=PROMPT, new_tokens=4)
    assert at.title[0].value == "Attention sinks"
    grid = charts(at)[0]
    assert titles(at)[0].startswith("Share of attention on the first token")
    expected = trace_sink_shares(lm_app[family].trace(PROMPT, 4)).first_token
    assert np.allclose(arr(grid["data"][0]["z"]), expected, atol=1e-6)
    assert titles(at)[1].startswith("Layer 1, head 1: mean weight on each token")
    assert "Hide the first token from every later query" in [t.label for t in at.toggle]


def test_the_switch_shows_the_change_its_library_call_measures(lm_app):
    at = open_sinks("llama", sentence=PROMPT, new_tokens=4, hide_first="True")
    result = remove_sink(lm_app["llama"], PROMPT, 4)
    shown = {m.label: m.value for m in at.metric}
    assert shown["KL(intact ‖ switched)"] == f"{result.kl:.4f} nats"
    assert shown["Total variation"] == f"{result.total_variation:.4f}"
    texts = "\n".join(m.value for m in at.markdown)
    assert result.continuation_switched.strip()[:5] in texts
    tables = [t.value for t in at.dataframe]
    top = tables[-2]  # the intact side's candidates, then the switched side's
    assert top["probability"].iloc[0] == round(result.top_intact[0].first, 4)
    assert top["switched"].iloc[0] == round(result.top_intact[0].second, 4)
    assert at.query_params["hide_first"] == "True"


def test_picking_a_head_draws_its_shares(lm_app):
    at = open_sinks("gpt2", sentence=PROMPT, new_tokens=3)
    at.selectbox(key="w_sk_layer").set_value(2).run()
    at.selectbox(key="w_sk_head").set_value(3).run()
    ok(at)
    bars = charts(at)[1]
    assert bars["layout"]["title"]["text"].startswith("Layer 2, head 3")
    shares = trace_sink_shares(lm_app["gpt2"].trace(PROMPT, 3)).head(1, 2)
    assert np.allclose(arr(bars["data"][0]["y"]), np.nan_to_num(shares), atol=1e-6)
    assert at.query_params["sink_layer"] == "2" and at.query_params["sink_head"] == "3"


def test_a_head_outside_the_model_from_a_link_is_one_line(lm_app):
    at = open_sinks("llama", sentence=PROMPT, sink_layer="9", sink_head="0")
    said = messages(at)
    assert "Layer 9 does not exist here; showing 1." in said
    assert "`sink_head=0` ignored: use a whole number from 1 to 1000" in said
    assert charts(at)


def test_a_one_token_prompt_is_refused_by_the_switch_in_one_line(lm_app):
    at = open_sinks("gpt2", sentence="a", new_tokens=2, hide_first="True")
    said = messages(at).replace("\\", "")  # markdown escapes
    assert "The switch cannot run: the prompt is one token: it has nothing to attend to but itself" in said


def test_with_a_translator_it_measures_the_decoders_self_attention(lm_app):
    at = open_sinks(DEFAULT_MODEL, sentence="Two dogs play in the snow.")
    assert titles(at)[0].endswith("(the decoder's self-attention over the translation)")
    assert "The switch that removes the sink runs with a language model" in messages(at)


def test_a_sliding_window_that_no_longer_reaches_the_first_token_is_said(lm_app):
    at = open_sinks("mistral", sentence=PROMPT, hide_first="True")
    assert remove_sink(lm_app["mistral"], PROMPT).kl == 0.0
    assert "Nothing changed: every layer of this model attends through a sliding window" in messages(at)
    assert [s.value for s in at.success] == ["The greedy continuation did not change."]


def test_the_token_labels_are_escaped_for_plotly(lm_app):
    """Plotly reads tick labels as HTML: Llama's ``<s>`` unescaped is a strike-through tag and its label vanishes."""
    at = open_sinks("llama", sentence=PROMPT, new_tokens=2)
    ticks = charts(at)[1]["data"][0]["x"]
    tokens = lm_app["llama"].trace(PROMPT, 2).target_tokens
    assert "<" in tokens[0]  # the start token
    assert ticks[0] == "0 '&lt;s&gt;'" and not any("<" in t for t in ticks)
    assert len(ticks) == len(tokens)


def test_with_chat_on_the_switch_runs_on_the_chat_turn_the_grid_measures(lm_app):
    """The grid reads the trace of the prompt through the chat template; the switch must run on that turn too, not
    on the bare prompt (its positions would not be the grid's)."""
    at = open_sinks("smollm2", sentence=PROMPT, new_tokens=4)
    at.toggle(key="w_lm_chat").set_value(True).run()
    assert charts(ok(at))[1]["data"][0]["x"][1] == "1 '&lt;'"  # the template's first piece after the start token
    at.toggle(key="w_sk_switch").set_value(True).run()
    model = lm_app["smollm2"]
    turn = remove_sink(model, [{"role": "user", "content": PROMPT}], 4)
    bare = remove_sink(model, PROMPT, 4)
    intact = [repr(t.token) for t in turn.top_intact]
    assert intact != [repr(t.token) for t in bare.top_intact]  # the two are told apart
    shown = [d.value for d in ok(at).dataframe if "switched" in d.value.columns]
    assert len(shown) == 1 and shown[0]["next token"].tolist() == intact


def test_a_links_new_tokens_and_chat_are_taken_and_written_back(lm_app):
    """The prompt form's settings (Complete & explore's) are in the link of every page that draws the form."""
    at = open_page(PAGE, straight=True, timeout=180, beam="1", model="smollm2", sentence=PROMPT, new_tokens="3",
                   chat="True")
    assert at.slider(key="w_lm_new_tokens").value == 3 and at.toggle(key="w_lm_chat").value is True
    turn = lm_app["smollm2"].trace([{"role": "user", "content": PROMPT}], 3)
    assert len(charts(at)[1]["data"][0]["x"]) == len(turn.target_tokens)
    assert at.query_params["new_tokens"] == "3" and at.query_params["chat"] == "True"


def test_gpt2s_eviction_keeps_text_positions_and_says_so(lm_app):
    """A table of positions cannot move in the cache: the page runs the masked rule and says why."""
    at = open_sinks("gpt2", sentence=PROMPT, new_tokens=2)
    assert "each token keeps its position in the text (one masked pass)" in "\n".join(c.value for c in at.caption)
    at.number_input(key="sk_evict_tokens").set_value(60)
    at.number_input(key="sk_evict_window").set_value(10)
    next(b for b in at.button if b.label == "Run").click()
    at = ok(at.run())
    model = lm_app["gpt2"]
    expected = sink_eviction(model, text_ids(model)[:60], 10, KEPT, rule="text").perplexities()
    table = [d.value for d in at.dataframe][-2]
    np.testing.assert_allclose(table["perplexity"], [round(v, 2) for v in expected.values()], atol=0.011)
