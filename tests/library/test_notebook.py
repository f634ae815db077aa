"""examples/quickstart.ipynb runs in a real Jupyter kernel (nbclient) and draws the shipped model's own maps."""

from __future__ import annotations

import html
from pathlib import Path

import nbclient
import nbformat
import numpy as np
import pytest
from support.app import arr

import viz_model

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "examples" / "quickstart.ipynb"
PLOTLY = "application/vnd.plotly.v1+json"


@pytest.fixture(scope="module")
def executed():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(cell.get("outputs") for cell in notebook.cells), "the notebook is committed without outputs"
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


@pytest.fixture(scope="module")
def trace():
    return viz_model.load(device="cpu").trace("Two dogs are playing in the snow.", beam=1)


def figure(cell) -> dict:
    found = [o["data"][PLOTLY] for o in cell.outputs if PLOTLY in o.get("data", {})]
    assert len(found) == 1, f"expected one Plotly figure, got outputs {[o.output_type for o in cell.outputs]}"
    return found[0]


def test_the_trace_shows_a_summary(executed, trace):
    out = executed[0].outputs[0]["data"]
    assert "<caption>AttentionTrace</caption>" in out["text/html"]
    assert html.escape(trace.translation) in out["text/html"]
    assert out["text/plain"].startswith(f"AttentionTrace(model={trace.model_name!r}")
    assert "array(" not in out["text/plain"]


def test_the_heatmap_is_the_last_cross_attention_layer(executed, trace):
    fig = figure(executed[1])
    last = trace.num_layers["cross"] - 1
    np.testing.assert_allclose(arr(fig["data"][0]["z"]).reshape(len(trace.target_tokens), -1),
                               trace.cross_attentions[last].mean(axis=0), atol=1e-6)
    assert fig["layout"]["xaxis"]["ticktext"] == [html.escape(t, quote=False) for t in trace.source_tokens]
    assert fig["layout"]["yaxis"]["ticktext"] == [html.escape(t, quote=False) for t in trace.target_tokens]


def test_the_model_view_has_every_encoder_head(executed, trace):
    """One grid of layers (rows) x heads (columns), a gap between maps; every block is that head's map."""
    fig = figure(executed[2])
    layers, heads, n = trace.num_layers["encoder"], trace.num_heads, len(trace.source_tokens)
    grid = arr(next(t for t in fig["data"] if t["type"] == "heatmap")["z"]).reshape(layers * (n + 1) - 1, -1)
    assert grid.shape == (layers * (n + 1) - 1, heads * (n + 1) - 1)
    for layer in range(layers):
        for head in range(heads):
            block = grid[layer * (n + 1):layer * (n + 1) + n, head * (n + 1):head * (n + 1) + n]
            np.testing.assert_allclose(block, trace.encoder_attentions[layer][head], atol=1e-6)


def test_the_head_view_draws_lines_for_every_head(executed, trace):
    fig = figure(executed[3])
    names = {t.get("legendgroup") or t.get("name") for t in fig["data"] if t.get("mode", "").startswith("lines")}
    assert len([n for n in names if n]) >= trace.num_heads
