"""Head ablation (viz_model.analysis.ablation): exactly one head's contribution removed, per call, model untouched."""

from __future__ import annotations

import math

import pytest
import sacrebleu
import torch
from support.data import make_pairs

from viz_model.analysis.ablation import (
    HeadMaskedNetwork,
    ablate,
    all_heads,
    check_heads,
    head_importance,
    head_mask_for,
    token_diff,
)
from viz_model.data.batching import pad
from viz_model.data.bleu import corpus_scores
from viz_model.nn.attention import causal_mask, combine_masks, padding_mask
from viz_model.search.decoding import beam_search
from viz_model.tokenization.tokenizer import BOS_ID, EOS_ID

TEXT = "Two dogs are playing in the snow."


def padded_batch(tokenizer):
    """Two sentences of different lengths: source ids and decoder inputs, both padded."""
    pairs = [("A man is running.", "Ein Mann läuft."), (TEXT, "Zwei Hunde spielen im Schnee am Wasser.")]
    src = pad([tokenizer.encode(en) + [EOS_ID] for en, _ in pairs])
    tgt = pad([[BOS_ID] + tokenizer.encode(de) for _, de in pairs])
    return src, tgt


def manual_attention(mha, query, source, mask, off_head):
    """Multi-head attention written out; head `off_head`'s slice of the concatenated outputs is 0 before W_o."""
    batch, q_len, _ = query.shape

    def split(x):
        return x.view(batch, x.shape[1], mha.heads, mha.d_head).transpose(1, 2)

    q, k, v = split(mha.w_q(query)), split(mha.w_k(source)), split(mha.w_v(source))
    scores = (q @ k.transpose(-2, -1) / math.sqrt(mha.d_head)).masked_fill(~mask, float("-inf"))
    concat = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(batch, q_len, mha.d_model)
    if off_head is not None:
        concat[..., off_head * mha.d_head:(off_head + 1) * mha.d_head] = 0.0
    return mha.w_o(concat)


def manual_logits(net, src, tgt, off):
    """The whole teacher-forced pass by hand, switching off the one head `off` = (kind, layer, head) or none."""
    def off_head(kind, layer):
        return off[2] if off is not None and off[:2] == (kind, layer) else None

    src_mask, pad_id = padding_mask(src, net.config.pad_id), net.config.pad_id
    self_mask = combine_masks(causal_mask(tgt.shape[1]), padding_mask(tgt, pad_id))
    x = net.embed(src, "source")
    for i, layer in enumerate(net.encoder_layers):
        x = layer.attn_residual(x, lambda h, i=i, layer=layer: manual_attention(
            layer.self_attn, h, h, src_mask, off_head("encoder", i)))
        x = layer.ffn_residual(x, layer.ffn)
    memory = net.encoder_norm(x) if net.encoder_norm is not None else x
    y = net.embed(tgt, "target")
    for i, layer in enumerate(net.decoder_layers):
        y = layer.self_residual(y, lambda h, i=i, layer=layer: manual_attention(
            layer.self_attn, h, h, self_mask, off_head("decoder", i)))
        y = layer.cross_residual(y, lambda h, i=i, layer=layer: manual_attention(
            layer.cross_attn, h, memory, src_mask, off_head("cross", i)))
        y = layer.ffn_residual(y, layer.ffn)
    return net.logits(net.decoder_norm(y) if net.decoder_norm is not None else y)


