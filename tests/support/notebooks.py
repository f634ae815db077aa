"""Run the example notebooks in a real Jupyter kernel, and compare their outputs with the committed ones.

``python tests/support/notebooks.py [NAME.ipynb ...]`` re-executes the notebooks of ``examples/`` (all by default)
and writes them back with their outputs: run it after changing a notebook or what it shows.
"""

from __future__ import annotations

import base64
import math
import sys
from pathlib import Path

import nbformat

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PLOTLY = "application/vnd.plotly.v1+json"
TOLERANCE = 1e-4  # figure data: float noise between machines, far below anything a change would move


def notebooks() -> list[Path]:
    return sorted(EXAMPLES.glob("*.ipynb"))


def execute(path: Path) -> nbformat.NotebookNode:
    """`path` executed top to bottom in a fresh python3 kernel, run from its folder (no timing metadata)."""
    import nbclient  # the test extra's; imported here so that reading notebooks needs nbformat alone

    notebook = nbformat.read(path, as_version=4)

    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    return notebook


def differences(committed, executed, where: str = "") -> list[str]:
    """Where two outputs' JSON differ: text exactly, numbers (and Plotly's base64 arrays) to `TOLERANCE`."""
    committed, executed = _decoded(committed), _decoded(executed)
    if isinstance(committed, dict) and isinstance(executed, dict):
        if committed.keys() != executed.keys():
            return [f"{where}: keys {sorted(committed)} != {sorted(executed)}"]
        return [d for key in committed for d in differences(committed[key], executed[key], f"{where}/{key}")]
    if isinstance(committed, list) and isinstance(executed, list):
        if len(committed) != len(executed):
            return [f"{where}: {len(committed)} items != {len(executed)}"]
        return [d for i, (a, b) in enumerate(zip(committed, executed)) for d in differences(a, b, f"{where}[{i}]")]
    numbers = (int, float)
    if isinstance(committed, numbers) and isinstance(executed, numbers) and not isinstance(committed, bool):
        same = math.isclose(committed, executed, abs_tol=TOLERANCE) or math.isnan(committed) and math.isnan(executed)
        return [] if same else [f"{where}: {committed} != {executed}"]
    return [] if committed == executed else [f"{where}: {str(committed)[:200]!r} != {str(executed)[:200]!r}"]


def cell_outputs(cell) -> list[dict]:
    """A code cell's outputs, consecutive stream outputs of one stream joined: how a kernel splits printed text into
    messages depends on timing, what was printed does not."""
    joined: list[dict] = []
    for output in (dict(o) for o in cell.outputs):
        previous = joined[-1] if joined else None
        if output.get("output_type") == "stream" and previous and previous.get("output_type") == "stream" \
                and previous.get("name") == output.get("name"):
            previous["text"] = "".join([previous["text"], output["text"]])
        else:
            joined.append(output)
    return joined


def _decoded(value):
    """Plotly's base64 typed array as a list of numbers; anything else as it is."""
    import numpy as np

    if not (isinstance(value, dict) and "bdata" in value):
        return value
    return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"])).astype(float).tolist()


def refresh(paths: list[Path]) -> None:
    for path in paths:
        nbformat.write(execute(path), path)
        print(f"{path.name}: {path.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    refresh([EXAMPLES / name for name in sys.argv[1:]] or notebooks())
