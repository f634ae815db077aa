"""Streamlit AppTest of what a rerun remakes on a long prompt (CPU, fp32; the tiny imported Llama of
tests/support/long_lm.py, a ~1,000-token prompt, maps on demand): Complete & explore's token focus figure is made
once per trace, token and head, a rerun draws it again (a short prompt's is made on every run, as before); Positional
encoding's score split is computed once per model, tokens, layer and head."""

from __future__ import annotations

import shutil

import pytest
from support.app import APP, ok, start, switch_to, titles
from support.hf_lm import import_lm
from support.long_lm import long_llama_folder, long_text

from app.views.positional import position_lm_tabs
from viz_model.lessons import position_split
from viz_model.modeldir.shipped import DEFAULT_MODEL
from viz_model.plot import map_figures

PROMPT = long_text(400)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("long-lm-models")
    shutil.copytree(APP.parents[1] / "assets" / DEFAULT_MODEL, root / DEFAULT_MODEL)
    import_lm(long_llama_folder(tmp_path_factory.mktemp("hf-lm")), root)
    return root


@pytest.fixture
def focus_calls(models, monkeypatch):
    """The `token_focus` calls (token index, column rows) the app makes, with the long-model folder served."""
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(models))
    calls, real = [], map_figures.token_focus

    def counted(trace, kind, side, index, head="mean", column_rows=None):
        calls.append((index, column_rows))
        return real(trace, kind, side, index, head, column_rows)

    monkeypatch.setattr(map_figures, "token_focus", counted)
    return calls


def test_a_long_prompt_token_focus_is_made_once_per_token(focus_calls):
    at = ok(start(model="llama", sentence="a man", view="focus"))
    at.session_state["sentence"] = PROMPT
    ok(at.run())
    made = len(focus_calls)
    assert made >= 1 and focus_calls[-1][1] is not None  # the long prompt's focus: its column over some rows
    title = titles(at)[0]
    ok(at.run())
    assert len(focus_calls) == made and titles(at)[0] == title  # drawn again, not remade
    at.slider(key="focus_token_scroll").set_value(300).run()
    assert focus_calls[-1][0] == 300 and "token 300" in titles(ok(at))[0]  # another token: made for it


def test_a_short_prompt_token_focus_is_made_on_every_run(focus_calls):
    at = ok(start(model="llama", sentence="a man in a red shirt", view="focus"))
    made = len(focus_calls)
    assert made >= 1 and focus_calls[-1][1] is None
    ok(at.run())
    assert len(focus_calls) == made + 1


def test_the_score_split_is_computed_once_per_head(models, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(models))
    calls, real = [], position_split.split_lm_scores
    monkeypatch.setattr(position_split, "split_lm_scores", lambda *args: calls.append(args[2:]) or real(*args))
    position_lm_tabs._score_split.clear()
    at = ok(start(model="llama", sentence=PROMPT))
    switch_to(at, "positional").run()
    assert calls == [(0, 0)]
    title = next(t for t in titles(ok(at)) if "score = sum of the parts" in t)
    ok(at.run())
    assert calls == [(0, 0)] and title in titles(at)  # drawn again, not recomputed
    at.selectbox(key="w_pe_split_head").set_value(2).run()
    assert calls == [(0, 0), (0, 1)] and "Layer 1, head 2: score" in " ".join(titles(ok(at)))
