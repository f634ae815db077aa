"""Positional encodings: the paper's formula, the relative-position rotation and the wavelengths."""

from __future__ import annotations

import math

import pytest
import torch

from viz_model.config import ModelConfig
from viz_model.nn.model import Transformer
from viz_model.nn.positional import (
    LearnedPositions,
    SinusoidalPositions,
    check_positions,
    shift_matrix,
    sinusoidal_table,
    wavelengths,
)


@pytest.mark.parametrize("d_model", [4, 16, 32])
def test_sinusoidal_table_matches_the_formula(d_model):
    length = 50
    table = sinusoidal_table(length, d_model)
    assert table.shape == (length, d_model) and table.dtype == torch.float32
    for pos in range(length):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)  # even columns: sin
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)  # odd columns: cos
    # position 0 is [0, 1, 0, 1, ...]: sin/cos interleaved, not concatenated
    assert table[0].tolist() == [0.0, 1.0] * (d_model // 2)


def test_odd_d_model_is_rejected():
    with pytest.raises(ValueError, match="even"):
        sinusoidal_table(10, 7)


@pytest.mark.parametrize("k", [1, 3, 17, -5])
def test_shift_matrix_maps_pe_pos_to_pe_pos_plus_k(k):
    d_model = 32
    table = sinusoidal_table(120, d_model).double()
    m = shift_matrix(k, d_model)
    assert m.shape == (d_model, d_model)
    for pos in range(max(0, -k), 100):
        torch.testing.assert_close(m @ table[pos], table[pos + k], atol=1e-6, rtol=0)
    # block-diagonal: one 2x2 rotation per sin/cos pair, nothing across pairs
    block = torch.block_diag(*[torch.ones(2, 2, dtype=torch.float64)] * (d_model // 2))
    assert torch.all(m[block == 0] == 0)
    for i in range(d_model // 2):  # each block is a rotation: orthogonal with determinant 1
        r = m[2 * i:2 * i + 2, 2 * i:2 * i + 2]
        torch.testing.assert_close(r @ r.T, torch.eye(2, dtype=torch.float64))
        assert torch.det(r).item() == pytest.approx(1.0)


def test_shift_matrix_is_independent_of_position():
    d_model = 16
    table = sinusoidal_table(40, d_model).double()
    m = shift_matrix(5, d_model)
    torch.testing.assert_close(table[5:35] @ m.T, table[10:40], atol=1e-6, rtol=0)
    torch.testing.assert_close(shift_matrix(2, d_model) @ shift_matrix(3, d_model), m, atol=1e-12, rtol=0)


def test_wavelengths_form_a_geometric_progression_from_2pi_to_10000_2pi():
    d_model = 512
    w = wavelengths(d_model)
    assert w.shape == (d_model // 2,)
    assert w[0].item() == pytest.approx(2 * math.pi)
    # the last pair has exponent (d_model-2)/d_model: just below 10000 * 2 pi, approaching it as d_model grows
    assert w[-1].item() == pytest.approx(2 * math.pi * 10000 ** ((d_model - 2) / d_model))
    assert 2 * math.pi * 10000 * 0.95 < w[-1].item() < 2 * math.pi * 10000
    ratios = w[1:] / w[:-1]
    torch.testing.assert_close(ratios, torch.full_like(ratios, 10000 ** (2 / d_model)))
    # column 2i of the table really has wavelength w[i]: PE(pos + w_i) = PE(pos) for that pair
    table = sinusoidal_table(1, 8)
    for i, wave in enumerate(wavelengths(8).tolist()):
        assert math.sin(wave / 10000 ** (2 * i / 8)) == pytest.approx(table[0, 2 * i].item(), abs=1e-9)


def test_position_modules_and_limits():
    sin = SinusoidalPositions(10, 8)
    torch.testing.assert_close(sin(3, offset=2), sinusoidal_table(10, 8)[2:5])
    assert "table" not in sin.state_dict()  # recomputed, never saved
    learned = LearnedPositions(10, 8)
    assert learned(4).shape == (4, 8)
    for module in (sin, learned):
        with pytest.raises(ValueError, match="10 positions"):
            module(11)
        with pytest.raises(ValueError, match="max_positions"):
            module(3, offset=8)
    check_positions(10, 0, 10)


def test_model_adds_the_sinusoids_to_scaled_embeddings():
    cfg = ModelConfig(vocab_size=50, encoder_layers=1, decoder_layers=1, d_model=16, heads=2, d_ff=32,
                      dropout=0.0, max_positions=20)
    net = Transformer(cfg).eval()
    ids = torch.tensor([[5, 6, 7]])
    expected = net.src_embedding(ids) * math.sqrt(16) + sinusoidal_table(20, 16)[:3]
    torch.testing.assert_close(net.embed(ids, "source"), expected)
    torch.testing.assert_close(net.embed(ids, "target", offset=4),
                               net.tgt_embedding(ids) * 4.0 + sinusoidal_table(20, 16)[4:7])
    torch.testing.assert_close(net.positional_encodings(3, "target"), sinusoidal_table(20, 16)[:3])
