"""The analyses of an encoder (issue 59, the pages' library): head roles after Clark et al. (2019), the shares on
[SEP] and [CLS] and [SEP] hidden, ablation of fill-mask, attribution at the mask, rollout over the encoder. A small
random BERT built by transformers and imported once (one load per module); numbers checked against transformers'
own pass or by hand; CPU, fp32."""

from __future__ import annotations

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from support.hf_encoders import CONFIGS, build_encoder_folder  # noqa: E402

import viz_model  # noqa: E402
from viz_model.analysis import ablate, attention_rollout, head_importance  # noqa: E402
from viz_model.analysis.encoder_head_roles import (  # noqa: E402
    KeySets,
    corpus_roles,
    findings,
    key_sets,
    map_scores,
    text_roles,
)
from viz_model.analysis.encoder_sinks import hidden_keys_mask, hide_sep, trace_special_shares  # noqa: E402
from viz_model.analysis.fill_mask_ablation import text_importance  # noqa: E402
from viz_model.analysis.rollout import rollout_rows  # noqa: E402
from viz_model.attribution import attribute  # noqa: E402
from viz_model.attribution.contributions import alti_block  # noqa: E402
from viz_model.cli.main import main  # noqa: E402
from viz_model.nn.model import HeadMask  # noqa: E402

TEXT = "A man [MASK] in the snow. The dog reads."


def imported_folder(tmp_path_factory, family: str):
    folder = build_encoder_folder(tmp_path_factory.mktemp("hf"), family)
    out = tmp_path_factory.mktemp("ours") / family
    assert main(["import", str(folder), "--out", str(out)]) == 0
    return folder, viz_model.load(out, device="cpu")


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    folder, model = imported_folder(tmp_path_factory, "bert")
    hf = getattr(transformers, CONFIGS["bert"][1]).from_pretrained(folder, attn_implementation="eager").eval()
    return model, hf, transformers.AutoTokenizer.from_pretrained(folder)


def their_maps(bert, text: str, pair: str | None = None) -> list[np.ndarray]:
    _, hf, tokenizer = bert
    with torch.no_grad():
        out = hf(**tokenizer(text, pair, return_tensors="pt"), output_attentions=True)
    return [a[0].double().numpy() for a in out.attentions]


# --- head roles ---------------------------------------------------------------------------------------------------
def test_the_token_sets_find_cls_sep_and_punctuation(bert):
    model = bert[0]
    encoded = model.encoded("A man runs. The dog reads.", "Two dogs play.")
    sets = key_sets(encoded.ids, [model.tokenizer.token_text(i) for i in encoded.ids], model.tokenizer.skipped)
    pieces = model.pieces(encoded.ids)
    assert [pieces[i] for i in sets.cls] == ["[CLS]"] and [pieces[i] for i in sets.sep] == ["[SEP]", "[SEP]"]
    assert [pieces[i] for i in sets.punctuation] == [".", ".", "."]
    masked = model.encoded(f"A {model.mask_token} runs.").ids
    from viz_model.analysis.encoder_head_roles import model_key_sets
    assert model_key_sets(model, masked).sep == [len(masked) - 1]  # the mask token is in no set


def test_each_score_reads_its_keys_on_a_map_made_by_hand():
    n = 5
    previous = np.eye(n, k=-1)
    previous[0, 0] = 1.0
    nxt = np.eye(n, k=1)
    nxt[-1, -1] = 1.0
    uniform = np.full((n, n), 1 / n)
    sep = np.zeros((n, n))
    sep[:, 4] = 1.0
    scores = map_scores(np.stack([previous, nxt, uniform, sep]), KeySets([0], [4], [2]))
    assert scores["previous_token"] == pytest.approx([1, 0, 1 / n, 0])
    assert scores["next_token"] == pytest.approx([0, 1, 1 / n, 0.25])
    assert scores["sep"] == pytest.approx([0, 0.4, 1 / n, 1.0]) and scores["cls"] == pytest.approx([0.4, 0, 0.2, 0])
    assert scores["punctuation"] == pytest.approx([0.2, 0.2, 0.2, 0])
    assert scores["entropy"] == pytest.approx([0, 0, np.log(n), 0]) and scores["breadth"][2] == pytest.approx(1.0)


