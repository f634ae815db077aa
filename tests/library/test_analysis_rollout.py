"""Attention rollout and attention flow (viz_model.analysis.rollout) on hand-made stacks and a real trace."""

from __future__ import annotations

import numpy as np
import pytest

from viz_model.analysis.rollout import attention_flow, attention_rollout, residual_attention

# layer 1: both positions attend to token 0; layer 2: both attend to token 1
A1 = np.array([[1.0, 0.0], [1.0, 0.0]])
A2 = np.array([[0.0, 1.0], [0.0, 1.0]])


def test_rollout_by_hand():
    rollout = attention_rollout([A1, A2])
    # B1 = I/2 + A1/2 = [[1, 0], [.5, .5]], B2 = [[.5, .5], [0, 1]], R2 = B2 @ B1
    np.testing.assert_allclose(rollout[0], [[1.0, 0.0], [0.5, 0.5]])
    np.testing.assert_allclose(rollout[1], [[0.75, 0.25], [0.5, 0.5]])


def test_flow_by_hand():
    # graph: input j -> middle i with capacity B1[i, j], middle -> output with B2:
    # 0 -> out 0: via middle 0 min(1, .5) + via middle 1 min(.5, .5) = 1; 1 -> out 0: via middle 1 only: .5
    # 0 -> out 1: via middle 1 min(.5, 1) = .5 (middle 0 -> out 1 has capacity 0); 1 -> out 1: min(.5, 1) = .5
    np.testing.assert_allclose(attention_flow([A1, A2]), [[1.0, 0.5], [0.5, 0.5]], atol=1e-6)


def test_one_layer_flow_is_the_residual_map():
    a = np.array([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8], [0.6, 0.3, 0.1]])
    np.testing.assert_allclose(attention_flow([a], residual=0.25), residual_attention([a], residual=0.25)[0],
                               atol=1e-6)


def test_heads_are_averaged():
    heads = np.stack([np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[0.0, 1.0], [1.0, 0.0]])])
    np.testing.assert_allclose(attention_rollout([heads])[0], attention_rollout([np.full((2, 2), 0.5)])[0])


def test_full_residual_keeps_every_token_to_itself():
    eye = np.eye(3)
    np.testing.assert_allclose(attention_rollout([A1[:1, :1], A2[:1, :1]], residual=1.0)[-1], [[1.0]])
    random = np.random.default_rng(0).dirichlet(np.ones(3), size=(2, 3))
    np.testing.assert_allclose(attention_rollout(random, residual=1.0)[-1], eye)
    np.testing.assert_allclose(attention_flow(random, residual=1.0), eye, atol=1e-6)


def test_row_and_bound_properties_on_a_real_trace(tiny_model):
    trace = tiny_model.trace("A man is running in the park.", beam=1)
    layers = trace.encoder_attentions
    n = len(trace.source_tokens)
    rollout = attention_rollout(layers)
    assert rollout.shape == (tiny_model.config.encoder_layers, n, n)
    np.testing.assert_allclose(rollout.sum(axis=-1), 1.0, atol=1e-9)
    flow = attention_flow(layers)
    first = residual_attention(layers)[0]
    assert flow.shape == (n, n) and (flow >= 0).all()
    # a flow is bounded by the output's incoming capacity (1) and by the input's outgoing capacity in layer 1
    assert (flow <= 1 + 1e-6).all()
    assert (flow <= first.sum(axis=0)[None, :] + 1e-6).all()
    # and is at least the best single path's bottleneck from j to i
    bottleneck = np.zeros((n, n))
    mixed = residual_attention(layers)
    for j in range(n):
        best = np.zeros(n)
        best[j] = 1.0
        for layer in mixed:
            best = (np.minimum(layer, best[None, :])).max(axis=1)
        bottleneck[:, j] = best
    assert (flow >= bottleneck - 1e-6).all()


@pytest.mark.parametrize("layers, kwargs, match", [
    ([], {}, "no attention layers"),
    ([np.ones((2, 3))], {}, "square"),
    ([np.eye(2), np.eye(3)], {}, "n of layer 0"),
    ([np.eye(2)], {"residual": 1.5}, "residual"),
    ([-np.eye(2)], {}, "non-negative"),
])
def test_rollout_errors(layers, kwargs, match):
    with pytest.raises(ValueError, match=match):
        attention_rollout(layers, **kwargs)


def test_flow_resolution_error():
    with pytest.raises(ValueError, match="resolution"):
        attention_flow([np.eye(2)], resolution=0)
