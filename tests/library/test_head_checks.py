"""The shape check of a list of heads (`viz_model.kinds.head_checks`) serves ablation's (kind, layer, head) and head
patching's (layer, head): each refuses what is wrong in its own one line, and returns the distinct heads in order."""

from __future__ import annotations

import pytest
from support.data import tiny_model_config

from viz_model.analysis.ablation import check_heads
from viz_model.kinds.language_model import check_patched_heads


@pytest.mark.parametrize(("heads", "line"), [
    ("0,1", "heads must be a list of (layer, head) pairs, got '0,1'"),
    ([(0,)], "a head is a (layer, head) pair of integers, e.g. (0, 1); got (0,)"),
    ([[0, True]], "a head is a (layer, head) pair of integers, e.g. (0, 1); got [0, True]"),
    ([(0, 1.0)], "a head is a (layer, head) pair of integers, e.g. (0, 1); got (0, 1.0)"),
    ([(2, 0)], "head (2, 0) is outside the model: layers 0 to 1, heads 0 to 3 (0-based)"),
    ([(0, -1)], "head (0, -1) is outside the model: layers 0 to 1, heads 0 to 3 (0-based)"),
])
def test_a_patched_head_that_is_wrong_is_one_line(heads, line):
    with pytest.raises(ValueError) as err:
        check_patched_heads(heads, 2, 4)
    assert str(err.value) == line


def test_patched_heads_are_distinct_and_sorted():
    assert check_patched_heads([(1, 0), [0, 2], (1, 0)], 2, 4) == [(0, 2), (1, 0)]


@pytest.mark.parametrize(("heads", "line"), [
    ([("cross", 0)], "a head is (kind, layer, head), e.g. ('cross', 0, 3); got ('cross', 0)"),
    (["enc"], "a head is (kind, layer, head), e.g. ('cross', 0, 3); got 'enc'"),
    ([("self", 0, 0)], "head kind must be one of encoder, decoder, cross; got 'self'"),
    ([("encoder", 2, 0)], "encoder layer must be an integer from 0 to 1, got 2"),
    ([("cross", 0, 4)], "head must be an integer from 0 to 3, got 4"),
])
def test_an_ablated_head_that_is_wrong_is_one_line(heads, line):
    with pytest.raises(ValueError) as err:
        check_heads(tiny_model_config(40), heads)
    assert str(err.value) == line


def test_ablated_heads_are_distinct_in_kind_order():
    assert check_heads(tiny_model_config(40), [("cross", 1, 0), ["encoder", 1, 3], ("decoder", 0, 2),
                                               ("cross", 1, 0)]) == [("encoder", 1, 3), ("decoder", 0, 2),
                                                                     ("cross", 1, 0)]
