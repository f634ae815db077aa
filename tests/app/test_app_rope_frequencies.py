"""AppTest tests of the Positional page's RoPE frequencies tab on tiny models built by transformers from configs
(issue 60): a Pythia (GPT-NeoX, a quarter of each head rotating), a Llama with YaRN, one with dynamic NTK, one with
llama3. The tab says how many dimensions rotate, and its chart of the scalings draws the model's own wavelengths
(transformers' inv_freq) beside the other scalings' (illustrations, rope_scaling's functions) within 1e-6. A RoPE
scaling type still unsupported is one line in load() and on the page, and the app keeps running."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from support.app import arr
from support.hf_lm import build_lm_folder, import_lm
from support.hf_rope import CONFIGS, TRAINED
from test_app_teaching import captions, chart, ok, on_page

import viz_model
from viz_model.lessons import position_length, position_rope
from viz_model.modeldir.checkpoint import CheckpointError
from viz_model.nn import rope_scaling

transformers = pytest.importorskip("transformers")
PYTHIA = {"rotary_pct": 0.25, "hidden_size": 128, "num_attention_heads": 2}  # 16 of 64 dimensions rotate
FACTOR = 4.0
LONGROPE = {"rope_type": "longrope", "rope_theta": 1e4, "short_factor": [1.0] * 4, "long_factor": [2.0] * 4,
            "original_max_position_embeddings": TRAINED}
SAID_LONGROPE = "rope_type 'longrope' is not implemented (default, linear, llama3, yarn, dynamic are)"
SAID_UNKNOWN = "rope_scaling must be one of default, linear, llama3, yarn, dynamic; got 'ntk-by-parts'"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The models folder (each family imported) and each one's Hugging Face folder; beside them a Hugging Face
    folder whose rope_type is longrope and an imported directory whose config names an unknown scaling."""
    root, hf = tmp_path_factory.mktemp("rope-models"), {}
    hf["pythia"] = build_lm_folder(tmp_path_factory.mktemp("hf"), "gpt_neox", folder_name="pythia", **PYTHIA)
    hf["llama3"] = build_lm_folder(tmp_path_factory.mktemp("hf"), "llama", folder_name="llama3")
    for family in ("llama-yarn", "llama-dynamic"):
        hf[family] = build_lm_folder(tmp_path_factory.mktemp("hf"), family, configs=CONFIGS)
    for folder in hf.values():
        import_lm(folder, root)
    longrope = root / "hf-longrope"
    shutil.copytree(hf["llama-yarn"], longrope)
    config = json.loads((longrope / "config.json").read_text())
    (longrope / "config.json").write_text(json.dumps({**config, "rope_parameters": LONGROPE}))
    unknown = root / "unknown-scaling"
    shutil.copytree(root / "llama-yarn", unknown)
    config = json.loads((unknown / "config.json").read_text())
    (unknown / "config.json").write_text(json.dumps({**config, "rope_scaling": "ntk-by-parts"}))
    return root, hf


@pytest.fixture
def rope_app(models, monkeypatch, tmp_path):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(models[0]))
    monkeypatch.setenv("VIZ_MODEL_CACHE", str(tmp_path / "cache"))
    return models


def open_lm(model: str) -> AppTest:
    return ok(on_page("positional", model=model, sentence=""))


def lines(at: AppTest, prefix: str) -> dict[str, np.ndarray]:
    """Each trace of the chart titled `prefix`: its name -> its y values."""
    return {trace["name"]: arr(trace["y"]).astype(float) for trace in chart(at, prefix)["data"]}


def their_wavelengths(folder, **rope) -> np.ndarray:
    """2π / transformers' inv_freq for the folder's config, its rope parameters updated with `rope` (dynamic NTK:
    at `shown_length`, twice the trained length)."""
    from transformers import modeling_rope_utils

    config = transformers.AutoConfig.from_pretrained(folder)
    config.rope_parameters = {**config.rope_parameters, **rope}
    kind = config.rope_parameters.get("rope_type", "default")
    if kind == "dynamic":
        inv_freq, _ = modeling_rope_utils._compute_dynamic_ntk_parameters(config, "cpu", 2 * TRAINED)
    elif kind == "default":
        inv_freq, _ = _default(config)
    else:
        inv_freq, _ = modeling_rope_utils.ROPE_INIT_FUNCTIONS[kind](config, "cpu")
    return 2 * math.pi / inv_freq.double().numpy()


def _default(config):
    """transformers' unscaled inv_freq of `config` (partial rotary included)."""
    rope = config.rope_parameters
    head = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    dim = int(head * rope.get("partial_rotary_factor", 1.0))
    base = rope["rope_theta"]
    import torch

    return 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim), 1.0


def illustrations(dims: int, base: float, trained: int) -> dict[str, np.ndarray]:
    """Each scaling at FACTOR from `trained`, by rope_scaling's functions: the chart's illustration names -> their
    wavelengths."""
    theta = {"linear": rope_scaling.scaled_frequencies(dims, base, "linear", FACTOR),
             "llama3": rope_scaling.scaled_frequencies(dims, base, "llama3", FACTOR, original_max_positions=trained),
             "YaRN": rope_scaling.yarn_frequencies(dims, base, FACTOR, trained),
             "dynamic NTK": rope_scaling.dynamic_frequencies(dims, base, FACTOR, trained, int(FACTOR * trained))}
    return {f"{name} ×{FACTOR:g} (illustration)": 2 * math.pi / t.double().numpy() for name, t in theta.items()}


