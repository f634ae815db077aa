"""An encoder's trace over a long input keeps each layer's score recipe and makes a map when it is read, as a language
model's long trace does (`viz_model.on_demand`): a ModernBERT reading 2,000+ tokens, its rows equal to the full maps
and to transformers' eager attention, its local layers' window kept, saved and loaded back; DeBERTa's maps stay
full."""

from __future__ import annotations

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from support.hf_encoders import build_encoder_folder  # noqa: E402

import viz_model  # noqa: E402
from viz_model.hf.importer import import_model  # noqa: E402
from viz_model.kinds.encoder import FULL_MAPS_MAX_TOKENS  # noqa: E402
from viz_model.on_demand import OnDemandMaps  # noqa: E402
from viz_model.trace import AttentionTrace  # noqa: E402

TOLERANCE = 1e-5
ROWS = [slice(0, 6), slice(1000, 1012), slice(2040, 2050)]


@pytest.fixture(scope="module")
def long_modernbert(tmp_path_factory):
    root = tmp_path_factory.mktemp("long")
    folder = build_encoder_folder(root, "modernbert", max_position_embeddings=4096)
    import_model(str(folder), root / "imported")
    return folder, viz_model.load(root / "imported", device="cpu")


@pytest.fixture(scope="module")
def text(long_modernbert):
    return " ".join(["a man runs in the snow with the old dog"] * 160) + f" {long_modernbert[1].mask_token} park."


def test_a_long_trace_reads_its_rows_on_demand_equal_to_the_full_maps_and_transformers(long_modernbert, text,
                                                                                        tmp_path):
    folder, model = long_modernbert
    n = len(model.encode(text))
    assert n > 2048 > FULL_MAPS_MAX_TOKENS
    auto, full = model.trace(text), model.trace(text, maps="full")
    assert isinstance(auto.encoder_attentions, OnDemandMaps) and isinstance(full.encoder_attentions, list)
    (fast,), (kept,) = auto.settings["predictions"], full.settings["predictions"]  # fused attention vs explicit
    assert fast["ids"] == kept["ids"] and fast["probabilities"] == pytest.approx(kept["probabilities"], abs=1e-5)
    hf = transformers.AutoModelForMaskedLM.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        theirs = hf(**transformers.AutoTokenizer.from_pretrained(folder)(text, return_tensors="pt"),
                    output_attentions=True).attentions
    radius, windowed = model.config.window_radius, model.config.windowed_layers
    for layer in range(model.config.encoder_layers):
        assert auto.encoder_attentions.shape(layer) == (model.num_heads, n, n)
        for head in range(model.num_heads):
            for rows in ROWS:
                row = auto.head_map("encoder", layer, head, rows)
                assert np.abs(row - full.encoder_attentions[layer][head, rows]).max() < TOLERANCE
                assert np.abs(row - theirs[layer][0, head, rows].numpy()).max() < TOLERANCE
                far = np.abs(np.arange(n)[None, :] - np.arange(n)[rows][:, None]) > radius
                assert (row[far] == 0).all() == (layer in windowed) and np.allclose(row.sum(-1), 1, atol=1e-5)
    auto.save(tmp_path / "long.npz")
    back = AttentionTrace.load(tmp_path / "long.npz")
    assert isinstance(back.encoder_attentions, OnDemandMaps)
    assert np.array_equal(back.head_map("encoder", 1, 2, ROWS[1]), auto.head_map("encoder", 1, 2, ROWS[1]))


def test_a_short_trace_keeps_full_maps_and_on_demand_is_asked_by_name(long_modernbert):
    model = long_modernbert[1]
    text = f"a man {model.mask_token} in the snow."
    short, asked = model.trace(text), model.trace(text, maps="on_demand")
    assert isinstance(short.encoder_attentions, list) and isinstance(asked.encoder_attentions, OnDemandMaps)
    for ours, theirs in zip(asked.encoder_attentions, short.encoder_attentions, strict=True):
        assert np.abs(ours - theirs).max() < TOLERANCE
    with pytest.raises(ValueError, match="maps must be one of auto, full, on_demand"):
        model.trace(text, maps="lazy")


def test_debertas_maps_stay_full_and_on_demand_is_refused_in_one_line(tmp_path):
    folder = build_encoder_folder(tmp_path, "deberta-v3")
    import_model(str(folder), tmp_path / "imported")
    model = viz_model.load(tmp_path / "imported", device="cpu")
    assert isinstance(model.trace(f"a man {model.mask_token} in the snow.").encoder_attentions, list)
    with pytest.raises(ValueError, match="DeBERTa's maps are kept in full") as err:
        model.trace("a man runs", maps="on_demand")
    assert "\n" not in str(err.value)
