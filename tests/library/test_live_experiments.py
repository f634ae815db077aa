"""The live experiments on tiny language models: sink eviction (StreamingLLM's cache rule and the masked rule) and
RoPE past its trained length with each scaling switched on in a copy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import viz_model
from viz_model import LanguageModel
from viz_model.analysis import sink_eviction as eviction
from viz_model.config import ModelConfig
from viz_model.lessons import position_length, position_scaling
from viz_model.lessons.position_parts import LessonError
from viz_model.nn.causal_lm import CausalLM
from viz_model.nn.rope_scaling import scaled_frequencies

TEXT = ("A man in a blue shirt is riding a bike down the street while two dogs run along the beach and a little girl "
        "with a red hat looks at the water.")


@pytest.fixture(scope="module")
def tokenizer():
    return viz_model.load("multi30k-lm-en", device="cpu").tokenizer


def tiny_lm(tokenizer, layers: int = 2, positional: str = "rope", seed: int = 0) -> LanguageModel:
    """A `LanguageModel` of `layers` layers, 4 query heads on 2 key/value heads, 256 positions, random weights."""
    torch.manual_seed(seed)
    config = ModelConfig(kind="decoder", vocab_size=tokenizer.vocab_size, d_model=32, heads=4, kv_heads=2, d_ff=64,
                         encoder_layers=0, decoder_layers=layers, max_positions=256, positional=positional,
                         norm="pre", pad_id=0)
    return LanguageModel(CausalLM(config).eval(), tokenizer, name=f"tiny-{positional}-{layers}")


@pytest.fixture(scope="module")
def rope_lm(tokenizer):
    return tiny_lm(tokenizer)


@pytest.fixture(scope="module")
def ids(tokenizer):
    found = tokenizer.encode(TEXT)
    assert len(found) >= 30
    return found[:30]


def test_with_nothing_evicted_every_rule_is_the_full_context(rope_lm, ids):
    full = eviction.full_losses(rope_lm, ids)
    streamed = eviction.streamed_losses(rope_lm, ids, len(ids) - 1, (0, 1, 4))  # the cache is full at the last step
    for losses in streamed.values():
        np.testing.assert_allclose(losses, full, atol=1e-5)
    masked = eviction.full_losses(rope_lm, ids, eviction.eviction_mask(len(ids), len(ids), 0))
    np.testing.assert_allclose(masked, full, atol=1e-6)


def test_evicting_changes_the_predictions_after_the_window_only(rope_lm, ids):
    result = eviction.sink_eviction(rope_lm, ids, 6, kept=(0, 2))
    for losses in result.kept.values():
        np.testing.assert_allclose(losses[:5], result.full[:5], atol=1e-5)  # nothing evicted before the window fills
        assert np.abs(losses[8:] - result.full[8:]).max() > 1e-3
    assert np.abs(result.kept[0][8:] - result.kept[2][8:]).max() > 1e-3
    assert set(result.perplexities()) == {"full", "0", "2"}


def test_the_masked_rule_is_a_token_by_token_evicted_cache_at_text_positions(rope_lm, ids):
    window, kept = 7, 2
    mask = eviction.eviction_mask(len(ids), window, kept)
    assert mask.sum(1).max() == window and mask[10].nonzero().flatten().tolist() == [0, 1, 6, 7, 8, 9, 10]
    cache, expected = None, []
    with torch.inference_mode():
        for t in range(len(ids) - 1):  # every key cached, the evicted ones masked: their positions stay the text's
            out = rope_lm.network(torch.tensor([[ids[t]]]), cache=cache, key_mask=mask[t:t + 1, :t + 1])
            cache = out.cache
            expected.append(-torch.log_softmax(out.logits[0, -1].double(), -1)[ids[t + 1]].item())
    result = eviction.sink_eviction(rope_lm, ids, window, kept=(kept,), rule="text")
    np.testing.assert_allclose(result.kept[kept], expected, atol=1e-5)


@pytest.mark.parametrize("positional", ["rope", "alibi"])
def test_the_cache_rule_in_one_layer_is_the_kept_tokens_read_afresh(tokenizer, ids, positional):
    """With one layer a cached key depends on its token alone, so StreamingLLM's prediction at t is a fresh pass over
    the kept tokens at positions 0 .. window - 1: the re-indexing of the cache checked against the network itself."""
    model = tiny_lm(tokenizer, layers=1, positional=positional, seed=1)
    window = 8
    streamed = eviction.streamed_losses(model, ids, window, (0, 1, 3))
    for n, losses in streamed.items():
        for t in range(window, len(ids) - 1):
            kept = [*ids[:n], *ids[t - (window - n) + 1:t + 1]]
            assert len(kept) == window
            with torch.inference_mode():
                logits = model.forced_pass(kept).logits[0, -1].double()
            assert losses[t] == pytest.approx(-torch.log_softmax(logits, -1)[ids[t + 1]].item(), abs=1e-5)


def test_with_no_sink_kept_rope_s_cache_rule_is_the_masked_one(rope_lm, ids):
    """RoPE's scores read distances only, and with no sink kept re-indexing the cache keeps every distance."""
    cache = eviction.sink_eviction(rope_lm, ids, 6, kept=(0, 2))
    text = eviction.sink_eviction(rope_lm, ids, 6, kept=(0, 2), rule="text")
    np.testing.assert_allclose(cache.kept[0], text.kept[0], atol=1e-5)
    assert np.abs(cache.kept[2][8:] - text.kept[2][8:]).max() > 1e-4  # the sinks' distances differ


