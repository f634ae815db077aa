"""A precision is called precision: `with_precision` / ``precision=``, the old names warning for one release."""

from __future__ import annotations

import pytest


def test_search_meaning_a_precision_is_precision_and_the_old_names_warn(random_net, tokenizer):
    """CPU, float32: `with_precision` / ``precision=`` are what `with_search` / ``search=`` were, which still work for
    one release with a DeprecationWarning."""
    from viz_model import TranslationModel

    model = TranslationModel(random_net, tokenizer, "tiny", device="cpu", precision="fp32")
    assert model.search_precision == "fp32" and model.with_precision("fp32") is model
    with pytest.warns(DeprecationWarning, match="with_search is deprecated: use with_precision"):
        assert model.with_search("fp32") is model
    with pytest.warns(DeprecationWarning, match=r"TranslationModel\(search=\) is deprecated: pass precision="):
        old = TranslationModel(random_net, tokenizer, "tiny", device="cpu", search="fp32")
    assert old.search_precision == "fp32"
    with pytest.raises(ValueError, match="search precision must be one of"):
        model.with_precision("fp16")