def test_pythia_says_which_share_of_each_head_rotates_and_draws_its_rotating_pairs(rope_app):
    at = open_lm("pythia")
    assert "Each head: 16 of 64 dimensions per head rotate (25%); the rest carry no position. They turn 8 pairs" \
        in captions(at)
    drawn = lines(at, "RoPE: each rotating pair's wavelength")
    theirs = their_wavelengths(rope_app[1]["pythia"])
    assert len(theirs) == 8  # the rotating pairs only
    np.testing.assert_allclose(drawn["no scaling"], theirs, rtol=1e-6)
    for name, wavelengths in illustrations(16, 5000.0, 256).items():
        np.testing.assert_allclose(drawn[name], wavelengths, rtol=1e-6)
    assert set(drawn) == {"no scaling", *illustrations(16, 5000.0, 256)}
    assert "This model has no scaling: every coloured line is an illustration" in captions(at)
    own = lines(at, "RoPE: each frequency pair's wavelength")["before scaling"]
    np.testing.assert_allclose(own, theirs, rtol=1e-6)


@pytest.mark.parametrize("family, label, trained", [
    ("llama-yarn", "this model: YaRN ×4", TRAINED), ("llama-dynamic", "this model: dynamic NTK ×2", TRAINED),
    ("llama3", "this model: llama3 ×8", 64)])
def test_a_scaled_model_draws_its_own_scaling_beside_the_others(rope_app, family, label, trained):
    at = open_lm(family)
    at.number_input(key="pe_lm_compare_factor").set_value(FACTOR).run()
    ok(at)
    drawn = lines(at, "RoPE: each rotating pair's wavelength")
    folder = rope_app[1][family]
    np.testing.assert_allclose(drawn[label], their_wavelengths(folder), rtol=1e-6)
    np.testing.assert_allclose(drawn["no scaling"], their_wavelengths(folder, rope_type="default"), rtol=1e-6)
    model = viz_model.load(rope_app[0] / family, device="cpu")
    config = model.config
    expected = illustrations(config.rope_dims or config.d_head, config.rope_base, trained)
    own = position_rope.SCALING_NAMES[config.rope_scaling]
    assert set(drawn) == {"no scaling", label} | {n for n in expected if not n.startswith(f"{own} ×")}
    for name in set(drawn) - {"no scaling", label}:
        np.testing.assert_allclose(drawn[name], expected[name], rtol=1e-6)
    assert f"Solid: {label}, as its config says" in captions(at)


@pytest.mark.parametrize("name, said", [("hf-longrope", SAID_LONGROPE), ("unknown-scaling", SAID_UNKNOWN)])
def test_a_rope_scaling_still_unsupported_is_one_line_in_load_and_on_the_page(rope_app, name, said):
    with pytest.raises(CheckpointError) as err:
        viz_model.load(rope_app[0] / name, device="cpu")
    assert said in str(err.value) and "\n" not in str(err.value)
    at = ok(on_page("positional", model=name, sentence=""))
    shown = [e.value for e in at.error if said in e.value]
    assert len(shown) == 1 and "\n" not in shown[0] and shown[0].startswith("This model cannot be loaded: ")
    at = open_lm("pythia")  # the app keeps running: another model opens in the same process
    assert "16 of 64 dimensions per head rotate" in captions(at)


@pytest.mark.parametrize("family", ["llama-yarn", "llama3"])
def test_the_length_experiment_switches_the_configs_scaling_off_and_on(rope_app, family):
    import torch

    root, hf = rope_app
    at = open_lm(family)
    label = next(c.label for c in at.checkbox if c.key == "pe_lm_own_scaling")
    assert label == {"llama-yarn": "With this model's YaRN ×4 scaling (its config's)",
                     "llama3": "With this model's llama3 ×8 scaling (its config's)"}[family]
    model = viz_model.load(root / family, device="cpu")
    ids, tokens = position_length.text_ids(model), 80
    scheme = model.network.scheme
    runs = {}
    for scaled in (False, True):
        at.checkbox(key="pe_lm_own_scaling").set_value(scaled)
        at.number_input(key="pe_lm_tokens").set_value(tokens)
        next(b for b in at.button if b.label == "Measure the loss").click()
        ok(at.run())
        runs[scaled] = arr(chart(at, "Loss of each token of the text by its position")["data"][0]["y"])
        said = "Measured with the model's" if scaled else "switched off: plain RoPE at base"
        assert said in captions(at)
    np.testing.assert_allclose(runs[True], position_length.loss_by_position(model, ids, tokens).losses, atol=1e-6)
    unscaled = position_rope.without_scaling(model)
    np.testing.assert_allclose(runs[False], position_length.loss_by_position(unscaled, ids, tokens).losses, atol=1e-6)
    assert model.network.scheme is scheme and model.config.rope_scaling != "default"  # the loaded model untouched
    assert np.abs(runs[False] - runs[True]).max() > 1e-5  # the scaling changes the loss (random weights: a little)
    config = transformers.AutoConfig.from_pretrained(hf[family])  # transformers' model with the scaling off
    config.rope_parameters = {"rope_type": "default", "rope_theta": config.rope_parameters["rope_theta"]}
    theirs = transformers.LlamaForCausalLM.from_pretrained(hf[family], config=config).eval()
    with torch.no_grad():
        logits = theirs(torch.tensor([ids[:tokens]])).logits[0, :-1].double()
    losses = -torch.log_softmax(logits, -1)[torch.arange(tokens - 1), torch.tensor(ids[1:tokens])]
    np.testing.assert_allclose(runs[False], losses.numpy(), atol=1e-4)
