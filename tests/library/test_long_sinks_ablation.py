"""Attention sinks and ablation of a long prompt (CPU, fp32; a tiny RoPE language model with 4,608 positions): the
shares read head by head from maps made on demand equal the shares of every map kept, computed as the page did before
(whole layers), with and without a sliding window; no whole layer is read; ablation keeps recipes, not maps."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from support.long_lm import long_language_model, long_text

from viz_model import LanguageModel
from viz_model.analysis import ablation, sinks
from viz_model.nn.causal_lm import CausalLM
from viz_model.on_demand import OnDemandMaps

PROMPT = long_text(300)  # about 300 tokens: more than one block of query rows (map_summary.ROWS_AT_ONCE)


@pytest.fixture(scope="module")
def lm():
    return long_language_model()


@pytest.fixture(scope="module", params=[None, 40])
def traces(request, lm):
    """The prompt and 2 new tokens, maps on demand and every map kept; a model whose second layer slides a window
    of 40 keys (param 40) or none."""
    model = lm
    if request.param is not None:
        config = dataclasses.replace(lm.config, sliding_window=request.param, sliding_layers=(1,))
        network = CausalLM(config).eval()
        network.load_state_dict(lm.network.state_dict())
        model = LanguageModel(network, lm.tokenizer, name="long-lm-window")
    return model.trace(PROMPT, 2, maps="on_demand"), model.trace(PROMPT, 2, maps="full")


def whole_layer_shares(maps: list[np.ndarray], windows: list[int | None]) -> np.ndarray:
    """The shares as the page measured them before: each layer's maps whole, one float64 product a layer."""
    n = maps[0].shape[-1]
    query, key = np.arange(n)[:, None], np.arange(n)[None, :]
    out = []
    for weights, window in zip(maps, windows):
        seen = (query > key) & (True if window is None else query - key < window)
        counts = seen.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append(np.where(counts > 0, (weights.astype(np.float64) * seen).sum(axis=1) / counts, np.nan))
    return np.stack(out)


def test_the_fixture_is_long_and_on_demand(traces):
    lazy, full = traces
    assert isinstance(lazy.decoder_attentions, OnDemandMaps) and isinstance(full.decoder_attentions, list)
    assert len(lazy.target_tokens) > 256


