"""What the pages read of a mixture of experts and of learned sinks (issue 60), on tiny imported gpt-oss and Mixtral
models: each token's router weights as a tokens x experts matrix, a head's attention split by how query and key were
routed (checked against a count made pair by pair), and the share each head's learned sink takes (one minus a row's
sum, averaged over the rows), all kept by a saved trace; a model without them gets None or one line."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("transformers")
from support.hf_lm import build_lm_folder, import_lm  # noqa: E402

from app.views.by_hand.head_steps import head_steps  # noqa: E402
from viz_model.analysis.expert_routing import attention_by_routing, routing_matrix  # noqa: E402
from viz_model.analysis.sink_logits import learned_sink_shares  # noqa: E402
from viz_model.trace import AttentionTrace  # noqa: E402

PROMPT = "The red dog reads a book in the park, and the old man runs in the snow."


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A tiny gpt-oss and a tiny Mixtral, imported."""
    root = tmp_path_factory.mktemp("moe-models")
    return {family: import_lm(build_lm_folder(tmp_path_factory.mktemp("hf"), family), root)
            for family in ("gpt_oss", "mixtral")}


@pytest.fixture(scope="module")
def traces(models):
    """A trace (prompt and 4 new tokens) of each."""
    return {family: model.trace(PROMPT, 4) for family, model in models.items()}


@pytest.mark.parametrize("family", ["gpt_oss", "mixtral"])
def test_the_routing_matrix_holds_each_tokens_chosen_weights(traces, family):
    trace = traces[family]
    experts, weights = trace.expert_routing()
    for layer in range(len(experts)):
        matrix = routing_matrix(trace, layer)
        assert matrix.shape == (len(trace.target_tokens), trace.config["experts"])
        assert np.allclose(matrix.sum(axis=1), 1, atol=1e-6) and ((matrix > 0).sum(axis=1) == experts.shape[2]).all()
        assert np.array_equal(np.take_along_axis(matrix, experts[layer], axis=1), weights[layer])
    with pytest.raises(ValueError, match="layer must be an integer from 0 to 1"):
        routing_matrix(trace, 2)


@pytest.mark.parametrize("family", ["gpt_oss", "mixtral"])
def test_a_heads_attention_split_by_routing_equals_a_count_pair_by_pair(traces, family):
    trace = traces[family]
    experts = trace.expert_routing()[0]
    for layer, head in ((0, 1), (1, 3)):
        weights, mask = trace.head_map("decoder", layer, head), trace.mask("decoder", layer)
        found = {s.name: s for s in attention_by_routing(trace, layer, head)}
        sums, counts, total = {}, {}, 0.0
        for i in range(len(weights)):
            for j in range(i):
                if not mask[i, j]:
                    continue
                total += weights[i, j]
                shared = bool(set(experts[layer, i]) & set(experts[layer, j]))
                for name, holds in (("same first expert", experts[layer, i, 0] == experts[layer, j, 0]),
                                    ("different first expert", experts[layer, i, 0] != experts[layer, j, 0]),
                                    ("an expert in common", shared), ("no expert in common", not shared)):
                    if holds:
                        sums[name] = sums.get(name, 0.0) + weights[i, j]
                        counts[name] = counts.get(name, 0) + 1
        for name, split in found.items():
            assert split.pairs == counts.get(name, 0)
            if split.pairs:
                assert abs(split.mean_weight - sums[name] / counts[name]) < 1e-6
                assert abs(split.share - sums[name] / total) < 1e-6
        assert found["same first expert"].pairs + found["different first expert"].pairs == counts[
            "an expert in common"] + counts.get("no expert in common", 0)


def test_the_learned_sinks_share_is_what_each_row_misses(traces):
    trace = traces["gpt_oss"]
    shares = learned_sink_shares(trace)
    expected = np.array([[1 - trace.head_map("decoder", layer, head).sum(axis=1).mean()
                          for head in range(trace.num_heads)] for layer in range(len(trace.decoder_attentions))])
    assert shares.shape == expected.shape and np.allclose(shares, expected, atol=1e-6)
    assert (shares > 0).all() and (shares < 1).all()


def test_a_model_without_them_gets_none_or_one_line(traces):
    assert learned_sink_shares(traces["mixtral"]) is None
    plain = dataclasses.replace(traces["mixtral"], settings={k: v for k, v in traces["mixtral"].settings.items()
                                                           if k != "routing"})
    assert plain.expert_routing() is None
    with pytest.raises(ValueError, match="not a mixture of experts"):
        attention_by_routing(plain, 0, 0)


def test_a_saved_trace_keeps_its_sink_logits_routing_and_maps(traces, tmp_path):
    trace = traces["gpt_oss"]
    for suffix in (".npz", ".json"):
        again = AttentionTrace.load(trace.save(tmp_path / f"trace{suffix}"))
        assert np.array_equal(again.sink_logits(), trace.sink_logits())
        for loaded, kept in zip(again.expert_routing(), trace.expert_routing()):
            assert np.array_equal(loaded, kept)
        assert np.array_equal(again.head_map("decoder", 1, 2), trace.head_map("decoder", 1, 2))
        assert np.allclose(learned_sink_shares(again), learned_sink_shares(trace), atol=0)


def test_attention_by_hand_works_the_learned_sink_into_its_softmax(models, traces):
    model, trace = models["gpt_oss"], traces["gpt_oss"]
    ids = trace.target_ids
    for layer, head, rows in ((1, 2, None), (0, 1, (3, 9))):  # every row (the records), a few (the recipe)
        steps = head_steps(model, ids, layer, head, rows)
        assert steps.sink == pytest.approx(float(trace.sink_logits()[layer, head]), abs=1e-7)
        assert steps.difference < 1e-6 and (steps.weights.sum(axis=1) < 1).all()
    assert head_steps(models["mixtral"], traces["mixtral"].target_ids, 0, 0).sink is None
