"""The Positional encoding page's computations for every scheme (CPU, float32): each scheme at its defaults, the
loaded model's positional part, and one head's scores split into parts that add up to the model's own scores."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from support.data import tiny_model_config

from viz_model.config.model import POSITIONAL_KINDS
from viz_model.lessons import position_parts
from viz_model.nn.alibi import alibi_slopes
from viz_model.nn.model import Transformer
from viz_model.plot import position_figures

SOURCE, TARGET = [5, 9, 11, 14, 3], [2, 7, 8, 21]


def tiny(positional: str, **changes) -> Transformer:
    torch.manual_seed(0)
    model = Transformer(tiny_model_config(60, positional=positional, dropout=0.0, **changes)).eval()
    if model.encoder_position_bias is not None:
        for table in (model.encoder_position_bias, model.decoder_position_bias):
            torch.nn.init.normal_(table.embedding.weight, std=2.0)
    return model


@pytest.mark.parametrize("positional", POSITIONAL_KINDS)
@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_the_parts_add_up_to_the_scores_the_records_hold(positional, stack):
    model = tiny(positional)
    layers = [0] if positional in ("sinusoidal", "learned") else [0, 1]
    for layer in layers:
        for head in range(model.config.heads):
            split = position_parts.split_scores(model, SOURCE, TARGET, stack, layer, head)
            with torch.no_grad():
                out = model(torch.tensor([SOURCE]), torch.tensor([TARGET]), need_weights=True)
            record = (out.encoder_records if stack == "encoder" else out.decoder_records)[layer]
            assert np.array_equal(split.score, record.scores[0, head].numpy())
            assert split.residual < 1e-5 and len(split.parts) == (4 if positional in ("sinusoidal", "learned") else 2)
            assert all(np.abs(part).max() > 1e-4 for part in split.parts.values()), list(split.parts)


def test_the_additive_split_is_the_first_layers_own_arithmetic():
    """content·content is the score the model computes with the positions switched off (the no-PE pass)."""
    model = tiny("sinusoidal")
    split = position_parts.split_scores(model, SOURCE, TARGET, "encoder", 0, 2)
    with torch.no_grad():
        bare = model.encode(torch.tensor([SOURCE]), need_weights=True, positions=False).records[0].scores[0, 2]
    assert np.allclose(split.parts["content·content"], bare.numpy(), atol=1e-5)
    assert not np.allclose(split.parts["content·position"], split.parts["position·content"].T, atol=1e-3)


def test_a_split_that_would_not_be_exact_is_refused_in_one_line():
    with pytest.raises(position_parts.LessonError, match="only in the first layer of a post-norm model"):
        position_parts.split_scores(tiny("sinusoidal"), SOURCE, TARGET, "encoder", 1, 0)
    with pytest.raises(position_parts.LessonError, match="only in the first layer of a post-norm model"):
        position_parts.split_scores(tiny("learned", norm="pre"), SOURCE, TARGET, "encoder", 0, 0)
    with pytest.raises(position_parts.LessonError, match="BART's embedding norm mix them"):
        position_parts.split_scores(tiny("learned", embedding_norm=True), SOURCE, TARGET, "encoder", 0, 0)
    for args, words in (((SOURCE, TARGET, "cross", 0, 0), "stack must be encoder or decoder"),
                        ((SOURCE, TARGET, "encoder", 2, 0), r"layer must be in \[0, 1\]"),
                        ((SOURCE, TARGET, "encoder", 0, 4), r"head must be in \[0, 3\]")):
        with pytest.raises(position_parts.LessonError, match=words):
            position_parts.split_scores(tiny("rope"), *args)


def test_each_scheme_at_its_defaults():
    length, heads = 40, 8
    alibi = position_parts.default_offset_part("alibi", length, heads)
    assert np.allclose(alibi[:, 3, 10], -alibi_slopes(heads).numpy() * 7)
    rope = position_parts.default_offset_part("rope", length, heads, 512)
    assert np.isclose(rope[0, 5, 5], math.sqrt(64)) and np.allclose(rope[:, 4, 9], rope[:, 20, 25])  # by offset
    relative = position_parts.default_offset_part("relative", length, heads)
    assert relative[0, 0, 0] == 0 and relative[0, 0, 1] == 16 + 1 and relative[0, 1, 0] == 1  # key after: upper half
    sinusoidal = position_parts.default_offset_part("sinusoidal", length, heads, 64)
    # PE·PE depends on the offset only (the projections the model applies are what let absolute position in)
    assert np.isclose(sinusoidal[0, 7, 7], 32 / 8) and np.isclose(sinusoidal[0, 0, 5], sinusoidal[0, 20, 25])
    learned = position_parts.default_offset_part("learned", length, heads, 64)
    assert not np.allclose(learned[0, 0, 5], learned[0, 20, 25], atol=1e-3)  # a random table: no structure
    with pytest.raises(position_parts.LessonError, match="known: sinusoidal, learned, rope, alibi, relative"):
        position_parts.default_offset_part("rotary", length)
    with pytest.raises(position_parts.LessonError, match=r"number of positions must be an integer in \[1, 4096\]"):
        position_parts.default_offset_part("alibi", 0)


def test_rope_angles_wavelengths_and_decay():
    angles = position_parts.rope_angles_table(10, 8, 100.0)
    assert angles.shape == (10, 4) and np.isclose(angles[1, 0], 1.0) and np.isclose(angles[3, 1], 3 * 100 ** -0.25)
    assert np.allclose(position_parts.rope_wavelengths(8, 100.0), 2 * math.pi * 100.0 ** (np.arange(4) / 4))
    decay = position_parts.rope_decay(64, 10000.0, 200)
    assert np.isclose(decay[0], 8.0) and decay[50] < decay[0] / 2  # the score of a vector with itself falls off


def test_the_loaded_models_positional_part():
    for positional in ("alibi", "relative"):
        model = tiny(positional)
        part = position_parts.model_offset_part(model, "encoder", 9)
        with torch.no_grad():
            record = model.encode(torch.tensor([[5] * 9]), need_weights=True).records[0]
        assert np.allclose(part, record.position_bias[0].numpy())
    values = position_parts.relative_values(tiny("relative"), "decoder")
    assert values.shape == (32, 4)
    buckets = position_parts.relative_buckets_by_offset(tiny("relative").config, 200)  # beyond max_distance 128
    assert (buckets["decoder"][buckets["offset"] > 0] == 0).all() and buckets["encoder"].max() == 31
    for positional, words in (("rope", "rope positions add no token-independent part"),
                              ("learned", "learned positions add no token-independent part")):
        with pytest.raises(position_parts.LessonError, match=words):
            position_parts.model_offset_part(tiny(positional), "encoder", 5)
    with pytest.raises(position_parts.LessonError, match="it has no relative bias table"):
        position_parts.relative_values(tiny("alibi"), "encoder")


def test_the_figures_build():
    split = position_parts.split_scores(tiny("relative"), SOURCE, TARGET, "encoder", 1, 0)
    labels = [str(i) for i in SOURCE]
    assert len(position_figures.score_split_figure(split, labels, labels, "head 1").data) == 3
    parts = [(s, position_parts.default_offset_part(s, 12, 4, 32)[0]) for s in POSITIONAL_KINDS]
    assert len(position_figures.offset_parts_figure(parts, "each scheme").data) == 5
    assert position_figures.rope_angles_figure(position_parts.rope_angles_table(12, 16)).data[0].z.shape == (12, 8)
    decays = position_figures.rope_decay_figure({16: position_parts.rope_decay(16, 1e4, 30),
                                                 128: position_parts.rope_decay(128, 1e4, 30)}, 1e4)
    assert [len(trace.y) for trace in decays.data] == [30, 30] and decays.data[1].y[0] == 1.0
    assert len(position_figures.alibi_slopes_figure(alibi_slopes(6).numpy()).data[0].y) == 6
    buckets = position_parts.relative_buckets_by_offset(tiny("relative").config, 20)
    assert len(position_figures.relative_buckets_figure(buckets).data) == 2
    values = position_parts.relative_values(tiny("relative"), "encoder")
    assert position_figures.relative_values_figure(values, "encoder").data[0].z.shape == (32, 4)