def test_progress_counts_every_pass_and_the_cache_is_not_kept(rope_lm, ids):
    seen = []
    before = [p.clone() for p in rope_lm.network.parameters()]
    eviction.sink_eviction(rope_lm, ids, 10, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(k, len(ids) - 10) for k in range(1, len(ids) - 9)]
    assert all(torch.equal(a, b) for a, b in zip(before, rope_lm.network.parameters()))


@pytest.mark.parametrize(("tokens", "window", "kept", "rule", "message"), [
    (30, 4, (0, 4), "cache", "a window of 4 tokens cannot keep 4 initial tokens and the newest one"),
    (30, 29, (0,), "cache", "the text gives 30 tokens, too short for a window of 29"),
    (30, 1, (0,), "cache", "the window must be a whole number of tokens from 2"),
    (30, 8, (), "cache", "the kept counts must be whole numbers from 0"),
    (30, 8, (0,), "both", "the rule must be one of cache, text"),
])
def test_bad_input_gets_one_line(tokens, window, kept, rule, message):
    with pytest.raises(ValueError, match=message) as err:
        eviction.check_eviction(tokens, window, kept, rule)
    assert "\n" not in str(err.value)


def test_scaling_off_is_the_loaded_model_and_on_is_a_copy(rope_lm, tokenizer):
    ids = position_length.text_ids(rope_lm)[:300]
    frequencies = rope_lm.network.scheme.frequencies
    runs = position_scaling.losses_by_scaling(rope_lm, ids, 300, 4.0)
    plain = position_length.loss_by_position(rope_lm, ids, 300)
    assert list(runs) == [position_scaling.AS_LOADED, *position_scaling.SCALINGS]
    np.testing.assert_array_equal(runs[position_scaling.AS_LOADED].losses, plain.losses)
    assert rope_lm.network.scheme.frequencies is frequencies and rope_lm.config.rope_scaling == "default"
    for scaling in position_scaling.SCALINGS:
        assert np.abs(runs[scaling].losses - plain.losses).max() > 1e-6, scaling  # random weights: small changes
    linear = position_scaling.scaled_copy(rope_lm, "linear", 4.0)
    torch.testing.assert_close(linear.network.scheme.frequencies, scaled_frequencies(8, 10000.0) / 4)
    assert linear.network.layers is rope_lm.network.layers  # the weights shared, not copied
    assert linear.network is not rope_lm.network and linear._int8 is not rope_lm._int8  # a draft of its own
    unit = position_scaling.scaled_copy(rope_lm, "linear", 1.0)
    np.testing.assert_allclose(position_length.loss_by_position(unit, ids, 300).losses, plain.losses, atol=1e-6)


def test_the_scalings_refuse_a_model_without_rope_and_a_bad_factor(tokenizer, rope_lm):
    learned = tiny_lm(tokenizer, layers=1, positional="learned")
    with pytest.raises(LessonError, match="this model has learned positions, not rotary ones"):
        position_scaling.losses_by_scaling(learned, [1, 2, 3], 3, 2.0)
    with pytest.raises(LessonError, match="the factor must be a number from 1 to 64"):
        position_scaling.losses_by_scaling(rope_lm, [1, 2, 3], 3, 0.5)
    with pytest.raises(LessonError, match="unknown scaling 'longrope'"):
        position_scaling.losses_by_scaling(rope_lm, [1, 2, 3], 3, 2.0, ["longrope"])
    with pytest.raises(ValueError, match="StreamingLLM's cache rule needs RoPE or ALiBi; use the text rule"):
        eviction.sink_eviction(learned, list(range(2, 40)), 12)
    masked = eviction.sink_eviction(learned, list(range(2, 40)), 12, rule="text")
    assert masked.rule == "text" and len(masked.kept[4]) == 37
    with pytest.raises(ValueError, match="rescaled changes the RoPE settings"):
        rope_lm.rescaled(heads=2)


def test_the_benchmark_results_file_has_both_experiments_at_the_pages_defaults():
    """The shape of benchmarks/results/live_experiments.json (bench_live_experiments.py), not its timings."""
    import json
    from pathlib import Path

    from app.page_settings import POSITIONAL_ENCODING, SINKS

    data = json.loads((Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "live_experiments.json")
                      .read_text(encoding="utf-8"))
    eviction_run, scaling_run = data["sink_eviction"], data["rope_scalings"]
    assert (eviction_run["tokens"], eviction_run["window"]) == (SINKS.evict_tokens.default,
                                                                SINKS.evict_window.default)
    assert eviction_run["kept"] == list(eviction.KEPT) and eviction_run["rule"] == "cache"
    assert set(eviction_run["perplexity"]) == {"full", *map(str, eviction.KEPT)}
    assert eviction_run["paper"]["perplexity"] == {"0": 5158.07, "4": 5.40}
    assert scaling_run["factor"] == POSITIONAL_ENCODING.lm_factor.default
    assert scaling_run["tokens"] == 2 * scaling_run["trained"]  # the page's default: twice the trained length
    for part in ("mean_loss_within", "mean_loss_past"):
        assert set(scaling_run[part]) == {position_scaling.AS_LOADED, *position_scaling.SCALINGS}
    for run in (eviction_run, scaling_run, data["sink_eviction_text_rule"]):
        assert run["wall_s"] > 0 and run["cpu_s"] > 0 and run["runs"] >= 1
    assert {"cpu", "cores", "torch", "date"} <= set(data["machine"])
