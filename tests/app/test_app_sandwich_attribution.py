"""A Gemma 2 model (sandwich norms) on the Attribution page: ALTI+, which cannot decompose a normed attention output,
says so in one line while the other methods draw; the library records why it skipped ALTI+. CPU, fp32."""

from __future__ import annotations

import pytest
from support.app import charts, messages, open_page
from support.hf_lm import build_lm_folder, import_lm

from viz_model.attribution import Attribution, attribute

PROMPT = "The cat sat on the"


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    """A tiny Gemma 2 folder imported into a models folder of its own; the folder and the loaded model."""
    root = tmp_path_factory.mktemp("sandwich-models")
    model = import_lm(build_lm_folder(tmp_path_factory.mktemp("hf-lm"), "gemma2"), root)
    return root, model


def test_the_library_skips_alti_on_a_sandwich_norm_and_says_why(gemma, tmp_path):
    _, model = gemma
    result = attribute(model, PROMPT, methods=("value_weighted", "alti", "saliency"))
    assert result.alti is None and "sandwich norm" in result.skipped["alti"]
    assert set(result.methods) == {"value_weighted", "saliency"}
    with pytest.raises(ValueError, match="sandwich norm"):
        result.source_share()
    assert Attribution.load(result.save(tmp_path / "a.npz")).skipped == result.skipped


def test_the_page_draws_the_other_methods_and_gives_alti_one_line(gemma, monkeypatch):
    root, model = gemma
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(root))
    at = open_page("attribution", timeout=180, beam="1", model=model.name, sentence=PROMPT)
    assert not at.exception
    assert "alti" in at.multiselect(key="w_at_methods").value  # the default methods ask for it
    assert "sandwich norm" in messages(at)
    assert charts(at) and not at.error
