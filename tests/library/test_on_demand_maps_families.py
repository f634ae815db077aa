"""Maps made on demand equal the full maps for the imported families (tests/support: small random models built by
transformers, imported with ``viz-model import``), fp32 on the CPU, atol 1e-5: a language model's trace over its
prompt and a cached continuation (Llama with grouped heads, Mistral's sliding window, Gemma 2's soft cap, BLOOM's
ALiBi, GPT-2, gpt-oss's learned sinks), and `TranslationModel.trace(maps="on_demand")`'s encoder, decoder and cross
maps (this project's model, T5's relative bias, Marian's sinusoids, BART's learned positions), saved and loaded
back."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
from support.hf import build_marian_folder, import_folder  # noqa: E402
from support.hf_families import build_bart_folder, build_t5_folder  # noqa: E402
from support.hf_lm import build_lm_folder, import_lm  # noqa: E402

from viz_model.on_demand import FULL_MAPS_MAX_TOKENS, OnDemandMaps  # noqa: E402
from viz_model.trace import AttentionTrace  # noqa: E402

ATOL = 1e-5  # float32 rounding: a remade score may sum in another order than the layer's batched product
PROMPT = "the dog sees the cat and the cat sees the dog near the house"


@pytest.fixture(scope="module", params=["llama", "mistral", "gemma2", "bloom", "gpt2", "gpt_oss"])
def language_model(request, tmp_path_factory):
    return import_lm(build_lm_folder(tmp_path_factory.mktemp("hf"), request.param), tmp_path_factory.mktemp("lm"))


def test_a_language_models_trace_made_on_demand_equals_its_full_trace(language_model):
    full = language_model.trace(PROMPT, max_new_tokens=5, maps="full")
    lazy = language_model.trace(PROMPT, max_new_tokens=5, maps="on_demand")
    assert isinstance(lazy.decoder_attentions, OnDemandMaps) and isinstance(full.decoder_attentions, list)
    assert lazy.target_ids == full.target_ids and lazy.num_heads == full.num_heads
    for layer, (made, kept) in enumerate(zip(lazy.decoder_attentions, full.decoder_attentions)):
        np.testing.assert_allclose(made, kept, rtol=0, atol=ATOL, err_msg=f"layer {layer}")
    assert lazy.nbytes < full.nbytes
    np.testing.assert_allclose(lazy.head_map("decoder", 0, 1, slice(2, 6)), full.head_map("decoder", 0, 1)[2:6],
                               rtol=0, atol=ATOL)
    again = AttentionTrace.from_npz_bytes(lazy.to_npz_bytes())
    np.testing.assert_array_equal(again.head_map("decoder", 1, 0), lazy.head_map("decoder", 1, 0))


def test_auto_keeps_maps_up_to_the_threshold_and_a_bad_mode_is_refused(language_model, monkeypatch):
    assert FULL_MAPS_MAX_TOKENS == 0  # the benchmark's rule: "auto" keeps recipes at every length
    assert isinstance(language_model.trace(PROMPT, max_new_tokens=1).decoder_attentions, OnDemandMaps)
    monkeypatch.setattr("viz_model.on_demand.FULL_MAPS_MAX_TOKENS", 64)  # a threshold a machine could give
    assert isinstance(language_model.trace(PROMPT, max_new_tokens=1).decoder_attentions, list)
    assert isinstance(language_model.trace(PROMPT, max_new_tokens=1, maps="on_demand").decoder_attentions,
                      OnDemandMaps)
    with pytest.raises(ValueError, match="maps must be one of auto, full, on_demand, got 'lazy'"):
        language_model.trace(PROMPT, max_new_tokens=1, maps="lazy")


@pytest.fixture(scope="module", params=["ours", "t5", "marian", "bart"])
def translator(request, tmp_path_factory):
    if request.param == "ours":
        return request.getfixturevalue("tiny_model")
    root = tmp_path_factory.mktemp("hf")
    build = {"t5": lambda: build_t5_folder(root, "1.1"), "marian": lambda: build_marian_folder(root),
             "bart": lambda: build_bart_folder(root)}[request.param]
    return import_folder(build(), tmp_path_factory, request.param)


@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_a_translators_trace_made_on_demand_equals_its_full_trace_saved_and_loaded(translator, suffix, tmp_path):
    text = "the dog sees the cat"
    full = translator.trace(text, maps="full")
    lazy = translator.trace(text, maps="on_demand")
    assert lazy.output_ids == full.output_ids and lazy.translation == full.translation
    lazy.save(tmp_path / f"t{suffix}")
    again = AttentionTrace.load(tmp_path / f"t{suffix}")
    for kind in ("encoder", "decoder", "cross"):
        assert isinstance(lazy.attentions(kind), OnDemandMaps) and isinstance(full.attentions(kind), list)
        assert isinstance(again.attentions(kind), OnDemandMaps)
        for layer, kept in enumerate(full.attentions(kind)):
            np.testing.assert_allclose(lazy.attentions(kind)[layer], kept, rtol=0, atol=ATOL,
                                       err_msg=f"{kind} layer {layer}")
            np.testing.assert_array_equal(again.attentions(kind)[layer], lazy.attentions(kind)[layer])


def test_a_translators_auto_maps_go_on_demand_past_the_threshold_and_a_bad_mode_is_refused(translator,
                                                                                          monkeypatch):
    text = "the dog sees the cat"
    assert isinstance(translator.trace(text).cross_attentions, list)  # a translator's default: maps="full"
    assert isinstance(translator.trace(text, maps="auto").cross_attentions, OnDemandMaps)  # the threshold: 0
    monkeypatch.setattr("viz_model.on_demand.FULL_MAPS_MAX_TOKENS", 64)
    assert isinstance(translator.trace(text, maps="auto").cross_attentions, list)  # a sentence under the threshold
    monkeypatch.setattr("viz_model.on_demand.FULL_MAPS_MAX_TOKENS", 3)
    assert isinstance(translator.trace(text, maps="auto").cross_attentions, OnDemandMaps)
    for bad in ("lazy", None, ["full"]):
        with pytest.raises(ValueError, match=r"^maps must be one of auto, full, on_demand, got "):
            translator.trace(text, maps=bad)


def test_a_1024_token_trace_past_the_threshold_keeps_layers_x_n_x_d_bytes(tmp_path_factory):
    from viz_model.on_demand import FULL_MAPS_MAX_TOKENS

    lm = import_lm(build_lm_folder(tmp_path_factory.mktemp("hf"), "llama"), tmp_path_factory.mktemp("lm"))
    words = PROMPT.split()
    text = " ".join(words[i % len(words)] + str(i % 7) for i in range(240))  # about 1,024 tokens
    with pytest.warns(UserWarning, match="past the 256 this model was trained on"):
        trace = lm.trace(text, max_new_tokens=0)  # maps="auto"
    n, cfg = len(trace.target_ids), lm.config
    assert 1000 <= n <= 1200 and n > FULL_MAPS_MAX_TOKENS and isinstance(trace.decoder_attentions, OnDemandMaps)
    per_layer = (cfg.heads + cfg.kv_heads) * n * cfg.d_head * 4 + 2 * n * 8  # queries, keys, positions
    assert trace.decoder_attentions.nbytes == cfg.decoder_layers * per_layer
    assert trace.decoder_attentions.nbytes * 50 < cfg.decoder_layers * cfg.heads * n * n * 4
    with torch.inference_mode():
        full = lm.network(torch.tensor([trace.target_ids]), need_weights=True).attentions
    np.testing.assert_allclose(trace.head_map("decoder", 1, 3), full[1][0, 3].numpy(), rtol=0, atol=ATOL)


@torch.inference_mode()
def test_a_cached_continuation_holds_the_keys_once_not_once_a_step(language_model):
    ids = language_model.encode(PROMPT)
    _, calls = language_model._decoded(ids, 6, True, None, None, "recipe")
    assert len(calls) == 7
    for out in calls[:-1]:  # each step's keys and cache let go once the next step holds them all
        assert out.cache == [] and all(r.keys.shape[1] == 0 for r in out.recipes)
    assert all(r.keys.shape[1] == len(ids) + 6 for r in calls[-1].recipes)
