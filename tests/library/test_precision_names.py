"""A precision is called precision: `with_precision` / ``precision=``; `with_search` / ``search=``, the names of a
rename that was never released, are gone."""

from __future__ import annotations

import pytest


def test_precision_is_the_one_name_of_the_search_precision(random_net, tokenizer):
    """CPU, float32: `with_precision` / ``precision=`` choose the search's precision; `with_search` / ``search=``,
    their names before a rename that was never released, are gone."""
    from viz_model import TranslationModel

    model = TranslationModel(random_net, tokenizer, "tiny", device="cpu", precision="fp32")
    assert model.search_precision == "fp32" and model.with_precision("fp32") is model
    assert model.with_precision("int8").search_precision == "int8"
    assert not hasattr(model, "with_search")
    with pytest.raises(TypeError, match="search"):
        TranslationModel(random_net, tokenizer, "tiny", device="cpu", search="fp32")
    with pytest.raises(ValueError, match="search precision must be one of"):
        model.with_precision("fp16")
