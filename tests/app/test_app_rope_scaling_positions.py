"""AppTest tests of the Positional page with a YaRN-scaled Llama and a dynamic-NTK Qwen2 open (issue 60): the RoPE
frequencies tab names what each scaling did to each pair, as the library's table says, and the other RoPE tabs draw."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from support.hf_lm import build_lm_folder, import_lm
from support.hf_rope import CONFIGS
from test_app_teaching import captions, chart, ok, on_page, tables

import viz_model
from viz_model.lessons import position_rope

YARN, DYNAMIC = "llama-yarn", "qwen2-dynamic"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("rope-models")
    for family in (YARN, DYNAMIC):
        import_lm(build_lm_folder(tmp_path_factory.mktemp("hf-rope"), family, configs=CONFIGS), root)
    return root


@pytest.fixture
def rope_app(models, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(models))
    return models


def open_lm(model: str) -> AppTest:
    return ok(on_page("positional", model=model, sentence=""))


@pytest.mark.parametrize("family, said", [(YARN, "YaRN: a pair that turns more than 32× within 16 positions kept, "
                                                 "one that turns under 1× divided by 4, a linear ramp between; cos "
                                                 "and sin × 1.139, so every score × 1.296"),
                                          (DYNAMIC, "dynamic NTK scaling: past 16 tokens the base grows with the "
                                                    "length a pass reaches")])
def test_the_frequencies_tab_names_what_the_scaling_did(rope_app, family, said):
    at = open_lm(family)
    model = viz_model.load(rope_app / family, device="cpu")
    expected = position_rope.frequency_table(model.config)
    shown = tables(at)[0]
    assert list(shown["scaling"]) == list(expected["scaling"])
    np.testing.assert_allclose(shown["θ"], expected["theta"], rtol=1e-12)
    assert said in captions(at)
    names = {trace["name"] for trace in chart(at, "RoPE: each frequency pair's wavelength")["data"]}
    assert set(expected["scaling"]) <= names
    if family == DYNAMIC:
        assert position_rope.GROWN in names and "shown at 32 tokens" in captions(at)
    else:
        assert {position_rope.KEPT, position_rope.SMOOTHED, position_rope.STRETCHED} <= names
