"""Maps made on demand from each layer's `ScoreRecipe` equal the maps the model computed (fp32, CPU, atol 1e-5), for
every position scheme of the language model and the translator, the encoder, decoder and cross lists; a recipe holds
layers x n x d, not heads x n²; saved recipes load back, and a cut or changed file fails in one line."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
import torch

from viz_model.analysis.map_summary import block_mean_grid, top_keys
from viz_model.config import ModelConfig
from viz_model.nn.causal_lm import CausalLM
from viz_model.nn.model import Transformer
from viz_model.on_demand import OnDemandMaps, recipe_maps, translator_recipes
from viz_model.trace import AttentionTrace, DecodingStep, TraceError

ATOL = 1e-5  # float32 rounding: a remade score may sum in another order than the layer's batched product
LM = dict(kind="decoder", vocab_size=64, d_model=32, heads=4, d_ff=64, encoder_layers=0, decoder_layers=3,
          max_positions=128, norm="pre")
LM_SCHEMES = {
    "learned": dict(positional="learned"),
    "sinusoidal": dict(positional="sinusoidal"),
    "rope": dict(positional="rope", kv_heads=2),
    "rope linear scaling": dict(positional="rope", rope_scaling="linear", rope_factor=2.0),
    "rope llama3 scaling": dict(positional="rope", kv_heads=1, rope_scaling="llama3", rope_factor=8.0,
                                rope_low_freq_factor=1.0, rope_high_freq_factor=4.0, rope_original_max_positions=16),
    "alibi": dict(positional="alibi", heads=6, d_model=48),
    "sliding window (Mistral)": dict(positional="rope", kv_heads=2, sliding_window=5),
    "sliding layers, soft cap (Gemma 2)": dict(positional="rope", kv_heads=2, sliding_window=6, sliding_layers=(0, 2),
                                               attention_softcap=2.0, query_scalar=12.0, normalization="rms"),
    "local RoPE base (Gemma 3)": dict(positional="rope", sliding_window=6, sliding_layers=(0, 2),
                                      local_rope_base=10000.0, rope_base=1e6),
    "query/key norms (Qwen3)": dict(positional="rope", kv_heads=2, qk_norm=True, normalization="rms"),
}
SEQ2SEQ = dict(vocab_size=64, d_model=32, heads=4, d_ff=64, encoder_layers=2, decoder_layers=2, max_positions=128,
               pad_id=0, bos_id=1, eos_id=2)
SEQ2SEQ_SCHEMES = {
    "sinusoidal (the paper, Marian)": dict(positional="sinusoidal"),
    "learned (BART)": dict(positional="learned"),
    "relative bias (T5)": dict(positional="relative", scale_scores=False, relative_buckets=8,
                               relative_max_distance=12),
    "rope": dict(positional="rope"),
    "alibi": dict(positional="alibi"),
}


def language_model(scheme: str, seed: int = 0) -> CausalLM:
    torch.manual_seed(seed)
    return CausalLM(ModelConfig(**(LM | LM_SCHEMES[scheme]))).eval()


def translator(scheme: str) -> Transformer:
    torch.manual_seed(0)
    return Transformer(ModelConfig(**SEQ2SEQ, **SEQ2SEQ_SCHEMES[scheme])).eval()


def assert_equal_maps(lazy: OnDemandMaps, full: list[torch.Tensor]) -> None:
    assert len(lazy) == len(full)
    for layer, (made, kept) in enumerate(zip(lazy, full)):
        np.testing.assert_allclose(made, kept[0].float().numpy(), rtol=0, atol=ATOL, err_msg=f"layer {layer}")


@pytest.mark.parametrize("scheme", list(LM_SCHEMES))
@torch.inference_mode()
def test_a_language_models_maps_made_on_demand_equal_its_maps(scheme):
    network = language_model(scheme)
    ids = torch.randint(3, 64, (1, 24))
    full = network(ids, need_weights=True)
    recorded = network(ids, need_weights="recipe")
    torch.testing.assert_close(recorded.logits, full.logits, rtol=0, atol=1e-5)
    assert not recorded.maps and not recorded.records
    assert_equal_maps(OnDemandMaps(recorded.recipes), full.attentions)
    if network.config.sliding_window is not None:  # the window hides keys: the test would pass without one else
        assert any(r.window is not None for r in recorded.recipes)
        assert not full.attentions[0][0, :, -1, 0].any()


@pytest.mark.parametrize("scheme", ["rope", "alibi", "sliding window (Mistral)"])
@torch.inference_mode()
def test_the_recipes_of_cached_calls_merge_into_the_maps_of_one_pass(scheme):
    from viz_model.nn.score_recipe import merged

    network = language_model(scheme)
    ids = torch.randint(3, 64, (1, 16))
    full = network(ids, need_weights=True).attentions
    first = network(ids[:, :10], need_weights="recipe")
    calls, cache = [first], first.cache
    for t in range(10, 16):
        calls.append(network(ids[:, t:t + 1], need_weights="recipe", cache=cache))
        cache = calls[-1].cache
    lazy = OnDemandMaps([merged([c.recipes[layer] for c in calls]) for layer in range(len(full))])
    assert_equal_maps(lazy, full)


@pytest.mark.parametrize("scheme", list(SEQ2SEQ_SCHEMES))
@pytest.mark.parametrize("positions", [True, False], ids=["positions", "none"])
@torch.inference_mode()
def test_a_translators_encoder_decoder_and_cross_maps_made_on_demand_equal_its_maps(scheme, positions):
    network = translator(scheme)
    src = torch.randint(3, 64, (1, 13))
    src[0, -3:] = 0  # padding: hidden from every query
    tgt = torch.randint(3, 64, (1, 9))
    tgt[0, 0] = 1
    full = network(src, tgt, need_weights=True, positions=positions)
    recorded = network(src, tgt, need_weights="recipe", positions=positions)
    recipes = translator_recipes(network, src, tgt, recorded, positions)
    for kind in ("encoder", "decoder", "cross"):
        assert_equal_maps(OnDemandMaps(recipes[kind]), getattr(full, f"{kind}_attentions"))
    assert recipes["encoder"][0].key_mask[-3:].tolist() == [False] * 3


@torch.inference_mode()
def test_one_head_and_a_few_rows_are_made_alone():
    network = language_model("sliding layers, soft cap (Gemma 2)")
    ids = torch.randint(3, 64, (1, 20))
    full = network(ids, need_weights=True).attentions
    lazy = OnDemandMaps(network(ids, need_weights="recipe").recipes)
    np.testing.assert_allclose(lazy.head(2, 3), full[2][0, 3].numpy(), rtol=0, atol=ATOL)
    np.testing.assert_allclose(lazy.head(0, 1, slice(5, 9)), full[0][0, 1, 5:9].numpy(), rtol=0, atol=ATOL)
    assert recipe_maps(lazy.recipes[1], [0, 2]).shape == (2, 20, 20)
    assert lazy.shape(1) == (4, 20, 20) and [m.shape for m in lazy[1:]] == [(4, 20, 20)] * 2


@torch.inference_mode()
def test_the_record_of_a_1024_token_pass_holds_layers_x_n_x_d_bytes_not_heads_x_n_squared():
    network = language_model("rope")  # 4 query heads reading 2 key/value heads of width 8, 3 layers
    n, cfg = 1024, network.config
    recipes = OnDemandMaps(network(torch.randint(3, 64, (1, n)), need_weights="recipe").recipes)
    kept = sum(t.numel() * t.element_size() for r in recipes.recipes for t in r.tensors().values())
    d = cfg.d_head
    per_layer = (cfg.heads + cfg.kv_heads) * n * d * 4 + 2 * n * 8  # queries, keys (float32), positions (int64)
    assert recipes.nbytes == kept == cfg.decoder_layers * per_layer
    full_maps = cfg.decoder_layers * cfg.heads * n * n * 4
    assert kept * 50 < full_maps, (kept, full_maps)


def on_demand_trace(n: int = 12, scheme: str = "alibi") -> tuple[AttentionTrace, list[torch.Tensor]]:
    """A trace of a random language model over `n` random ids with its maps made on demand, and the full maps."""
    network = language_model(scheme)
    ids = torch.randint(3, 64, (1, n))
    with torch.inference_mode():
        full = network(ids, need_weights=True).attentions
        recipes = network(ids, need_weights="recipe").recipes
    tokens = [f"t{i}" for i in ids[0].tolist()]
    d = network.config.d_model
    trace = AttentionTrace(
        source_text=" ".join(tokens), translation="", source_ids=[], source_tokens=[], source_words=[],
        target_ids=ids[0].tolist(), target_tokens=tokens, target_words=list(range(n)), output_ids=ids[0].tolist(),
        output_tokens=tokens, encoder_attentions=[], decoder_attentions=OnDemandMaps(recipes), cross_attentions=[],
        encoder_mask=np.zeros((0, 0), bool), decoder_mask=np.tri(n, dtype=bool), cross_mask=np.zeros((n, 0), bool),
        source_positional=np.zeros((0, d), np.float32), target_positional=np.zeros((n, d), np.float32),
        source_embeddings=np.zeros((0, d), np.float32), target_embeddings=np.zeros((n, d), np.float32),
        steps=[DecodingStep(t, 3, "x", 3, "x", 0.5, [3], ["x"], [0.5]) for t in range(n)], log_probability=0.0,
        settings={}, config=network.config.to_dict())
    trace.validate()
    return trace, full


def test_a_trace_reads_maps_made_on_demand_as_it_reads_lists():
    trace, full = on_demand_trace()
    assert trace.num_layers["decoder"] == 3 and trace.num_heads == 6
    assert isinstance(trace.decoder_attentions[0], np.ndarray)
    np.testing.assert_allclose(np.stack(list(trace.decoder_attentions)), torch.cat(full).numpy(), atol=ATOL, rtol=0)
    np.testing.assert_allclose(trace.head_map("decoder", 1, 5), full[1][0, 5].numpy(), atol=ATOL, rtol=0)
    assert trace.nbytes > trace.decoder_attentions.nbytes > 0
    with pytest.raises(ValueError, match="head must be an integer from 0 to 5"):
        trace.head_map("decoder", 0, 6)
    with pytest.raises(ValueError, match=r"layer must be an integer from 0 to 2 \(decoder\), got 3"):
        trace.head_map("decoder", 3, 0)


@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_a_saved_trace_holds_the_recipes_and_loads_back_the_same_maps(tmp_path, suffix):
    trace, _ = on_demand_trace(scheme="sliding layers, soft cap (Gemma 2)")
    loaded = AttentionTrace.load(trace.save(tmp_path / f"trace{suffix}"))
    assert isinstance(loaded.decoder_attentions, OnDemandMaps)
    for made, again in zip(trace.decoder_attentions, loaded.decoder_attentions):
        np.testing.assert_array_equal(made, again)
    assert [r.settings() for r in loaded.decoder_attentions.recipes] == [
        r.settings() for r in trace.decoder_attentions.recipes]


def test_a_saved_bf16_recipe_loads_back_in_bf16():
    trace, _ = on_demand_trace()
    for recipe in trace.decoder_attentions.recipes:
        recipe.queries, recipe.keys = recipe.queries.bfloat16(), recipe.keys.bfloat16()
    loaded = AttentionTrace.from_npz_bytes(trace.to_npz_bytes())
    assert loaded.decoder_attentions.recipes[0].keys.dtype == torch.bfloat16
    np.testing.assert_array_equal(loaded.decoder_attentions[2], trace.decoder_attentions[2])


def rewritten(data: bytes, change) -> bytes:
    """The .npz `data` with `change(name, array)` applied to every member (a valid zip, so only the digest can tell)."""
    out = io.BytesIO()
    with np.load(io.BytesIO(data)) as npz:
        np.savez(out, **{name: change(name, npz[name]) for name in npz.files})
    return out.getvalue()


def test_a_cut_or_changed_trace_file_fails_to_load_in_one_line(tmp_path):
    trace, _ = on_demand_trace()
    data = trace.to_npz_bytes()
    with pytest.raises(TraceError, match="not a valid trace .npz") as cut:
        AttentionTrace.from_npz_bytes(data[:len(data) // 2])
    assert "\n" not in str(cut.value)

    def nudge(name, array):
        return array + np.float32(1e-3) if name == "decoder_attentions/1/keys" else array

    with pytest.raises(TraceError, match="do not match their digest") as changed:
        AttentionTrace.from_npz_bytes(rewritten(data, nudge))
    assert "\n" not in str(changed.value)

    def widen(name, array):
        if name != "header":
            return array
        header = json.loads(array.tobytes().decode())
        header["recipes"]["decoder"][0]["window"] = 3
        return np.frombuffer(json.dumps(header).encode(), np.uint8)

    with pytest.raises(TraceError, match="do not match their digest"):
        AttentionTrace.from_npz_bytes(rewritten(data, widen))

    def drop_keys(name, array):
        return array[:, :-1] if name == "decoder_attentions/0/keys" else array

    with pytest.raises(TraceError, match="decoder_attentions recipe: recipe key_positions has shape"):
        AttentionTrace.from_npz_bytes(rewritten(data, drop_keys))
    path = tmp_path / "trace.json"
    text = trace.save(path).read_text()
    path.write_text(text.replace('"causal": true', '"causal": false', 1))
    with pytest.raises(TraceError, match="do not match their digest"):
        AttentionTrace.load(path)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert "decoder_attentions/0/queries.npy" in archive.namelist()


def test_the_model_views_summaries_equal_those_of_the_full_maps():
    trace, full = on_demand_trace(n=40, scheme="rope")
    grid = block_mean_grid(trace, "decoder", size=8)
    assert grid.cells.shape == (3, 4, 8, 8) and grid.method == "block mean"
    maps = torch.cat(full).numpy()  # (layers, heads, n, n)
    expected = maps[:, :, :5, :5].mean(axis=(2, 3))  # the first block: rows 0-4, keys 0-4
    np.testing.assert_allclose(grid.cells[:, :, 0, 0], expected, atol=ATOL)
    np.testing.assert_allclose(grid.cells.mean(axis=(2, 3)), maps.mean(axis=(2, 3)), atol=ATOL)
    top = top_keys(trace, "decoder", 2, 1, k=3)
    order = np.argsort(-maps[2, 1], axis=1, kind="stable")[:, :3]
    np.testing.assert_allclose(top.weights, np.take_along_axis(maps[2, 1], order, axis=1), atol=ATOL)
    np.testing.assert_allclose(top.kept, top.weights.sum(axis=1))
    assert top.keys[0, 0] == 0 and top.weights[0, 0] == pytest.approx(1.0)  # the first row sees itself alone
    with pytest.raises(ValueError, match="size must be an integer from 1 to 256"):
        block_mean_grid(trace, "decoder", size=0)
    with pytest.raises(ValueError, match="this trace has no encoder attention"):
        block_mean_grid(trace, "encoder")


def test_a_recipe_refuses_a_per_query_key_mask_it_cannot_keep():
    network = language_model("rope")
    ids = torch.randint(3, 64, (1, 6))
    with pytest.raises(ValueError, match="need_weights='recipe' records no key_mask"):
        network(ids, need_weights="recipe", key_mask=torch.ones(6, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match="a score recipe records a batch of one, got a batch of 2"):
        network(torch.randint(3, 64, (2, 6)), need_weights="recipe")