def test_the_shares_equal_those_of_transformers_maps_and_cls_sep_and_the_rest_sum_to_one(bert):
    model = bert[0]
    table = text_roles(model, TEXT)
    maps = their_maps(bert, TEXT)
    ids = model.encode(TEXT)
    sep = [len(ids) - 1]
    punctuation = [i for i, piece in enumerate(model.pieces(ids)) if piece in (",", ".")]
    for row in table.itertuples():
        weights = maps[row.layer][row.head]
        assert row.sep == pytest.approx(weights[:, sep].sum(-1).mean(), abs=1e-5)
        assert row.cls == pytest.approx(weights[:, 0].mean(), abs=1e-5)
        assert row.punctuation == pytest.approx(weights[:, punctuation].sum(-1).mean(), abs=1e-5)
        assert row.previous_token == pytest.approx(np.mean([weights[i, i - 1] for i in range(1, len(ids))]), abs=1e-5)
        assert row.next_token == pytest.approx(np.mean([weights[i, i + 1] for i in range(len(ids) - 1)]), abs=1e-5)
        assert 0 <= row.cls + row.sep + row.punctuation <= 1 + 1e-9
    assert len(table) == model.config.encoder_layers * model.num_heads and (table.sequences == 1).all()
    two = corpus_roles(model, [TEXT, "Two dogs play."])
    alone = text_roles(model, "Two dogs play.")
    assert two.sep.to_numpy() == pytest.approx((table.sep.to_numpy() + alone.sep.to_numpy()) / 2)


def test_findings_name_the_heads_over_the_stated_thresholds(bert):
    table = text_roles(bert[0], TEXT)
    table.loc[3, ["sep", "previous_token"]] = [0.62, 0.55]
    found = findings(table)
    texts = [f.text for f in found]
    layer, head = int(table["layer"][3]), int(table["head"][3])
    assert f"layer {layer + 1} head {head + 1} puts 62% of its weight on [SEP]" in " ".join(texts)
    assert any(t.startswith(f"layer {layer + 1} head {head + 1} follows the previous token") for t in texts)
    assert all(f.value >= 0.5 for f in found if f.score != "breadth")
    assert all(f.value >= 0.9 for f in found if f.score == "breadth")
    assert {(f.layer, f.head) for f in findings(table, threshold=0.6, broad=1.0) if f.score == "previous_token"} \
        <= {(f.layer, f.head) for f in found if f.score == "previous_token"} - {(layer, head)}
    with pytest.raises(ValueError, match="thresholds must be shares"):
        findings(table, threshold=0)


# --- sinks ----------------------------------------------------------------------------------------------------------
def test_the_shares_on_sep_and_cls_are_the_traces_columns_and_sum_to_one_with_the_rest(bert):
    model = bert[0]
    trace = model.trace(TEXT, "Two dogs play.")
    shares = trace_special_shares(model, trace)
    seps = [i for i, piece in enumerate(trace.source_tokens) if piece == "[SEP]"]
    assert shares.sets.sep == seps and shares.sets.cls == [0]
    maps = their_maps(bert, TEXT, "Two dogs play.")
    for layer, weights in enumerate(maps):
        assert shares.sep[layer] == pytest.approx(weights[:, :, seps].sum(-1).mean(-1), abs=1e-5)
        assert shares.cls[layer] == pytest.approx(weights[:, :, 0].mean(-1), abs=1e-5)
    assert np.allclose(shares.cls + shares.sep + shares.rest, 1.0) and (shares.rest >= -1e-9).all()


def test_hiding_sep_equals_a_forced_pass_with_its_column_masked_and_moves_the_predictions(bert):
    model = bert[0]
    switch = hide_sep(model, TEXT, top_k=5)
    ids = model.encode(TEXT)
    assert switch.hidden == [len(ids) - 1]
    mask = hidden_keys_mask(len(ids), switch.hidden)
    assert not mask[:-1, -1].any() and mask[-1, -1] and mask[:, :-1].all()
    with torch.no_grad():
        out = model.forced_pass(ids, key_mask=mask, need_weights=True)
        plain = model.forced_pass(ids, need_weights=True)
    probs = torch.softmax(out.logits[0, ids.index(model.tokenizer.mask_id)], -1)
    (found,) = switch.masks
    assert found.switched.probabilities == pytest.approx(probs.topk(5).values.tolist(), abs=1e-6)
    assert [t.first for t in found.top_switched] == pytest.approx(found.switched.probabilities)
    assert found.intact.tokens == [t for t, _ in model.fill_mask(TEXT)[0]]
    assert found.kl > 0
    # layer 0 reads the same input: its hidden map is the intact one with [SEP]'s column out, rows renormalised
    weights, intact = out.records[0].weights[0].double().numpy(), plain.records[0].weights[0].double().numpy()
    kept = intact.copy()
    kept[:, :-1, -1] = 0.0
    assert np.allclose(weights, kept / kept.sum(-1, keepdims=True), atol=1e-6)
    with pytest.raises(ValueError, match="no mask token") as err:
        hide_sep(model, "A man runs.")
    assert "\n" not in str(err.value)


