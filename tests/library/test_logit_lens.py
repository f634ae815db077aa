"""The logit lens (issue 61) on the shipped language model and a translator's decoder: the last row is the model's
own output (the shipped translator's too), the rows' curves and the block that changed a cell most are read from the
same numbers, bad input gets one line; an encoder refuses in one line; the figures draw what the record holds. (Its
exactness against transformers: test_hf_import_lm.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import viz_model
from viz_model.kinds.language_model import LanguageModel
from viz_model.modeldir.shipped import DEFAULT_MODEL, SHIPPED_ENCODER, SHIPPED_LANGUAGE_MODEL
from viz_model.plot.figure_style import escape
from viz_model.plot.lens_figures import lens_grid_figure, token_curve_figure

ASSETS = Path(__file__).resolve().parents[2] / "assets"
PROMPT = "A man in a blue shirt is"


@pytest.fixture(scope="module")
def shipped() -> LanguageModel:
    return viz_model.load(ASSETS / SHIPPED_LANGUAGE_MODEL, device="cpu")  # type: ignore[return-value]


@pytest.fixture(scope="module")
def translator() -> viz_model.TranslationModel:
    return viz_model.load(ASSETS / DEFAULT_MODEL, device="cpu")  # type: ignore[return-value]


def softmax_top(logits: torch.Tensor, k: int) -> tuple[np.ndarray, np.ndarray]:
    top = torch.softmax(logits.float(), dim=-1).topk(k)
    return top.indices.numpy(), top.values.numpy()


def test_the_last_row_is_the_language_models_own_output(shipped):
    ids = shipped.encode(PROMPT)
    lens = shipped.logit_lens(PROMPT, top_k=3)
    with torch.inference_mode():
        logits = shipped.network(torch.tensor([ids])).logits[0]
    top_ids, top_probs = softmax_top(logits, 3)
    assert lens.top_ids.shape == (shipped.config.decoder_layers + 1, len(ids), 3) and lens.ids == ids
    assert np.array_equal(lens.top_ids[-1], top_ids) and np.allclose(lens.top_probs[-1], top_probs, atol=1e-6)
    assert lens.tokens == shipped.pieces(ids) and lens.top_tokens[-1][-1] == shipped.pieces(top_ids[-1].tolist())
    assert lens.top_ids[-1, -1, 0] == shipped.trace(PROMPT, 1).output_ids[len(ids) - 1]  # the model's next token
    assert not np.array_equal(lens.top_ids[0], lens.top_ids[-1])  # the embeddings read otherwise


def test_curves_ranks_and_the_deciding_block_read_the_same_numbers(shipped):
    ids = shipped.encode(PROMPT)
    predicted = shipped.logit_lens(PROMPT, top_k=1).top_ids[-1, -1, 0]
    lens = shipped.logit_lens(PROMPT, top_k=2, track=[int(predicted), ids[0]])
    rows = lens.num_rows
    assert np.allclose(lens.top_curves[np.arange(rows), :, np.arange(rows)], lens.top_probs[:, :, 0])
    probs, ranks = lens.token_curve(int(predicted), len(ids) - 1)
    assert probs.shape == ranks.shape == (rows,) and ranks[-1] == 1
    assert np.allclose(probs, lens.top_curves[-1, -1])  # the prediction is the last row's top token
    assert np.allclose(probs[-1], lens.top_probs[-1, -1, 0]) and (ranks >= 1).all()
    block = lens.deciding_block(rows - 1, len(ids) - 1)
    assert block == int(np.abs(np.diff(probs)).argmax()) + 1 and 1 <= block < rows
    assert lens.row_label(0) == "embeddings" and lens.row_label(2) == "block 2"


@pytest.mark.parametrize("call, said", [
    (lambda m: m.logit_lens(PROMPT, top_k=0), "top_k must be an integer from 1 to"),
    (lambda m: m.logit_lens(PROMPT, top_k=10 ** 7), "top_k must be an integer from 1 to"),
    (lambda m: m.logit_lens(PROMPT, track=[-1]), "track must be a list of token ids"),
    (lambda m: m.logit_lens("   "), "prompt is empty"),
    (lambda m: m.logit_lens(PROMPT).token_curve(3, 0), "token id 3 was not tracked"),
    (lambda m: m.logit_lens(PROMPT).deciding_block(0, 99), "position must be an integer from 0 to"),
])
def test_bad_input_gets_one_line(shipped, call, said):
    with pytest.raises(ValueError, match=said) as caught:
        call(shipped)
    assert "\n" not in str(caught.value)


def test_a_translators_decoder_lens_ends_in_its_own_logits(translator):
    text = "Two dogs play in the snow."
    trace = translator.trace(text, beam=1)
    lens = translator.logit_lens(text, top_k=4, forced_ids=trace.output_ids)
    assert lens.ids == trace.target_ids and lens.top_ids.shape == (translator.config.decoder_layers + 1,
                                                                   len(trace.target_ids), 4)
    src, tgt = torch.tensor([translator.encode(text)]), torch.tensor([trace.target_ids])
    with torch.inference_mode():
        logits = translator.network(src, tgt).logits[0]
    top_ids, top_probs = softmax_top(logits, 4)
    assert np.array_equal(lens.top_ids[-1], top_ids) and np.allclose(lens.top_probs[-1], top_probs, atol=1e-6)
    own = translator.logit_lens(text, top_k=4)  # its own translation, searched as translate_ids searches
    assert own.ids == [translator.config.bos_id] + translator.translate_ids([translator.encode(text)])[0][:-1]
    with pytest.raises(ValueError, match="not both"):
        translator.logit_lens(text, target="Hund", forced_ids=trace.output_ids)


def test_an_encoder_refuses_the_lens_in_one_line():
    encoder = viz_model.load(ASSETS / SHIPPED_ENCODER, device="cpu")
    with pytest.raises(ValueError, match="the logit lens does not apply to an encoder") as caught:
        encoder.logit_lens("A dog [MASK] in the snow.")
    assert "\n" not in str(caught.value)


def test_the_grid_figure_names_each_cells_top_token_and_carries_its_cell_for_a_click(shipped):
    lens = shipped.logit_lens(PROMPT, top_k=3)
    n = len(lens.ids)
    fig = lens_grid_figure(lens.window(2, n), "grid", chosen=(1, 4), first=2)
    heatmap, cells, ring = fig.data
    assert (heatmap.zmin, heatmap.zmax) == (0.0, 1.0) and np.array_equal(heatmap.z, lens.top_probs[:, 2:, 0])
    assert list(heatmap.x) == list(range(2, n)) and heatmap.text[-1][0] == escape(lens.top_tokens[-1][2][0])
    assert [list(c) for c in cells.customdata][:2] == [[0, 2], [0, 3]]
    assert len(cells.customdata) == lens.num_rows * (n - 2) and (ring.x[0], ring.y[0]) == (4, 1)
    probabilities, ranks = np.array([0.1, 0.5, 0.9]), np.array([9, 2, 1])
    curve = token_curve_figure(probabilities, ranks, ["embeddings", "block 1", "block 2"], "curve")
    assert list(curve.data[0].y) == [0.1, 0.5, 0.9] and list(curve.data[1].y) == [9, 2, 1]
    assert curve.layout.yaxis2.autorange == "reversed"  # rank 1 at the top
