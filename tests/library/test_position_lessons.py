"""The Positional encoding page's computations for every scheme (CPU, float32): each scheme at its defaults, the
loaded model's positional part, and one head's scores split into parts that add up to the model's own scores."""

from __future__ import annotations

import dataclasses
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


SCORE_SCHEMES = ("rope", "alibi", "relative")
T5_LIKE = {"norm": "pre", "normalization": "rms", "scale_scores": False, "scale_embeddings": False,
           "attention_bias": False}


@pytest.mark.parametrize("positional", SCORE_SCHEMES)
@pytest.mark.parametrize("changes", [{}, T5_LIKE], ids=["post-norm", "t5-like"])
def test_the_score_schemes_parts_are_computed_apart_from_the_score(positional, changes):
    """content: q·k of the unpositioned queries and keys (in layer 1, the scores of the pass without positions);
    the rotation's part: q·R(j−p)k − q·k; the bias: the scheme's own."""
    model = tiny(positional, **changes)
    for stack, ids in (("encoder", SOURCE), ("decoder", TARGET)):
        for head in range(model.config.heads):
            split = position_parts.split_scores(model, SOURCE, TARGET, stack, 0, head)
            with torch.no_grad():
                if stack == "encoder":
                    bare = model.encode(torch.tensor([SOURCE]), need_weights=True, positions=False).records[0]
                else:
                    memory = model.encode(torch.tensor([SOURCE]))
                    bare = model.decode(torch.tensor([TARGET]), memory, need_weights=True,
                                        positions=False).self_records[0]
            assert np.allclose(split.parts["content"], bare.scores[0, head].numpy(), atol=1e-5)
            assert split.adds_up and split.residual < 1e-5
            if positional == "alibi":
                distance = np.abs(np.arange(len(ids))[:, None] - np.arange(len(ids))[None, :])
                assert np.allclose(split.parts["position bias"], -alibi_slopes(4).numpy()[head] * distance)


@pytest.mark.parametrize("positional", SCORE_SCHEMES)
def test_a_forward_whose_position_is_not_the_schemes_fails_the_check(positional, monkeypatch):
    """A model whose scores get another rotation or bias than its scheme's: the parts no longer add up (with the
    content defined as the score minus the recorded part they always did)."""
    model = tiny(positional)
    own = model.score_position

    def wrong(side, queries, keys, need_weights):
        if positional == "rope":
            return own(side, 2 * queries, 2 * keys, need_weights)  # turned twice as far
        position = own(side, queries, keys, need_weights)
        return dataclasses.replace(position, bias=1.5 * position.bias)

    monkeypatch.setattr(model, "score_position", wrong)
    for stack in ("encoder", "decoder"):
        split = position_parts.split_scores(model, SOURCE, TARGET, stack, 1, 0)
        assert split.residual > 1e-2 and not split.adds_up, (stack, split.residual)


@pytest.mark.parametrize("positional", POSITIONAL_KINDS)
def test_a_perturbed_part_fails_the_check(positional):
    split = position_parts.split_scores(tiny(positional), SOURCE, TARGET, "encoder", 0, 1)
    assert split.adds_up
    for name, part in split.parts.items():
        wrong = dataclasses.replace(split, parts={**split.parts, name: part + 0.01 * np.abs(split.score).max()})
        assert not wrong.adds_up, name


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


@pytest.mark.parametrize("positional", POSITIONAL_KINDS)
def test_the_loaded_models_positional_part_for_every_scheme(positional):
    """Per head of the first layer: the bias (ALiBi, T5), the position·position part (sinusoids, learned table) or
    the rotation's part on the sentence (RoPE): each what the split of that head gives."""
    model = tiny(positional)
    for stack, ids in (("encoder", SOURCE), ("decoder", TARGET)):
        shown = position_parts.model_position_part(model, stack, len(ids), SOURCE, TARGET)
        assert shown.exact and shown.part.shape == (4, len(ids), len(ids)) and shown.note
        name = {"rope": "rotation", "sinusoidal": "position·position", "learned": "position·position"}.get(
            positional, "position bias")
        for head in range(4):
            expected = position_parts.split_scores(model, SOURCE, TARGET, stack, 0, head).parts[name]
            assert np.allclose(shown.part[head], expected, atol=1e-5), (stack, head)
        assert np.abs(shown.part).max() > 1e-3
    if positional == "rope":
        with pytest.raises(position_parts.LessonError, match="depends on the tokens"):
            position_parts.model_position_part(model, "encoder", 5)


def test_ropes_part_on_a_sentence_of_several_blocks_of_queries():
    model = tiny("rope", max_positions=128)
    source = [5 + i % 50 for i in range(75)] + [3]  # more than two blocks of 32 queries
    shown = position_parts.model_position_part(model, "encoder", len(source), source, TARGET)
    for head in (0, 3):
        split = position_parts.split_scores(model, source, TARGET, "encoder", 1, head)
        assert split.adds_up and split.residual < 1e-5
        rotation = position_parts.split_scores(model, source, TARGET, "encoder", 0, head).parts["rotation"]
        assert np.allclose(shown.part[head], rotation, atol=1e-5)
    assert shown.part.shape == (4, 76, 76) and not np.allclose(shown.part[:, 40, 50], shown.part[:, 40, 30])


@pytest.mark.parametrize("changes, why", [({"norm": "pre"}, "it is pre-norm"),
                                          ({"embedding_norm": True}, "its embeddings are normed")])
def test_where_no_heads_position_part_exists_the_model_says_why_and_shows_its_table(changes, why):
    model = tiny("learned", **changes)
    shown = position_parts.model_position_part(model, "encoder", 7)
    table = model.positional_encodings(7, "source").detach().double().numpy()
    assert not shown.exact and why in shown.note and shown.note.count("\n") == 0
    assert np.allclose(shown.part[0], table @ table.T / math.sqrt(model.config.d_model)) and len(shown.part) == 1


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
