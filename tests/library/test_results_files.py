"""Every results file in benchmarks/results/ says what it was measured on: CPU model and cores, torch, date."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RESULTS = sorted((REPO / "benchmarks" / "results").glob("*.json"))


def machine_problems(data: object) -> list[str]:
    """What a results file's ``machine`` record (bench_common.machine) lacks; [] when it is complete."""
    record = data.get("machine") if isinstance(data, dict) else None
    if not isinstance(record, dict):
        return [f"no machine record (found {record!r})"]
    problems = []
    if not isinstance(record.get("cpu"), str) or not record["cpu"]:
        problems.append("machine.cpu: no CPU model")
    if not isinstance(record.get("cores"), int) or isinstance(record.get("cores"), bool) or record["cores"] < 1:
        problems.append(f"machine.cores: {record.get('cores')!r} is not a number of cores")
    if not isinstance(record.get("torch"), str) or not record["torch"]:
        problems.append("machine.torch: no torch version")
    if not isinstance(record.get("date"), str) or not re.fullmatch(r"\d{4}-\d\d-\d\d", record["date"]):
        problems.append(f"machine.date: {record.get('date')!r} is not a date")
    return problems


def test_there_are_results_files():
    assert len(RESULTS) >= 20


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.name)
def test_each_results_file_names_its_machine_torch_and_date(path):
    problems = machine_problems(json.loads(path.read_text(encoding="utf-8")))
    assert not problems, f"{path.name}: " + "; ".join(problems) + " (re-run its script: bench_common.write_results)"


def test_an_incomplete_record_is_named():
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_common

    assert machine_problems({"machine": bench_common.machine()}) == []
    assert machine_problems({"machine": "x86_64, 2 CPUs"}) == ["no machine record (found 'x86_64, 2 CPUs')"]
    assert machine_problems({}) == ["no machine record (found None)"]
    assert machine_problems({"machine": {"cpu": "AMD EPYC", "cores": 2, "date": "26/11/2026"}}) == [
        "machine.torch: no torch version", "machine.date: '26/11/2026' is not a date"]
