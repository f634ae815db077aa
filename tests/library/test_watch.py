"""Watch attention form (issue 25): a tiny Transformer learns copy and reverse within the page's budget, its final
cross-attention points where the task says, and without positional encoding reverse cannot be learned."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from viz_model.lessons.watch_trainer import (
    FIRST_SYMBOL,
    WatchConfig,
    WatchError,
    expected_source,
    target_of,
    train_watch,
)

STEPS_ONLY = WatchConfig(seconds=120.0, snapshot_every=100)  # the default steps, not cut short by a slow machine


@pytest.fixture(scope="module")
def runs() -> dict:
    """Copy and reverse with sinusoidal PE, and reverse without PE, each trained once for this module."""
    return {(task, pe): train_watch(dataclasses.replace(STEPS_ONLY, task=task, positional=pe))
            for task, pe in (("copy", "sinusoidal"), ("reverse", "sinusoidal"), ("reverse", "none"))}


def cross_argmax_share(result) -> float:
    """The share of the probe's output positions whose last-layer cross-attention (mean over heads) peaks at the
    source position the task copies from."""
    n = len(result.probe)
    expected = expected_source(result.config.task, n, result.config.shift)
    cross = result.snapshots[-1].cross[-1].mean(axis=0)[:len(expected)]
    return float(np.mean(cross.argmax(axis=-1) == np.array(expected)))


@pytest.mark.slow
@pytest.mark.parametrize("task", ["copy", "reverse"])
def test_copy_and_reverse_are_learned_and_attention_points_at_the_source(runs, task):
    result = runs[task, "sinusoidal"]
    assert result.final_accuracy >= 0.99, result.history[-1]
    assert cross_argmax_share(result) >= 0.95
    first = result.snapshots[0].cross[-1].mean(axis=0)
    assert first.max() < 0.5  # the untrained maps are spread out; the trained ones are sharp
    assert result.snapshots[-1].output == target_of(task, result.probe)


def test_reverse_without_positional_encoding_stays_unsolved(runs):
    with_pe, without = runs["reverse", "sinusoidal"], runs["reverse", "none"]
    assert without.final_accuracy < 0.5 <= with_pe.final_accuracy - 0.4
    assert cross_argmax_share(without) < 0.5


def test_the_same_seed_gives_the_same_curves_and_maps():
    cfg = WatchConfig(steps=60, snapshot_every=20, seconds=120.0)
    a, b = train_watch(cfg), train_watch(cfg)
    assert a.history == b.history and a.probe == b.probe
    for x, y in zip(a.snapshots, b.snapshots):
        for kind in ("encoder", "decoder", "cross"):
            for m, n in zip(getattr(x, kind), getattr(y, kind)):
                np.testing.assert_array_equal(m, n)
    other = train_watch(dataclasses.replace(cfg, seed=1))
    assert other.probe != a.probe or other.history != a.history


def test_stop_and_time_budget_end_training_with_a_last_snapshot():
    calls = []
    stopped = train_watch(WatchConfig(steps=500, snapshot_every=50), should_stop=lambda: len(calls) > 0,
                          on_progress=lambda r: calls.append(r.snapshots[-1].step))
    assert stopped.stopped == "stopped" and [s.step for s in stopped.snapshots] == [0] and calls == [0]
    timed = train_watch(WatchConfig(steps=5000, snapshot_every=1000, seconds=1.0))
    assert timed.stopped == "seconds" and 0 < timed.snapshots[-1].step < 5000
    assert timed.history[-1]["step"] == timed.snapshots[-1].step


def test_npz_holds_every_snapshot_per_kind_and_layer():
    result = train_watch(WatchConfig(steps=40, snapshot_every=20, layers=2, heads=2))
    arrays = result.to_npz()
    assert arrays["steps"].tolist() == [0, 20, 40]
    n = len(result.probe)
    assert arrays["cross_layer2"].shape == (3, 2, n + 1, n + 1)
    assert arrays["decoder_layer1"].shape == (3, 2, n + 1, n + 1)


def test_targets_of_each_task():
    x = [FIRST_SYMBOL + i for i in (3, 1, 2, 0)]
    assert target_of("reverse", x) == x[::-1] and target_of("sort", x) == sorted(x)
    assert target_of("shift", x, 1) == x[1:] + x[:1] and target_of("every_other", x) == x[::2]
    assert expected_source("shift", 4, 1) == [1, 2, 3, 0] and expected_source("sort", 4) is None


@pytest.mark.parametrize("change, names", [
    ({"task": "translate"}, "task"), ({"positional": "rotary"}, "positional"), ({"steps": 10**6}, "steps"),
    ({"d_model": 512}, "d_model"), ({"heads": 3}, "heads"), ({"min_length": 9, "max_length": 5}, "min_length"),
    ({"max_length": 64}, "max_length"), ({"shift": 0}, "shift"), ({"seconds": 1e6}, "seconds"),
    ({"symbols": 1}, "symbols"), ({"max_positions": 9}, "max_positions"), ({"max_positions": 35}, "max_positions"),
    ({"max_positions": 12.0}, "max_positions"), ({"steps": 800.5}, r"steps must be in \[1, 5000\], got 800.5"),
    ({"batch": True}, "batch"),
])
def test_every_setting_is_bounded_with_a_message_naming_it(change, names):
    with pytest.raises(WatchError, match=names):
        WatchConfig(**change)


@pytest.mark.parametrize("positional", ["rope", "alibi", "relative", "learned"])
def test_the_model_s_schemes_train_and_read_as_far_as_max_positions(positional):
    cfg = WatchConfig(positional=positional, steps=30, snapshot_every=10, seconds=120.0, max_positions=20)
    assert cfg.model_config().positional == positional and cfg.model_config().max_positions == 20
    assert WatchConfig(positional="none").model_config().positional == "sinusoidal"
    assert WatchConfig().model_config().max_positions == WatchConfig().max_length + 2
    result = train_watch(cfg)
    assert result.model.config.positional == positional and result.history[-1]["loss"] < result.history[1]["loss"]


def test_two_trainings_at_once_each_get_what_they_would_alone():
    """Two sessions train in threads at the same time: each result equals its run alone (no shared state)."""
    import threading

    configs = [WatchConfig(steps=40, snapshot_every=20, seconds=120.0, task=t, seed=s)
               for t, s in (("copy", 3), ("reverse", 4))]
    alone = [train_watch(c) for c in configs]
    together: list = [None, None]
    threads = [threading.Thread(target=lambda i=i: together.__setitem__(i, train_watch(configs[i])))
               for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for a, b in zip(alone, together):
        assert a.history == b.history and a.probe == b.probe
        # equal but for the last bits: two trainings at once share PyTorch's intra-op threads, which can change the
        # order of float sums (seen on a loaded 2-core machine); shared state would change far more than that
        np.testing.assert_allclose(a.snapshots[-1].cross[0], b.snapshots[-1].cross[0], rtol=0, atol=1e-6)
    assert together[0].model is not together[1].model
