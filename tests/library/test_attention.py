"""Scaled dot-product attention, masks and multi-head attention against PyTorch's reference implementations."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from viz_model.nn.attention import (
    KVCache,
    MultiHeadAttention,
    attention,
    attention_scores,
    causal_mask,
    combine_masks,
    masked_softmax,
    padding_mask,
)

B, H, LQ, LK, D = 2, 4, 5, 7, 8


def qkv(seed: int = 0, lq: int = LQ, lk: int = LK):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, lq, D, generator=g), torch.randn(B, H, lk, D, generator=g),
            torch.randn(B, H, lk, D, generator=g))


def random_mask(seed: int, shape=(B, H, LQ, LK)) -> torch.Tensor:
    """A random boolean mask where every query row keeps at least one key."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(shape, generator=g) > 0.5
    mask[..., 0] = True
    return mask


def key_padding(lengths: list[int], lk: int = LK) -> torch.Tensor:
    ids = torch.zeros(len(lengths), lk, dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, :n] = 5
    return padding_mask(ids, pad_id=0)


MASKS = {
    "none": lambda: None,
    "padding": lambda: key_padding([7, 4]),
    "causal": lambda: causal_mask(LQ, offset=LK - LQ),
    "padding+causal": lambda: combine_masks(key_padding([7, 4]), causal_mask(LQ, offset=LK - LQ)),
    "random per head": lambda: random_mask(3),
}


@pytest.mark.parametrize("mask_name", list(MASKS))
def test_instrumented_path_equals_sdpa(mask_name):
    q, k, v = qkv()
    mask = MASKS[mask_name]()
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out, weights = attention(q, k, v, mask, need_weights=True, impl="math")
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    assert weights.shape == (B, H, LQ, LK)
    # the fast path is sdpa itself and gives no weights
    fast, none = attention(q, k, v, mask, need_weights=False)
    assert none is None
    torch.testing.assert_close(fast, expected, atol=1e-5, rtol=1e-5)
    # and the weights are the textbook softmax(Q K^T / sqrt(d_k)) with masked scores at -inf
    scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(D)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    torch.testing.assert_close(weights.double(), torch.softmax(scores, -1), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("mask_name", ["padding+causal", "random per head"])
def test_bf16_on_the_cpu_takes_the_explicit_path_with_the_same_result(mask_name, monkeypatch):
    """CPU autocast training: the fused CPU kernel is slow for bf16, so "auto" computes it explicitly."""
    q, k, v = (t.bfloat16().requires_grad_() for t in qkv(4))
    mask = MASKS[mask_name]()
    expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask)

    def fused_not_expected(*args, **kwargs):
        raise AssertionError("the fused kernel ran for bf16 CPU tensors")

    monkeypatch.setattr(F, "scaled_dot_product_attention", fused_not_expected)
    out, weights = attention(q, k, v, mask)
    assert weights is None and out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), expected, atol=3e-2, rtol=3e-2)
    out.float().sum().backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (q, k, v))
    with pytest.raises(AssertionError, match="fused kernel ran"):  # fp32 (inference, fp32 training) stays fused
        attention(*qkv(4), mask)


@pytest.mark.parametrize("mask_name", list(MASKS))
def test_masked_weights_are_exactly_zero_and_rows_sum_to_one(mask_name):
    q, k, v = qkv(1)
    mask = MASKS[mask_name]()
    _, weights = attention(q, k, v, mask, need_weights=True)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, LQ), atol=1e-6, rtol=0)
    if mask is not None:
        assert torch.all(weights[~mask.expand_as(weights)] == 0.0)


def test_fully_masked_row_gives_zeros_not_nan():
    q, k, v = qkv(2)
    mask = torch.ones(B, H, LQ, LK, dtype=torch.bool)
    mask[0, 1, 2] = False
    out, weights = attention(q, k, v, mask, need_weights=True)
    assert not torch.isnan(weights).any() and not torch.isnan(out).any()
    assert torch.all(weights[0, 1, 2] == 0) and torch.all(out[0, 1, 2] == 0)


def test_sdpa_path_cannot_give_weights():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="weights"):
        attention(q, k, v, need_weights=True, impl="sdpa")
    with pytest.raises(ValueError, match="impl"):
        attention(q, k, v, impl="flash")


