"""Fitted encoder-only models import exactly (issue 59's done-when): for every family, a model transformers fitted
briefly on the Multi30K English captions from a config no other test uses (`support.fitted_encoders`), imported with
``viz-model import``, agrees with transformers' eager forward on 200 held-out validation captions, one word of each
masked: the first fill-mask prediction on at least 99% of them, the top-5 probabilities within 1e-4, every attention
map within 1e-4. The agreement is recorded per family (``record_property``: ``agreement``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from support.fit_cache import cache_dir  # noqa: E402
from support.fitted_encoders import FITTED, HELD_OUT, fitted_folder, held_out  # noqa: E402
from support.hf import eager_model, imported_model  # noqa: E402
from support.hf_encoders import CONFIGS  # noqa: E402

AGREEMENT, PROBABILITY_TOLERANCE, MAP_TOLERANCE, TOP_K = 0.99, 1e-4, 1e-4, 5


@pytest.fixture(scope="module", params=list(FITTED))
def family(request):
    return request.param


@pytest.fixture(scope="module")
def folder(family, request, tmp_path_factory):
    """The fitted folder, cached in pytest's cache folder (a run without the cache plugin fits it afresh)."""
    return fitted_folder(cache_dir(request, tmp_path_factory, "fitted-encoders"), family)


@pytest.fixture(scope="module")
def hf(family, folder):
    return eager_model(CONFIGS[family][1], folder)


@pytest.fixture(scope="module")
def imported(folder, tmp_path_factory):
    return imported_model(folder, tmp_path_factory.mktemp("fitted"))


def theirs(hf, text: str):
    """transformers' eager forward over `text`: its ids, attention maps, and the top-k at the (one) mask token."""
    model, tokenizer = hf
    inputs = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = model(**inputs, output_attentions=True)
    ids = inputs["input_ids"][0].tolist()
    top = torch.softmax(out.logits[0, ids.index(tokenizer.mask_token_id)].float(), -1).topk(TOP_K)
    return ids, [a[0].numpy() for a in out.attentions], top.indices.tolist(), top.values.tolist()


def test_a_fitted_model_predicts_the_held_out_masks_as_transformers_does(hf, imported, family, record_property):
    tokenizer = hf[1]
    texts = [text for text, _ in held_out(tokenizer.mask_token)]
    same_first = right = 0
    worst_probability = worst_map = 0.0
    for text in texts:
        ids, maps, top_ids, top_probabilities = theirs(hf, text)
        trace = imported.trace(text, top_k=TOP_K)
        assert trace.source_ids == ids, text
        (found,) = trace.settings["predictions"]
        same_first += found["ids"][0] == top_ids[0]
        right += found["ids"][0] == top_ids[0] and found["tokens"][0] == tokenizer.decode([top_ids[0]])
        worst_probability = max(worst_probability, float(np.abs(np.subtract(found["probabilities"],
                                                                            top_probabilities)).max()))
        assert len(trace.encoder_attentions) == len(maps)
        worst_map = max(worst_map, max(float(np.abs(ours - other).max())
                                       for ours, other in zip(trace.encoder_attentions, maps)))
    agreement = same_first / len(texts)
    record_property("agreement", {"family": family, "captions": len(texts), "first_equal": agreement,
                                  "worst_top5_probability": worst_probability, "worst_map": worst_map})
    assert len(texts) == HELD_OUT and right == same_first
    assert agreement >= AGREEMENT and worst_probability < PROBABILITY_TOLERANCE and worst_map < MAP_TOLERANCE, (
        agreement, worst_probability, worst_map)


def test_the_fit_made_the_predictions_meaningful(hf, imported, family, record_property):
    """Fitted, not random: the first guess is the masked word on a tenth of the held-out captions or more (a random
    model's, of 800 ids, almost never is), is not one token everywhere, and stands clear of the second (no ties that
    rounding could reorder)."""
    firsts, gaps, right = set(), [], 0
    for text, word in held_out(hf[1].mask_token)[:100]:
        (found,) = imported.trace(text).settings["predictions"]
        firsts.add(found["ids"][0])
        gaps.append(found["probabilities"][0] - found["probabilities"][1])
        right += found["tokens"][0].strip().lower() == word.lower()
    record_property("held_out", {"family": family, "accuracy": right / 100, "first_tokens": len(firsts),
                                 "median_gap": float(np.median(gaps))})
    assert right >= 10 and len(firsts) >= 3 and np.median(gaps) > 1e-3, (right, len(firsts), np.median(gaps))
