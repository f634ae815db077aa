"""The induction-heads run of "Watch attention form" (`viz_model.lessons.induction_run`) and the attention-only
decoder it trains (`ModelConfig.attention_only`), on the CPU in fp32: the model is its attention alone, the
sequences and probes are what the docstrings say, a short run keeps its measurements and stops when told, and (slow)
the page's default run forms induction heads: the induction score after training is clearly higher than before."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from viz_model.config import ModelConfig
from viz_model.config.checks import ConfigError
from viz_model.lessons.induction_run import (
    PROBES,
    START_ID,
    InductionConfig,
    pad_id,
    probes,
    sequences,
    summary,
    train_induction,
)
from viz_model.lessons.watch_trainer import WatchError
from viz_model.nn.causal_lm import CausalLM

SMALL = InductionConfig(symbols=12, min_length=3, length=6, d_model=16, steps=30, snapshot_every=10, seconds=120.0)


def test_an_attention_only_layer_is_the_full_layer_with_its_feed_forward_network_giving_zero():
    cfg = SMALL.model_config()
    torch.manual_seed(0)
    bare = CausalLM(cfg)
    assert not [name for name, _ in bare.named_parameters() if "ffn" in name]
    full = CausalLM(dataclasses.replace(cfg, attention_only=False))
    missing, unexpected = full.load_state_dict(bare.state_dict(), strict=False)
    assert missing and all(".ffn" in name for name in missing) and not unexpected
    with torch.no_grad():
        for layer in full.layers:
            for p in layer.ffn.parameters():
                p.zero_()
    ids = torch.tensor([[START_ID, 3, 4, 5, 3, 4, 5]])
    np.testing.assert_allclose(bare(ids).logits.detach().numpy(), full(ids).logits.detach().numpy(), atol=1e-6)
    with torch.no_grad():  # the check can fail: with a working network the layer computes something else
        for layer in full.layers:
            for p in layer.ffn.parameters():
                p.normal_()
    assert not np.allclose(bare(ids).logits.detach().numpy(), full(ids).logits.detach().numpy(), atol=1e-3)
    with pytest.raises(ConfigError, match="attention_only"):
        ModelConfig(attention_only=True)  # an encoder-decoder model: a decoder-only option
    with pytest.raises(ConfigError, match="attention_only"):
        dataclasses.replace(cfg, attention_only="yes")


def test_sequences_repeat_their_random_symbols_and_pad_the_rest():
    batch = sequences(SMALL, 50, np.random.default_rng(0)).numpy()
    assert batch.shape == (50, 2 * SMALL.length + 1) and (batch[:, 0] == START_ID).all()
    sizes = set()
    for row in batch:
        body = row[1:][row[1:] != pad_id(SMALL)]
        size = len(body) // 2
        sizes.add(size)
        assert len(body) == 2 * size and (body[:size] == body[size:]).all() and body.min() >= 1
        assert (row[1 + 2 * size:] == pad_id(SMALL)).all()
    assert sizes == set(range(SMALL.min_length, SMALL.length + 1))  # every length of the range is drawn
    found = probes(SMALL)
    assert len(found) == PROBES and len(found[0]) == 2 * SMALL.length + 1 and found == probes(SMALL)
    for probe in found:
        size = (len(probe) - 1) // 2
        assert probe[0] == START_ID and probe[1:size + 1] == probe[size + 1:] and len(set(probe[1:size + 1])) == size
    assert len(found[-1]) == 2 * SMALL.min_length + 1


@pytest.mark.parametrize("change, message", [
    ({"layers": 3}, "layers must be an integer from 1 to 2, got 3"), ({"steps": 10.5}, "steps"),
    ({"min_length": 9, "length": 8}, "min_length"), ({"length": 40}, "at most symbols"),
    ({"heads": 3}, "heads of even width"), ({"seconds": 0}, "seconds"), ({"learning_rate": 1.0}, "learning_rate"),
    ({"positional": "alibi"}, "rope or learned"),
])
def test_every_setting_is_bounded_with_a_message_naming_it(change, message):
    with pytest.raises(WatchError, match=message):
        dataclasses.replace(SMALL, **change)


def test_a_short_run_measures_every_snapshot_and_stops_when_told():
    seen = []
    result = train_induction(SMALL, on_progress=lambda r: seen.append(r.snapshots[-1].step))
    assert seen == [0, 10, 20, 30] and result.stopped == "steps" and len(result.history) == 30
    shot = result.snapshots[-1]
    assert shot.induction.shape == shot.previous.shape == (2, 2) and len(shot.maps) == 2
    assert shot.maps[0].shape == (2, 2 * SMALL.length, 2 * SMALL.length)
    np.testing.assert_allclose(shot.maps[1].sum(axis=-1), 1.0, atol=1e-6)
    again = train_induction(SMALL)
    np.testing.assert_array_equal(again.snapshots[-1].induction, shot.induction)  # seeded
    stopped = train_induction(dataclasses.replace(SMALL, steps=500), should_stop=lambda: True)
    assert stopped.stopped == "stopped" and [s.step for s in stopped.snapshots] == [0]
    assert "scored" in summary(result) and f"{shot.loss_repeat:.2f}" in summary(result)


@pytest.mark.slow
def test_the_pages_default_run_forms_induction_heads():
    """The default settings, seeded, to their step count (a minute or two on one core): a layer-2 head's induction
    score rises from chance to above 0.7, a layer-1 head becomes a previous-token head, the repeats' loss falls below
    1 nat while the first copy stays near chance."""
    cfg = dataclasses.replace(InductionConfig(), seconds=900.0)
    result = train_induction(cfg)
    first, last = result.snapshots[0], result.snapshots[-1]
    assert last.step == cfg.steps
    assert first.induction.max() < 0.15 and last.induction[1].max() > 0.7
    assert last.induction[1].max() - first.induction[1].max() > 0.5
    assert last.previous[0].max() > 0.6
    assert last.loss_repeat < 1.0 and abs(last.loss_first - result.chance_loss) < 0.3
    assert "the phase change" in summary(result)
