"""Streamlit AppTest tests of Attribution, Attention by hand, The training recipe and Alignment & rollout with a
language model open (CPU, fp32): the shipped multi30k-lm-en, an imported tiny Llama (4 query heads on 2 key/value
heads, RoPE) and a GPT-2 (learned positions); every number checked against the library."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from support.app import APP, arr, charts, messages, ok, open_page, titles
from support.hf_lm import build_lm_folder, import_lm, lm_models_folder

import viz_model
from app import completion
from app.page_settings import LM_NEW_TOKENS
from app.views.alignment import alignment_lm
from app.views.attribution import attribution_lm
from app.views.by_hand import head_steps
from viz_model.analysis import rollout
from viz_model.attribution import attribute
from viz_model.modeldir.shipped import SHIPPED_LANGUAGE_MODEL

LLAMA, GPT2, SHIPPED = "llama", "gpt2", SHIPPED_LANGUAGE_MODEL
PROMPT = "a man plays in the snow"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The shipped language model (copied) and two tiny ones imported with ``viz-model import``."""
    root = lm_models_folder(tmp_path_factory, (LLAMA, GPT2))
    shutil.copytree(APP.parents[1] / "assets" / SHIPPED, root / SHIPPED)
    return root


@pytest.fixture(autouse=True)
def lm_app(models, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(models))
    return models


def lm_page(page: str, model: str = LLAMA):
    return open_page(page, timeout=180, beam="1", model=model, sentence=PROMPT)


def lm(models, name: str):
    return viz_model.load(models / name, device="cpu")


def trace_of(models, name: str):
    """The library's trace of the page's prompt and greedy continuation (the app's default length)."""
    return lm(models, name).trace(PROMPT, LM_NEW_TOKENS)


def chart(at, title_start: str) -> dict:
    return next(c for c in charts(at) if c["layout"]["title"]["text"].startswith(title_start))


# --- Alignment & rollout -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", [LLAMA, SHIPPED])
def test_alignment_is_one_line_and_rollout_runs_over_the_causal_layers(models, name):
    at = lm_page("alignment", name)
    assert alignment_lm.NO_ALIGNMENT in messages(at)
    maps = trace_of(models, name).attentions("decoder")
    last = len(maps)
    assert titles(at) == [f"Raw attention, layer {last} (mean over heads)", f"Rollout through layers 1–{last}",
                          f"Flow through layers 1–{last}"]
    rolled = arr(chart(at, "Rollout")["data"][0]["z"])
    np.testing.assert_allclose(rolled, rollout.attention_rollout(maps, 0.5)[-1], atol=1e-5)
    assert np.abs(np.triu(rolled, 1)).max() == 0 and np.allclose(rolled.sum(axis=1), 1, atol=1e-5)  # causal rows
    np.testing.assert_allclose(arr(chart(at, "Raw")["data"][0]["z"]), maps[-1].mean(axis=0), atol=1e-6)
    at.slider(key="w_ro_residual").set_value(0.0).run()  # no residual: the raw maps multiplied
    expected = maps[1].mean(axis=0) @ maps[0].mean(axis=0)
    at.selectbox(key="w_ro_layer").set_value(2).run()
    np.testing.assert_allclose(arr(chart(ok(at), "Rollout")["data"][0]["z"]), expected, atol=1e-5)


# --- The training recipe -------------------------------------------------------------------------------------------
def test_training_draws_the_shipped_language_models_curves_with_perplexity(models):
    at = lm_page("training", SHIPPED)
    curves = chart(at, "Training curves")
    panels = [a["text"] for a in curves["layout"]["annotations"]]
    assert "validation perplexity" in panels and "validation BLEU" not in panels
    events = [json.loads(line) for line in (models / SHIPPED / "training_log.jsonl").read_text().splitlines()]
    val = [e for e in events if e["event"] == "val"]
    ppl = next(d for d in curves["data"] if d["name"] == "validation perplexity")
    np.testing.assert_allclose(arr(ppl["y"]), np.exp([e["val_loss"] for e in val]), rtol=1e-9)
    gap = next(m for m in at.metric if m.label.startswith("Largest gap"))
    assert float(gap.value) < 1e-9  # the schedule drawn is the one the model logged (its training_facts.json)
    trace = trace_of(models, SHIPPED)
    n, heads = len(trace.target_tokens), trace.num_heads
    table = next(d.value for d in at.dataframe if "stage" in d.value.columns)
    shapes = dict(zip(table["stage"], table["shape"]))
    assert shapes["weights softmax(QKᵀ/√d_k + causal mask)"] == f"1 × {heads} × {n} × {n}"
    cfg = lm(models, SHIPPED).config
    assert shapes["keys K, values V"] == f"1 × {cfg.kv_heads} × {n} × {cfg.d_head}"
    assert shapes["final norm, logits"] == f"1 × {n} × {cfg.vocab_size}"


@pytest.mark.parametrize("name", [LLAMA, GPT2])
def test_training_of_an_imported_language_model_without_a_log_is_one_line(name):
    at = lm_page("training", name)
    assert f"{name} was imported from another framework" in messages(at)
    assert len(at.info) == 1 and not at.get("plotly_chart")


