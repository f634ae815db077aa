"""Every measured figure in README.md and docs/ matches the results file its marker names (benchmarks/docs_figures.py),
and the pages speak of the project, not of how it was made."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import docs_figures  # noqa: E402

PAGES = docs_figures.pages()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_marked_figure_equals_its_results_file(page):
    problems = docs_figures.check_markers(page.read_text(encoding="utf-8"), page.name)
    assert not problems, "\n".join(map(str, problems))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_measurement_like_figure_is_marked(page):
    problems = docs_figures.unmarked(page.read_text(encoding="utf-8"), str(page.relative_to(REPO)))
    assert not problems, "\n".join(map(str, problems))


def test_a_figure_that_differs_from_its_file_fails_with_both_numbers(tmp_path, monkeypatch):
    (tmp_path / "r.json").write_text(json.dumps({"a": {"p50_ms": 189.44}, "machine": {
        "cpu": "AMD EPYC", "cores": 2, "isa": ["AVX2", "AVX-512"], "date": "2026-11-26"}}))
    monkeypatch.setattr(docs_figures, "RESULTS", tmp_path)
    good = ("p50 189<!-- fig r.json a.p50_ms .0f --> ms on "
            "<!-- machine r.json -->2-core AMD EPYC (AVX-512), 2026-11-26<!-- /machine -->")
    assert docs_figures.check_markers(good, "page.md") == []
    [problem] = docs_figures.check_markers("p50 276<!-- fig r.json a.p50_ms .0f --> ms", "page.md")
    assert "276" in str(problem) and "189" in str(problem)
    [problem] = docs_figures.check_markers("<!-- machine r.json -->an AVX2 VM<!-- /machine -->", "page.md")
    assert "2-core AMD EPYC (AVX-512), 2026-11-26" in str(problem)
    [problem] = docs_figures.check_markers("1<!-- fig r.json a.missing d -->", "page.md")
    assert "missing" in str(problem)
    stale = "p50 276<!-- fig r.json a.p50_ms .0f --> ms"
    assert docs_figures.fix(stale) == stale.replace("276", "189")


def test_measurement_like_figures_are_found_and_targets_code_and_markers_are_not():
    text = ("It took 12 s (p50 <= 60 ms), 2.31x faster, 41.8 BLEU.\n`5 s` in code; 3<!-- fig x.json k d --> ms\n"
            "```\n9 ms\n```\n15.4 -> 10.7 s\n")
    found = [p.text for p in docs_figures.unmarked(text, "page.md")]
    assert found == ["12 s", "2.31x", "41.8 BLEU", "10.7 s"]


def test_key_paths_reach_into_lists_and_keys_with_dots_and_spaces():
    data = {"runs": {"copy, sinusoidal PE": {"steps": 800}}, "beam4-alpha1.0": {"bleu": 37.09}, "t": [{"x": 1}]}
    assert docs_figures.lookup(data, "runs.copy, sinusoidal PE.steps") == 800
    assert docs_figures.lookup(data, "beam4-alpha1.0.bleu") == 37.09
    assert docs_figures.lookup(data, "t.0.x") == 1
    assert docs_figures.render(0.0368, "x100 .1f") == "3.7" and docs_figures.render(11753.4, "/1000 .1f") == "11.8"


# Words of how the project was made (sessions, machines named after the work, internal issues, what was tried).
HISTORY = re.compile(r"\b(sessions? of|this session|earlier sessions?|previous run|VM of|"
                     r"this VM|earlier VM|issue \d+|was tried|what was tried|Done on|not done|we |our team)\b",
                     re.IGNORECASE)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_pages_speak_of_the_project_not_of_how_it_was_made(page):
    hits = [f"{page.name}:{n}: {line.strip()[:120]}" for n, line in enumerate(page.read_text().splitlines(), 1)
            if HISTORY.search(line)]
    assert not hits, "\n".join(hits)


def test_the_machine_record_names_cpu_cores_isa_and_date():
    import bench_common

    record = bench_common.machine()
    assert {"cpu", "cores", "isa", "date", "torch", "python", "load_average"} <= set(record)
    assert record["cores"] >= 1 and re.fullmatch(r"\d{4}-\d\d-\d\d", record["date"])
    assert bench_common.describe_machine({"cpu": "AMD EPYC", "cores": 2, "isa": ["AVX2", "AVX-512", "AVX512-BF16"],
                                          "date": "2026-11-26"}) == "2-core AMD EPYC (AVX-512, AVX512-BF16), 2026-11-26"
    assert bench_common.describe_machine({"cpu": "X", "cores": 4, "isa": ["AVX2"], "date": "2026-01-02"}) == \
        "4-core X (AVX2), 2026-01-02"


def test_without_git_dates_an_old_file_is_checked_by_what_it_recorded(tmp_path, monkeypatch):
    (tmp_path / "old.json").write_text(json.dumps({"machine": "x86_64, 2 CPUs"}))
    monkeypatch.setattr(docs_figures, "RESULTS", tmp_path)
    monkeypatch.setattr(docs_figures, "REPO", tmp_path)  # not a git repository: no commit date
    ok = "<!-- machine old.json -->x86_64, 2 CPUs, file of 2026-11-25<!-- /machine -->"
    assert docs_figures.check_markers(ok, "page.md") == []
    [problem] = docs_figures.check_markers(ok.replace("x86_64", "AVX2 VM"), "page.md")
    assert "x86_64, 2 CPUs" in str(problem)
