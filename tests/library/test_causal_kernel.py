"""The fused kernel told ``is_causal`` (a language model's pass from position 0, issue 62) equals the explicit path:
outputs and logits within 1e-4, maps made on demand within 1e-5; passes it cannot express (a shorter sliding window,
earlier keys in the cache, a key mask, ALiBi's bias) keep the mask."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from viz_model.config import ModelConfig
from viz_model.nn import attention as attention_module
from viz_model.nn.attention import attention, causal_mask
from viz_model.nn.causal_lm import CausalLM
from viz_model.on_demand import OnDemandMaps

LM = dict(kind="decoder", vocab_size=64, d_model=48, heads=6, kv_heads=2, d_ff=64, encoder_layers=0, decoder_layers=2,
          max_positions=128, norm="pre", positional="rope", normalization="rms")


@pytest.fixture
def kernel_calls(monkeypatch) -> list[dict]:
    """Each fused kernel call's keyword arguments, the call itself run as it is."""
    calls: list[dict] = []
    kernel = F.scaled_dot_product_attention

    def recorded(*args, **kwargs):
        calls.append(kwargs)
        return kernel(*args, **kwargs)
    monkeypatch.setattr(attention_module.F, "scaled_dot_product_attention", recorded)
    return calls


def test_the_causal_kernel_equals_the_explicit_path_under_the_causal_mask(kernel_calls):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 40, 16) for _ in range(3))
    fused, _ = attention(q, k, v, causal_mask(40), causal=True)
    explicit, _ = attention(q, k, v, causal_mask(40), impl="math")
    torch.testing.assert_close(fused, explicit, rtol=0, atol=1e-5)
    assert kernel_calls == [{"dropout_p": 0.0, "is_causal": True, "scale": None}]


def test_the_causal_flag_is_ignored_where_queries_and_keys_differ_in_number(kernel_calls):
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 9, 8), torch.randn(1, 2, 9, 8)
    mask = causal_mask(4, offset=5)
    fused, _ = attention(q, k, v, mask, causal=True)
    torch.testing.assert_close(fused, attention(q, k, v, mask, impl="math")[0], rtol=0, atol=1e-5)
    assert "is_causal" not in kernel_calls[0] and kernel_calls[0]["attn_mask"] is mask


@pytest.mark.parametrize("changes, causal", [({}, True), ({"sliding_window": 64}, True),
                                             ({"sliding_window": 5}, False),
                                             ({"positional": "alibi", "kv_heads": None}, False)],
                         ids=["rope", "window longer than the pass", "window shorter", "alibi"])
@torch.inference_mode()
def test_a_pass_from_position_0_runs_the_causal_kernel_where_its_mask_is_plain(kernel_calls, changes, causal):
    torch.manual_seed(0)
    network = CausalLM(ModelConfig(**(LM | changes))).eval()
    ids = torch.randint(3, 64, (1, 30))
    full = network(ids, need_weights=True)
    assert not kernel_calls  # the explicit path: every map kept
    recorded = network(ids, need_weights="recipe")
    assert [call.get("is_causal", False) for call in kernel_calls] == [causal] * len(network.layers)
    torch.testing.assert_close(recorded.logits, full.logits, rtol=0, atol=1e-4)
    for made, kept in zip(OnDemandMaps(recorded.recipes), full.attentions):
        torch.testing.assert_close(torch.from_numpy(made), kept[0], rtol=0, atol=1e-5)
    plain = network(ids)
    torch.testing.assert_close(plain.logits, full.logits, rtol=0, atol=1e-4)


@torch.inference_mode()
def test_a_cached_call_and_a_key_mask_keep_the_mask(kernel_calls):
    torch.manual_seed(0)
    network = CausalLM(ModelConfig(**LM)).eval()
    ids = torch.randint(3, 64, (1, 20))
    first = network(ids[:, :12])
    later = network(ids[:, 12:], cache=first.cache)
    hidden = causal_mask(20)[0, 0].clone()
    hidden[5:, 2] = False
    masked = network(ids, key_mask=hidden)
    assert [call.get("is_causal", False) for call in kernel_calls] == [True, True, False, False, False, False]
    full = network(ids, need_weights=True)
    torch.testing.assert_close(later.logits, full.logits[:, 12:], rtol=0, atol=1e-4)
    torch.testing.assert_close(masked.logits, network(ids, need_weights=True, key_mask=hidden).logits, rtol=0,
                               atol=1e-4)
