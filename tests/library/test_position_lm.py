"""The Positional encoding lessons of a loaded language model (CPU, fp32/fp64): RoPE's frequencies against
transformers' llama3 and linear scalings, the q·k decay and band shares of hand-made heads, ALiBi's slopes against
BLOOM's, a learned table against GPT-2's wpe, the score split adding up to the recorded scores, and the loss by
position against transformers' own model on the page's text."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
from support.hf_lm import CONFIGS, build_lm_folder, import_lm  # noqa: E402

from viz_model.lessons import position_alibi, position_length, position_rope, position_split, position_table  # noqa: E402,E501
from viz_model.lessons.position_parts import LessonError, rope_decay  # noqa: E402
from viz_model.lessons.position_text import LONG_TEXT  # noqa: E402
from viz_model.nn.rotary import rope_angles, rotate  # noqa: E402

FAMILIES = ("llama", "llama2", "gpt2", "bloom")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """family -> (its Hugging Face folder, the imported `LanguageModel` on the CPU)."""
    hf, root = tmp_path_factory.mktemp("hf-lm"), tmp_path_factory.mktemp("lm")
    out = {}
    for family in FAMILIES:
        folder = build_lm_folder(hf, family)
        out[family] = folder, import_lm(folder, root)
    return out


def hf_model(folder, family):
    return getattr(transformers, CONFIGS[family][1]).from_pretrained(folder, attn_implementation="eager").eval()


# --- RoPE's frequencies ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family, function", [("llama", "_compute_llama3_parameters"),
                                              ("llama2", "_compute_linear_scaling_rope_parameters")])
def test_the_models_frequencies_equal_transformers_scaled_ones(folders, family, function):
    from transformers import modeling_rope_utils

    folder, model = folders[family]
    theirs, _ = getattr(modeling_rope_utils, function)(transformers.AutoConfig.from_pretrained(folder), "cpu")
    table = position_rope.frequency_table(model.config)
    assert np.array_equal(table["theta"].to_numpy(), theirs.double().numpy())
    stretched = np.isclose(table["unscaled theta"].to_numpy() / theirs.double().numpy(), model.config.rope_factor)
    assert np.array_equal(table["scaling"].to_numpy() == position_rope.STRETCHED, stretched)


def test_llama3_keeps_the_fast_pairs_and_stretches_the_slow_ones(folders):
    table = position_rope.frequency_table(folders["llama"][1].config)  # original length 64, factor 8
    # wavelengths 2π, 167, 4443, 118000 against 64/4 = 16 and 64/1 = 64: the first kept, the others all stretched
    assert list(table["scaling"]) == ["kept", "stretched", "stretched", "stretched"]
    assert list(table["stretch"].round(6)) == [1.0, 8.0, 8.0, 8.0]
    assert list(table["band"]) == ["high", "low", "low", "low"]  # within 64 positions only the first turns
    table = position_rope.frequency_table(folders["llama2"][1].config)  # linear, factor 2: every pair
    assert set(table["scaling"]) == {"stretched"} and np.allclose(table["stretch"], 2.0)


def test_a_model_without_rope_has_no_frequencies(folders):
    with pytest.raises(LessonError, match="learned, not RoPE"):
        position_rope.frequency_table(folders["gpt2"][1].config)


# --- the decay of q·k and the bands, on hand-made heads -----------------------------------------------------------
def test_the_rotation_decay_of_all_ones_is_roformers():
    d_head, base, n = 16, 10000.0, 40
    ones = torch.ones(1, 5, d_head)
    theta = (1.0 / base ** (np.arange(0, d_head, 2) / d_head))
    ours = position_rope.rotation_decay(ones, ones, theta, n, math.sqrt(d_head))[0]
    assert np.allclose(ours, rope_decay(d_head, base, n), atol=1e-5)


def test_the_rotation_decay_is_the_mean_score_of_the_pairs_turned_that_far_apart():
    torch.manual_seed(0)
    d_head, length, n = 8, 6, 12
    q, k = torch.randn(2, length, d_head, dtype=torch.float64), torch.randn(2, length, d_head, dtype=torch.float64)
    theta = torch.tensor([1.0, 0.3, 0.05, 0.001])
    ours = position_rope.rotation_decay(q, k, theta.numpy(), n, 2.0)
    for distance in range(n):  # every query at position `distance`, every key at 0: the model's own rotation
        cq, sq = rope_angles(torch.tensor([[distance]]), d_head, frequencies=theta)
        ck, sk = rope_angles(torch.tensor([[0]]), d_head, frequencies=theta)
        turned_q = rotate(q[None].float(), cq, sq)[0].double()
        turned_k = rotate(k[None].float(), ck, sk)[0].double()
        expected = (turned_q @ turned_k.transpose(-1, -2)).mean((-1, -2)) / 2.0
        assert np.allclose(ours[:, distance], expected.numpy(), atol=1e-5), distance


def test_the_measured_decay_reads_each_diagonal():
    length = 7
    p, j = np.arange(length)[:, None], np.arange(length)[None, :]
    scores = np.stack([np.where(p >= j, 10.0 - (p - j), 0.0), np.where(p >= j, (p - j) ** 2.0, 0.0)])
    measured = position_rope.measured_decay(scores, 9)
    assert np.array_equal(measured[0, :7], 10.0 - np.arange(7)) and np.array_equal(measured[1, :7], np.arange(7) ** 2)
    assert np.isnan(measured[:, 7:]).all()  # no pair is 7 or 8 apart in 7 tokens


def test_band_shares_find_the_pair_a_head_uses():
    d_head, half = 8, 4
    q = torch.zeros(2, 3, d_head)
    k = torch.zeros(2, 3, d_head)
    q[0, :, 1], k[0, :, 1 + half] = 2.0, 3.0  # head 1: pair 1 only (its two dimensions)
    q[1, :, 0], k[1, :, 0] = 1.0, 1.0  # head 2: pairs 0 and 3, the slow one three times as strong
    q[1, :, 3], k[1, :, 3 + half] = 1.0, 3.0
    shares = position_rope.band_shares(q, k)
    assert np.allclose(shares, [[0, 1, 0, 0], [0.25, 0, 0, 0.75]])


def test_rope_measures_of_the_tiny_llama(folders):
    model = folders["llama"][1]
    ids = position_length.text_ids(model)[:60]
    measures = position_rope.rope_measures(model, ids, 16)
    assert measures.measured.shape == measures.rotation.shape == (2, 4, 16)
    assert np.allclose(measures.shares.sum(-1), 1.0)
    assert np.allclose(measures.band_share("high") + measures.band_share("low"), 1.0)
    record = model.forced_pass(ids, need_weights=True).records[1]
    assert np.isclose(measures.measured[1, 2, 0], record.scores[0, 2].detach().diagonal().double().mean().item())


# --- ALiBi ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("heads", [6, 8, 12])
def test_alibi_slopes_equal_build_alibi_tensors(folders, heads):
    bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")
    config = dataclasses.replace(folders["bloom"][1].config, heads=heads, d_model=heads * 8)
    theirs = bloom.build_alibi_tensor(torch.ones(1, 2), heads, torch.float32)[:, 0, 1]  # m_h · position 1
    assert np.array_equal(position_alibi.model_slopes(config), theirs.double().numpy())
    bias = position_alibi.distance_bias(config, 5)
    assert np.allclose(bias, -theirs.double().numpy()[:, None] * np.arange(5))
    assert np.allclose(position_alibi.half_distance(config), 1 / theirs.double().numpy())


# --- a learned table ---------------------------------------------------------------------------------------------
def test_the_learned_table_is_gpt2s_wpe(folders):
    folder, model = folders["gpt2"]
    table = position_table.learned_table(model)
    assert np.allclose(table, hf_model(folder, "gpt2").transformer.wpe.weight.detach().double().numpy())
    similarity = position_table.cosine_similarity(table)
    assert np.allclose(np.diag(similarity), 1.0) and np.allclose(similarity, similarity.T)


def test_principal_components_of_a_table_on_one_line():
    direction = np.array([3.0, 4.0, 0.0])
    table = np.arange(5)[:, None] * direction[None, :]  # every row on one line: one component holds everything
    coordinates, explained = position_table.principal_components(table, 2)
    assert np.allclose(explained, [1.0, 0.0])
    assert np.allclose(np.abs(coordinates[:, 0]), np.abs((np.arange(5) - 2) * 5.0))


# --- the score split ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["llama", "bloom"])
def test_the_split_adds_up_to_the_recorded_scores(folders, family):
    model = folders[family][1]
    ids = position_length.text_ids(model)[:40]
    split = position_split.split_lm_scores(model, ids, 1, 3)
    assert split.adds_up and split.residual < 1e-4
    record = model.forced_pass(ids, need_weights=True).records[1]
    if family == "bloom":  # the bias is the record's own
        assert np.allclose(split.parts["position bias"], record.position_bias[0, 3].detach().numpy(), atol=1e-5)
    else:  # the rotation part is the record's too (its scaled frequencies: unscaled ones would not add up)
        assert np.allclose(split.parts["rotation"], record.position_bias[0, 3].detach().numpy(), atol=1e-4)


def test_the_split_refuses_a_learned_table_and_a_head_outside(folders):
    with pytest.raises(LessonError, match="pre-norm"):
        position_split.split_lm_scores(folders["gpt2"][1], [1, 2, 3], 0, 0)
    with pytest.raises(LessonError, match="head must be an integer from 1 to 4"):
        position_split.split_lm_scores(folders["llama"][1], [1, 2, 3], 0, 4)


# --- loss by position --------------------------------------------------------------------------------------------
def test_the_loss_by_position_is_transformers(folders):
    folder, model = folders["llama"]
    ids = position_length.text_ids(model)
    assert len(ids) > 600  # the text runs well past the fixture's 256 positions
    result = position_length.loss_by_position(model, ids, 300)
    assert result.warning == ("300 positions are past the 256 this model was trained on; its attention there is "
                              "untested")
    with torch.no_grad():
        logits = hf_model(folder, "llama")(torch.tensor([ids[:300]])).logits[0, :-1].double()
    theirs = torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:300]), reduction="none").numpy()
    assert np.allclose(result.losses, theirs, atol=1e-4)
    inside, beyond = result.inside_beyond()
    assert np.isclose(inside, theirs[:256].mean(), atol=1e-4) and np.isclose(beyond, theirs[256:].mean(), atol=1e-4)
    assert np.allclose(result.smoothed(1), result.losses)
    assert np.isclose(result.smoothed(10)[50], theirs[41:51].mean(), atol=1e-4)


def test_a_learned_table_refuses_past_its_rows_and_bloom_records_no_length(folders):
    gpt2 = folders["gpt2"][1]
    with pytest.raises(LessonError, match="this model has 128 .*no row past position 127"):
        position_length.loss_by_position(gpt2, position_length.text_ids(gpt2), 129)
    assert position_length.loss_by_position(gpt2, position_length.text_ids(gpt2), 128).warning is None
    bloom = folders["bloom"][1]
    result = position_length.loss_by_position(bloom, position_length.text_ids(bloom), 300)
    assert result.trained is None and result.warning is None and result.inside_beyond()[1] is None


def test_the_page_text_is_long_prose():
    assert 1400 <= len(LONG_TEXT.split()) <= 1600 and len(LONG_TEXT) < 20_000


@pytest.mark.parametrize("family", ["qwen3", "gemma", "gemma3", "mistral", "qwen2"])
def test_the_split_adds_up_in_every_layer_of_every_rope_family(tmp_path_factory, family):
    """Query/key norms (Qwen3), Gemma's scale, Gemma 3's sliding layers turning with their own base, windows."""
    model = import_lm(build_lm_folder(tmp_path_factory.mktemp("hf"), family), tmp_path_factory.mktemp("lm"))
    ids = position_length.text_ids(model)[:30]
    for layer in range(model.config.decoder_layers):
        split = position_split.split_lm_scores(model, ids, layer, 1)
        assert split.adds_up and split.residual < 1e-4, (layer, split.residual)
