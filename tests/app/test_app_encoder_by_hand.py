"""Attention by hand with an encoder open (issue 59), CPU, float32: one head worked through from the layer's own
queries, keys and values (DeBERTa's position terms added, ModernBERT's rotation and window) equals the traced map,
and the page's tables and output are those numbers."""

from __future__ import annotations

import numpy as np
import pytest
from support.app import arr, charts
from support.app_encoders import ENCODERS, encoder_page

import viz_model
from app.views.by_hand.encoder_steps import encoder_head_steps


@pytest.fixture(scope="module")
def loaded(encoder_assets) -> dict[str, viz_model.EncoderModel]:
    return {name: viz_model.load(encoder_assets / name, device="cpu") for name in ENCODERS}


@pytest.mark.parametrize("name", ENCODERS)
def test_every_head_worked_by_hand_equals_the_traced_map(loaded, name):
    model = loaded[name]
    text, pair = f"two young dogs {model.mask_token} in the snow .", "a cat sleeps"
    encoded, trace = model.encoded(text, pair), model.trace(text, pair)
    for layer in range(model.config.encoder_layers):
        for head in range(model.num_heads):
            steps = encoder_head_steps(model, encoded.ids, encoded.type_ids, layer, head)
            assert np.abs(steps.weights - trace.encoder_attentions[layer][head]).max() < 1e-5
            assert (steps.bias is not None) == (name == "deberta-v3") and steps.visible.all()
    record = model.forced_pass(encoded.ids, encoded.type_ids, need_weights=True).records[1]
    assert np.allclose(steps.values, record.values[0, head].detach().double().numpy(), atol=1e-6)  # the layer's own v
    assert np.abs(steps.scores - record.scores[0, head].detach().double().numpy()).max() < 1e-5


def test_a_modernbert_local_layer_worked_by_hand_rotates_and_keeps_to_its_window(tmp_path):
    from support.hf_encoders import build_encoder_folder

    model = viz_model.from_transformers(*_hf(build_encoder_folder(tmp_path, "modernbert")), device="cpu")
    text = "two young dogs are [MASK] in the snow on the beach with a ball ."
    encoded, trace = model.encoded(text), model.trace(text)
    steps = encoder_head_steps(model, encoded.ids, encoded.type_ids, 1, 2)  # layer 2: local, a window of ±4
    assert steps.rotated and steps.window == 4 and not steps.visible.all()
    assert (steps.weights[~steps.visible] == 0).all()
    assert np.abs(steps.weights - trace.encoder_attentions[1][2]).max() < 1e-5
    assert not np.allclose(steps.q, steps.q_projected)


def test_albert_shared_layer_is_worked_at_each_depth_it_runs(tmp_path):
    from support.hf_encoders import build_encoder_folder

    model = viz_model.from_transformers(*_hf(build_encoder_folder(tmp_path, "albert"), "AlbertForMaskedLM"),
                                        device="cpu")
    text = "two young dogs are [MASK] in the snow ."
    encoded, trace = model.encoded(text), model.trace(text)
    assert len(model.network.layers) == 1 and model.config.encoder_layers == 3  # one layer's weights, three depths
    worked = [encoder_head_steps(model, encoded.ids, encoded.type_ids, depth, 1).weights for depth in range(3)]
    for depth in range(3):
        assert np.abs(worked[depth] - trace.encoder_attentions[depth][1]).max() < 1e-5
    assert np.abs(worked[0] - worked[2]).max() > 1e-3  # the same weights, other maps at each depth


def _hf(folder, model_class: str = "ModernBertForMaskedLM"):
    import transformers

    model = getattr(transformers, model_class).from_pretrained(folder, attn_implementation="eager").eval()
    return model, transformers.AutoTokenizer.from_pretrained(folder)


@pytest.mark.parametrize("name", ENCODERS)
def test_the_page_shows_the_head_worked_out_and_its_output(encoders, loaded, name):
    model = loaded[name]
    text = f"two dogs {model.mask_token} in the snow ."
    at = encoder_page("by_hand", name, sentence=text)
    at.selectbox(key="w_abh_enc_layer").set_value(2).run()
    at.selectbox(key="w_abh_enc_head").set_value(3).run()
    trace = model.trace(text)
    i = model.mask_positions(trace.source_ids)[0]  # the query followed: the mask token by default
    assert at.selectbox(key="w_abh_enc_query").value == i
    weights = next(c for c in charts(at) if c["layout"]["title"]["text"].startswith("Softmax weights worked out"))
    assert np.allclose(arr(weights["data"][0]["z"]), trace.encoder_attentions[1][2], atol=1e-5)
    assert float(next(m.value for m in at.metric if m.label.startswith("Largest difference"))) < 1e-5
    row = at.dataframe[-2].value  # step 2: the query's row, one line per key
    assert np.allclose(row["softmax weight"], trace.encoder_attentions[1][2][i], atol=1e-6)
    encoded = model.encoded(text)
    steps = encoder_head_steps(model, encoded.ids, encoded.type_ids, 1, 2)
    assert np.allclose(at.dataframe[-1].value.to_numpy()[0], steps.weights[i] @ steps.values, atol=1e-6)
