"""Length generalisation (issue 44): one tiny model per positional scheme on the same task, tested on lengths
beyond any trained, with accuracy by length, the probe's maps at an unseen length, a plain summary and figures."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from viz_model.lessons.position_experiment import (
    PAGE_SECONDS,
    LengthExperiment,
    LengthResult,
    SchemeRun,
    run_length_experiment,
)
from viz_model.lessons.watch_trainer import POSITIONAL, Snapshot, WatchError
from viz_model.nn.model import Transformer
from viz_model.plot.length_figures import accuracy_figure, maps_figure

TINY = LengthExperiment(schemes=POSITIONAL, min_length=2, max_length=4, test_length=8, probe_length=6, layers=1,
                        heads=2, d_model=16, steps=20, seconds=120.0, test_size=6)


@pytest.fixture(scope="module")
def tiny() -> LengthResult:
    return run_length_experiment(TINY)


def test_every_scheme_trains_and_has_a_curve_for_every_length(tiny):
    assert list(tiny.runs) == list(POSITIONAL) == list(TINY.schemes)
    assert TINY.lengths == [2, 3, 4, 5, 6, 7, 8] and TINY.unseen == [5, 6, 7, 8]
    for run in tiny.runs.values():
        assert run.steps == 20 and run.stopped == "steps"
        for curve in (run.sequence_accuracy, run.token_accuracy):
            assert len(curve) == len(TINY.lengths) and all(0.0 <= a <= 1.0 for a in curve)
        n = TINY.probe_length
        for kind in ("encoder", "decoder", "cross"):
            [weights] = getattr(run.probe, kind)
            assert weights.shape == (2, n + 1, n + 1)
            np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert len(tiny.probe) == TINY.probe_length > TINY.max_length


def test_the_same_seed_gives_the_same_curves_and_maps(tiny):
    again = run_length_experiment(TINY)
    for name, run in tiny.runs.items():
        other = again.runs[name]
        assert (run.sequence_accuracy, run.token_accuracy, run.probe.output) == \
            (other.sequence_accuracy, other.token_accuracy, other.probe.output)
        np.testing.assert_array_equal(run.probe.cross[0], other.probe.cross[0])
    reseeded = run_length_experiment(dataclasses.replace(TINY, seed=1, schemes=("learned",)))
    assert reseeded.probe != tiny.probe
    assert reseeded.runs["learned"].token_accuracy != tiny.runs["learned"].token_accuracy


def test_training_never_sees_a_test_length_and_the_tests_reach_beyond(monkeypatch):
    """Every source the models train on is at most max_length symbols (+ </s>); the tests reach test_length."""
    seen: dict[bool, list[int]] = {True: [], False: []}
    forward = Transformer.forward

    def counting(self, src, *args, **kwargs):
        seen[self.training].append(int((src != 0).sum(-1).max()))
        return forward(self, src, *args, **kwargs)

    monkeypatch.setattr(Transformer, "forward", counting)
    run_length_experiment(dataclasses.replace(TINY, schemes=("learned", "rope")))
    assert len(seen[True]) == 2 * TINY.steps and max(seen[True]) == TINY.max_length + 1
    assert max(seen[False]) == TINY.test_length + 1 > TINY.max_length + 1
    assert TINY.watch_config("learned").model_config().max_positions >= TINY.test_length + 2


def test_progress_rises_to_one_and_should_stop_keeps_the_finished_schemes():
    heard: list[tuple[float, str]] = []
    settings = dataclasses.replace(TINY, schemes=("sinusoidal", "alibi"))
    result = run_length_experiment(settings, progress=lambda done, text: heard.append((done, text)))
    fractions = [f for f, _ in heard]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and 0 < fractions[0] < 0.5
    assert any(t.startswith("alibi: step") for _, t in heard) and not result.stopped
    done: list[str] = []
    stopped = run_length_experiment(settings, progress=lambda f, text: done.append(text),
                                    should_stop=lambda: "sinusoidal: done" in done)
    assert stopped.stopped and list(stopped.runs) == ["sinusoidal"]
    assert "1 of 2 schemes" in stopped.summary()


def fake(curves: dict[str, list[float]], settings: LengthExperiment = TINY) -> LengthResult:
    """A result with these exact-sequence curves (token accuracy a tenth lower)."""
    empty = Snapshot(0, [], [], [], [])
    runs = {n: SchemeRun(n, c, [a - 0.1 for a in c], settings.steps, "steps", 1.0, 0.1, empty)
            for n, c in curves.items()}
    return LengthResult(settings, [4] * settings.probe_length, runs)


def test_the_summary_states_the_measured_numbers_and_nothing_more():
    result = fake({"rope": [1, 1, 1, 0.5, 0.25, 0, 0], "alibi": [1, 1, 0.75, 0.75, 0.75, 0.75, 0.75]})
    text = result.summary()
    assert "At lengths 5-8, never seen in training: rope 0.19, alibi 0.75." in text
    assert "trained lengths 2-4: rope 1.00, alibi 0.92" in text
    assert "Token accuracy (teacher-forced) at lengths 5-8: rope 0.09, alibi 0.65" in text
    assert "at least half the sequences exactly right: rope 5, alibi 8" in text
    assert "Highest exact accuracy at the unseen lengths: alibi." in text
    poor = fake({"rope": [1, 1, 1, 0.25, 0, 0, 0]}).summary()
    assert "No scheme gets half the unseen-length sequences exactly right." in poor and "Highest" not in poor
    assert "Cut short" not in poor


@pytest.mark.parametrize("change, name", [
    ({"task": "sort"}, "task"), ({"schemes": ()}, "schemes"), ({"schemes": ("rope", "rope")}, "schemes"),
    ({"schemes": ("rotary",)}, "schemes"), ({"schemes": "rope"}, "schemes"),
    ({"schemes": [["rope"]]}, "schemes"), ({"schemes": 5}, "schemes"), ({"test_length": 8}, "test_length"),
    ({"test_length": 17}, "test_length"), ({"probe_length": 8}, "probe_length"),
    ({"probe_length": 17}, "probe_length"), ({"test_size": 0}, "test_size"), ({"test_size": 10**4}, "test_size"),
    ({"steps": 10**6}, "steps"), ({"seconds": 1e6}, "seconds"), ({"max_length": 40}, "max_length"),
    ({"d_model": 30, "heads": 2}, "d_model"), ({"min_length": 9}, "min_length"),
])
def test_every_setting_is_bounded_in_one_line_naming_it(change, name):
    with pytest.raises(WatchError, match=name) as error:
        LengthExperiment(**change)
    assert "\n" not in str(error.value)


def test_the_figures_draw_every_scheme_and_shade_the_trained_lengths(tiny):
    fig = accuracy_figure(tiny)
    assert [t.name for t in fig.data] == list(POSITIONAL)
    assert list(fig.data[2].x) == TINY.lengths and list(fig.data[2].y) == [100 * a for a in
                                                                             tiny.runs["rope"].sequence_accuracy]
    [shade] = fig.layout.shapes
    assert (shade.x0, shade.x1) == (1.5, 4.5)
    assert list(accuracy_figure(tiny, "token_accuracy").data[0].y) == [
        100 * a for a in tiny.runs["sinusoidal"].token_accuracy]
    maps = maps_figure(tiny, "cross", layer=0, head=1)
    assert len(maps.data) == len(POSITIONAL)
    np.testing.assert_array_equal(maps.data[3].z, tiny.runs["alibi"].probe.cross[0][1])
    assert list(maps.data[3].x) == list(range(TINY.probe_length + 1))  # one column per position, repeats apart
    assert list(maps.layout.xaxis.ticktext)[-1] == "&lt;/s&gt;" and list(maps.layout.yaxis.ticktext)[0] == "&lt;s&gt;"
    assert "length 6 (trained up to 4)" in maps.layout.title.text
    mean = maps_figure(tiny, "encoder", head=None)
    np.testing.assert_allclose(mean.data[0].z, tiny.runs["sinusoidal"].probe.encoder[0].mean(0))
    for bad in (dict(kind="self"), dict(head=2), dict(layer=1)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            maps_figure(tiny, **bad)
    with pytest.raises(ValueError, match="measure"):
        accuracy_figure(tiny, "bleu")


def test_the_default_training_budgets_leave_time_for_the_tests_within_the_page_s():
    default = LengthExperiment()
    assert default.schemes == ("sinusoidal", "learned", "rope", "alibi", "relative")
    assert len(default.schemes) * default.seconds <= PAGE_SECONDS - 10


@pytest.mark.slow
def test_a_learned_table_solves_the_trained_lengths_and_no_longer_ones():
    """The untrained rows of a learned table: copy is solved at the trained lengths, never two beyond them."""
    result = run_length_experiment(dataclasses.replace(LengthExperiment(), schemes=("learned",), seconds=120.0))
    settings = result.settings
    assert result.mean("learned", list(range(settings.min_length, settings.max_length + 1))) >= 0.95
    assert result.mean("learned", list(range(settings.max_length + 2, settings.test_length + 1))) == 0.0