def some_heads(config):
    """One head of each kind, picked from the config's sizes: last layer / last head, first / middle, ..."""
    return [("encoder", config.encoder_layers - 1, config.heads - 1), ("decoder", 0, config.heads // 2),
            ("cross", config.decoder_layers - 1, 0)]


@pytest.mark.parametrize("pick", range(3))
def test_ablation_removes_exactly_that_heads_slice(random_net, tokenizer, tiny_config, pick):
    head = some_heads(tiny_config)[pick]
    src, tgt = padded_batch(tokenizer)
    with torch.no_grad():
        ablated = random_net(src, tgt, head_mask=head_mask_for(tiny_config, [head])).logits
        expected = manual_logits(random_net, src, tgt, head)
        intact = manual_logits(random_net, src, tgt, None)
    real = tgt != tiny_config.pad_id
    torch.testing.assert_close(ablated[real], expected[real], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(ablated[real], intact[real], atol=1e-4)


def test_intact_model_equals_a_mask_of_all_ones(random_net, tokenizer, tiny_config):
    src, tgt = padded_batch(tokenizer)
    ones = head_mask_for(tiny_config, [])
    for kind, layers in (("encoder", tiny_config.encoder_layers), ("cross", tiny_config.decoder_layers)):
        assert torch.equal(getattr(ones, kind), torch.ones(layers, tiny_config.heads))
    with torch.no_grad():
        torch.testing.assert_close(random_net(src, tgt, head_mask=ones).logits, random_net(src, tgt).logits)
        real = tgt != tiny_config.pad_id
        torch.testing.assert_close(random_net(src, tgt).logits[real],
                                   manual_logits(random_net, src, tgt, None)[real], atol=1e-5, rtol=1e-5)


def test_masked_view_decodes_with_the_mask(tiny_model):
    cfg = tiny_model.config
    heads = [h for h in all_heads(cfg) if h[0] == "cross"]
    mask = head_mask_for(cfg, heads)
    src = torch.tensor([tiny_model.encode(TEXT)])
    output = beam_search(HeadMaskedNetwork(tiny_model.network, mask), src, beam=1, alpha=0.0)[0].tokens
    tgt = torch.tensor([[BOS_ID] + output[:-1]])
    with torch.no_grad():
        masked = tiny_model.network(src, tgt, head_mask=mask).logits[0].argmax(-1).tolist()
    assert masked == output  # greedy with the mask = the argmax of the masked teacher-forced pass, every step


def test_ablate_one_sentence(tiny_model):
    cfg = tiny_model.config
    heads = {h for h in all_heads(cfg) if h[0] == "cross"}
    before = {k: v.clone() for k, v in tiny_model.network.state_dict().items()}
    result = ablate(tiny_model, TEXT, heads, beam=2)
    assert all(torch.equal(v, tiny_model.network.state_dict()[k]) for k, v in before.items())  # untouched
    assert result.heads == check_heads(cfg, heads) and len(result.heads) == cfg.decoder_layers * cfg.heads
    assert result.translation == tiny_model.translate(TEXT, beam=2)
    # log-probabilities of the original output: the batched helper agrees with the traces' own sums
    assert result.log_prob_intact == pytest.approx(result.intact.log_probability, abs=1e-4)
    assert result.log_prob_ablated == pytest.approx(result.ablated.log_probability, abs=1e-4)
    assert result.ablated.settings["head_mask"] and result.ablated.target_ids == result.intact.target_ids
    assert result.log_prob_change == pytest.approx(result.log_prob_ablated - result.log_prob_intact)
    assert [t for e in result.diff for t in e.intact] == result.intact.output_tokens
    assert [t for e in result.diff for t in e.ablated] == result.ablated_tokens
    assert result.changed == (result.ablated_translation != result.translation)
    assert result.changed == any(e.operation != "equal" for e in result.diff)


def test_token_diff_by_hand():
    edits = token_diff(["▁Ein", "▁Hund", "▁läuft", "</s>"], ["▁Ein", "▁Mann", "</s>"])
    assert [(e.operation, e.intact, e.ablated) for e in edits] == [
        ("equal", ["▁Ein"], ["▁Ein"]), ("replace", ["▁Hund", "▁läuft"], ["▁Mann"]), ("equal", ["</s>"], ["</s>"])]


def test_head_errors(tiny_model):
    cfg = tiny_model.config
    for heads, match in [(set(), "at least one head"), ({("self", 0, 0)}, "kind"),
                         ({("encoder", cfg.encoder_layers, 0)}, "encoder layer"),
                         ({("cross", 0, cfg.heads)}, "head must be"), ({("cross", 0)}, "kind, layer, head"),
                         ({("cross", True, 0)}, "layer"), ({("decoder", -1, 0)}, "layer")]:
        with pytest.raises(ValueError, match=match):
            ablate(tiny_model, TEXT, heads)
    with pytest.raises(ValueError, match="beam"):
        ablate(tiny_model, TEXT, {("cross", 0, 0)}, beam=0)
    assert check_heads(cfg, [("cross", 0, 1), ("encoder", 0, 0), ("cross", 0, 1)]) == [("encoder", 0, 0),
                                                                                         ("cross", 0, 1)]


def test_head_importance_agrees_with_ablate(tiny_model):
    cfg = tiny_model.config
    texts = [en for en, _ in make_pairs(3, seed=5)]
    refs = tiny_model.translate(texts, beam=4)  # the outputs ablate scores
    table = head_importance(tiny_model, texts, refs)
    assert len(table) == (cfg.encoder_layers + 2 * cfg.decoder_layers) * cfg.heads
    assert list(table.columns) == ["kind", "layer", "head", "nll", "nll_intact", "nll_rise"]
    head = some_heads(cfg)[2]
    results = [ablate(tiny_model, t, {head}) for t in texts]
    tokens = sum(len(r.intact.output_ids) for r in results)
    row = table[(table["kind"] == head[0]) & (table["layer"] == head[1]) & (table["head"] == head[2])].iloc[0]
    assert row["nll_intact"] == pytest.approx(-sum(r.log_prob_intact for r in results) / tokens, abs=1e-5)
    assert row["nll"] == pytest.approx(-sum(r.log_prob_ablated for r in results) / tokens, abs=1e-5)
    assert row["nll_rise"] == pytest.approx(row["nll"] - row["nll_intact"])
    assert len(head_importance(tiny_model, texts, refs, limit=1)) == len(table)


def test_head_importance_bleu(tiny_model):
    pairs = make_pairs(3, seed=6)
    texts, refs = [en for en, _ in pairs], [de for _, de in pairs]
    table = head_importance(tiny_model, texts, refs, bleu=True)
    intact = corpus_scores(tiny_model.translate(texts, beam=1), refs)["bleu"]
    assert (table["bleu_intact"] == intact).all()
    assert (table["bleu_drop"] == intact - table["bleu"]).all()


def test_head_importance_bleu_equals_sacrebleu_of_the_ablated_translations(tiny_model):
    """bleu, bleu_intact and bleu_drop against BLEU computed here, with sacrebleu, on translations made by `ablate`
    (a separate path: one sentence at a time, the head switched off by its own mask)."""
    pairs = make_pairs(4, seed=7)
    texts, refs = [en for en, _ in pairs], [de for _, de in pairs]
    table = head_importance(tiny_model, texts, refs, bleu=True)
    for head in some_heads(tiny_model.config)[:2]:
        results = [ablate(tiny_model, t, {head}, beam=1) for t in texts]
        ablated = sacrebleu.corpus_bleu([r.ablated_translation for r in results], [refs]).score
        intact = sacrebleu.corpus_bleu([r.translation for r in results], [refs]).score
        row = table[(table["kind"] == head[0]) & (table["layer"] == head[1]) & (table["head"] == head[2])].iloc[0]
        assert row["bleu"] == pytest.approx(ablated, abs=0.006)  # the table rounds to 2 decimals
        assert row["bleu_intact"] == pytest.approx(intact, abs=0.006)
        assert row["bleu_drop"] == pytest.approx(intact - ablated, abs=0.011)


def test_head_importance_errors(tiny_model):
    with pytest.raises(ValueError, match="reference translations"):
        head_importance(tiny_model, [TEXT], None)
    with pytest.raises(ValueError, match="1 source sentences but 2 references"):
        head_importance(tiny_model, [TEXT], ["a", "b"])
    with pytest.raises(ValueError, match="limit"):
        head_importance(tiny_model, [TEXT], ["Ein Hund."], limit=0)
    with pytest.raises(ValueError, match="reference 1 is empty"):
        head_importance(tiny_model, [TEXT], [" "])
