"""Every score a shipped model card prints in its quality table is the one its results.json holds (issue 24: the
figures a reader sees come from the file the evaluation wrote, not typed by hand): a translator's BLEU and chrF, a
language model's lines, NLL and perplexity, an encoder's lines, masked tokens, top-1, top-5 and NLL."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.parent for p in (REPO / "assets").glob("*/config.json"))
COLUMNS = [("beam1", "bleu"), ("beam4", "bleu"), ("beam1", "chrf"), ("beam4", "chrf")]
LM_COLUMNS = ["lines", "nll", "perplexity"]
ENCODER_COLUMNS = ["lines", "masked", "top1", "top5", "nll"]
MARKER = re.compile(r"<!-- fig [^\n]+? -->")  # the figure check's marker after a number (benchmarks/docs_figures.py)


def quality_rows(card: str) -> dict[str, list[float]]:
    """The card's quality table: set name -> BLEU greedy, BLEU beam 4, chrF greedy, chrF beam 4 (the figure
    markers left out)."""
    section = MARKER.sub("", card.split("## Quality", 1)[1].split("\n## ", 1)[0])
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [float(c) for c in cells[1:]] for cells in rows[1:]}


@pytest.mark.parametrize("directory", SHIPPED, ids=lambda p: p.name)
def test_the_cards_quality_table_is_its_results_file(directory):
    results = json.loads((directory / "results.json").read_text())
    rows = quality_rows((directory / "MODEL_CARD.md").read_text())
    columns = {"decoder": LM_COLUMNS, "encoder": ENCODER_COLUMNS}.get(
        json.loads((directory / "config.json").read_text()).get("kind"))
    if columns is not None:  # a language model or an encoder: one row per set, keyed by the set's name
        assert rows and rows.keys() == results.keys(), f"{directory.name}: the card's sets are not its results'"
        for name, values in rows.items():
            assert values == [results[name][column] for column in columns], f"{directory.name}: {name}"
        return
    assert len(rows) >= 4, f"{directory.name}: no quality table in the card"
    for name, values in rows.items():
        expected = [results[f"{name}/{search}"][metric] for search, metric in COLUMNS]
        assert values == expected, f"{directory.name}: {name}"


def test_quality_rows_reads_a_table():
    card = ("# x\n## Quality (sacrebleu)\n| set | a | b | c | d |\n|---|---|---|---|---|\n"
            "| val | 1.5 | 2<!-- fig results.json val.b d --> | 3 | 4.25 |\n\n## Notes\n| not | 9 | 9 | 9 | 9 |\n")
    assert quality_rows(card) == {"val": [1.5, 2.0, 3.0, 4.25]}
