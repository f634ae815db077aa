"""Watch attention form's induction-heads experiment in AppTest (CPU, fp32): the link opens it, a short training run
draws the loss and score curves, the summary and one head's maps before and after, from the run it keeps."""

from __future__ import annotations

import numpy as np
import pytest
from support.app import arr, charts, markdown, messages, ok, open_page, start, switch_to


def title(chart: dict) -> str:
    return chart["layout"].get("title", {}).get("text", "")


def induction_page():
    at = start(sentence="A man runs.")
    switch_to(at, "watch").run()
    at.radio(key="watch_experiment").set_value("induction").run()
    return ok(at)


def test_the_link_opens_the_induction_experiment_with_its_settings(tiny):
    at = open_page("watch", straight=True, timeout=180, beam="1", experiment="induction", induction_seconds="12")
    assert "An **induction head** completes patterns" in markdown(at)
    assert "time budget (12 s)" in messages(at)
    assert at.slider(key="watch_ind_seconds").value == 12 and not at.get("plotly_chart")
    assert not [b for b in at.button if b.label == "Train" and b.key == "FormSubmitter:watch_form-Train"]


@pytest.mark.slow
def test_a_short_run_draws_its_curves_summary_and_maps(tiny):
    at = induction_page()
    at.slider(key="watch_ind_seconds").set_value(5)
    next(b for b in at.button if b.label == "Train").click()
    ok(at.run(timeout=240))
    result = at.session_state["watch_induction"]
    assert result.stopped in ("seconds", "steps") and len(result.snapshots) >= 2
    assert not [b for b in at.button if b.key == "ind_stop"]  # shown while the run goes on, gone after it
    subplot_titles = [a.get("text", "") for c in charts(at) for a in c["layout"].get("annotations", [])]
    assert subplot_titles.count("induction score of each head") == 1  # the live curves made way
    assert "The strongest induction head, layer" in markdown(at)
    layer, head = result.best_head()
    maps = next(c for c in charts(at) if title(c).startswith(f"Layer {layer + 1}, head {head + 1}"))
    np.testing.assert_allclose(arr(maps["data"][0]["z"]), result.snapshots[0].maps[layer][head], atol=1e-9)
    np.testing.assert_allclose(arr(maps["data"][1]["z"]), result.snapshots[-1].maps[layer][head], atol=1e-9)
    at.selectbox(key="ind_head_box").set_value(1 - head).run()
    maps = next(c for c in charts(ok(at)) if title(c).startswith(f"Layer {layer + 1}, head {2 - head}"))
    np.testing.assert_allclose(arr(maps["data"][1]["z"]), result.snapshots[-1].maps[layer][1 - head], atol=1e-9)
