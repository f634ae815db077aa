"""AppTest tests of the Positional encoding page with a language model open (CPU, fp32): an imported tiny Llama
(llama3-scaled RoPE, 256 positions), GPT-2 (a learned table of 128) and BLOOM (ALiBi, 6 heads), each opening on its
own scheme with numbers checked against the library and transformers; and translators opening on theirs."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from support.app import arr, build_scheme_assets
from support.hf_lm import lm_models_folder
from test_app_teaching import captions, chart, messages, metrics, ok, on_page, tables, titles

import viz_model
from viz_model.lessons import position_length, position_rope, position_scaling, position_split

LLAMA, GPT2, BLOOM = "llama", "gpt2", "bloom"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return lm_models_folder(tmp_path_factory, (LLAMA, GPT2, BLOOM))


@pytest.fixture
def lm_app(models, monkeypatch):
    """The app's models folder: the three imported language models."""
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(models))
    return models


def open_lm(model: str, **params: str) -> AppTest:
    return on_page("positional", model=model, sentence="", **params)


def tab_labels(at: AppTest) -> list[str]:
    return [t.label for t in at.tabs]


def open_tab(at: AppTest) -> str:
    """The label of the tab the page opens on (its tab container's default)."""
    containers = [node for node in at._tree.main.children.values() if node.type == "tab_container"]
    assert len(containers) == 1, [node.type for node in at._tree.main.children.values()]
    tabs = list(containers[0].children.values())
    return tabs[containers[0].proto.tab_container.default_tab_index].label


def measure(at: AppTest, tokens: int) -> AppTest:
    at.number_input(key="pe_lm_tokens").set_value(tokens)
    next(b for b in at.button if b.label == "Measure the loss").click()
    return ok(at.run())


# --- RoPE (the tiny Llama) ---------------------------------------------------------------------------------------
def test_a_rope_model_opens_on_its_frequencies_with_llama3s_stretch(lm_app):
    at = open_lm(LLAMA)
    assert tab_labels(at)[:3] == ["RoPE frequencies", "q·k by distance", "Frequency bands by head"]
    assert open_tab(at) == "RoPE frequencies"
    model = viz_model.load(lm_app / LLAMA, device="cpu")
    expected = position_rope.frequency_table(model.config)
    shown = tables(at)[0]
    assert list(shown["scaling"]) == list(expected["scaling"]) == ["kept", "stretched", "stretched", "stretched"]
    np.testing.assert_allclose(shown["θ"], expected["theta"], rtol=1e-12)
    marks = [a["text"] for a in chart(at, "RoPE: each frequency pair's wavelength")["layout"]["annotations"]]
    assert marks == ["trained length 64", "max_position_embeddings 256"]


def test_the_decay_and_the_bands_are_the_models_own_heads(lm_app):
    at = open_lm(LLAMA)
    at.selectbox(key="w_pe_lm_layer").set_value(2).run()
    at.selectbox(key="w_pe_lm_band_layer").set_value(2).run()
    ok(at)
    model = viz_model.load(lm_app / LLAMA, device="cpu")
    measures = position_rope.rope_measures(model, position_length.text_ids(model)[:256], 64)
    measured = chart(at, "Layer 2: mean score of a query on the key that far back")
    assert len(measured["data"]) == 4  # one line per head
    np.testing.assert_allclose(arr(measured["data"][2]["y"]), measures.measured[1, 2], atol=1e-6)
    rotation = chart(at, "Layer 2: the mean query and mean key, turned Δ apart")
    np.testing.assert_allclose(arr(rotation["data"][0]["y"]), measures.rotation[1, 0], atol=1e-6)
    bands = chart(at, "Share of each head's q·k in the low (semantic) band")
    np.testing.assert_allclose(arr(bands["data"][0]["z"]), measures.band_share("low"), atol=1e-9)
    pairs = chart(at, "Layer 2: each frequency pair's share")
    assert pairs["data"][0]["x"] == ["0 (high)", "1 (low)", "2 (low)", "3 (low)"]
    assert "1 pair of 4 is high" in captions(at)


def test_the_score_split_of_a_rope_head_adds_up(lm_app):
    at = open_lm(LLAMA)
    at.selectbox(key="w_pe_split_layer").set_value(2).run()
    at.selectbox(key="w_pe_split_head").set_value(3).run()
    ok(at)
    split = chart(at, "Layer 2, head 3: score = sum of the parts")
    model = viz_model.load(lm_app / LLAMA, device="cpu")
    expected = position_split.split_lm_scores(model, position_length.text_ids(model)[:24], 1, 2)
    assert [d["name"] for d in split["data"]] == ["score", "content", "rotation"]
    np.testing.assert_allclose(arr(split["data"][2]["z"]), expected.parts["rotation"], atol=1e-6)
    assert "they add up to the score the model's forward recorded" in captions(at)


