"""Marks on a logarithmic axis (the trained lengths on the RoPE and sinusoid wavelength charts) are labelled where
their lines are: plotly places an annotation on a log axis at 10^y, so a label at y = 8192 would stretch the axis to
10^8192 (every pair then sits on the bottom line). Plotly figures only, on the CPU."""

from __future__ import annotations

import numpy as np
import pandas as pd

from viz_model.lessons import pe_tables
from viz_model.plot.lm_position_figures import frequency_figure
from viz_model.plot.pe_lab_figures import wavelength_figure

MARKS = {"trained length": 8192.0, "original length": 128.0}


def _labels_sit_on_their_lines(fig, data_y: np.ndarray) -> None:
    low, high = np.log10(data_y.min()), np.log10(data_y.max())
    labels = {a.text: a.y for a in fig.layout.annotations}
    lines = {s.y0 for s in fig.layout.shapes}
    for label, value in MARKS.items():
        assert value in lines
        assert np.isclose(labels[label], np.log10(value)), (label, labels[label])
        assert low - 1 <= labels[label] <= high + 1, "a label outside the data's decades stretches the log axis"


def test_rope_frequency_marks_are_placed_in_log_units() -> None:
    wavelengths = 2 * np.pi * 500_000 ** (np.arange(32) / 32)
    table = pd.DataFrame({"pair": range(32), "unscaled wavelength": wavelengths, "wavelength": wavelengths * 8,
                          "scaling": ["stretched"] * 32, "stretch": [8.0] * 32})
    fig = frequency_figure(table, MARKS)
    assert fig.layout.yaxis.type == "log"
    _labels_sit_on_their_lines(fig, np.concatenate([wavelengths, wavelengths * 8]))


def test_sinusoid_wavelength_marks_are_placed_in_log_units() -> None:
    wavelengths = pe_tables.pair_wavelengths(64)
    fig = wavelength_figure(wavelengths, marks=MARKS)
    _labels_sit_on_their_lines(fig, wavelengths)
