"""A model across its training opens as one series (issue 60, item 3): a tiny GPT-NeoX trained a few steps by
transformers and saved with save_pretrained at each of several steps (as transformers' Trainer names them,
``checkpoint-N``) opens as a series, and its induction score per checkpoint equals the score computed from
transformers' own maps (output_attentions); steps of another architecture or tokenizer are refused in one line."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

transformers = pytest.importorskip("transformers")
import torch  # noqa: E402
from support.hf_lm import build_lm_folder  # noqa: E402
from support.neox_run import STEPS, neox_run, with_other_tokenizer  # noqa: E402, F401 (a fixture)

from viz_model.analysis.checkpoint_scores import checkpoint_scores, series_scores  # noqa: E402
from viz_model.analysis.lm_head_roles import maps_table, repeated_sequences  # noqa: E402
from viz_model.hf.hub_cache import CACHE_ENV  # noqa: E402
from viz_model.modeldir.checkpoint import CheckpointError  # noqa: E402
from viz_model.training_series import load_series, load_step, open_series  # noqa: E402

LENGTH, COPIES, SAMPLES = 12, 3, 3  # small repeated sequences: the test is about equality, not about a phase change


@pytest.fixture(scope="module")
def run(neox_run, tmp_path_factory):  # noqa: F811 (the fixture)
    """A GPT-NeoX trained by transformers on repeated random tokens, saved at `STEPS` (``checkpoint-N``,
    `support.neox_run`): the run's folder, and the import cache used while the module runs."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(tmp_path_factory.mktemp("cache")))
        yield neox_run


def transformers_induction(folder, sequences) -> np.ndarray:
    """Per (layer, head), the induction score of transformers' own eager maps of `sequences`, averaged as the Head
    roles page averages (`maps_table`)."""
    model = transformers.GPTNeoXForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    found = []
    with torch.no_grad():
        for ids in sequences:
            out = model(input_ids=torch.tensor([ids]), output_attentions=True)
            found.append(([a[0].double().numpy() for a in out.attentions], ids))
    return maps_table(found)["induction"].to_numpy()


def test_a_transformers_run_opens_as_a_series_with_its_steps(run):
    series = open_series(run)
    assert series.steps == STEPS and [p.split("/")[-1] for p in series.places] == [f"checkpoint-{s}" for s in STEPS]
    assert open_series(str(run)).steps == STEPS


def test_its_induction_score_per_checkpoint_is_transformers_maps_score(run):
    series = open_series(run)
    scores = series_scores(series, "cpu", LENGTH, COPIES, SAMPLES)
    assert list(scores) == list(STEPS)
    per_step = []
    for step in STEPS:
        model = load_step(series, step, "cpu")
        sequences = repeated_sequences(model, LENGTH, COPIES, SAMPLES)
        expected = transformers_induction(run / f"checkpoint-{step}", sequences)
        ours = scores[step].heads["induction"].to_numpy()
        assert ours.shape == (4 * 2,)
        np.testing.assert_allclose(ours, expected, atol=1e-5)
        per_step.append(ours)
        assert np.isfinite(scores[step].loss_repeats) and np.isfinite(scores[step].loss_first)
    assert not np.allclose(per_step[0], per_step[-1], atol=1e-4)  # training moved the maps: the steps differ


def test_the_loss_on_the_repeats_is_the_models_own(run):
    model = load_step(open_series(run), STEPS[-1], "cpu")
    scores = checkpoint_scores(model, LENGTH, COPIES, 1)
    ids = repeated_sequences(model, LENGTH, COPIES, 1)[0]
    with torch.no_grad():
        logits = model.forced_pass(ids).logits[0, :-1].double()
    nll = -torch.log_softmax(logits, dim=-1)[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].numpy()
    start = len(ids) - LENGTH * COPIES
    assert scores.loss_repeats == pytest.approx(nll[start + LENGTH - 1:].mean())
    assert scores.loss_first == pytest.approx(nll[start:start + LENGTH - 1].mean())


def test_a_step_of_another_architecture_is_refused_in_one_line(run, tmp_path):
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copytree(run / "checkpoint-0", mixed / "step-0")
    build_lm_folder(mixed, "gpt_neox", folder_name="step-5", num_attention_heads=2)
    with pytest.raises(CheckpointError, match="step 5 has another architecture than step 0") as err:
        load_series(open_series(mixed), "cpu")
    assert "\n" not in str(err.value)


def test_a_step_with_another_tokenizer_is_refused_in_one_line(run, tmp_path):
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copytree(run / "checkpoint-0", mixed / "step-0")
    with_other_tokenizer(run / "checkpoint-4", mixed / "step-4")  # two pieces swap their ids: another tokenizer
    with pytest.raises(CheckpointError, match="step 4 has another tokenizer than step 0") as err:
        load_series(open_series(mixed), "cpu")
    assert "\n" not in str(err.value)


def test_what_is_no_series_is_said_in_one_line(run, tmp_path):
    with pytest.raises(CheckpointError, match="not a checkpoint series"):
        open_series(tmp_path)
    with pytest.raises(CheckpointError, match="needs its steps"):
        open_series("EleutherAI/pythia-14m")
    with pytest.raises(CheckpointError, match="step 3 is not in the series"):
        open_series(run).place(3)
    hub = open_series("EleutherAI/pythia-14m", [1000, 0, 512])
    assert hub.steps == (0, 512, 1000) and hub.places == ("step0", "step512", "step1000")
    with pytest.raises(CheckpointError, match=r"steps are whole numbers from 0, got \[0, -1000\]"):
        open_series("EleutherAI/pythia-14m", [0, -1000])
    with pytest.raises(CheckpointError, match=r"at most 200 steps in a hub series \(Pythia publishes 154\), got 201$"):
        open_series("EleutherAI/pythia-14m", list(range(201)))
    assert len(open_series("EleutherAI/pythia-14m", list(range(200)) * 2).steps) == 200  # repeats count once
