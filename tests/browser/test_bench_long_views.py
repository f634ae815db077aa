"""Smoke test of benchmarks/bench_long_views.py (Debian's Chromium, CPU fp32): ``--quick`` walks three visits of a
600-token prompt and reports each page's seconds to settle, whether it is within the limit, and the machine; it
writes no results file. It times nothing itself: the figures come from a full run on an idle machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support.app import ROOT
from support.browser import CHROMIUM

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium "
                                                     "(apt-get install chromium); CI installs it"),
]
RESULTS = ROOT / "benchmarks" / "results" / "bench_long_views.json"


def test_the_quick_walk_reports_every_visit_and_writes_no_results_file():
    before = RESULTS.read_bytes() if RESULTS.exists() else None
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("VIZ_MODEL_ASSETS", None)
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_long_views.py"), "--quick", "--json"],
                         env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout)
    assert found["quick"] and found["tokens"] == 600 and found["limit_s"] == 5.0
    assert set(found["pages"]) == {"explore", "positional", "explore-model"}
    for name, page in found["pages"].items():
        assert len(page["seconds"]) == found["rounds"] == 1 and page["median_s"] == page["seconds"][0] > 0, name
        assert page["max_s"] == page["seconds"][0] and page["within_limit"] == (page["max_s"] <= 5.0), name
    assert found["trace_visit_s"] > 0 and found["problems"] == {}
    assert found["slowest_s"] == max(page["max_s"] for page in found["pages"].values())
    assert found["all_within_limit"] == all(page["within_limit"] for page in found["pages"].values())
    assert {"cpu", "cores", "torch", "date", "load_average"} <= set(found["machine"])
    assert (RESULTS.read_bytes() if RESULTS.exists() else None) == before