def test_the_loss_past_ropes_trained_length_is_warned_and_drawn(lm_app):
    at = open_lm(LLAMA)
    assert at.number_input(key="pe_lm_tokens").value == 512  # twice the trained length
    at = measure(at, 300)
    assert "300 positions are past the 256 this model was trained on" in messages(at)
    loss = chart(at, "Loss of each token of the text by its position")
    model = viz_model.load(lm_app / LLAMA, device="cpu")
    expected = position_length.loss_by_position(model, position_length.text_ids(model), 300)
    np.testing.assert_allclose(arr(loss["data"][0]["y"]), expected.losses, atol=1e-6)
    inside, beyond = expected.inside_beyond()
    shown = metrics(at)
    assert shown["Mean loss within the trained length"] == f"{inside:.3f} nats"
    assert shown["Mean loss past position 256"] == f"{beyond:.3f} nats"


def test_the_scalings_replace_llama3s_own_from_its_trained_length(lm_app):
    at = open_lm(LLAMA)
    at.number_input(key="pe_lm_tokens").set_value(160)
    at.multiselect(key="pe_lm_scalings").set_value(["dynamic"])
    next(b for b in at.button if b.label == "Measure with the scalings").click()
    at = ok(at.run())
    model = viz_model.load(lm_app / LLAMA, device="cpu")
    runs = position_scaling.losses_by_scaling(model, position_length.text_ids(model), 160, 4.0, ["dynamic"])
    table = tables(at)[-1]
    assert list(table["run"]) == [position_scaling.AS_LOADED, "dynamic NTK × 4"]
    np.testing.assert_allclose(table["mean loss within 64"], [round(float(r.losses[:64].mean()), 3)
                                                              for r in runs.values()], atol=1e-3)
    assert model.config.rope_scaling == "llama3"  # the page's copy, not the model


# --- a learned table (GPT-2) -------------------------------------------------------------------------------------
def test_gpt2_opens_on_its_learned_table_and_cannot_split(lm_app):
    at = open_lm(GPT2)
    assert open_tab(at) == "Its table of positions"
    assert "Its principal components" in " ".join(titles(at))
    model = viz_model.load(lm_app / GPT2, device="cpu")
    table = model.network.positions.embedding.weight.detach().double().numpy()
    similarity = chart(at, "cos(PE(p), PE(q)) for positions 0–127")
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    np.testing.assert_allclose(arr(similarity["data"][0]["z"]), unit @ unit.T, atol=1e-9)
    assert "is pre-norm" in messages(at) and not any(t.startswith("Layer 1, head 1") for t in titles(at))


def test_gpt2_refuses_past_its_positions_in_one_line(lm_app):
    at = open_lm(GPT2)
    assert at.number_input(key="pe_lm_tokens").value == 256
    at = measure(at, 200)
    assert "The loss cannot be measured: 200 positions asked; this model has 128" in messages(at)
    assert not any(t.startswith("Loss of each token") for t in titles(at))
    assert "This model has learned positions, not rotary ones: the scalings stretch RoPE's frequencies" in \
        messages(at)
    at = measure(at, 128)
    assert chart(at, "Loss of each token of the text by its position")
    assert "past the" not in messages(at)


# --- ALiBi (BLOOM) -----------------------------------------------------------------------------------------------
def test_bloom_opens_on_its_slopes_and_its_split_adds_up(lm_app):
    bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")
    at = open_lm(BLOOM)
    assert open_tab(at) == "ALiBi slopes"
    slopes = bloom.build_alibi_tensor(__import__("torch").ones(1, 2), 6, __import__("torch").float32)[:, 0, 1]
    np.testing.assert_allclose(arr(chart(at, "ALiBi: each head's slope")["data"][0]["y"]), slopes.numpy())
    bias = chart(at, "ALiBi: what each head adds")
    np.testing.assert_allclose(arr(bias["data"][4]["y"])[:5], -slopes[4].item() * np.arange(5), atol=1e-7)
    split = chart(at, "Layer 1, head 1: score = sum of the parts")
    assert [d["name"] for d in split["data"]] == ["score", "content", "position bias"]
    assert "they add up to the score the model's forward recorded" in captions(at)
    at = measure(at, 300)  # no trained length recorded: drawn, no warning
    assert chart(at, "Loss of each token of the text by its position") and "past the" not in messages(at)
    assert "records no trained length" in captions(at)


# --- translators open on their own scheme -------------------------------------------------------------------------
@pytest.fixture
def schemes(tmp_path_factory, monkeypatch):
    root = build_scheme_assets(tmp_path_factory.mktemp("scheme-assets"))
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(root))
    return root


@pytest.mark.parametrize("scheme, tab", [("relative", "Today's schemes"), ("alibi", "Today's schemes"),
                                         ("sinusoidal", "The sinusoids"), ("learned", "On your sentence")])
def test_a_translator_opens_on_its_own_scheme(schemes, scheme, tab):
    at = on_page("positional", model=f"tiny-{scheme}")
    assert open_tab(at) == tab
    assert at.radio(key="w_pe_scheme").value == scheme
