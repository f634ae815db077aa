"""A hub id's revisions opened as one model from the sidebar (issue 60, item 3), in AppTest: Pythia's ``stepN``
revisions with a training-step slider; a revision the hub does not have, a step of another architecture or tokenizer,
a text that is no hub id and steps that are no numbers are each said in one line while the app keeps running. The hub
is replaced by the checkpoints of the tiny GPT-NeoX run (`support.neox_run`, `support.fake_hub`: no network)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")
from support.app import arr, charts, ok, start, switch_to  # noqa: E402
from support.fake_hub import fake_revisions  # noqa: E402
from support.hf_lm import build_lm_folder  # noqa: E402
from support.neox_run import STEPS, neox_run, with_other_tokenizer  # noqa: E402, F401 (a fixture)

from viz_model.analysis.checkpoint_scores import series_scores  # noqa: E402
from viz_model.hf.hub_cache import CACHE_ENV, HUB_ENV  # noqa: E402
from viz_model.modeldir.series import hub_series  # noqa: E402

REPO = "EleutherAI/pythia-tiny"
SLIDER = f"hub_step_{REPO}"


@pytest.fixture
def revisions(neox_run, tiny, tmp_path, monkeypatch):  # noqa: F811 (the fixture)
    """The run's checkpoints as `REPO`'s revisions ``step0``, ``step4``, ``step8`` (an empty import cache, the tiny
    assets as the app's models); the revisions the hub was asked for."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    folders = {f"step{step}": neox_run / f"checkpoint-{step}" for step in STEPS}
    folders["step5"] = build_lm_folder(tmp_path, "gpt_neox", folder_name="step5", num_attention_heads=2)
    folders["step6"] = with_other_tokenizer(neox_run / "checkpoint-4", tmp_path / "step6")
    return fake_revisions(monkeypatch, folders)


def open_hub_series(repo: str, steps: str):
    """The app with the sidebar's hub series form filled in with `repo` and `steps`, and submitted."""
    at = ok(start(sentence="A man runs."))
    at.sidebar.text_input(key="hub_series_id").input(repo)
    at.sidebar.text_input(key="hub_series_steps").input(steps)
    next(b for b in at.sidebar.button if b.label == "Open as a series").click()
    return ok(at.run())


def heatmaps(at) -> list[np.ndarray]:
    return [arr(d["z"]) for c in charts(at) for d in c["data"] if d.get("type") == "heatmap"]


def test_a_hub_ids_revisions_open_as_one_model_with_a_training_step_slider(revisions):
    at = open_hub_series(REPO, "8, 0, 4")
    slider = at.sidebar.select_slider(key=SLIDER)
    assert [int(s) for s in slider.options] == list(STEPS) and int(slider.value) == STEPS[-1]
    assert set(revisions) == {"step8", "step0"}  # the step open, and the first step it is checked against
    captions = [c.value.replace("\\", "") for c in at.sidebar.caption]
    assert f"{REPO} · checkpoint series on the hub · step 8 of 8: the revision step8" in captions
    assert not at.sidebar.error
    last = heatmaps(at)
    ok(slider.set_value(4).run())
    assert "step4" in revisions
    assert f"{REPO} · checkpoint series on the hub · step 4 of 8: the revision step4" in [
        c.value.replace("\\", "") for c in at.sidebar.caption]
    earlier = heatmaps(at)
    assert last and len(earlier) == len(last) and not np.allclose(earlier[0], last[0])  # another step's maps
    next(b for b in at.sidebar.button if b.label == "Close the hub series").click()
    ok(at.run())
    assert SLIDER not in [s.key for s in at.sidebar.select_slider]
    assert not at.sidebar.selectbox[0].disabled  # the picker's model again


def test_watch_attention_form_measures_the_hub_series_open(revisions):
    at = open_hub_series(REPO, "0, 4, 8")
    switch_to(at, "watch").run()
    at.radio(key="watch_experiment").set_value("series").run()
    ok(at.selectbox(key="series_pick").set_value(REPO).run())
    assert REPO in at.selectbox(key="series_pick").options
    expected = series_scores(hub_series(REPO, list(STEPS)), "cpu")
    lines = next(c for c in charts(at) if any(d.get("name") == "induction score" for d in c["data"]))
    by_name = {d["name"]: d for d in lines["data"]}
    assert [int(x) for x in arr(by_name["induction score"]["x"])] == list(STEPS)
    np.testing.assert_allclose(arr(by_name["induction score"]["y"]), [expected[s].best("induction") for s in STEPS],
                               atol=1e-9)
    np.testing.assert_allclose(arr(by_name["loss: repeats"]["y"]), [expected[s].loss_repeats for s in STEPS])


def test_a_revision_the_hub_does_not_have_is_one_line(revisions):
    at = open_hub_series(REPO, "0, 999")
    assert [e.value for e in at.sidebar.error] == [
        f"This model cannot be loaded: {REPO}: the hub has no revision 'step999' of it (a branch, tag or commit, "
        "such as Pythia's step1000)"]


@pytest.mark.parametrize(("steps", "expected"), [
    ("0, 5", "This model cannot be loaded: step 5 has another architecture than step 0 (2 layers x 2 heads, d_model "
             "32, vocabulary"),
    ("0, 6", "This model cannot be loaded: step 6 has another tokenizer than step 0: a series holds one model across "
             "its training; mixed tokenizers cannot be compared step by step"),
])
def test_a_step_of_another_model_is_one_line(revisions, steps, expected):
    at = open_hub_series(REPO, steps)
    errors = [e.value for e in at.sidebar.error]
    assert len(errors) == 1 and errors[0].startswith(expected) and "\n" not in errors[0]


@pytest.mark.parametrize(("repo", "steps", "expected"), [
    ("/etc", "0", "'/etc' is not a hub id (owner/name, such as EleutherAI/pythia-70m)"),
    (REPO, "0, a thousand", "The training steps are whole numbers separated by commas, such as 0, 1000, 143000"),
    (REPO, "", "The training steps are whole numbers separated by commas, such as 0, 1000, 143000"),
    pytest.param(REPO, ", ".join(map(str, range(0, 201_000, 1000))),
                 f"{REPO}: at most 200 steps in a hub series (Pythia publishes 154), got 201", id="201-steps"),
])
def test_what_is_no_hub_series_is_one_line(revisions, repo, steps, expected):
    at = open_hub_series(repo, steps)
    assert [e.value for e in at.sidebar.error] == [expected] and revisions == []


def test_a_server_started_without_the_hub_offers_no_hub_series(monkeypatch):
    """`viz-model app --no-hub` (VIZ_MODEL_HUB=off): the sidebar has no hub series form, the picker's model serves."""
    monkeypatch.setenv(HUB_ENV, "off")
    at = ok(start(sentence="A man runs."))
    assert not [e for e in at.sidebar.expander if e.label == "A series on the hub"]
    assert not [t for t in at.sidebar.text_input if t.key == "hub_series_id"]
    monkeypatch.setenv(HUB_ENV, "on")
    at = ok(start(sentence="A man runs."))
    assert [t for t in at.sidebar.text_input if t.key == "hub_series_id"]
