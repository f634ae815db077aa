"""The instrumented Transformer: every attention map it returns is a proper, correctly masked distribution."""

from __future__ import annotations

import pytest
import torch

from viz_model.config import ModelConfig
from viz_model.data.batching import pad
from viz_model.nn.model import HeadMask, Transformer
from viz_model.tokenization.tokenizer import BOS_ID, EOS_ID, PAD_ID


def two_sentence_batch(tokenizer):
    """Two sentences of different lengths, padded: source (x </s>) and decoder input (<s> y)."""
    src_texts = ["A man is running.", "Two dogs are playing in the snow near the water."]
    tgt_texts = ["Zwei Hunde spielen im Schnee am Wasser.", "Ein Mann."]
    src = pad([tokenizer.encode(t) + [EOS_ID] for t in src_texts])
    tgt = pad([[BOS_ID] + tokenizer.encode(t) for t in tgt_texts])
    assert (src == PAD_ID).any() and (tgt == PAD_ID).any()  # both sides really are padded
    return src, tgt


@pytest.fixture(scope="module")
def outputs(random_net, tokenizer):
    src, tgt = two_sentence_batch(tokenizer)
    with torch.no_grad():
        return src, tgt, random_net(src, tgt, need_weights=True)


def test_one_map_per_layer_with_per_head_shapes(outputs, tiny_config):
    src, tgt, out = outputs
    b, s, t, h = src.shape[0], src.shape[1], tgt.shape[1], tiny_config.heads
    assert len(out.encoder_attentions) == tiny_config.encoder_layers
    assert len(out.decoder_attentions) == len(out.cross_attentions) == tiny_config.decoder_layers
    assert all(a.shape == (b, h, s, s) for a in out.encoder_attentions)
    assert all(a.shape == (b, h, t, t) for a in out.decoder_attentions)
    assert all(a.shape == (b, h, t, s) for a in out.cross_attentions)
    assert out.logits.shape == (b, t, tiny_config.vocab_size)


def all_maps(out):
    return ([("encoder", i, a) for i, a in enumerate(out.encoder_attentions)]
            + [("decoder", i, a) for i, a in enumerate(out.decoder_attentions)]
            + [("cross", i, a) for i, a in enumerate(out.cross_attentions)])


def test_every_row_sums_to_one(outputs):
    _, _, out = outputs
    for kind, layer, a in all_maps(out):
        assert torch.allclose(a.sum(-1), torch.ones(a.shape[:-1]), atol=1e-5), (kind, layer)
        assert (a >= 0).all(), (kind, layer)


def test_padding_keys_get_exactly_zero(outputs):
    src, tgt, out = outputs
    src_pad, tgt_pad = src == PAD_ID, tgt == PAD_ID
    for kind, layer, a in all_maps(out):
        keys = tgt_pad if kind == "decoder" else src_pad
        for b in range(a.shape[0]):
            assert torch.all(a[b][:, :, keys[b]] == 0.0), (kind, layer, b)
            assert torch.all(a[b][:, :, ~keys[b]].sum(-1) > 0.99), (kind, layer, b)


def test_decoder_maps_are_lower_triangular(outputs):
    _, tgt, out = outputs
    t = tgt.shape[1]
    above = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
    for layer, a in enumerate(out.decoder_attentions):
        assert torch.all(a[..., above] == 0.0), layer
        assert torch.all(a[..., 0, 0] == 1.0), layer  # the first query can only see <s>


def test_returned_masks_match_the_maps(outputs):
    src, tgt, out = outputs
    assert out.source_mask.shape == (2, 1, 1, src.shape[1])
    assert torch.equal(out.source_mask[:, 0, 0], src != PAD_ID)
    t = tgt.shape[1]
    assert out.target_mask.shape == (2, 1, t, t)
    for layer, a in enumerate(out.decoder_attentions):
        assert torch.all(a[~out.target_mask.expand_as(a)] == 0.0), layer


