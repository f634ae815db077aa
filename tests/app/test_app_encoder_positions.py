"""Positional encoding with an encoder open (issue 59), CPU, float32, in the model's own scheme: BERT's learned table
and the rows a text reads, RoBERTa's rows offset by the pad id, ModernBERT's two RoPE bases, and DeBERTa-v3's log
buckets and its three terms of a real head, which add up to the scores the model computed (and their softmax to
the traced map)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.app import arr, charts, messages
from support.app_encoders import encoder_page

import viz_model
from viz_model.lessons import encoder_positions
from viz_model.lessons.position_parts import LessonError


@pytest.fixture(scope="module")
def loaded(encoder_assets) -> dict[str, viz_model.EncoderModel]:
    return {name: viz_model.load(encoder_assets / name, device="cpu") for name in ("bert", "deberta-v3")}


@pytest.fixture(scope="module")
def other_assets(tmp_path_factory):
    """A models folder holding a small random RoBERTa and ModernBERT, imported."""
    from support.hf_encoders import build_encoder_folder

    from viz_model.hf.importer import import_model

    root = tmp_path_factory.mktemp("position-assets")
    for family in ("roberta", "modernbert"):
        import_model(str(build_encoder_folder(tmp_path_factory.mktemp("hf"), family)), root / family)
    return root


def test_the_three_deberta_terms_add_up_to_the_scores_and_their_softmax_is_the_traced_map(loaded):
    model = loaded["deberta-v3"]
    text = "two young dogs [MASK] in the snow ."
    trace = model.trace(text)
    for layer in range(model.config.encoder_layers):
        for head in range(model.num_heads):
            split = encoder_positions.disentangled_split(model, text, None, layer, head)
            assert split.residual < 1e-5
            assert all(np.abs(term).max() > 1e-3 for term in split.terms.values())  # every term is a real part
            assert np.abs(split.weights - trace.encoder_attentions[layer][head]).max() < 1e-6
            softmax = np.exp(split.scores - split.scores.max(axis=-1, keepdims=True))
            assert np.allclose(softmax / softmax.sum(axis=-1, keepdims=True), split.weights, atol=1e-6)
    shifted = encoder_positions.DisentangledSplit(split.scores, {**split.terms, "c2p": split.terms["c2p"] + 0.01},
                                                  split.relative, split.weights)
    assert shifted.residual > 5e-3  # the check can fail
    with pytest.raises(LessonError, match="not DeBERTa's"):
        encoder_positions.disentangled_split(loaded["bert"], text, None, 0, 0)


def test_the_deberta_page_splits_a_head_and_draws_its_buckets(encoders, loaded):
    model = loaded["deberta-v3"]
    text = "two young dogs [MASK] in the snow ."
    at = encoder_page("positional", "deberta-v3", sentence=text)
    at.selectbox(key="w_pe_split_layer").set_value(2).run()
    at.selectbox(key="w_pe_split_head").set_value(3).run()
    split = encoder_positions.disentangled_split(model, text, None, 1, 2)
    figures = {c["layout"]["title"]["text"]: c for c in charts(at)}
    terms = figures["Layer 2, head 3: score = c2c + c2p + p2c"]["data"]
    assert [d["name"] for d in terms] == ["score", "c2c", "c2p", "p2c"]
    for drawn, expected in zip(terms, [split.scores, *split.terms.values()]):
        assert np.allclose(arr(drawn["z"]).reshape(expected.shape), expected, atol=1e-5)
    metrics = {m.label: float(m.value) for m in at.metric}
    assert metrics["Max difference: c2c + c2p + p2c − the scores"] < 1e-5
    assert metrics["Max difference: softmax of the scores − the traced map"] < 1e-6
    buckets = figures["DeBERTa: the bucket of each relative position (query − key)"]["data"][0]
    offsets, expected = encoder_positions.buckets(model, 64)
    assert arr(buckets["y"]).tolist() == expected.tolist()
    mid = model.config.position_buckets // 2  # kept as they are within half the buckets, log-spaced beyond
    near = np.abs(offsets) < mid
    assert (expected[near] == offsets[near]).all() and (np.diff(expected) >= 0).all()
    assert np.abs(expected).max() < np.abs(offsets).max() / 4


def test_bert_shows_its_table_and_the_rows_the_text_reads(encoders, loaded):
    model = loaded["bert"]
    at = encoder_page("positional", "bert", sentence="a [MASK] runs .")
    figures = {c["layout"]["title"]["text"]: c for c in charts(at)}
    n = len(model.encode("a [MASK] runs ."))
    rows = figures[f"The rows your text reads: rows 0 to {n - 1}"]["data"][0]
    assert np.allclose(arr(rows["z"]).reshape(n, -1), encoder_positions.learned_rows(model)[:n], atol=1e-6)
    assert "Token t reads row t of the table, from row 0." in "\n".join(c.value for c in at.caption)


def test_roberta_rows_are_offset_by_the_pad_id_and_modernbert_has_two_bases(other_assets, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(other_assets))
    roberta = viz_model.load(other_assets / "roberta", device="cpu")
    pad = roberta.config.pad_id
    ids = roberta.encode("a <mask> runs .")
    assert encoder_positions.rows_read(roberta, ids) == list(range(pad + 1, pad + 1 + len(ids)))
    at = encoder_page("positional", "roberta", sentence="a <mask> runs .")
    assert f"its first token reads row {pad + 1}, and a pad reads row {pad}" in "\n".join(c.value for c in at.caption)
    assert any(t == f"The rows your text reads: rows {pad + 1} to {pad + len(ids)}"
               for t in (c["layout"]["title"]["text"] for c in charts(at)))

    modern = viz_model.load(other_assets / "modernbert", device="cpu")
    at = encoder_page("positional", "modernbert", sentence="a [MASK] runs .")
    fig = next(c for c in charts(at) if c["layout"]["title"]["text"] == "RoPE: each pair's wavelength under each base")
    lines = {d["name"]: arr(d["y"]) for d in fig["data"]}
    d = modern.config.d_head
    for name, base in (("global", 1000.0), ("local", 50.0)):
        expected = [2 * math.pi * base ** (2 * i / d) for i in range(d // 2)]
        assert np.allclose(lines[name], expected, rtol=1e-5)
    assert not messages(at)
