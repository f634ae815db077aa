"""The int8 search network: what it shares, how close its scores are, where it is used, and its fallbacks."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

import viz_model
from viz_model.analysis.ablation import HeadMaskedNetwork, head_mask_for
from viz_model.kinds.translator import TranslationModel
from viz_model.nn import quantize
from viz_model.nn.fused import FusedSelfAttention, stacked
from viz_model.nn.linear import onednn_available
from viz_model.nn.packed import PackedLinear
from viz_model.nn.quantize import Int8Linear, Int8RowBlocks, int8_search_network, rows_interact, search_network_for
from viz_model.search.decoding import beam_search


def test_int8_linear_matches_the_float_layer_within_quantisation_error():
    torch.manual_seed(0)
    layer = nn.Linear(64, 48)
    x = torch.randn(5, 3, 64)
    expected = layer(x)
    got = Int8Linear(layer.weight, layer.bias)(x)
    assert got.shape == expected.shape and got.dtype == torch.float32
    error = (got - expected).abs().max() / expected.abs().max()
    assert 0 < error < 0.03  # int8 weights and 7-bit activations: close, not equal


def test_fused_self_attention_equals_the_three_int8_projections(random_net):
    attn = random_net.decoder_layers[0].self_attn
    fused = FusedSelfAttention(attn, lambda layers: Int8Linear(*stacked(layers)))
    x = torch.randn(3, 5, attn.d_model)
    q, kv = fused.project(x)
    separate = [Int8Linear(m.weight, m.bias)(x) for m in (attn.w_q, attn.w_k, attn.w_v)]
    for got, want in zip((q, kv.key, kv.value), separate):
        torch.testing.assert_close(fused.merge_heads(got), want)
    with pytest.raises(ValueError, match="source must be None"):
        fused.project(x, x)


def test_search_network_shares_everything_but_the_decoder_linears(random_net):
    clone = int8_search_network(random_net)
    assert clone is not None and clone is not random_net
    assert clone.encoder_layers is random_net.encoder_layers  # the encoder runs once a sentence: shared, fp32
    assert clone.src_embedding.weight is random_net.src_embedding.weight
    for original, copy in zip(random_net.decoder_layers, clone.decoder_layers):
        assert isinstance(copy.self_attn, FusedSelfAttention) and isinstance(copy.self_attn.w_qkv, Int8Linear)
        assert isinstance(copy.cross_attn.w_q, Int8Linear) and isinstance(copy.ffn.w_2, Int8Linear)
        assert isinstance(original.self_attn.w_q, nn.Linear) and not isinstance(original.self_attn.w_q, Int8Linear)
        assert copy.self_residual.norm.weight is original.self_residual.norm.weight
    # the original is left exactly as it was: still tied, still float
    assert random_net.output_projection is None
    assert isinstance(clone.output_projection, Int8RowBlocks)
    assert not any(module.training for module in clone.modules())  # its fused layers too: no attention dropout
    assert all(isinstance(block, Int8Linear) for block in clone.output_projection.blocks)
    assert all(p.dtype == torch.float32 for p in random_net.parameters())


def test_int8_logits_are_close_to_full_precision(trained_net, tokenizer):
    clone = int8_search_network(trained_net)
    src = torch.tensor([tokenizer.encode("A man is playing in the snow.") + [2]])
    tgt = torch.tensor([[1] + tokenizer.encode("Ein Mann spielt im Schnee.")])
    with torch.inference_mode():
        exact = trained_net(src, tgt).logits.log_softmax(-1)
        approx = clone(src, tgt).logits.log_softmax(-1)
    assert (exact.argmax(-1) == approx.argmax(-1)).all()
    assert (exact.exp() - approx.exp()).abs().max() < 0.05


def test_model_searches_with_int8_and_traces_in_full_precision(model_dir):
    model = viz_model.load(model_dir, device="cpu")
    assert model.search_network is not model.network
    text = "A man is playing in the snow."
    src = torch.tensor([model.encode(text)])
    with torch.inference_mode():
        int8_ids = beam_search(model.search_network, src, beam=3)[0].tokens
    trace = model.trace(text, beam=3)
    assert trace.output_ids == int8_ids
    assert model.translate(text, beam=3) == trace.translation
    assert model.beam_tree(text, beam=3).best.tokens == int8_ids
    # what the trace shows is the full-precision teacher-forced pass over that output
    tgt = torch.tensor([trace.target_ids])
    with torch.inference_mode():
        out = model.network(src, tgt, need_weights=True)
    for layer, maps in enumerate(trace.cross_attentions):
        assert torch.equal(torch.from_numpy(maps), out.cross_attentions[layer][0])
    assert trace.encoder_attentions[0].tobytes() == out.encoder_attentions[0][0].numpy().tobytes()


def test_fp32_search_is_full_precision(model_dir):
    model = viz_model.load(model_dir, device="cpu", precision="fp32")
    assert model.search_precision == "fp32" and not rows_interact(model.search_network)
    # the packed copy of the same weights (viz_model.nn.packed) where oneDNN can pack, else the network itself
    assert isinstance(model.search_network.output_projection, PackedLinear) if onednn_available() \
        else model.search_network is model.network


@pytest.mark.parametrize("bad", ["int4", "", None, 8])
def test_unknown_search_precision_is_a_clear_error(random_net, bad):
    with pytest.raises(ValueError, match="search precision must be one of auto, int8, fp32"):
        search_network_for(random_net, bad)


def test_int8_needs_eval_mode(random_net):
    train_mode = viz_model.Transformer(random_net.config).train()
    with pytest.raises(ValueError, match="eval mode"):
        int8_search_network(train_mode)


def test_missing_kernels_fall_back_to_full_precision(random_net, monkeypatch):
    def unavailable(*_args, **_kwargs):
        raise RuntimeError("Didn't find engine for operation quantized::linear_prepack NoQEngine")

    monkeypatch.setattr(quantize.torch.ops.quantized, "linear_prepack", unavailable)
    with pytest.warns(UserWarning, match="searching in full precision"):
        fallback = search_network_for(random_net, "auto")
    assert not rows_interact(fallback)  # full precision: its packed copy where oneDNN can pack, else itself
    assert isinstance(fallback.output_projection, PackedLinear) if onednn_available() else fallback is random_net
    with pytest.raises(ValueError, match="not available in this PyTorch build.*NoQEngine.*use search precision fp32"):
        search_network_for(random_net, "int8")  # asked for explicitly: no silent fallback


def test_int8_only_where_it_can_run(tiny_config):
    with torch.device("meta"):  # stands in for a GPU: any device but the CPU
        elsewhere = viz_model.Transformer(tiny_config).eval()
    assert search_network_for(elsewhere, "auto") is elsewhere
    with pytest.raises(ValueError, match="int8 search is not possible here: it runs on the CPU only"):
        search_network_for(elsewhere, "int8")
    double = viz_model.Transformer(tiny_config).double().eval()
    assert search_network_for(double, "auto") is double
    with pytest.raises(ValueError, match="quantizes float32 weights, this network's are torch.float64"):
        search_network_for(double, "int8")


def test_every_search_of_a_sentence_agrees(tiny_model, corpus):
    """trace, translate (single and batched), the beam tree and a no-op ablation run the same search: the int8
    activations share one scale per call, so even tiny differences in the encoding would change outputs."""
    texts = [en for en, _ in corpus[:40]] + ["A dog.", "Two women are sitting on a red car near the water."]
    batched = tiny_model.translate(texts, beam=3)
    ones = head_mask_for(tiny_model.config, [])
    assert quantize.rows_interact(HeadMaskedNetwork(tiny_model.search_network, ones))  # batched: one at a time
    for text, together in zip(texts, batched):
        trace = tiny_model.trace(text, beam=3)
        assert tiny_model.translate(text, beam=3) == together == trace.translation, text
        assert tiny_model.beam_tree(text, beam=3).best.tokens == trace.output_ids, text
        src = torch.tensor([trace.source_ids])
        with torch.inference_mode():
            no_op = beam_search(HeadMaskedNetwork(tiny_model.search_network, ones), src, beam=3)[0].tokens
        assert no_op == trace.output_ids, text


def test_translation_model_on_cpu_defaults_to_int8(random_net, tokenizer):
    model = TranslationModel(random_net, tokenizer, device="cpu")
    assert isinstance(model.search_network.output_projection, Int8RowBlocks)


def test_cli_precision_flag(model_dir, capsys):
    from viz_model.cli.main import main

    for precision in ("fp32", "int8"):
        # on the CPU: the int8 search exists there only
        assert main(["trace", "A man is playing in the snow.", "--model", str(model_dir), "--precision", precision,
                     "--device", "cpu", "--out", "-"]) == 0
        assert json.loads(capsys.readouterr().out)["settings"]["search"] == precision
        assert main(["info", "--model", str(model_dir), "--precision", precision, "--device", "cpu"]) == 0
        info, _ = json.JSONDecoder().raw_decode(capsys.readouterr().out)  # the model card follows the JSON
        assert info["search"] == precision
    with pytest.raises(SystemExit) as err:
        main(["translate", "x", "--model", str(model_dir), "--precision", "int4"])
    assert err.value.code == 2
    assert "invalid choice: 'int4'" in capsys.readouterr().err


def test_loading_and_tracing_import_no_symbolic_machinery(model_dir):
    """Shape planning on the meta device and mask checks once pulled in sympy and PyTorch's decompositions
    (~110 MB of resident memory); loading and tracing must not."""
    script = textwrap.dedent(f"""
        import sys, viz_model
        model = viz_model.load({str(model_dir)!r}, device="cpu")
        model.trace("A man is playing in the snow.", beam=2)
        model.translate(["A dog.", "Two women are sitting on the beach."])
        print(sorted(m for m in ("sympy", "torch._dynamo", "torch.fx.experimental.symbolic_shapes")
                     if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_row_blocks_compute_what_one_int8_matrix_computes(random_net):
    """The vocabulary projection built as blocks of rows (less memory while building) gives the same numbers as one
    int8 matrix: one scale per row, the input quantized alike in every block."""
    weight = torch.randn(1000, 32)
    x = torch.randn(4, 32)
    with torch.inference_mode():
        torch.testing.assert_close(Int8RowBlocks(weight, rows=300)(x), Int8Linear(weight, None)(x), rtol=0, atol=0)