def test_padding_does_not_change_a_sentence(random_net, tokenizer, outputs):
    """Sentence 0 alone gives the same logits and maps as inside the padded batch."""
    src, tgt, out = outputs
    n_src, n_tgt = int((src[0] != PAD_ID).sum()), int((tgt[0] != PAD_ID).sum())
    with torch.no_grad():
        alone = random_net(src[:1, :n_src], tgt[:1, :n_tgt], need_weights=True)
    torch.testing.assert_close(alone.logits[0], out.logits[0, :n_tgt], atol=1e-5, rtol=1e-4)
    for a, b in zip(alone.encoder_attentions, out.encoder_attentions):
        torch.testing.assert_close(a[0], b[0, :, :n_src, :n_src], atol=1e-6, rtol=1e-4)
    for a, b in zip(alone.cross_attentions, out.cross_attentions):
        torch.testing.assert_close(a[0], b[0, :, :n_tgt, :n_src], atol=1e-6, rtol=1e-4)


def test_tokens_left_out_at_their_positions_equal_them_masked(random_net, outputs):
    """`position_ids`: encoding only some tokens, each at its own position, gives what masking the others gives."""
    src = outputs[0][:1]
    kept = torch.tensor([[0, 2, 3]])
    masked = torch.full_like(src, PAD_ID)
    masked[0, kept[0]] = src[0, kept[0]]
    with torch.no_grad():
        whole = random_net.encode(masked).hidden[0, kept[0]]
        left_out = random_net.encode(src[:, kept[0]], position_ids=kept).hidden[0]
        torch.testing.assert_close(left_out, whole, atol=1e-5, rtol=1e-4)
        with pytest.raises(ValueError, match="position_ids of shape"):
            random_net.encode(src[:, :3], position_ids=kept[:, :2])


def test_fast_path_gives_the_same_logits_without_weights(random_net, outputs):
    src, tgt, out = outputs
    with torch.no_grad():
        fast = random_net(src, tgt)
    assert fast.encoder_attentions == fast.decoder_attentions == fast.cross_attentions == []
    torch.testing.assert_close(fast.logits, out.logits, atol=1e-5, rtol=1e-4)


def test_model_stores_no_attention_on_its_modules(random_net, outputs):
    """Weights come back from forward, nothing is kept on a module (so threads can share a model)."""
    tensors = {id(a) for _, _, a in all_maps(outputs[2])}
    for module in random_net.modules():
        for value in vars(module).values():
            assert id(value) not in tensors


@pytest.mark.parametrize("options", [{"norm": "pre"}, {"positional": "learned"}, {"share_embeddings": False},
                                     {"encoder_layers": 1, "decoder_layers": 3, "heads": 8}])
def test_variants_produce_valid_maps(options, tokenizer):
    cfg = ModelConfig(**{"vocab_size": tokenizer.vocab_size, "encoder_layers": 2, "decoder_layers": 2,
                         "d_model": 32, "heads": 4, "d_ff": 64, "max_positions": 64, **options})
    torch.manual_seed(0)
    net = Transformer(cfg).eval()
    src, tgt = two_sentence_batch(tokenizer)
    with torch.no_grad():
        out = net(src, tgt, need_weights=True)
    assert len(out.encoder_attentions) == cfg.encoder_layers and len(out.cross_attentions) == cfg.decoder_layers
    for kind, layer, a in all_maps(out):
        assert a.shape[1] == cfg.heads
        assert torch.allclose(a.sum(-1), torch.ones(a.shape[:-1]), atol=1e-5), (kind, layer)
    assert (net.output_projection is None) == cfg.share_embeddings
    if cfg.share_embeddings:
        assert net.src_embedding.weight is net.tgt_embedding.weight


def test_tied_embeddings_are_the_output_projection(random_net, tokenizer):
    src, tgt = two_sentence_batch(tokenizer)
    with torch.no_grad():
        hidden = random_net.decode(tgt, random_net.encode(src)).hidden
        torch.testing.assert_close(random_net.logits(hidden), hidden @ random_net.src_embedding.weight.T)
    assert torch.all(random_net.src_embedding.weight[PAD_ID] == 0)


def test_head_mask_ablates_single_heads(random_net, tokenizer, tiny_config):
    src, tgt = two_sentence_batch(tokenizer)
    ones = {kind: torch.ones(n, tiny_config.heads) for kind, n in
            (("encoder", tiny_config.encoder_layers), ("decoder", tiny_config.decoder_layers),
             ("cross", tiny_config.decoder_layers))}
    with torch.no_grad():
        base = random_net(src, tgt).logits
        same = random_net(src, tgt, head_mask=HeadMask(**ones)).logits
        cross = ones["cross"].clone()
        cross[0, 1] = 0.0
        ablated = random_net(src, tgt, need_weights=True, head_mask=HeadMask(cross=cross))
    torch.testing.assert_close(same, base)
    assert not torch.allclose(ablated.logits, base)
    # the encoder is untouched by a cross-attention ablation
    with torch.no_grad():
        plain = random_net(src, tgt, need_weights=True)
    for a, b in zip(ablated.encoder_attentions, plain.encoder_attentions):
        torch.testing.assert_close(a, b)