def test_shares_read_head_by_head_equal_the_whole_layers(traces):
    lazy, full = traces
    windows = full.settings["windows"]
    expected = whole_layer_shares(full.decoder_attentions, windows)
    on_demand, kept = sinks.trace_sink_shares(lazy), sinks.trace_sink_shares(full)
    np.testing.assert_allclose(kept.shares, expected, rtol=1e-12, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(on_demand.shares, expected, atol=1e-6, equal_nan=True)
    assert np.isnan(expected[1, :, -1]).all()  # the last key: no later query
    if windows[1] is not None:
        assert not np.isnan(expected[1, :, -2]).any() and np.isnan(expected[1, :, :-40]).sum() == 0
        assert np.nanmax(np.abs(expected[1] - whole_layer_shares(full.decoder_attentions[1:], [None])[0])) > 1e-3
    old = sinks.sink_shares(full.decoder_attentions, full.target_tokens, windows)
    assert [(t.position, t.heads, t.top_layer, t.top_head) for t in on_demand.heavy] == \
        [(t.position, t.heads, t.top_layer, t.top_head) for t in old.heavy]
    assert on_demand.sink_rate == old.sink_rate


def test_shares_never_read_a_whole_layer(traces, monkeypatch):
    lazy, _ = traces

    def whole_layer(self, layer):
        raise AssertionError(f"layer {layer} read whole")
    monkeypatch.setattr(OnDemandMaps, "__getitem__", whole_layer)
    assert sinks.trace_sink_shares(lazy).shares.shape == (2, 4, len(lazy.target_tokens))


def test_a_translators_decoder_shares_are_unchanged(random_model_dir):
    import viz_model
    trace = viz_model.load(random_model_dir, device="cpu").trace("two dogs play in the snow", beam=1)
    expected = whole_layer_shares(trace.decoder_attentions, [None] * len(trace.decoder_attentions))
    np.testing.assert_allclose(sinks.trace_sink_shares(trace).shares, expected, rtol=1e-12, atol=1e-12,
                               equal_nan=True)


def test_the_ablation_of_a_long_prompt_keeps_recipes_and_equals_every_map(lm):
    result = ablation.ablate(lm, PROMPT, {("decoder", 0, 2)}, max_new_tokens=3)
    assert isinstance(result.intact.decoder_attentions, OnDemandMaps)
    assert isinstance(result.ablated.decoder_attentions, OnDemandMaps)
    full = lm.trace(PROMPT, 3, maps="full")
    assert result.intact.target_ids == full.target_ids
    for layer in range(2):
        for h in range(4):
            np.testing.assert_allclose(result.intact.head_map("decoder", layer, h), full.decoder_attentions[layer][h],
                                       atol=1e-5)
    np.testing.assert_allclose(result.ablated.head_map("decoder", 0, 2), full.decoder_attentions[0][2], atol=1e-5)
    assert np.abs(result.ablated.head_map("decoder", 1, 0) - full.decoder_attentions[1][0]).max() > 1e-4
    p = full.settings["prompt_length"]
    expected = sum(np.log(full.steps[t].probability) for t in range(p - 1, p + 2))
    assert result.log_prob_intact == pytest.approx(expected, abs=1e-4)
    assert result.log_prob_ablated != pytest.approx(result.log_prob_intact, abs=1e-6)
    pair = ([full.target_ids[:p]], [full.target_ids[p:]])
    mask = ablation.head_mask_for(lm.config, {("decoder", 0, 2)})
    assert result.log_prob_intact == pytest.approx(float(lm.sequence_log_probs(*pair)[0]), abs=1e-4)
    assert result.log_prob_ablated == pytest.approx(float(lm.sequence_log_probs(*pair, mask)[0]), abs=1e-4)


def test_the_logit_change_of_a_long_prompt_names_positions_not_every_token(lm):
    from viz_model.analysis.lm_head_roles import logit_change
    from viz_model.plot.logit_figures import logit_change_figure

    ids = lm.encode(PROMPT)
    fig = logit_change_figure(logit_change(lm, ids, {("decoder", 0, 2)}), "long")
    axis = fig.layout.xaxis2
    assert axis.tickvals is None and axis.ticktext is None and "hover for its token" in axis.title.text
    assert len(fig.data[0].x) == len(ids) and fig.data[0].customdata[5].startswith("6: ")
    short = logit_change_figure(logit_change(lm, ids[:20], {("decoder", 0, 2)}), "short")
    assert list(short.layout.xaxis2.tickvals) == list(range(20))


def test_a_continuation_too_unlikely_for_float32_keeps_a_finite_log_probability():
    """CPU, fp32: a forced token whose probability underflows float32 (logits scaled up: a log-probability far below
    -104) is scored from the log-softmax, as `sequence_log_probs` scores it, in the trace and in an ablation."""
    model = long_language_model(seed=1)
    with torch.no_grad():
        model.network.final_norm.weight.mul_(400.0)
    prompt = "a man in a red shirt"
    ids = model.encode(prompt)
    with torch.inference_mode():
        scores = torch.log_softmax(model.forced_pass(ids).logits[0, -1].float(), dim=-1)
    least = int(scores.argmin())
    assert float(scores[least]) < -200  # its probability is 0 in float32
    trace = model.trace(prompt, forced_ids=[least])
    expected = float(model.sequence_log_probs([ids], [[least]])[0])
    assert np.isfinite(trace.log_probability) and trace.log_probability == pytest.approx(expected, rel=1e-5)
    result = ablation.ablate_continuation(model, prompt, [("decoder", 0, 0)], 3)
    assert np.isfinite(result.log_prob_intact) and np.isfinite(result.log_prob_ablated)