def test_sdpa_path_leaves_scores_unscaled_as_t5_does():
    q, k, v = qkv()
    mask = torch.ones(B, 1, 1, LK, dtype=torch.bool)
    mask[0, ..., -2:] = False
    fused, _ = attention(q, k, v, mask, impl="sdpa", scale=False)
    explicit, _ = attention(q, k, v, mask, impl="math", scale=False)
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=0)
    assert not torch.allclose(fused, attention(q, k, v, mask, impl="sdpa")[0], atol=1e-3)


def test_weights_are_taken_before_attention_dropout():
    q, k, v = qkv(4)
    torch.manual_seed(0)
    out, weights = attention(q, k, v, need_weights=True, dropout_p=0.5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, LQ), atol=1e-6, rtol=0)
    assert not torch.allclose(out, weights @ v)  # the output did use dropped-out weights


def test_mask_dtype_error_names_the_dtype():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="bool") as err:
        attention(q, k, v, torch.ones(B, 1, 1, LK), need_weights=True)
    assert "torch.float32" in str(err.value)


def test_mask_shape_error_names_both_shapes():
    q, k, v = qkv()
    with pytest.raises(ValueError) as err:
        attention(q, k, v, torch.ones(B, 1, 1, LK + 1, dtype=torch.bool), need_weights=True)
    message = str(err.value)
    assert str((B, 1, 1, LK + 1)) in message and str((B, H, LQ, LK)) in message


def test_qkv_shape_errors_name_the_shapes():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"q \(4, 5, 8\)"):
        attention(q[0], k, v)
    with pytest.raises(ValueError, match="d_k"):
        attention(q, k[..., :4], v)
    with pytest.raises(ValueError, match="value_len"):
        attention(q, k, v[:, :, :3])


def test_padding_and_causal_mask_shapes():
    ids = torch.tensor([[5, 6, 0], [7, 0, 0]])
    mask = padding_mask(ids, 0)
    assert mask.shape == (2, 1, 1, 3) and mask.dtype == torch.bool
    assert mask[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]
    causal = causal_mask(3)
    assert causal.shape == (1, 1, 3, 3)
    assert torch.equal(causal[0, 0], torch.tril(torch.ones(3, 3, dtype=torch.bool)))
    step = causal_mask(1, offset=4)  # one decoding step at position 4 sees positions 0..4
    assert step.shape == (1, 1, 1, 5) and bool(step.all())
    assert combine_masks(None, None) is None
    with pytest.raises(ValueError):
        causal_mask(0)
    with pytest.raises(ValueError):
        padding_mask(ids[0], 0)


def test_masked_softmax_and_scores_helpers():
    q, k, _ = qkv(5)
    torch.testing.assert_close(attention_scores(q, k, scale=False) / math.sqrt(D), attention_scores(q, k))
    weights = masked_softmax(attention_scores(q, k), None)
    torch.testing.assert_close(weights, torch.softmax(attention_scores(q, k), -1))


# --- the paper-notes worked example ---------------------------------------------------------------
X = torch.tensor([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], dtype=torch.float64)
W_Q = torch.tensor([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], dtype=torch.float64)
W_K = torch.tensor([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], dtype=torch.float64)
W_V = torch.tensor([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]], dtype=torch.float64)


# (the library's softmax runs in float32, so float64 inputs agree with the hand computation to ~1e-8)
def worked_example(scale: bool):
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    assert q.tolist() == [[1, 0, 2], [2, 2, 2], [2, 1, 3]]
    assert k.tolist() == [[0, 1, 1], [4, 4, 0], [2, 3, 1]]
    assert v.tolist() == [[1, 2, 3], [2, 8, 0], [2, 6, 3]]
    out, weights = attention(q[None, None], k[None, None], v[None, None], need_weights=True, impl="math",
                             scale=scale)
    return out[0, 0], weights[0, 0], v


def by_hand(scores: list[float], values: torch.Tensor) -> tuple[list[float], list[float]]:
    exps = [math.exp(s) for s in scores]
    weights = [e / sum(exps) for e in exps]
    return weights, [sum(w * float(values[j, c]) for j, w in enumerate(weights)) for c in range(3)]