# --- Attribution ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", [LLAMA, GPT2, SHIPPED])
def test_attribution_draws_the_continuation_as_the_library_attributes_it(models, name):
    at = lm_page("attribution", name)
    methods = at.multiselect(key="w_at_methods")
    assert "attention" not in methods.options and "rollout" not in methods.options
    assert methods.value == ["value_weighted", "alti", "saliency"]
    result = attribute(lm(models, name), PROMPT, methods=("value_weighted", "alti", "saliency"))
    share = chart(at, "ALTI+: where")
    assert [d["name"] for d in share["data"]] == ["prompt", "earlier continuation"]
    np.testing.assert_allclose(arr(share["data"][0]["y"]), result.source_share(), atol=1e-6)
    matrix = arr(chart(at, "ALTI+: every output")["data"][0]["z"])
    expected = np.concatenate([result.source_scores("alti"), result.prefix_scores("alti")], axis=1)
    np.testing.assert_allclose(matrix, expected, atol=1e-6)
    assert attribution_lm.NO_FOIL in "\n".join(c.value for c in at.caption)
    assert attribution_lm.NO_DELETION in messages(at)


def test_a_forced_continuation_with_integrated_gradients_and_its_completeness(models):
    at = lm_page("attribution", LLAMA)
    at.text_input(key="w_at_target").set_value(" in the park").run()
    at.multiselect(key="w_at_methods").set_value(["alti", "integrated_gradients"]).run()
    ok(at)
    result = attribute(lm(models, LLAMA), PROMPT, target=" in the park", methods=("alti", "integrated_gradients"))
    share = chart(at, "ALTI+: where")
    np.testing.assert_allclose(arr(share["data"][0]["y"]), result.source_share(), atol=1e-6)
    assert at.selectbox(key="w_at_output").options == [f"{i}: {t}" for i, t in enumerate(result.output_tokens)]
    gap = next(m for m in at.metric if m.label.startswith("Integrated gradients"))
    assert gap.value == f"{result.relative_gap[0]:.1%}"


# --- Attention by hand ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", [LLAMA, GPT2, SHIPPED])
def test_attention_by_hand_works_one_head_through_to_the_recorded_map(models, name):
    at = lm_page("by_hand", name)
    trace = trace_of(models, name)
    maps = trace.attentions("decoder")
    np.testing.assert_allclose(arr(chart(at, "Softmax weights")["data"][0]["z"]), maps[0][0], atol=1e-5)
    assert float(at.metric[0].value) < 1e-5
    tabs = [t.label for t in at.tabs]
    assert ("q: after RoPE" in tabs) == (name != GPT2) and "k: x W_k" in tabs
    query = completion.prompt_length(trace) - 1  # by default the prompt's last token
    row = next(d.value for d in at.dataframe if "softmax weight" in d.value.columns)
    np.testing.assert_allclose(row["softmax weight"], maps[0][0][query], atol=1e-5)
    assert list(row["may attend"]) == [j <= query for j in range(len(trace.target_tokens))]


def test_a_grouped_head_reads_its_key_value_head_and_later_queries_follow(models):
    at = lm_page("by_hand", LLAMA)
    at.selectbox(key="w_abh_lm_layer").set_value(2).run()
    at.selectbox(key="w_abh_lm_head").set_value(4).run()
    at.selectbox(key="w_abh_lm_query").set_value(9).run()
    ok(at)
    assert "head 4 reads key/value head 2" in "\n".join(c.value for c in at.caption)
    model, trace = lm(models, LLAMA), trace_of(models, LLAMA)
    steps = head_steps.head_steps(model, trace.target_ids, 1, 3)
    np.testing.assert_allclose(arr(chart(at, "Softmax weights")["data"][0]["z"]),
                               trace.attentions("decoder")[1][3], atol=1e-5)
    assert steps.kv_head == 1 and steps.difference < 1e-5
    # the key is the kv head's: the same for query heads 3 and 4, another for head 1
    np.testing.assert_array_equal(steps.k, head_steps.head_steps(model, trace.target_ids, 1, 2).k)
    assert not np.allclose(steps.k, head_steps.head_steps(model, trace.target_ids, 1, 0).k)
    row = next(d.value for d in at.dataframe if "softmax weight" in d.value.columns)
    assert int(row["may attend"].sum()) == 10


@pytest.mark.parametrize("family", ["mistral", "qwen3", "gemma2", "bloom"])
def test_head_steps_match_the_recorded_map_for_windows_norms_caps_and_alibi(tmp_path_factory, family):
    """CPU, fp32: every head of every layer, worked through by hand, equals the network's own weights."""
    model = import_lm(build_lm_folder(tmp_path_factory.mktemp("hf-lm"), family), tmp_path_factory.mktemp(family))
    ids = model.encode(PROMPT)
    for layer in range(len(model.network.layers)):
        for head in range(model.config.heads):
            steps = head_steps.head_steps(model, ids, layer, head)
            assert steps.difference < 1e-5, (layer, head)
    window = {"mistral": 5, "gemma2": None}.get(family)
    if family == "mistral":
        assert steps.window == window and not steps.visible[-1, 0]
    assert (steps.q_normed is not None) == (family == "qwen3")
    assert (steps.bias is not None) == (family == "bloom") and steps.rotated == (family != "bloom")


# --- every page ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("page", ["attribution", "by_hand", "training", "alignment"])
def test_none_of_the_four_pages_refuses_the_shipped_language_model(page):
    at = lm_page(page, SHIPPED)
    assert "for translation models" not in messages(at) and charts(at), page
