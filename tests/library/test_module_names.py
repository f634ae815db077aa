"""Modules named for what they hold: no two modules of the lessons, figures, analyses and attributions share a
name, and none is named as one of those folders."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_two_modules_of_the_four_share_a_name():
    folders = ("lessons", "plot", "analysis", "attribution")
    names = [p.stem for folder in folders for p in (ROOT / "viz_model" / folder).glob("*.py") if p.stem != "__init__"]
    assert sorted(set(names)) == sorted(names), sorted(n for n in set(names) if names.count(n) > 1)
    assert not set(names) & set(folders)  # plot/analysis.py beside analysis/ was a second read too
