"""AppTest tests of the Positional encoding page with a tiny model of every scheme (CPU): today's schemes at their
defaults, the loaded model's scheme, and one head's scores split into parts whose sum is the score the model's own
record holds (checked against the library)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support.app import TINY_CONFIG, TINY_MODEL, arr, build_scheme_assets
from support.data import tiny_model_config
from test_app_teaching import SENTENCE, captions, chart, charts, messages, ok, on_page, tables

import viz_model
from viz_model.config.model import POSITIONAL_KINDS
from viz_model.lessons.position_parts import model_offset_part, model_position_part, split_scores
from viz_model.modeldir.checkpoint import save_model_dir
from viz_model.nn.alibi import alibi_slopes
from viz_model.nn.model import Transformer
from viz_model.tokenization.tokenizer import Tokenizer

# beside the tiny model of every scheme: a pre-norm learned table (no head has a position·position part) and a
# T5-like relative model (pre-norm, RMSNorm, scores not divided by √d_k)
EXTRA_MODELS = {"tiny-prenorm-learned": {"positional": "learned", "norm": "pre"},
                "tiny-t5-like": {"positional": "relative", "norm": "pre", "normalization": "rms",
                                 "scale_scores": False, "scale_embeddings": False, "attention_bias": False}}


@pytest.fixture(scope="module")
def scheme_assets(tmp_path_factory):
    root = build_scheme_assets(tmp_path_factory.mktemp("scheme-assets"))
    tokenizer = Tokenizer.load(root / TINY_MODEL / "tokenizer.model")
    for name, changes in EXTRA_MODELS.items():
        torch.manual_seed(3)
        network = Transformer(tiny_model_config(tokenizer.vocab_size, **{**TINY_CONFIG, **changes}))
        if network.encoder_position_bias is not None:
            for table in (network.encoder_position_bias, network.decoder_position_bias):
                torch.nn.init.normal_(table.embedding.weight, std=1.0)
        save_model_dir(network, tokenizer, root / name)
    return root


@pytest.fixture
def schemes(scheme_assets, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(scheme_assets))
    return scheme_assets


@pytest.mark.parametrize("scheme", POSITIONAL_KINDS)
def test_every_scheme_opens_the_page_and_its_split_adds_up(schemes, scheme):
    at = on_page("positional", model=f"tiny-{scheme}")
    assert "This model's positions: " in captions(at)
    chart(at, "PE matrix")  # the paper's lessons stay for every model
    panels = {a["text"] for c in charts(at) for a in c["layout"].get("annotations", [])}
    assert set(POSITIONAL_KINDS) <= panels  # each scheme at its defaults, in the schemes tab
    split = chart(at, "Encoder self-attention, layer 1, head 1: score = sum of the parts")
    model = viz_model.load(schemes / f"tiny-{scheme}", device="cpu")
    trace = model.trace(SENTENCE, beam=1)
    expected = split_scores(model.network, trace.source_ids, trace.target_ids, "encoder", 0, 0)
    np.testing.assert_allclose(arr(split["data"][0]["z"]), expected.score, atol=1e-6)
    assert len(split["data"]) == 1 + (4 if scheme in ("sinusoidal", "learned") else 2)
    table = tables(at)[-1]
    total, score = table.loc["sum of the parts", "value"], table.loc["the score the softmax saw", "value"]
    assert total == pytest.approx(score, abs=1e-5) and score == pytest.approx(float(expected.score[0, 0]), abs=1e-6)
    assert "they add up to the score the model's forward recorded" in captions(at)
    layers = at.selectbox(key="w_pe_split_layer").options
    assert layers == (["Layer 1"] if scheme in ("sinusoidal", "learned") else ["Layer 1", "Layer 2"])
    if scheme not in ("sinusoidal", "learned"):
        assert "This model adds nothing to its input" in messages(at)


@pytest.mark.parametrize("scheme", POSITIONAL_KINDS)
def test_the_loaded_models_positional_part_is_drawn_for_every_scheme(schemes, scheme):
    at = on_page("positional", model=f"tiny-{scheme}")
    own = chart(at, "This model's encoder: ")
    model = viz_model.load(schemes / f"tiny-{scheme}", device="cpu")
    trace = model.trace(SENTENCE, beam=1)
    length = min(at.slider(key="w_pe_scheme_len").value, TINY_CONFIG["max_positions"])
    expected = model_position_part(model.network, "encoder", length, trace.source_ids, trace.target_ids)
    assert expected.exact and expected.note in captions(at)
    assert own["layout"]["title"]["text"] == f"This model's encoder: {expected.what}"
    assert own["layout"]["annotations"][0]["text"] == "this model's encoder, head 1"
    np.testing.assert_allclose(arr(own["data"][0]["z"]), expected.part[0], atol=1e-6)
    np.testing.assert_allclose(arr(own["data"][1]["z"]), expected.part.mean(axis=0), atol=1e-6)
    at.selectbox(key="w_pe_split_head").set_value(3).run()
    np.testing.assert_allclose(arr(chart(ok(at), "This model's encoder: ")["data"][0]["z"]), expected.part[2],
                               atol=1e-6)
    if scheme == "rope":  # q·R(j−p)k − q·k on the sentence: the split's rotation part of layer 1
        split = split_scores(model.network, trace.source_ids, trace.target_ids, "encoder", 0, 2)
        np.testing.assert_allclose(expected.part[2], split.parts["rotation"], atol=1e-6)


def test_a_pre_norm_model_says_why_no_head_has_a_position_part_and_shows_its_table(schemes):
    at = on_page("positional", model="tiny-prenorm-learned")
    assert "No head's position·position part can be given: it is pre-norm" in messages(at)
    own = chart(at, "This model's encoder: its own position vectors")
    model = viz_model.load(schemes / "tiny-prenorm-learned", device="cpu")
    length = min(at.slider(key="w_pe_scheme_len").value, TINY_CONFIG["max_positions"])
    np.testing.assert_allclose(arr(own["data"][0]["z"]), model_position_part(model.network, "encoder", length).part[0],
                               atol=1e-6)
    assert "only in the first layer of a post-norm model" in messages(at)  # the split says why in one line
    assert "can be told apart in the first layer only" not in captions(at)


def test_t5s_formula_has_no_scale_where_the_model_leaves_its_scores_unscaled(schemes):
    for name, scaled in (("tiny-t5-like", False), ("tiny-relative", True)):
        at = on_page("positional", model=name)
        at.radio(key="w_pe_scheme").set_value("relative").run()
        formulas = [e.value for e in ok(at).latex if r"\mathrm{bucket}" in e.value]
        assert len(formulas) == 1 and (r"\sqrt{d_k}" in formulas[0]) == scaled, formulas
        assert ("this model divides it by √d_k" in captions(at)) == scaled
        at.radio(key="w_pe_scheme").set_value("alibi").run()
        formulas = [e.value for e in ok(at).latex if "m_h" in e.value]
        assert len(formulas) == 1 and (r"\sqrt{d_k}" in formulas[0]) == scaled, formulas
    split = chart(at, "Encoder self-attention, layer 1, head 1")
    assert len(split["data"]) == 3  # the T5-like model's split: score, content, bias


def test_the_split_follows_the_chosen_stack_layer_head_and_tokens(schemes):
    at = on_page("positional", model="tiny-relative")
    at.selectbox(key="w_pe_split_stack").set_value("decoder").run()
    at.selectbox(key="w_pe_split_layer").set_value(3).run()
    at.selectbox(key="w_pe_split_head").set_value(2).run()
    ok(at)
    at.selectbox(key="w_pe_split_query").set_value(2).run()
    at.selectbox(key="w_pe_split_key").set_value(1).run()
    ok(at)
    model = viz_model.load(schemes / "tiny-relative", device="cpu")
    trace = model.trace(SENTENCE, beam=1)
    expected = split_scores(model.network, trace.source_ids, trace.target_ids, "decoder", 2, 1)
    table = tables(at)[-1]
    assert table.loc["position bias", "value"] == pytest.approx(float(expected.parts["position bias"][2, 1]),
                                                                abs=1e-6)
    assert f"weight {trace.decoder_attentions[2][1][2, 1]:.4f}" in captions(at)
    chart(at, "Decoder self-attention, layer 3, head 2")


def test_each_scheme_at_its_defaults(schemes):
    at = on_page("positional", model="tiny-alibi")
    assert at.radio(key="w_pe_scheme").value == "alibi"  # the loaded model's own scheme first
    at.radio(key="w_pe_scheme").set_value("rope").run()
    ok(at)
    chart(at, "RoPE: each pair's angle at each position")
    decay = chart(at, "RoPE: q·k of one vector with itself at a distance")
    assert [t["name"] for t in decay["data"]] == [f"d_head {TINY_CONFIG['d_model'] // TINY_CONFIG['heads']}",
                                                  "d_head 128"]
    assert "falls to 0." in captions(at)
    at.radio(key="w_pe_scheme").set_value("alibi").run()
    slopes = chart(ok(at), "ALiBi: each head's slope")
    np.testing.assert_allclose(arr(slopes["data"][0]["y"]), alibi_slopes(TINY_CONFIG["heads"]).numpy(), rtol=1e-6)
    at.radio(key="w_pe_scheme").set_value("relative").run()
    chart(ok(at), "T5's relative bias: the bucket of each offset")
    own = next(c for c in charts(at) if any(a["text"] == "this model's encoder, head 1"
                                            for a in c["layout"].get("annotations", [])))
    length = min(at.slider(key="w_pe_scheme_len").value, TINY_CONFIG["max_positions"])
    model = viz_model.load(schemes / "tiny-alibi", device="cpu")
    np.testing.assert_allclose(arr(own["data"][0]["z"]), model_offset_part(model.network, "encoder", length)[0],
                               atol=1e-6)
    assert not [c for c in charts(at) if "learned value per bucket" in str(c["layout"].get("title"))]


def test_the_length_experiment_trains_each_scheme_and_tests_it_beyond_its_lengths(schemes):
    at = on_page("positional", model="tiny-rope")
    assert "Press Train and test" in messages(at)
    at.multiselect(key="pe_len_schemes").set_value(["learned", "alibi"])
    at.slider(key="pe_len_seconds").set_value(2)
    next(b for b in at.button if b.label == "Train and test").click().run()
    ok(at)
    accuracy = chart(at, "copy: exact-sequence accuracy (greedy) by length")
    assert [t["name"] for t in accuracy["data"] if t.get("showlegend") is not False][:2] == ["learned", "alibi"]
    result = at.session_state["pe_len_result"]
    assert set(result.runs) == {"learned", "alibi"} and max(result.settings.lengths) > result.settings.max_length
    assert result.summary().splitlines()[0] in "\n".join(m.value for m in at.markdown)
    at.selectbox(key="w_pe_len_kind").set_value("encoder").run()
    ok(at)
    at.multiselect(key="pe_len_schemes").set_value([])
    next(b for b in at.button if b.label == "Train and test").click().run()
    assert "Cannot run the experiment: schemes" in messages(ok(at))
