"""The settings imported families need (T5's RMS norm, unscaled scores, d_kv, no biases, gated GELU, untied head and
rescale; BART's learned positions from row 2 and embedding norm): each at its default is today's model and leaves the
config as it was; each named and checked; with them the fused, step-by-step and int8 paths agree with the recorded
pass, and a model directory saves, loads and translates."""

from __future__ import annotations

import json

import pytest
import torch
from support.data import assert_loads_as_built, step_by_step_logits, tiny_model_config

import viz_model
from viz_model.config import ConfigError, ModelConfig
from viz_model.config.model import IMPORT_OPTIONS
from viz_model.modeldir.checkpoint import save_model_dir
from viz_model.nn.model import Transformer, gelu_new
from viz_model.nn.norms import RMSNorm
from viz_model.nn.quantize import int8_search_network

T5_LIKE = {"positional": "relative", "norm": "pre", "normalization": "rms", "norm_eps": 1e-6, "scale_scores": False,
           "d_kv": 12, "attention_bias": False, "ffn_bias": False, "gated_ffn": True, "activation": "gelu_new",
           "scale_embeddings": False, "tied_head": False, "head_rescale": True, "bos_id": 0, "pad_id": 0}
BART_LIKE = {"positional": "learned", "position_offset": 2, "embedding_norm": True, "scale_embeddings": False,
             "activation": "gelu", "output_bias": True}
MBART_LIKE = {**BART_LIKE, "norm": "pre", "scale_embeddings": True}
NEW = ("normalization", "norm_eps", "scale_embeddings", "embedding_norm", "d_kv", "scale_scores", "attention_bias",
       "ffn_bias", "gated_ffn", "tied_head", "head_rescale")


def tiny(vocab: int = 60, **changes) -> Transformer:
    torch.manual_seed(0)
    model = Transformer(tiny_model_config(vocab, dropout=0.0, **changes)).eval()
    with torch.no_grad():  # weights far from their start, so that every setting changes the numbers
        for name, p in model.named_parameters():
            if "norm" in name or p.dim() == 1:
                p.normal_(1.0 if name.endswith("weight") else 0.0, 0.3)
        if model.output_bias is not None:
            model.output_bias.normal_(0, 1.0)
    return model


def test_new_settings_are_import_options_left_out_at_their_defaults():
    assert set(NEW) <= set(IMPORT_OPTIONS)
    data = ModelConfig(vocab_size=100).to_dict()
    assert not set(NEW) & data.keys()
    assert ModelConfig.from_dict(data) == ModelConfig(vocab_size=100)
    t5 = ModelConfig(vocab_size=100, **T5_LIKE)
    assert ModelConfig.from_dict(json.loads(json.dumps(t5.to_dict()))) == t5
    assert t5.d_head == 12 and ModelConfig(vocab_size=100).d_head == 64


@pytest.mark.parametrize("changes, words", [
    ({"normalization": "batch"}, "normalization must be one of layer, rms"),
    ({"norm_eps": 0.5}, r"norm_eps must be in \[1e-12, 0.01\]"),
    ({"d_kv": 0}, r"d_kv must be in \[1, 16384\]"),
    ({"d_model": 30, "heads": 4}, "must be divisible by heads .4., or d_kv set"),
    ({"gated_ffn": "yes"}, "gated_ffn must be true or false"),
    ({"tied_head": False, "share_embeddings": False}, "tied_head = false needs share_embeddings"),
    ({"positional": "rope", "position_offset": 2}, "position_offset needs positions added to the input"),
    ({"activation": "tanh"}, "activation must be one of relu, silu, gelu, gelu_new"),
])
def test_bad_settings_are_named(changes, words):
    with pytest.raises(ConfigError, match=words):
        ModelConfig(**changes)


def test_a_default_model_has_the_parameters_it_always_had():
    names = set(Transformer(tiny_model_config(60)).state_dict())
    assert not any("w_3" in n or "embedding_norm" in n or "output_projection" in n for n in names)
    assert {"encoder_layers.0.self_attn.w_q.bias", "encoder_layers.0.ffn.w_1.bias",
            "encoder_layers.0.attn_residual.norm.bias"} <= names


def test_t5_settings_give_t5s_parameters():
    model = tiny(**T5_LIKE)
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert shapes["encoder_layers.0.self_attn.w_q.weight"] == (4 * 12, 32)
    assert shapes["encoder_layers.0.self_attn.w_o.weight"] == (32, 4 * 12)
    assert shapes["decoder_layers.1.ffn.w_3.weight"] == (64, 32) and shapes["output_projection.weight"] == (60, 32)
    assert not any(k.endswith("bias") for k in shapes if "position_bias" not in k)
    assert model.src_embedding is model.tgt_embedding and isinstance(model.encoder_norm, RMSNorm)