def test_paper_notes_worked_example_unscaled():
    out, weights, v = worked_example(scale=False)
    # q1 . keys = [2, 4, 4]
    expected_w, expected_out = by_hand([2.0, 4.0, 4.0], v)
    torch.testing.assert_close(weights[0], torch.tensor(expected_w, dtype=torch.float64), atol=1e-6, rtol=0)
    torch.testing.assert_close(out[0], torch.tensor(expected_out, dtype=torch.float64), atol=1e-6, rtol=0)
    # the numbers quoted in the notes
    assert weights[0].tolist() == pytest.approx([0.0634, 0.4683, 0.4683], abs=5e-5)
    assert out[0].tolist() == pytest.approx([1.94, 6.68, 1.60], abs=5e-3)
    assert out[0].tolist() == pytest.approx([1.9366, 6.6831, 1.5951], abs=5e-5)
    # the notes' rounded version [0, .5, .5] gives [2.0, 7.0, 1.5]
    assert (torch.tensor([0.0, 0.5, 0.5], dtype=torch.float64) @ v).tolist() == [2.0, 7.0, 1.5]
    # the other two queries
    assert weights[1].tolist() == pytest.approx([0.0, 0.982, 0.018], abs=5e-4)
    assert out[1].tolist() == pytest.approx([2.0, 7.964, 0.054], abs=5e-4)
    assert out[2].tolist() == pytest.approx([1.9997, 7.7599, 0.3584], abs=5e-4)


def test_paper_notes_worked_example_scaled():
    out, weights, v = worked_example(scale=True)
    scores = [s / math.sqrt(3) for s in (2.0, 4.0, 4.0)]
    expected_w, expected_out = by_hand(scores, v)
    torch.testing.assert_close(weights[0], torch.tensor(expected_w, dtype=torch.float64), atol=1e-6, rtol=0)
    torch.testing.assert_close(out[0], torch.tensor(expected_out, dtype=torch.float64), atol=1e-6, rtol=0)
    assert weights[0].tolist() == pytest.approx([0.1361, 0.4319, 0.4319], abs=5e-5)
    assert out[0].tolist() == pytest.approx([1.8639, 6.3194, 1.7042], abs=5e-5)
    # scaling flattens the distribution: the largest weight of every query shrinks
    _, unscaled, _ = worked_example(scale=False)
    assert torch.all(weights.max(-1).values < unscaled.max(-1).values)


# --- multi-head attention against torch.nn.MultiheadAttention ------------------------------------
def paired_layers(d_model: int = 16, heads: int = 4, seed: int = 0):
    torch.manual_seed(seed)
    reference = nn.MultiheadAttention(d_model, heads, batch_first=True)
    with torch.no_grad():  # non-zero biases so a wrongly copied bias shows
        reference.in_proj_bias.normal_()
        reference.out_proj.bias.normal_()
    ours = MultiHeadAttention(d_model, heads)
    w_q, w_k, w_v = reference.in_proj_weight.chunk(3)
    b_q, b_k, b_v = reference.in_proj_bias.chunk(3)
    with torch.no_grad():
        for linear, w, b in ((ours.w_q, w_q, b_q), (ours.w_k, w_k, b_k), (ours.w_v, w_v, b_v),
                             (ours.w_o, reference.out_proj.weight, reference.out_proj.bias)):
            linear.weight.copy_(w)
            linear.bias.copy_(b)
    return ours.eval(), reference.eval()


