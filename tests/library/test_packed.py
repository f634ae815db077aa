"""The packed full-precision copy (`viz_model.nn.packed`) that full-precision searches and their traces run on the
CPU: the network's numbers (bit for bit from two rows on), its own weights shared where not packed, built only where
it can run and is worth its memory. Device: CPU; searches: this project's rule and transformers'."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from torch import nn

import viz_model
from viz_model.nn import packed as packing
from viz_model.nn.fused import FusedGatedFeedForward, FusedSelfAttention, parts
from viz_model.nn.linear import ONEDNN_MIN_WEIGHT, linear, onednn_available
from viz_model.nn.model import Transformer
from viz_model.nn.packed import PackedLinear, packed_bytes, packed_search_network
from viz_model.nn.quantize import search_network_for
from viz_model.search import next_token

pytestmark = pytest.mark.skipif(not onednn_available(), reason="this PyTorch has no oneDNN linear kernel")

T5_LIKE = {"positional": "relative", "norm": "pre", "normalization": "rms", "norm_eps": 1e-6, "scale_scores": False,
           "d_kv": 12, "attention_bias": False, "ffn_bias": False, "gated_ffn": True, "activation": "gelu_new",
           "scale_embeddings": False, "tied_head": False, "head_rescale": True, "bos_id": 0, "pad_id": 0}
WIDE = {"d_model": 192, "d_ff": 384}  # matrices of ONEDNN_MIN_WEIGHT or more: the packed kernel (the tiny's: F.linear)
BART_LIKE = {"positional": "learned", "position_offset": 2, "embedding_norm": True, "scale_embeddings": False,
             "activation": "gelu", "output_bias": True}


def tiny(config, **changes) -> Transformer:
    """A small network with weights far from their start (every setting changes the numbers), in eval mode."""
    torch.manual_seed(0)
    # attention dropout set (as imported configs have it): the copy must not apply it at inference either
    model = Transformer(dataclasses.replace(config, dropout=0.0, attention_dropout=0.3, **changes)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or p.dim() == 1:
                p.normal_(1.0 if name.endswith("weight") else 0.0, 0.3)
    return model


@pytest.mark.parametrize("width", [80, 160], ids=["f_linear", "onednn"])  # below / above ONEDNN_MIN_WEIGHT
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 9, 40])
def test_a_packed_layer_is_the_networks_product_bit_for_bit(rows, width):
    torch.manual_seed(rows)
    layers = [nn.Linear(256, width), nn.Linear(256, width), nn.Linear(256, 48 * width // 80)]
    assert (layers[0].weight.numel() < ONEDNN_MIN_WEIGHT) == (width == 80)
    x = torch.randn(rows, 1, 256)
    with torch.no_grad():
        one = layers[0]
        assert torch.equal(PackedLinear(parts(one))(x), linear(x, one.weight, one.bias))
        assert torch.equal(PackedLinear(((one.weight, None),))(x), linear(x, one.weight))
        side_by_side = torch.cat([linear(x, m.weight, m.bias) for m in layers], dim=-1)  # a fused layer: Q, K, V
        assert torch.equal(PackedLinear(parts(*layers))(x), side_by_side)


def test_a_packed_layer_shares_the_networks_tensors_for_its_single_rows():
    layer = nn.Linear(64, 32)
    packed = PackedLinear(parts(layer))
    assert packed.layers[0][0].data_ptr() == layer.weight.data_ptr()  # no copy beside the packed one


def test_the_copy_packs_the_layers_and_shares_everything_else(tiny_config):
    network = tiny(tiny_config, **T5_LIKE)
    copy = packed_search_network(network)
    assert copy is not None and copy.config is network.config
    for side in ("encoder_layers", "decoder_layers"):
        for layer, before in zip(getattr(copy, side), getattr(network, side)):
            assert isinstance(layer.self_attn, FusedSelfAttention) and isinstance(layer.self_attn.w_qkv, PackedLinear)
            assert isinstance(layer.ffn, FusedGatedFeedForward) and isinstance(layer.ffn.w_13, PackedLinear)
            assert isinstance(before.self_attn.w_q, nn.Linear)  # the network itself is left as it was
            assert layer.ffn_residual.norm.weight is before.ffn_residual.norm.weight
    assert isinstance(copy.output_projection, PackedLinear) and isinstance(network.output_projection, nn.Linear)
    assert copy.src_embedding.weight is network.src_embedding.weight
    assert copy.decoder_position_bias is network.decoder_position_bias
    assert not any(module.training for module in copy.modules())  # in eval mode, as the network is


@pytest.mark.parametrize("changes", [{}, T5_LIKE, BART_LIKE, WIDE], ids=["paper", "t5", "bart", "wide"])
def test_a_recorded_pass_of_the_copy_is_the_networks_bit_for_bit(tiny_config, changes):
    network = tiny(tiny_config, **changes)
    copy = packed_search_network(network)
    src = torch.tensor([[5, 9, 11, 3, 7, 7], [7, 8, 9, 10, 12, 3]])
    tgt = torch.randint(4, 60, (2, 7))
    tgt[:, 0] = network.config.bos_id
    with torch.inference_mode():
        ours, theirs = copy(src, tgt, need_weights=True), network(src, tgt, need_weights=True)
        assert torch.equal(ours.logits, theirs.logits)
        for kind in ("encoder_records", "decoder_records", "cross_records"):
            for got, want in zip(getattr(ours, kind), getattr(theirs, kind), strict=True):
                assert torch.equal(got.weights, want.weights) and torch.equal(got.scores, want.scores)
                assert torch.equal(got.output, want.output)
        fused = copy.logits(copy.decode(tgt, copy.encode(src)).hidden)  # the unrecorded path (fused attention)
        assert torch.equal(fused, network.logits(network.decode(tgt, network.encode(src)).hidden))


def test_built_only_where_it_runs_and_pays(tiny_config, monkeypatch):
    network = tiny(tiny_config)
    assert packed_search_network(network.double()) is None
    assert packed_search_network(tiny(tiny_config).train()) is None
    with torch.device("meta"):  # stands in for a GPU: any device but the CPU
        assert packed_search_network(Transformer(tiny_config).eval()) is None
    network = tiny(tiny_config)
    layers = sum(m.weight.numel() for m in network.modules() if isinstance(m, nn.Linear))
    assert packed_bytes(network) == 4 * (layers + network.tgt_embedding.weight.numel())  # tied: the embedding
    monkeypatch.setattr(packing, "PACKED_MAX_BYTES", packed_bytes(network) - 1)
    assert packed_search_network(network) is None
    assert search_network_for(network, "fp32") is network  # too big to copy: the network searches itself


@pytest.mark.parametrize("rule", ["project", "transformers"])
def test_a_translation_model_searches_and_traces_on_the_copy_as_on_the_network(tokenizer, tiny_config, monkeypatch,
                                                                               rule):
    network = tiny(tiny_config)
    model = viz_model.TranslationModel(network, tokenizer, "tiny", device="cpu", precision="fp32")
    assert model.search_precision == "fp32" and isinstance(model.search_network.output_projection, PackedLinear)
    assert model.recording_network is model.search_network and model.with_precision("int8").recording_network is network
    assert model.with_precision("fp32") is model  # no second packed copy for a view in the same precision
    with monkeypatch.context() as patched:  # a model whose step outgrows the caches: drafted in int8 instead
        patched.setattr(next_token, "DRAFT_MIN_PARAMETERS", 0)
        drafted = viz_model.TranslationModel(network, tokenizer, "tiny", device="cpu", precision="fp32")
        assert drafted.search_network is network and drafted.draft_network() is not None
    monkeypatch.setattr(packing, "PACKED_MAX_BYTES", 0)
    plain = viz_model.TranslationModel(network, tokenizer, "tiny", device="cpu", precision="fp32")
    assert plain.search_network is network and plain.recording_network is network
    for text in ("a man reads a book .", "the dog runs", "two women"):
        ours, theirs = model.trace(text, beam=4, rule=rule), plain.trace(text, beam=4, rule=rule)
        assert ours.output_ids == theirs.output_ids and model.translate(text, beam=4, rule=rule) == ours.translation
        for kind in ("encoder_attentions", "decoder_attentions", "cross_attentions"):
            for got, want in zip(getattr(ours, kind), getattr(theirs, kind)):
                np.testing.assert_array_equal(got, want)
        assert [s.top_probabilities for s in ours.steps] == [s.top_probabilities for s in theirs.steps]