# --- ablation -------------------------------------------------------------------------------------------------------
def test_ablating_heads_gives_the_fill_mask_predictions_of_the_head_mask(bert):
    model = bert[0]
    heads = [("encoder", 0, 1), ("encoder", 1, 2)]
    result = ablate(model, TEXT, heads)
    mask = torch.ones(model.config.encoder_layers, model.num_heads)
    mask[0, 1] = mask[1, 2] = 0.0
    theirs = model.fill_mask(TEXT, head_mask=HeadMask(encoder=mask))[0]
    (found,) = result.ablated.settings["predictions"]
    assert found["tokens"] == [t for t, _ in theirs]
    assert result.ablated_tokens == [theirs[0][0]] and result.heads == heads
    (intact,) = result.intact.settings["predictions"]
    with torch.no_grad():
        logits = model.forced_pass(model.encode(TEXT), head_mask=HeadMask(encoder=mask)).logits[0, found["position"]]
    assert result.log_prob_ablated == pytest.approx(float(torch.log_softmax(logits, -1)[intact["ids"][0]]), abs=1e-5)
    assert result.log_prob_intact == pytest.approx(intact["log_probability"])
    assert result.changed == (found["ids"][0] != intact["ids"][0])
    for bad, line in [(["decoder", 0, 0], "head kind must be one of encoder"), (("encoder", 9, 0), "encoder layer"),
                      (None, "at least one head")]:
        with pytest.raises(ValueError, match=line) as err:
            ablate(model, TEXT, [] if bad is None else [tuple(bad)])
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="no mask token"):
        ablate(model, "A man runs.", heads)


def test_head_importance_is_the_masked_tokens_nll_rise_with_each_head_off(bert):
    model = bert[0]
    texts = ["A man [MASK] in the snow.", "The old [MASK] plays in the [MASK]."]
    references = ["A man runs in the snow.", "The old dog plays in the park."]
    table = head_importance(model, texts, references)
    assert len(table) == model.config.encoder_layers * model.num_heads and set(table["kind"]) == {"encoder"}

    def nll(mask):
        total, count = 0.0, 0
        for text, reference in zip(texts, references):
            ids, filled = model.encode(text), model.encode(reference)
            with torch.no_grad():
                logits = model.forced_pass(ids, head_mask=mask).logits[0]
            for position in [i for i, t in enumerate(ids) if t == model.tokenizer.mask_id]:
                total -= float(torch.log_softmax(logits[position].double(), -1)[filled[position]])
                count += 1
        return total / count

    row = table[(table["layer"] == 1) & (table["head"] == 2)].iloc[0]
    off = torch.ones(model.config.encoder_layers, model.num_heads)
    off[1, 2] = 0.0
    assert row["nll_intact"] == pytest.approx(nll(None), abs=1e-4)
    assert row["nll_rise"] == pytest.approx(nll(HeadMask(encoder=off)) - nll(None), abs=1e-4)
    for sources, refs, line in [(["A man runs."], ["A man runs."], "text 1 has no mask token"),
                                (texts[:1], ["A tall man runs in the snow."], "reference 1 is not text 1")]:
        with pytest.raises(ValueError, match=line) as err:
            head_importance(model, sources, refs)
        assert "\n" not in str(err.value)


def test_the_texts_importance_is_each_heads_ablation_alone(bert):
    model = bert[0]
    table = text_importance(model, TEXT)
    assert len(table) == model.config.encoder_layers * model.num_heads
    for layer, head in [(0, 0), (1, 3)]:
        row = table[(table["layer"] == layer) & (table["head"] == head)].iloc[0]
        assert row["change"] == pytest.approx(ablate(model, TEXT, [("encoder", layer, head)]).log_prob_change,
                                              abs=1e-5)
    with pytest.raises(ValueError, match="no mask token"):
        text_importance(model, "A man runs.")


