"""`viz_model.nn.linear`: the oneDNN kernel at inference, ``F.linear`` wherever a gradient is needed, same values."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from viz_model.nn import linear as linear_module
from viz_model.nn.linear import Linear, linear, uses_onednn

needs_onednn = pytest.mark.skipif(not linear_module.onednn_available(),
                                  reason="this PyTorch build has no oneDNN linear kernel")


@needs_onednn
@pytest.mark.parametrize("shape", [(1, 64), (22, 64), (4, 1, 64), (2, 3, 5, 64), (0, 64)])
def test_inference_takes_onednn_and_equals_f_linear_to_rounding(shape):
    torch.manual_seed(0)
    layer = Linear(64, 300)
    x = torch.randn(*shape)
    with torch.inference_mode():
        assert uses_onednn(x, layer.weight)
        got = layer(x)
    expected = F.linear(x, layer.weight, layer.bias)
    assert got.shape == expected.shape == (*shape[:-1], 300) and got.dtype == torch.float32
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_non_contiguous_inputs_and_no_bias():
    torch.manual_seed(1)
    weight = torch.randn(40, 16)
    x = torch.randn(16, 7).t()  # a transposed view
    last = torch.randn(3, 5, 16)[:, -1]  # a strided slice, as the search takes the last position's hidden state
    with torch.no_grad():
        torch.testing.assert_close(linear(x, weight), x @ weight.t(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(linear(last, weight), last @ weight.t(), rtol=1e-5, atol=1e-5)


def test_gradients_take_f_linear_and_are_right():
    """Training and gradient attributions: the parameters (or the input) need a gradient, so F.linear runs."""
    torch.manual_seed(2)
    layer = Linear(8, 3)
    x = torch.randn(5, 8, requires_grad=True)
    assert not uses_onednn(x, layer.weight)
    layer(x).sum().backward()
    torch.testing.assert_close(x.grad, layer.weight.sum(0).expand(5, 8))
    torch.testing.assert_close(layer.weight.grad, x.detach().sum(0).expand(3, 8))
    with torch.no_grad():  # the same layer at inference takes the fast kernel (where there is one)
        assert uses_onednn(x, layer.weight) == linear_module.onednn_available()


def test_a_bias_that_needs_a_gradient_gets_it():
    """A frozen weight with a trainable bias (fine-tuning only biases): the product must stay differentiable."""
    torch.manual_seed(3)
    layer = Linear(8, 3)
    layer.weight.requires_grad_(False)
    x = torch.randn(5, 8)
    assert not uses_onednn(x, layer.weight, layer.bias)
    layer(x).sum().backward()
    torch.testing.assert_close(layer.bias.grad, torch.full((3,), 5.0))


def test_cpu_autocast_keeps_f_linear():
    """Inference under bf16 autocast computes in bf16, as F.linear does there, not in float32."""
    layer = Linear(8, 3)
    x = torch.randn(2, 8)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert not uses_onednn(x, layer.weight, layer.bias)
        assert layer(x).dtype == torch.bfloat16


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_other_dtypes_keep_f_linear(dtype):
    layer = Linear(8, 3).to(dtype)
    x = torch.randn(2, 8, dtype=dtype)
    with torch.inference_mode():
        assert not uses_onednn(x, layer.weight)
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))


def test_a_linear_is_an_nn_linear_with_the_same_state_dict():
    """Checkpoints, the int8 copy and weight decay see an ordinary nn.Linear."""
    layer = Linear(4, 2)
    assert isinstance(layer, torch.nn.Linear)
    assert set(layer.state_dict()) == {"weight", "bias"}
