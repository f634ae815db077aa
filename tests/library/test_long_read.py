"""What Attribution, Alignment & rollout and Attention by hand read on a long prompt (CPU, fp32; a tiny RoPE language
model with grouped heads): rollout rows carried layer by layer, value-weighted attention of the continuation's rows,
one head's query row worked by hand; each equal to the full computation on a short prompt."""

from __future__ import annotations

import numpy as np
import pytest
from support.long_lm import long_language_model, long_text

from viz_model.analysis.rollout import attention_rollout, rollout_rows
from viz_model.on_demand import OnDemandMaps


@pytest.fixture(scope="module")
def lm():
    return long_language_model()


@pytest.fixture(scope="module")
def traces(lm):
    """The same 60-word prompt and 3 new tokens traced with every map kept and with maps on demand."""
    prompt = long_text(60, seed=3)
    return lm.trace(prompt, 3, maps="full"), lm.trace(prompt, 3, maps="on_demand")


@pytest.mark.parametrize("residual", [0.5, 0.2, 1.0])
def test_rollout_rows_equal_the_full_rollouts_rows(traces, residual, monkeypatch):
    full, on_demand = traces
    assert isinstance(on_demand.decoder_attentions, OnDemandMaps)
    monkeypatch.setattr("viz_model.analysis.rollout.BLOCK_CELLS", 4 * 7 * len(full.target_tokens))  # blocks of 7 rows
    n = len(full.target_tokens)
    queries = [0, 5, n - 1]
    whole = attention_rollout(full.decoder_attentions, residual)
    for layers in (1, 2):
        for trace in (full, on_demand):
            rows = rollout_rows(trace, "decoder", queries, layers, residual)
            np.testing.assert_allclose(rows, whole[layers - 1][queries], atol=1e-6)
            np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=1e-9)


def test_rollout_rows_refuse_bad_input_in_one_line(traces):
    full, _ = traces
    n = len(full.target_tokens)
    for kwargs, message in ((dict(queries=[n]), "queries must be a non-empty list of positions from 0"),
                            (dict(queries=[]), "queries must be a non-empty list"),
                            (dict(queries=[0], layers=3), "layers must be an integer from 1 to 2"),
                            (dict(queries=[0], residual=1.5), "residual (the identity's share) must be from 0 to 1")):
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            rollout_rows(full, "decoder", **kwargs)


@pytest.mark.parametrize("family", ["llama", "mistral", "gemma2", "bloom"])
def test_one_query_row_worked_by_hand_equals_the_full_working(tmp_path_factory, family):
    """CPU, fp32: `head_steps` over query rows alone (a long prompt's: no maps kept, the recorded rows made from the
    recipe) equals those rows of the full working, for grouped heads and RoPE, a window, a soft cap and ALiBi."""
    from support.hf_lm import build_lm_folder, import_lm

    from app.views.by_hand.head_steps import head_steps

    model = import_lm(build_lm_folder(tmp_path_factory.mktemp("hf-lm"), family), tmp_path_factory.mktemp(family))
    ids = model.encode(long_text(20, seed=1))
    n = len(ids)
    for layer in range(len(model.network.layers)):
        for head in (0, model.config.heads - 1):
            whole = head_steps(model, ids, layer, head)
            for first, stop in ((n - 1, n), (3, 9), (0, 1)):
                part = head_steps(model, ids, layer, head, (first, stop))
                assert part.first_row == first and part.weights.shape == (stop - first, n)
                np.testing.assert_array_equal(part.visible, whole.visible[first:stop])
                for name in ("dots", "scores", "weights"):  # the pass without maps runs the fused attention in the
                    # layers before: float32 rounding in their outputs, not the working
                    np.testing.assert_allclose(getattr(part, name), getattr(whole, name)[first:stop], atol=1e-5,
                                               err_msg=name)
                np.testing.assert_allclose(part.recorded, whole.recorded[first:stop], atol=1e-5)
                np.testing.assert_allclose(part.k, whole.k, atol=1e-5)
                assert part.difference < 1e-5
    with pytest.raises(ValueError, match=r"rows must be \(first, stop\) with 0 <= first < stop <= "):
        head_steps(model, ids, 0, 0, (n, n + 1))


def test_a_long_prompts_attribution_equals_the_full_one_on_a_short_prompt(lm):
    """CPU, fp32: value-weighted attention of the continuation's rows alone, made from the recipes, and the gradients
    of a pass that keeps no map equal the full attribution's."""
    from viz_model.attribution import attribute_continuation

    prompt = long_text(40, seed=5)
    methods = ("value_weighted", "saliency", "input_x_gradient")
    full = attribute_continuation(lm, prompt, None, methods, max_new_tokens=4)
    rows = attribute_continuation(lm, prompt, None, methods, max_new_tokens=4, maps="on_demand")
    assert rows.output_ids == full.output_ids and len(rows.output_tokens) == 4
    for whole, part in zip(full.value_weighted["decoder"], rows.value_weighted["decoder"]):
        assert part.shape == (4, 4, whole.shape[2])  # heads, the continuation's rows, every key
        np.testing.assert_allclose(part, whole[:, -4:], atol=1e-6)
    for method in methods:
        np.testing.assert_allclose(rows.source_scores(method), full.source_scores(method), atol=1e-6)
    np.testing.assert_allclose(rows.log_probs, full.log_probs, atol=1e-5)
    with pytest.raises(ValueError, match="ALTI\\+ splits every layer's output into n² vectors: it runs with "
                                         "maps='full' only"):
        attribute_continuation(lm, prompt, None, ("alti",), max_new_tokens=2, maps="on_demand")
    with pytest.raises(ValueError, match="maps must be 'full' or 'on_demand', got 'some'"):
        attribute_continuation(lm, prompt, None, methods, max_new_tokens=2, maps="some")


def test_each_method_a_long_prompt_cannot_run_says_so_naming_its_limit():
    from viz_model.attribution.long_prompt import TOKEN_PASSES, refusals

    methods = ("value_weighted", "alti", "saliency", "input_x_gradient", "integrated_gradients")
    one = refusals(methods, 4102, 1, 256, 32)
    assert set(one) == {"alti", "integrated_gradients"}  # one new token: saliency and input x gradient run
    assert one["alti"].startswith("ALTI+ is left out: it splits each layer's output into one vector per query and "
                                  "key (4,102² x 32 values a layer here)")
    assert one["integrated_gradients"].startswith("Integrated gradients are left out: up to 256 points on the path")
    many = refusals(methods, 4102, 20, 256, 32)
    assert set(many) == {"alti", "saliency", "input_x_gradient", "integrated_gradients"}
    assert many["saliency"] == many["input_x_gradient"]
    assert many["saliency"].startswith(f"Saliency and input × gradient are left out: one backward pass over all 4,102 "
                                       f"tokens for each of the 20 continuation tokens (82,040 token-passes; at most "
                                       f"{TOKEN_PASSES:,} run here): 3 new tokens or fewer")
    assert refusals(("value_weighted", "saliency"), 300, 20, 256, 32) == {}
