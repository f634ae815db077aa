"""Heads are held in session state as integers (1-based) or "mean" / "max"; one place converts them."""

from __future__ import annotations

import pytest

from app import state


def test_head_values_round_trip_between_state_and_the_library():
    assert state.head_options(3) == [1, 2, 3, "mean", "max"]
    assert [state.head_label(v, 3) for v in state.head_options(3)] == [
        "Head 1 of 3", "Head 2 of 3", "Head 3 of 3", "Mean over heads", "Max over heads"]
    for value in state.head_options(8):
        assert state.state_head(state.head_index(value)) == value
    assert state.head_index(1) == 0 and state.head_index("max") == "max"


@pytest.mark.parametrize("url, held", [("4", 4), ("mean", "mean")])
def test_the_url_head_becomes_an_integer_in_state(tiny, url, held):
    from support.app import ok, start

    at = ok(start(head=url))
    assert at.session_state["head"] == held and at.query_params["head"] == url
