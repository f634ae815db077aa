"""Every measured figure in README.md, docs/ and the shipped model cards matches the results file its marker names
(benchmarks/docs_figures.py), and the pages speak of the project, not of how it was made."""

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


def page_id(page: Path) -> str:
    return str(page.relative_to(REPO))


def test_the_model_cards_are_checked_pages():
    cards = docs_figures.cards()
    assert {p.parent.name for p in cards} >= {"mixed-en-de", "multi30k-en-de", "multi30k-lm-en", "multi30k-mlm-en"}
    assert set(cards) <= set(PAGES) and all(docs_figures.base_of(p) == p.parent for p in cards)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_marked_figure_equals_its_results_file(page):
    problems = docs_figures.check_markers(page.read_text(encoding="utf-8"), page.name, docs_figures.base_of(page))
    assert not problems, "\n".join(map(str, problems))


@pytest.mark.parametrize("page", PAGES, ids=page_id)
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


def test_a_cards_bare_names_are_its_model_directorys_files_and_a_log_is_reduced(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({"val/beam4": {"bleu": 41.53}}))
    (tmp_path / "training_log.jsonl").write_text("\n".join(json.dumps(e) for e in [
        {"event": "start"}, {"event": "train", "wall_time": 3600.0, "tokens_per_s": 4000.0},
        {"event": "train", "wall_time": 7200.0, "tokens_per_s": 4100.0}, {"event": "val", "wall_time": 9000.0}]))
    card = ("**41.53<!-- fig results.json val/beam4.bleu .2f --> BLEU**, wall time "
            "2.50<!-- fig training_log.jsonl *.wall_time max /3600 .2f --> h, median "
            "4,050<!-- fig training_log.jsonl *.tokens_per_s median ,.0f --> tokens/s")
    assert docs_figures.check_markers(card, "MODEL_CARD.md", tmp_path) == []
    [problem] = docs_figures.check_markers(card.replace("2.50", "2.00"), "MODEL_CARD.md", tmp_path)
    assert "2.00" in str(problem) and "2.50" in str(problem)
    assert docs_figures.fix(card.replace("4,050", "9"), tmp_path) == card
    problems = docs_figures.check_markers(card, "MODEL_CARD.md")  # read from benchmarks/results: no such files
    assert len(problems) == 3 and all("No such file" in str(p) for p in problems)
    [problem] = docs_figures.check_markers("1<!-- fig training_log.jsonl *.wall_time .0f -->", "c.md", tmp_path)
    assert "not a number" in str(problem)  # a list needs a reducer


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
    assert docs_figures.lookup({"f": {"a": {"s": 1.0}, "b": {"s": 0.5}}}, "f.*.s") == [1.0, 0.5]  # every value
    assert docs_figures.render(docs_figures.lookup({"f": {"a": {"s": 1.0}, "b": {"s": 0.5}}}, "f.*.s"),
                               "min .1%") == "50.0%"
    assert docs_figures.render(0.0368, "x100 .1f") == "3.7" and docs_figures.render(11753.4, "/1000 .1f") == "11.8"


# Words of how the project was made (sessions, machines named after the work, internal issues, what was tried).
HISTORY = re.compile(r"\b(sessions? of|this session|earlier sessions?|(?:over|in|across) (?:two|three|four|several) "
                     r"sessions|within the session|previous run|VMs?|host vm|issue \d+|was tried|what was tried|"
                     r"Done on|not done|we |our team)\b", re.IGNORECASE)


def test_words_of_how_the_project_was_made_are_found():
    for line in ("22 epochs over three sessions", "cpu (2 threads, host vm)", "the slower AVX2-only VM of 2026-11-25",
                 "to finish within the session", "two VMs"):
        assert HISTORY.search(line), line
    assert not HISTORY.search("one loaded model serves many sessions at once; sessions stick to their replica; the "
                              "session's sentence; two sessions open")


@pytest.mark.parametrize("page", PAGES, ids=page_id)
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