def test_multihead_attention_under_cpu_autocast_takes_the_explicit_path(monkeypatch):
    """What training under CPU bf16 autocast runs: fp32 inputs, bf16 projections, the explicit attention; output
    and gradients agree with the fp32 fused computation within bf16 rounding."""
    ours, _ = paired_layers()
    ours.train()
    x = torch.randn(2, 6, 16)
    mask = combine_masks(causal_mask(6), torch.tensor([[True] * 6, [True] * 4 + [False] * 2])[:, None, None, :])
    x32 = x.clone().requires_grad_()
    reference, _, _ = ours(x32, mask=mask)
    reference.square().sum().backward()
    fused = F.scaled_dot_product_attention

    def fused_fp32_only(q, *args, **kwargs):
        assert q.dtype == torch.float32, "the fused kernel ran for bf16 CPU tensors"
        return fused(q, *args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", fused_fp32_only)
    ours.zero_grad()
    x16 = x.clone().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _, _ = ours(x16, mask=mask)
    assert out.dtype == torch.bfloat16
    out.float().square().sum().backward()
    torch.testing.assert_close(out.float(), reference, atol=0.05, rtol=0.05)
    torch.testing.assert_close(x16.grad, x32.grad, atol=0.1, rtol=0.05)


def test_multihead_self_attention_equals_torch():
    ours, reference = paired_layers()
    x = torch.randn(2, 6, 16)
    out, record, cache = ours(x, need_weights=True)
    weights = record.weights
    ref_out, ref_weights = reference(x, x, x, need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    assert weights.shape == ref_weights.shape == (2, 4, 6, 6)
    torch.testing.assert_close(weights, ref_weights, atol=1e-5, rtol=1e-5)
    assert isinstance(cache, KVCache) and cache.key.shape == (2, 4, 6, 4)


def test_multihead_masked_self_attention_equals_torch():
    ours, reference = paired_layers(seed=1)
    x = torch.randn(2, 6, 16)
    ids = torch.tensor([[4] * 6, [4] * 3 + [0] * 3])
    mask = combine_masks(padding_mask(ids, 0), causal_mask(6))
    out, record, _ = ours(x, None, mask, need_weights=True)
    weights = record.weights
    ref_out, ref_weights = reference(x, x, x, key_padding_mask=ids == 0, attn_mask=~causal_mask(6)[0, 0],
                                     need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, ref_weights, atol=1e-5, rtol=1e-5)
    # the fast path (sdpa) gives the same output
    fast, none, _ = ours(x, None, mask)
    assert none is None
    torch.testing.assert_close(fast, ref_out, atol=1e-5, rtol=1e-5)


def test_multihead_cross_attention_equals_torch():
    ours, reference = paired_layers(d_model=32, heads=8, seed=2)
    query, memory = torch.randn(2, 3, 32), torch.randn(2, 9, 32)
    ids = torch.tensor([[4] * 9, [4] * 5 + [0] * 4])
    out, record, _ = ours(query, memory, padding_mask(ids, 0), need_weights=True)
    weights = record.weights
    ref_out, ref_weights = reference(query, memory, memory, key_padding_mask=ids == 0, need_weights=True,
                                     average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, ref_weights, atol=1e-5, rtol=1e-5)
    assert torch.all(weights[1, :, :, 5:] == 0)


def test_multihead_incremental_cache_equals_full_pass():
    ours, _ = paired_layers(seed=3)
    x = torch.randn(1, 5, 16)
    full, full_record, _ = ours(x, None, causal_mask(5), need_weights=True)
    cache = None
    for t in range(5):
        step, record, cache = ours(x[:, t:t + 1], None, None, need_weights=True, cache=cache, append_to_cache=True)
        torch.testing.assert_close(step[:, 0], full[:, t], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(record.weights[:, :, 0], full_record.weights[:, :, t, :t + 1], atol=1e-6, rtol=1e-5)
    assert cache.key.shape == (1, 4, 5, 4)


def test_head_mask_switches_heads_off():
    ours, _ = paired_layers(seed=4)
    x = torch.randn(1, 4, 16)
    base, _, _ = ours(x)
    same, _, _ = ours(x, head_mask=torch.ones(4))
    torch.testing.assert_close(same, base)
    one_off, _, _ = ours(x, head_mask=torch.tensor([1.0, 0.0, 1.0, 1.0]))
    assert not torch.allclose(one_off, base)
    all_off, _, _ = ours(x, head_mask=torch.zeros(4))
    torch.testing.assert_close(all_off, ours.w_o.bias.expand_as(all_off))
    with pytest.raises(ValueError, match="head_mask"):
        ours(x, head_mask=torch.ones(3))


def test_multihead_errors():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(30, 4)
    ours, _ = paired_layers()
    with pytest.raises(ValueError, match="d_model=16"):
        ours(torch.randn(1, 3, 8))


@pytest.mark.parametrize("shape", [(2, 1, 1, 1, 6), (3, 1, 1, 6), (1, 1, 5, 7)])
def test_masks_that_do_not_broadcast_to_the_scores_are_refused(shape):
    q, k = torch.randn(2, 4, 5, 8), torch.randn(2, 4, 6, 8)
    v = k
    with pytest.raises(ValueError, match="does not broadcast to scores"):
        attention(q, k, v, torch.ones(shape, dtype=torch.bool))
