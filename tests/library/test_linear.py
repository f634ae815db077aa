"""`viz_model.nn.linear`: the oneDNN kernel at inference on large weights, ``F.linear`` on small ones and wherever a
gradient is needed, same values."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from viz_model.nn import linear as linear_module
from viz_model.nn.linear import ONEDNN_MIN_WEIGHT, Linear, linear, uses_onednn

needs_onednn = pytest.mark.skipif(not linear_module.onednn_available(),
                                  reason="this PyTorch build has no oneDNN linear kernel")
WIDE = ONEDNN_MIN_WEIGHT // 64  # a 64-input layer's outputs from which its weight takes oneDNN's kernel
WIDE_8 = ONEDNN_MIN_WEIGHT // 8  # an 8-input layer's


@needs_onednn
@pytest.mark.parametrize("shape", [(1, 64), (22, 64), (4, 1, 64), (2, 3, 5, 64), (0, 64)])
def test_inference_takes_onednn_and_equals_f_linear_to_rounding(shape):
    torch.manual_seed(0)
    layer = Linear(64, WIDE)
    x = torch.randn(*shape)
    with torch.inference_mode():
        assert uses_onednn(x, layer.weight)
        got = layer(x)
    expected = F.linear(x, layer.weight, layer.bias)
    assert got.shape == expected.shape == (*shape[:-1], WIDE) and got.dtype == torch.float32
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(1, 64), (22, 64), (4, 1, 64), (0, 64)])
def test_a_small_weight_keeps_f_linear_bit_for_bit(shape):
    """Below `ONEDNN_MIN_WEIGHT` oneDNN's per-call reorder costs more than the product (benchmarks/bench_linear.py)."""
    torch.manual_seed(4)
    layer = Linear(64, WIDE - 1)
    x = torch.randn(*shape)
    with torch.inference_mode():
        assert not uses_onednn(x, layer.weight, layer.bias)
        assert torch.equal(layer(x), F.linear(x, layer.weight, layer.bias))


@needs_onednn
@pytest.mark.parametrize("outputs", [40, WIDE], ids=["f_linear", "onednn"])
def test_non_contiguous_inputs_and_no_bias(outputs):
    torch.manual_seed(1)
    weight = torch.randn(outputs, 64)
    x = torch.randn(64, 7).t()  # a transposed view
    last = torch.randn(3, 5, 64)[:, -1]  # a strided slice, as the search takes the last position's hidden state
    with torch.no_grad():
        assert uses_onednn(x, weight) == (outputs == WIDE)
        torch.testing.assert_close(linear(x, weight), x @ weight.t(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(linear(last, weight), last @ weight.t(), rtol=1e-5, atol=1e-5)


def test_gradients_take_f_linear_and_are_right():
    """Training and gradient attributions: the parameters (or the input) need a gradient, so F.linear runs, on a
    weight large enough for oneDNN's kernel at inference too."""
    torch.manual_seed(2)
    layer, wide = Linear(8, 3), Linear(8, WIDE_8)
    x = torch.randn(5, 8, requires_grad=True)
    assert not uses_onednn(x, layer.weight) and not uses_onednn(x, wide.weight)
    layer(x).sum().backward()
    torch.testing.assert_close(x.grad, layer.weight.sum(0).expand(5, 8))
    torch.testing.assert_close(layer.weight.grad, x.detach().sum(0).expand(3, 8))
    with torch.no_grad():  # the same layers at inference: the fast kernel (where there is one) for the wide one
        assert not uses_onednn(x, layer.weight)
        assert uses_onednn(x, wide.weight) == linear_module.onednn_available()


def test_a_bias_that_needs_a_gradient_gets_it():
    """A frozen weight with a trainable bias (fine-tuning only biases): the product must stay differentiable."""
    torch.manual_seed(3)
    layer = Linear(8, WIDE_8)
    layer.weight.requires_grad_(False)
    x = torch.randn(5, 8)
    assert not uses_onednn(x, layer.weight, layer.bias)
    layer(x).sum().backward()
    torch.testing.assert_close(layer.bias.grad, torch.full((WIDE_8,), 5.0))


def test_cpu_autocast_keeps_f_linear():
    """Inference under bf16 autocast computes in bf16, as F.linear does there, not in float32."""
    layer = Linear(8, WIDE_8)
    x = torch.randn(2, 8)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert not uses_onednn(x, layer.weight, layer.bias)
        assert layer(x).dtype == torch.bfloat16


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_other_dtypes_keep_f_linear(dtype):
    layer = Linear(8, WIDE_8).to(dtype)
    x = torch.randn(2, 8, dtype=dtype)
    with torch.inference_mode():
        assert not uses_onednn(x, layer.weight)
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))


def test_a_linear_is_an_nn_linear_with_the_same_state_dict():
    """Checkpoints, the int8 copy and weight decay see an ordinary nn.Linear."""
    layer = Linear(4, 2)
    assert isinstance(layer, torch.nn.Linear)
    assert set(layer.state_dict()) == {"weight", "bias"}
