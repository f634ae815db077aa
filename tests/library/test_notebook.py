"""The notebooks in examples/ run in a real Jupyter kernel (nbclient) and are committed with the outputs they give;
examples/quickstart.ipynb draws the shipped model's own maps."""

from __future__ import annotations

import html

import numpy as np
import pytest

nbformat = pytest.importorskip("nbformat", reason="reading notebooks needs nbformat (the notebook extra)")
from support.app import arr  # noqa: E402
from support.notebooks import EXAMPLES, PLOTLY, cell_outputs, differences, execute, notebooks  # noqa: E402

import viz_model  # noqa: E402

EXPECTED = {"quickstart.ipynb", "imported_marian.ipynb", "attributions.ipynb", "compare_models.ipynb"}
_executed: dict[str, nbformat.NotebookNode] = {}


def executed_cells(name: str) -> list:
    """The code cells of examples/`name`, executed now (once per test session)."""
    pytest.importorskip("nbclient", reason="executing a notebook needs nbclient (the test extra)")
    if name not in _executed:
        _executed[name] = execute(EXAMPLES / name)
    return [cell for cell in _executed[name].cells if cell.cell_type == "code"]


def committed_cells(name: str) -> list:
    return [cell for cell in nbformat.read(EXAMPLES / name, as_version=4).cells if cell.cell_type == "code"]


def test_every_example_notebook_is_here():
    assert {path.name for path in notebooks()} == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_notebook_is_committed_run_once_top_to_bottom_with_its_outputs(name):
    cells = committed_cells(name)
    assert [cell.execution_count for cell in cells] == list(range(1, len(cells) + 1)), \
        "run it again in order: python tests/support/notebooks.py"
    for number, cell in enumerate(cells, 1):
        assert cell.outputs, f"code cell {number} has no output"
        kinds = {output.output_type for output in cell.outputs}
        assert "error" not in kinds and not any(o.get("name") == "stderr" for o in cell.outputs), (number, kinds)
        bundles = [output.get("data", {}) for output in cell.outputs]
        assert not any("plotly.js" in b.get("text/html", "") or "cdn.plot.ly" in b.get("text/html", "")
                       for b in bundles), f"cell {number} embeds plotly.js; keep only the figure JSON"
    assert (EXAMPLES / name).stat().st_size < 400_000


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_executing_a_notebook_gives_its_committed_outputs(name):
    """A notebook changed but not re-run (or a library change that moves what it shows) fails here."""
    committed, executed = committed_cells(name), executed_cells(name)
    assert len(committed) == len(executed)
    for number, (mine, fresh) in enumerate(zip(committed, executed), 1):
        found = differences(cell_outputs(mine), cell_outputs(fresh), f"cell {number}")
        assert not found, "\n".join(found[:10]) + "\nrefresh with: python tests/support/notebooks.py " + name


def test_the_comparison_sees_a_changed_number_or_text():
    figure = {"data": [{"z": {"bdata": "AAAAAAAA8D8=", "dtype": "f8"}, "name": "a"}]}
    assert differences(figure, {"data": [{"z": [1.0 + 1e-6], "name": "a"}]}) == []
    assert differences(figure, {"data": [{"z": [1.01], "name": "a"}]})
    assert differences(figure, {"data": [{"z": [1.0], "name": "b"}]})
    assert differences({"text": "Zwei Hunde"}, {"text": "Zwei Katzen"})
    assert differences([1, 2], [1, 2, 3])
    assert differences([float("nan")], [float("nan")]) == [] and differences([float("nan")], [0.0])
    split = nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("stream", name="stdout", text=t)
                                               for t in ("a\n", "b\n", "c\n")])
    whole = nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("stream", name="stdout", text="a\nb\n"),
                                               nbformat.v4.new_output("stream", name="stdout", text="c\n")])
    assert differences(cell_outputs(split), cell_outputs(whole)) == []  # split into messages otherwise: same text
    assert differences(cell_outputs(split), cell_outputs(nbformat.v4.new_code_cell(outputs=whole.outputs[:1])))


# --- quickstart: the figures are the shipped model's own maps -------------------------------------------------------
@pytest.fixture(scope="module")
def quickstart():
    return executed_cells("quickstart.ipynb")


@pytest.fixture(scope="module")
def trace():
    return viz_model.load(device="cpu").trace("Two dogs are playing in the snow.", beam=1)


def figure(cell) -> dict:
    found = [o["data"][PLOTLY] for o in cell.outputs if PLOTLY in o.get("data", {})]
    assert len(found) == 1, f"expected one Plotly figure, got outputs {[o.output_type for o in cell.outputs]}"
    return found[0]


@pytest.mark.slow
def test_the_trace_shows_a_summary(quickstart, trace):
    out = quickstart[0].outputs[0]["data"]
    assert "<caption>AttentionTrace</caption>" in out["text/html"]
    assert html.escape(trace.translation) in out["text/html"]
    assert out["text/plain"].startswith(f"AttentionTrace(model={trace.model_name!r}")
    assert "array(" not in out["text/plain"]


@pytest.mark.slow
def test_the_heatmap_is_the_last_cross_attention_layer(quickstart, trace):
    fig = figure(quickstart[1])
    last = trace.num_layers["cross"] - 1
    np.testing.assert_allclose(arr(fig["data"][0]["z"]).reshape(len(trace.target_tokens), -1),
                               trace.cross_attentions[last].mean(axis=0), atol=1e-6)
    assert fig["layout"]["xaxis"]["ticktext"] == [html.escape(t, quote=False) for t in trace.source_tokens]
    assert fig["layout"]["yaxis"]["ticktext"] == [html.escape(t, quote=False) for t in trace.target_tokens]


@pytest.mark.slow
def test_the_model_view_has_every_encoder_head(quickstart, trace):
    """One grid of layers (rows) x heads (columns), a gap between maps; every block is that head's map."""
    fig = figure(quickstart[2])
    layers, heads, n = trace.num_layers["encoder"], trace.num_heads, len(trace.source_tokens)
    grid = arr(next(t for t in fig["data"] if t["type"] == "heatmap")["z"]).reshape(layers * (n + 1) - 1, -1)
    assert grid.shape == (layers * (n + 1) - 1, heads * (n + 1) - 1)
    for layer in range(layers):
        for head in range(heads):
            block = grid[layer * (n + 1):layer * (n + 1) + n, head * (n + 1):head * (n + 1) + n]
            np.testing.assert_allclose(block, trace.encoder_attentions[layer][head], atol=1e-6)


@pytest.mark.slow
def test_the_head_view_draws_lines_for_every_head(quickstart, trace):
    fig = figure(quickstart[3])
    names = {t.get("legendgroup") or t.get("name") for t in fig["data"] if t.get("mode", "").startswith("lines")}
    assert len([n for n in names if n]) >= trace.num_heads