# --- attribution ----------------------------------------------------------------------------------------------------
def test_the_attribution_at_the_mask_reads_the_prediction_and_its_gradients_equal_transformers(bert):
    model, hf, tokenizer = bert
    text = f"A {model.mask_token} runs in the {model.mask_token}."
    result = attribute(model, text, methods=["value_weighted", "alti", "saliency", "input_x_gradient"])
    ids = model.encode(text)
    rows = [i for i, t in enumerate(ids) if t == model.tokenizer.mask_id]
    assert result.output_ids == [p[0] for p in [f.ids for f in model.predictions(
        model.forced_pass(ids).logits[0].detach(), rows, 1)]]
    assert result.prefix_tokens == [] and result.source_ids == ids
    for method in ("value_weighted", "alti", "saliency", "input_x_gradient"):
        assert result.source_scores(method).shape == (2, len(ids))
    assert np.allclose(result.alti.sum(-1), 1.0) and np.allclose(result.source_scores("value_weighted").sum(-1), 1.0)
    with torch.no_grad():
        out = model.forced_pass(ids, need_weights=True)
        blocks = [alti_block(model.network, r, "encoder", i)[0].double().numpy() for i, r in enumerate(out.records)]
    assert np.allclose(result.alti, (blocks[1] @ blocks[0])[rows], atol=1e-9)
    embeds = hf.get_input_embeddings()(torch.tensor([ids])).detach().requires_grad_(True)
    log_probs = torch.log_softmax(hf(inputs_embeds=embeds, token_type_ids=torch.zeros(1, len(ids), dtype=torch.long))
                                  .logits[0], -1)
    (grad,) = torch.autograd.grad(log_probs[rows[0], result.output_ids[0]], embeds)
    assert result.gradients["saliency"][0] == pytest.approx(grad[0].norm(dim=-1).numpy(), abs=1e-4)
    assert result.gradients["input_x_gradient"][0] == pytest.approx((grad[0] * embeds[0]).sum(-1).detach().numpy(),
                                                                    abs=1e-4)
    assert result.log_probs[0] == pytest.approx(float(log_probs[rows[0]].max().detach()), abs=1e-5)


def test_integrated_gradients_at_the_mask_are_complete(bert):
    model = bert[0]
    result = attribute(model, TEXT, methods=["integrated_gradients"], tolerance=0.01)
    assert result.relative_gap.max() <= 0.01 or result.steps == 256
    assert result.gradients["integrated_gradients"].shape == (1, len(model.encode(TEXT)))


def test_attribution_of_an_encoder_refuses_what_does_not_apply_in_one_line(bert):
    model = bert[0]
    for call, line in [(lambda: attribute(model, "A man runs."), "no mask token"),
                       (lambda: attribute(model, TEXT, methods=["rollout"]), "reads cross-attention, which an encoder"),
                       (lambda: attribute(model, TEXT, target="runs"), "target, foil")]:
        with pytest.raises(ValueError, match=line) as err:
            call()
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("family", ["modernbert", "deberta-v3"])
def test_alti_and_value_weighted_run_on_the_encoders_own_attention(family, tmp_path_factory):
    _, model = imported_folder(tmp_path_factory, family)
    text = f"A man {model.mask_token} in the snow."
    result = attribute(model, text, methods=["value_weighted", "alti", "saliency"])
    assert np.allclose(result.alti.sum(-1), 1.0) and (result.alti >= 0).all()
    assert len(result.alti_layers["encoder"]) == model.config.encoder_layers
    assert np.isfinite(result.gradients["saliency"]).all()
    assert hide_sep(model, text).masks[0].intact.tokens == [t for t, _ in model.fill_mask(text)[0]]


# --- rollout --------------------------------------------------------------------------------------------------------
def test_rollout_over_the_encoder_is_the_product_of_its_mixed_layers(bert):
    model = bert[0]
    trace = model.trace(TEXT)
    rolled = attention_rollout(trace.encoder_attentions)
    n = len(trace.source_ids)
    mixed = [0.5 * np.eye(n) + 0.5 * np.asarray(a, dtype=np.float64).mean(0) for a in trace.encoder_attentions]
    assert np.allclose(rolled[-1], mixed[1] @ mixed[0]) and np.allclose(rolled[-1].sum(-1), 1.0)
    assert np.allclose(rollout_rows(trace, "encoder", [2, 0]), rolled[-1][[2, 0]])


def test_the_corpus_scores_the_sentences_the_model_reads_whole_and_says_when_none_fits(bert):
    """A small model's 64 positions leave long captions out of the corpus scores (they would be refused one by one);
    the table counts the sentences read, and a corpus of long sentences alone is one line."""
    model, _, _ = bert
    short, long = "the dog runs on the grass .", " ".join(["the dog runs on the grass ."] * 20)
    table = corpus_roles(model, [short, long, short])
    assert set(table["sequences"]) == {2}
    np.testing.assert_allclose(table["sep"], text_roles(model, short)["sep"])
    with pytest.raises(ValueError, match="none of the 2 sentences fits in this model's positions"):
        corpus_roles(model, [long, long])
