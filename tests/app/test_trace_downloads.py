"""The explorer's "Download trace" of a language model (CPU, fp32, the shipped `multi30k-lm-en`): a short prompt's
trace keeps recipes (`FULL_MAPS_MAX_TOKENS` = 0) but its JSON and NPZ downloads (`AttentionTrace.with_whole_maps`)
hold every map, as before; past `WHOLE_MAP_TOKENS` tokens they hold the recipes (`AttentionTrace.load` makes the
maps)."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

import viz_model
from viz_model.on_demand import OnDemandMaps
from viz_model.trace import AttentionTrace

PROMPT = "A man in a blue shirt is"


@pytest.fixture(scope="module")
def traces():
    lm = viz_model.load("multi30k-lm-en", device="cpu")
    return lm.trace(PROMPT, 5), lm.trace(PROMPT, 5, maps="full")


def test_a_short_prompts_downloads_hold_every_map(traces):
    trace, full = traces
    assert isinstance(trace.decoder_attentions, OnDemandMaps)  # what the explorer's cache holds
    saved = trace.with_whole_maps()
    arrays = np.load(io.BytesIO(saved.to_npz_bytes()))
    data = json.loads(saved.to_json())
    assert "recipes" not in data
    for layer, kept in enumerate(full.decoder_attentions):
        np.testing.assert_allclose(arrays[f"decoder_attentions/{layer}"], kept, rtol=0, atol=1e-5)
        np.testing.assert_allclose(np.array(data["decoder_attentions"][layer]), kept, rtol=0, atol=1e-5)
    again = AttentionTrace.from_json(saved.to_json())
    assert again.target_ids == trace.target_ids and isinstance(again.decoder_attentions, list)


def test_a_long_prompts_downloads_keep_the_recipes(traces, monkeypatch):
    trace, _ = traces
    monkeypatch.setattr("viz_model.on_demand.WHOLE_MAP_TOKENS", 4)  # this trace counts as long
    assert trace.with_whole_maps() is trace
    assert "decoder_attentions/0/queries" in np.load(io.BytesIO(trace.with_whole_maps().to_npz_bytes()))