def test_rms_norm_trains_as_transformers_t5_layer_norm():
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    x = torch.randn(3, 5, 32) * 4
    ours, theirs = RMSNorm(32, 1e-6), t5.T5LayerNorm(32, eps=1e-6)
    with torch.no_grad():
        ours.weight.normal_()
        theirs.weight.copy_(ours.weight)
    grads = []
    for norm in (ours, theirs):
        inputs = x.clone().requires_grad_()
        (norm(inputs) ** 2).sum().backward()
        grads.append((inputs.grad, norm.weight.grad))
    assert all(torch.equal(a, b) for a, b in zip(*grads))


def test_rms_norm_and_gelu_new_equal_transformers():
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    from transformers.activations import ACT2FN

    for width in (16, 512):  # float32: transformers' operations in its order (eps added in place), bit for bit
        x = torch.randn(3, 5, width) * 4
        ours, theirs = RMSNorm(width, 1e-6), t5.T5LayerNorm(width, eps=1e-6)
        with torch.no_grad():
            ours.weight.normal_()
            theirs.weight.copy_(ours.weight)
        assert torch.equal(ours(x), theirs(x))
        # PyTorch's one-kernel tanh GELU against transformers' eight operations: the same formula, to a float32 ulp
        torch.testing.assert_close(gelu_new(x), ACT2FN["gelu_new"](x), rtol=2e-7, atol=5e-7)
        ours, theirs = ours.to(torch.bfloat16), theirs.to(torch.bfloat16)  # half weights: the float32 mean as T5's
        assert torch.equal(ours(x), theirs(x)) and ours(x).dtype == torch.bfloat16


@pytest.mark.parametrize("changes", [T5_LIKE, BART_LIKE, MBART_LIKE], ids=["t5", "bart", "mbart"])
def test_fused_step_by_step_and_int8_decoding_agree_with_one_recorded_pass(changes):
    model = tiny(**changes)
    src = torch.tensor([[5, 9, 11, 3, 7, 7], [7, 8, 9, 10, 12, 3]])
    tgt = torch.randint(4, 60, (2, 7))
    tgt[:, 0] = model.config.bos_id
    with torch.no_grad():
        recorded = model(src, tgt, need_weights=True).logits
        fused = model(src, tgt).logits
        encoded = model.encode(src)
        steps = step_by_step_logits(model, encoded, tgt)
        int8 = int8_search_network(model, strict=True)
        quantized = int8.logits(int8.decode(tgt, encoded).hidden)
    assert torch.allclose(fused, recorded, atol=1e-4, rtol=0)
    assert torch.allclose(steps, recorded, atol=1e-4, rtol=0)
    assert (quantized - recorded).abs().max() < 0.1 * recorded.abs().max()


def test_bart_positions_read_their_table_from_row_two():
    model = tiny(**BART_LIKE)
    table = model.src_positions.embedding.weight
    assert table.shape == (64 + 2, 32)
    assert torch.equal(model.positional_encodings(5), table[2:7]) and torch.equal(
        model.positional_encodings(3, "target", offset=4), model.tgt_positions.embedding.weight[6:9])


def test_unscaled_embeddings_and_the_rescaled_head():
    plain, t5 = tiny(), tiny(scale_embeddings=False, head_rescale=True)
    ids, hidden = torch.tensor([[5, 6]]), torch.randn(1, 2, 32)
    with torch.no_grad():
        t5.load_state_dict(plain.state_dict())
        assert torch.allclose(plain.token_embeddings(ids, "source"), t5.token_embeddings(ids, "source") * 32 ** 0.5)
        assert torch.allclose(t5.logits(hidden), plain.logits(hidden) * 32 ** -0.5, atol=1e-6)


@pytest.mark.parametrize("changes", [T5_LIKE, BART_LIKE, MBART_LIKE], ids=["t5", "bart", "mbart"])
def test_a_model_directory_with_the_settings_saves_loads_and_translates(changes, tmp_path, tokenizer):
    network = tiny(tokenizer.vocab_size, **changes)
    if changes is T5_LIKE:  # bos = pad = 0 there: this project's tokenizer starts from <s> (2) instead
        network = tiny(tokenizer.vocab_size, **{**changes, "bos_id": 2})
    save_model_dir(network, tokenizer, tmp_path / "model")
    assert_loads_as_built(tmp_path / "model")
    for search in ("fp32", "int8"):
        model = viz_model.load(tmp_path / "model", device="cpu", precision=search)
        assert model.config == network.config
        trace = model.trace("a man is sleeping .", beam=2)
        assert len(trace.encoder_attentions) == 2 and trace.target_tokens
