"""Watch attention form's series mode (issue 60, item 3), in AppTest: a folder of a language model's checkpoints
among the app's model folders is picked, and the page draws the best head's scores and the loss on the repeats at
every step, and one score of every head at every step, as `series_scores` computes them; a series whose steps are
no one model is said in one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support.app import TINY_MODEL, arr, build_tiny_assets, charts, messages, ok, start, switch_to

from app.views.watch.series_watch import summary
from viz_model.analysis.checkpoint_scores import series_scores
from viz_model.config import ModelConfig
from viz_model.modeldir.checkpoint import network_class, save_model_dir
from viz_model.modeldir.series import folder_series, record_step, step_folder
from viz_model.tokenization.tokenizer import Tokenizer

STEPS = (0, 10, 20)
LM = {"kind": "decoder", "encoder_layers": 0, "decoder_layers": 2, "d_model": 32, "heads": 4, "kv_heads": 2,
      "d_ff": 64, "dropout": 0.0, "max_positions": 128, "positional": "rope", "norm": "pre", "normalization": "rms",
      "activation": "silu", "gated_ffn": True, "attention_bias": False, "ffn_bias": False, "scale_embeddings": False}


def save_series(folder, tokenizer, configs) -> None:
    """A series folder of language models of `configs` (one per step of `STEPS`), each with its own random weights."""
    for step, config in zip(STEPS, configs):
        torch.manual_seed(step)
        save_model_dir(network_class(config)(config), tokenizer, step_folder(folder, step))
        record_step(folder, step)


@pytest.fixture(scope="module")
def series_assets(tmp_path_factory):
    """The app's tiny assets beside two series: ``tiny-lm-run`` (one model) and ``mixed-run`` (a step wider)."""
    root = build_tiny_assets(tmp_path_factory.mktemp("series-assets"))
    tokenizer = Tokenizer.load(root / TINY_MODEL / "tokenizer.model")
    config = ModelConfig.from_dict({**LM, "vocab_size": tokenizer.vocab_size})
    wider = ModelConfig.from_dict({**LM, "vocab_size": tokenizer.vocab_size, "d_model": 48})
    save_series(root / "tiny-lm-run", tokenizer, [config] * 3)
    save_series(root / "mixed-run", tokenizer, [config, wider, config])
    return root


def watch_series(series_assets, monkeypatch, name: str):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(series_assets))
    at = start(sentence="A man runs.")
    switch_to(at, "watch").run()
    ok(at)
    at.radio(key="watch_experiment").set_value("series").run()
    at.selectbox(key="series_pick").set_value(name).run()
    return ok(at)


def test_a_series_draws_every_checkpoints_scores(series_assets, monkeypatch):
    at = watch_series(series_assets, monkeypatch, "tiny-lm-run")
    expected = series_scores(folder_series(series_assets / "tiny-lm-run"), "cpu")
    lines = next(c for c in charts(at) if any(d.get("name") == "induction score" for d in c["data"]))
    by_name = {d["name"]: d for d in lines["data"]}
    assert [int(x) for x in arr(by_name["induction score"]["x"])] == list(STEPS)
    for name, score in (("induction score", "induction"), ("previous-token score", "previous_token"),
                        ("first-token (sink) share", "first_token")):
        np.testing.assert_allclose(arr(by_name[name]["y"]), [expected[s].best(score) for s in STEPS], atol=1e-9)
    np.testing.assert_allclose(arr(by_name["loss: repeats"]["y"]), [expected[s].loss_repeats for s in STEPS])
    heat = next(c for c in charts(at) if c["data"][0]["type"] == "heatmap")
    grid = np.array([expected[s].heads["induction"].to_numpy() for s in STEPS])
    np.testing.assert_allclose(arr(heat["data"][0]["z"]), grid, atol=1e-9)
    assert (heat["data"][0]["zmin"], heat["data"][0]["zmax"]) == (0.0, 1.0)  # one fixed scale, not the grid's own
    assert summary(expected) in [m.value for m in at.markdown]
    assert not messages(at)


def test_a_series_of_mixed_architectures_is_said_in_one_line(series_assets, monkeypatch):
    at = watch_series(series_assets, monkeypatch, "mixed-run")
    errors = [e.value for e in at.error]
    assert errors == ["This series cannot be shown: step 10 has another architecture than step 0 (2 layers x 4 "
                      "heads, d_model 48, vocabulary 160 against 2 layers x 4 heads, d_model 32, vocabulary 160): a "
                      "series holds one model across its training; mixed architectures cannot be compared step by "
                      "step"]


def test_a_series_opens_as_one_model_with_a_training_step_slider(series_assets, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(series_assets))
    at = ok(start(model="tiny-lm-run", sentence="A man runs."))
    slider = at.select_slider(key="series_step_tiny-lm-run")
    assert [int(s) for s in slider.options] == list(STEPS) and int(slider.value) == STEPS[-1]
    captions = [c.value.replace("\\", "") for c in at.sidebar.caption]
    assert "tiny-lm-run · checkpoint series" in captions and "Step 20 of 20: the checkpoint step-000020" in captions
    last = [arr(d["z"]) for c in charts(at) for d in c["data"] if d.get("type") == "heatmap"]
    ok(slider.set_value(10).run())
    assert "Step 10 of 20: the checkpoint step\\-000010" in [c.value for c in at.sidebar.caption]
    earlier = [arr(d["z"]) for c in charts(at) for d in c["data"] if d.get("type") == "heatmap"]
    assert last and len(earlier) == len(last) and not np.allclose(earlier[0], last[0])  # another step's maps


def test_a_step_of_another_architecture_is_said_in_one_line_in_the_sidebar(series_assets, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(series_assets))
    at = start(model="mixed-run", sentence="A man runs.")
    at.select_slider(key="series_step_mixed-run").set_value(10).run()
    assert [e.value for e in at.sidebar.error] == [
        "This model cannot be loaded: step 10 has another architecture than step 0 (2 layers x 4 heads, d_model 48, "
        "vocabulary 160 against 2 layers x 4 heads, d_model 32, vocabulary 160): a series holds one model across "
        "its training; mixed architectures cannot be compared step by step"]
