"""A long prompt's masks as figures (no model): blocks holding the share of their cells that may attend, a window of
exact cells at true positions, a token axis turned into positions; one-line refusals."""

from __future__ import annotations

import numpy as np
import pytest
from support.app import arr

from viz_model.plot import decoding_figures, long_mask_figures

CAUSAL = np.tri(600, dtype=bool)  # row i sees keys 0..i
TOKENS = [f"t{i}" for i in range(600)]


def test_blocks_hold_the_share_of_their_cells_that_may_attend():
    fig = long_mask_figures.downsampled_mask(CAUSAL, "Causal", cells=4)
    shares = arr(fig.data[0].z)
    rows = np.array([0, 150, 300, 450, 600])
    expected = [[CAUSAL[a:b, c:d].mean() for c, d in zip(rows, rows[1:])] for a, b in zip(rows, rows[1:])]
    np.testing.assert_allclose(shares, expected, rtol=1e-6)
    assert list(fig.data[0].x) == list(rows - 0.5) and list(fig.data[0].y) == list(rows - 0.5)
    assert "600 x 600 tokens drawn as blocks of up to 150 x 150" in fig.layout.title.text
    assert shares[0, 0] == pytest.approx((150 * 151 / 2) / 150**2) and shares[0, 1] == 0 and shares[1, 0] == 1


def test_a_window_draws_every_cell_at_its_true_position():
    fig = long_mask_figures.mask_window(CAUSAL, TOKENS, TOKENS, 100, 90, "Causal", size=20)
    z, x, y = arr(fig.data[0].z), np.array(fig.data[0].x), np.array(fig.data[0].y)
    assert list(x) == list(range(90, 110)) and list(y) == list(range(100, 120))
    assert (z == CAUSAL[100:120, 90:110]).all()
    assert list(fig.layout.xaxis.tickvals) == list(range(90, 110)) and fig.layout.xaxis.ticktext[0] == "90 t90"
    assert list(fig.layout.yaxis.range) == [119.5, 99.5]
    assert "every cell of queries 100–119 x keys 90–109 (of 600 x 600)" in fig.layout.title.text
    end = long_mask_figures.mask_window(CAUSAL, TOKENS, TOKENS, 590, 590, "Causal", size=20)
    assert list(end.data[0].y) == list(range(590, 600))  # fewer at the end


def test_the_window_is_centred_and_kept_inside():
    assert long_mask_figures.window_start(300, 600, 48) == 276
    assert long_mask_figures.window_start(5, 600, 48) == 0
    assert long_mask_figures.window_start(599, 600, 48) == 552


def test_a_row_of_thousands_of_keys_names_positions():
    rows = np.full((2, 600), 1 / 600)
    fig = long_mask_figures.positions_axis(decoding_figures.cross_rows_figure(rows, TOKENS, 0, 0, "x"), "keys")
    assert fig.layout.xaxis.tickmode == "auto" and fig.layout.xaxis.ticktext is None and fig.data[0].xgap == 0


@pytest.mark.parametrize("call, said", [
    (lambda: long_mask_figures.downsampled_mask(np.zeros((0, 3), bool), "x"), "a mask must be a non-empty"),
    (lambda: long_mask_figures.downsampled_mask(CAUSAL, "x", cells=0), "cells must be an integer from 1 to 4096"),
    (lambda: long_mask_figures.mask_window(CAUSAL, TOKENS, TOKENS, 600, 0, "x"), "first_row must be an integer"),
    (lambda: long_mask_figures.mask_window(CAUSAL, TOKENS, TOKENS, 0, -1, "x"), "first_key must be an integer"),
])
def test_bad_inputs_get_one_line(call, said):
    with pytest.raises(ValueError, match=said):
        call()
