"""`viz_model.analysis.layer_scores.layer_scores` (added for the Masks page): every step reproduces the model's own
weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from viz_model.analysis.layer_scores import layer_scores
from viz_model.config import ModelConfig
from viz_model.data.batching import pad
from viz_model.nn.model import Transformer

BOS, EOS = 2, 3


def network(norm: str) -> Transformer:
    torch.manual_seed(1)
    cfg = ModelConfig(vocab_size=40, encoder_layers=2, decoder_layers=3, d_model=16, heads=2, d_ff=32,
                      max_positions=32, norm=norm, dropout=0.0)
    return Transformer(cfg).eval()


SOURCES = [[5, 6, 7, 8, 9, EOS], [10, 11, EOS]]
TARGETS = [[BOS, 12, 13, 14], [BOS, 15, 16, 17, 18, 19]]


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_softmax_of_the_steps_equals_the_models_weights(norm, kind):
    net = network(norm)
    layers = 2 if kind == "encoder" else 3
    for layer in range(layers):
        scores = layer_scores(net, SOURCES, kind, layer, TARGETS)
        for row, (src, tgt) in enumerate(zip(SOURCES, TARGETS)):
            with torch.inference_mode():
                out = net(torch.tensor([src]), torch.tensor([tgt]), need_weights=True)
            recorded = {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions,
                        "cross": out.cross_attentions}[kind][layer][0].numpy()
            q, k = recorded.shape[1:]
            np.testing.assert_allclose(scores.weights[row][:, :q, :k], recorded, atol=1e-5)


def test_scores_masks_and_padding():
    net = network("post")
    scores = layer_scores(net, SOURCES, "decoder", 1, TARGETS)
    batch, heads, q, k = scores.raw.shape
    assert (batch, heads, q, k) == (2, 2, 6, 6)
    np.testing.assert_allclose(scores.scaled, scores.raw / np.sqrt(scores.d_k), rtol=1e-5)
    assert scores.d_k == 8
    np.testing.assert_array_equal(scores.causal_mask, np.tril(np.ones((6, 6), dtype=bool)))
    np.testing.assert_array_equal(scores.padding_mask[0], [True] * 4 + [False] * 2)
    np.testing.assert_array_equal(scores.mask[0], np.tril(np.ones((6, 6), dtype=bool)) & scores.padding_mask[0])
    assert (scores.weights[~np.broadcast_to(scores.mask[:, None], scores.weights.shape)] == 0).all()
    masked = scores.masked()
    assert np.isneginf(masked[0, :, 0, 1]).all() and np.isfinite(masked[0, :, 1, 0]).all()
    np.testing.assert_allclose(scores.weights.sum(-1), 1.0, atol=1e-5)
    assert scores.query_ids.shape == (2, 6) and scores.query_ids[0, -1] == 0


def test_cross_attention_masks_padded_source_keys():
    scores = layer_scores(network("post"), SOURCES, "cross", 0, TARGETS)
    assert scores.raw.shape == (2, 2, 6, 6)
    assert scores.causal_mask is None
    np.testing.assert_array_equal(scores.padding_mask[1], [True] * 3 + [False] * 3)
    assert (scores.weights[1, :, :, 3:] == 0).all()


@pytest.mark.parametrize("call, match", [
    (lambda n: layer_scores(n, SOURCES, "sideways", 0, TARGETS), "attention kind"),
    (lambda n: layer_scores(n, SOURCES, "encoder", 2), "encoder layer must be"),
    (lambda n: layer_scores(n, SOURCES, "cross", 0), "needs target_ids"),
    (lambda n: layer_scores(n, SOURCES, "decoder", 0, TARGETS[:1]), "2 source sequences but 1"),
    (lambda n: pad([[1], []], 0), "no row may be empty"),
    (lambda n: pad([], 0), "at least one row"),
])
def test_errors_name_the_problem(call, match):
    with pytest.raises(ValueError, match=match):
        call(network("post"))


@pytest.mark.parametrize("changes", [{"positional": "alibi"}, {"positional": "relative"}, {"positional": "rope"},
                                     {"scale_scores": False}])
def test_the_steps_of_models_that_scale_or_bias_their_scores_otherwise(changes):
    """Q K^T, then / sqrt(d_k) unless the model does not scale (T5), then + an added positional bias: the steps give
    the scores the softmax saw; under RoPE Q K^T is of the rotated queries and keys."""
    torch.manual_seed(1)
    cfg = ModelConfig(vocab_size=40, encoder_layers=1, decoder_layers=1, d_model=16, heads=2, d_ff=32,
                      max_positions=32, dropout=0.0, **changes)
    net = Transformer(cfg).eval()
    if net.encoder_position_bias is not None:
        torch.nn.init.normal_(net.encoder_position_bias.embedding.weight, std=2.0)
    scores = layer_scores(net, SOURCES[:1], "encoder", 0)
    divisor = np.sqrt(scores.d_k) if cfg.scale_scores else 1.0
    added = scores.position_bias if cfg.positional in ("alibi", "relative") else 0.0
    np.testing.assert_allclose(scores.raw / divisor + added, scores.scaled, atol=1e-5)
    assert (scores.position_bias is None) == (cfg.positional == "sinusoidal")