def test_input_errors(random_net):
    with pytest.raises(ValueError, match="batch, seq_len"):
        random_net(torch.tensor([4, 5]), torch.tensor([[2]]))
    with pytest.raises(ValueError, match="integer token ids"):
        random_net(torch.tensor([[4.0, 5.0]]), torch.tensor([[2]]))
    with pytest.raises(ValueError, match="differs from source batch"):
        random_net(torch.tensor([[4, 5]]), torch.tensor([[2], [2]]))
    too_long = torch.full((1, random_net.config.max_positions + 1), 5)
    with pytest.raises(ValueError, match=str(random_net.config.max_positions)):
        random_net(too_long, torch.tensor([[2]]))


def test_parameter_count_counts_tied_matrices_once(random_net, tiny_config):
    v, d, f = tiny_config.vocab_size, tiny_config.d_model, tiny_config.d_ff
    attn = 4 * (d * d + d)
    ffn = d * f + f + f * d + d
    norm = 2 * d
    expected = (v * d + tiny_config.encoder_layers * (attn + ffn + 2 * norm)
                + tiny_config.decoder_layers * (2 * attn + ffn + 3 * norm))
    assert random_net.num_parameters() == expected


def test_records_hold_what_each_layer_computed(random_net, outputs, tiny_config):
    """Each record's scores, masked scores, values and weights equal a recomputation from the layer's own inputs."""
    src, tgt, out = outputs
    d_head = tiny_config.d_model // tiny_config.heads
    for kind in ("encoder", "decoder", "cross"):
        records = out.records(kind)
        assert len(records) == (tiny_config.encoder_layers if kind == "encoder" else tiny_config.decoder_layers)
        for record in records:
            assert record.values.shape[-1] == d_head and record.values.shape[-2] == record.scores.shape[-1]
            visible = torch.ones_like(record.scores, dtype=torch.bool) if record.mask is None else \
                record.mask.expand_as(record.scores)
            assert torch.isneginf(record.masked_scores[~visible]).all()
            torch.testing.assert_close(record.masked_scores[visible], record.scores[visible])
            torch.testing.assert_close(record.weights, torch.softmax(record.masked_scores, -1).nan_to_num(0.0))
    # the first encoder layer's record, recomputed by hand from the embeddings
    layer = random_net.encoder_layers[0]
    with torch.no_grad():
        x = layer.attn_residual.enter(random_net.embed(src, "source"))
        q, kv = layer.self_attn.project(x)
        scores = q @ kv.key.transpose(-2, -1) / d_head ** 0.5
    torch.testing.assert_close(out.encoder_records[0].scores, scores)
    torch.testing.assert_close(out.encoder_records[0].values, kv.value)


def test_records_of_incremental_decoding_equal_the_full_pass(random_net, outputs):
    """Decoding one token at a time with the cache gives records equal to the matching rows of the full pass."""
    src, tgt, out = outputs
    with torch.no_grad():
        encoded = random_net.encode(src[:1], need_weights=True)
        full = random_net.decode(tgt[:1], encoded, need_weights=True)
        cache = None
        for t in range(tgt.shape[1]):
            step = random_net.decode(tgt[:1, t:t + 1], encoded, need_weights=True, cache=cache, offset=t)
            cache = step.cache
            for full_record, record in zip(full.self_records + full.cross_records,
                                           step.self_records + step.cross_records):
                keys = record.scores.shape[-1]
                torch.testing.assert_close(record.weights[:, :, 0], full_record.weights[:, :, t, :keys])
                torch.testing.assert_close(record.scores[:, :, 0], full_record.scores[:, :, t, :keys])


def test_records_unknown_kind_is_named(outputs):
    with pytest.raises(ValueError, match="attention kind must be encoder, decoder or cross"):
        outputs[2].records("self")
