"""RoPE, ALiBi and T5's relative bias in this project's model (CPU, float32): each equals transformers' reference
implementation, puts position into the scores so that they depend on the query-key offset only, keeps its part
of the score in the record, decodes step by step as in one pass, trains, saves and loads; bad settings are named."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from support.cli import assert_user_error, run
from support.data import step_by_step_logits, tiny_model_config, tiny_train_config

import viz_model
from viz_model.config import ConfigError, ModelConfig
from viz_model.config.model import POSITIONAL_KINDS
from viz_model.modeldir.checkpoint import save_model_dir
from viz_model.nn.alibi import alibi_bias, alibi_slopes
from viz_model.nn.model import Transformer
from viz_model.nn.relative_bias import RelativePositionBias, relative_position_bucket
from viz_model.nn.rotary import rope_angles, rotate

SCORE_SCHEMES = ("rope", "alibi", "relative")
INPUT_SCHEMES = ("sinusoidal", "learned")


def tiny(positional: str, **changes) -> Transformer:
    torch.manual_seed(0)
    model = Transformer(tiny_model_config(60, positional=positional, dropout=0.0, **changes)).eval()
    for table in (model.encoder_position_bias, model.decoder_position_bias):
        if table is not None:  # a trained table, not the near-zero start: the bias must matter in the checks
            torch.nn.init.normal_(table.embedding.weight, std=2.0)
    return model


# --- equal to transformers' implementations ---------------------------------------------------------------------
def test_rope_equals_llamas_rotary_embedding():
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    from transformers import LlamaConfig

    for d_head, base in ((16, 10000.0), (64, 500000.0)):
        config = LlamaConfig(hidden_size=d_head * 4, num_attention_heads=4, rope_theta=base)
        config.rope_parameters = {"rope_type": "default", "rope_theta": base}
        rotary = llama.LlamaRotaryEmbedding(config)
        positions = torch.tensor([[0, 1, 2, 7, 100, 1023], [5, 3, 9, 0, 64, 2]])
        q, k = torch.randn(2, 4, 6, d_head), torch.randn(2, 4, 6, d_head)
        cos, sin = rotary(q, positions)
        q_theirs, k_theirs = llama.apply_rotary_pos_emb(q, k, cos, sin)
        ours = rope_angles(positions, d_head, base)
        assert torch.allclose(rotate(q, *ours), q_theirs, atol=1e-6, rtol=0)
        assert torch.allclose(rotate(k, *ours), k_theirs, atol=1e-6, rtol=0)


def test_relative_buckets_and_bias_equal_t5s():
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    offsets = torch.arange(-300, 301)[None, :]
    for bidirectional in (True, False):
        for buckets, distance in ((32, 128), (8, 20), (4, 3), (64, 1000)):
            theirs = t5.T5Attention._relative_position_bucket(offsets, bidirectional, buckets, distance)
            assert torch.equal(relative_position_bucket(offsets, bidirectional, buckets, distance), theirs)
            if buckets // 2 < distance:  # a config's bounds (ModelConfig): the module looks buckets up by offset
                keys = torch.arange(-300, 301)[None]
                table = RelativePositionBias(4, buckets, distance, bidirectional)
                assert torch.equal(table.buckets(torch.zeros(1, 1, dtype=torch.long), keys)[0], theirs)
    from transformers import T5Config

    for is_decoder in (False, True):
        config = T5Config(d_model=32, d_kv=8, num_heads=4, relative_attention_num_buckets=16,
                          relative_attention_max_distance=40, is_decoder=is_decoder)
        attention = t5.T5Attention(config, has_relative_attention_bias=True)
        torch.nn.init.normal_(attention.relative_attention_bias.weight)
        ours = RelativePositionBias(4, 16, 40, bidirectional=not is_decoder)
        ours.embedding.weight.data.copy_(attention.relative_attention_bias.weight)
        for past, length, keys in ((0, 30, 30), (12, 1, 13), (50, 7, 57)):
            queries = torch.arange(past, past + length)[None]
            expected = attention.compute_bias(length, keys, past_seen_tokens=past)
            assert torch.equal(ours(queries, torch.arange(keys)[None]), expected)


def test_alibi_slopes_equal_blooms_and_its_bias_the_same_softmax():
    bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")
    for heads in (1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32):
        assert torch.equal(alibi_slopes(heads), bloom._get_alibi_slopes(heads, torch.device("cpu"))), heads
    heads, length = 6, 9
    scores = torch.randn(1, heads, length, length)
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    positions = torch.arange(length)[None]
    theirs = bloom.build_alibi_tensor(torch.ones(1, length), heads, torch.float32).view(1, heads, 1, length)
    ours = alibi_bias(positions, positions, alibi_slopes(heads))
    # BLOOM adds m*j, this project -m*|p - j|: equal up to m*p in each query's row, which the softmax ignores
    weights = [torch.softmax((scores + bias).masked_fill(~causal, float("-inf")), -1) for bias in (ours, theirs)]
    assert torch.allclose(weights[0], weights[1], atol=1e-6, rtol=0)
    assert torch.equal(ours, ours.transpose(-1, -2))  # the encoder's: the same penalty in both directions


# --- position enters the scores ----------------------------------------------------------------------------------
def _is_toeplitz(matrix: torch.Tensor, atol: float = 1e-5) -> bool:
    """Whether every diagonal of a square matrix is constant (the value depends on i - j only)."""
    n = matrix.shape[-1]
    return all(torch.allclose(matrix.diagonal(d), matrix.diagonal(d)[0].expand(n - abs(d)), atol=atol, rtol=0)
               for d in range(-n + 1, n))


@pytest.mark.parametrize("positional", POSITIONAL_KINDS)
def test_the_same_token_everywhere_scores_by_offset_only_for_the_relative_schemes(positional):
    model = tiny(positional)
    ids = torch.full((1, 12), 17)
    with torch.no_grad():
        out = model(ids, ids, need_weights=True)
    encoder = out.encoder_records[0].masked_scores[0]
    decoder = out.decoder_records[0].masked_scores[0].masked_fill(~torch.ones(12, 12, dtype=torch.bool).tril(), 0.0)
    for head in range(encoder.shape[0]):
        by_offset = _is_toeplitz(encoder[head]) and _is_toeplitz(decoder[head])
        assert by_offset == (positional in SCORE_SCHEMES), (positional, head)


@pytest.mark.parametrize("positional", SCORE_SCHEMES)
def test_the_record_keeps_the_positional_part_of_the_score(positional):
    model = tiny(positional)
    src, tgt = torch.randint(4, 60, (2, 9)), torch.randint(4, 60, (2, 6))
    with torch.no_grad():
        out = model(src, tgt, need_weights=True)
        x = model.embed(src, "source")
        attn = model.encoder_layers[0].self_attn
        h = model.encoder_layers[0].attn_residual.enter(x)
        q, kv = attn.project(h)
        content = q @ kv.key.transpose(-1, -2) / attn.d_head ** 0.5  # without rotation or bias
    record = out.encoder_records[0]
    assert torch.allclose(record.scores - record.position_bias, content, atol=1e-5, rtol=0)
    assert torch.equal(record.masked_scores, record.scores)  # no padding: what the softmax saw
    assert record.position_bias.abs().max() > 0.01  # the positional part is not nothing
    for records in (out.decoder_records, out.cross_records):
        assert all(r.position_bias is not None for r in records) == (records is out.decoder_records)


@pytest.mark.parametrize("positional", INPUT_SCHEMES)
def test_input_schemes_keep_no_positional_part_in_their_records(positional):
    with torch.no_grad():
        out = tiny(positional)(torch.randint(4, 60, (1, 5)), torch.randint(4, 60, (1, 4)), need_weights=True)
    assert all(r.position_bias is None for r in out.encoder_records + out.decoder_records + out.cross_records)


@pytest.mark.parametrize("positional", SCORE_SCHEMES)
def test_step_by_step_tree_and_fused_decoding_equal_one_recorded_pass(positional):
    model = tiny(positional)
    src = torch.tensor([[5, 9, 11, 3, 0, 0], [7, 8, 9, 10, 12, 3]])  # padding in the first row
    tgt = torch.randint(4, 60, (2, 7))
    with torch.no_grad():
        recorded = model(src, tgt, need_weights=True).logits
        fused = model(src, tgt).logits
        steps = step_by_step_logits(model, model.encode(src), tgt)
        # a tree: rows 0..2 a prefix, 3 and 4 two children of its last node (each at its own depth)
        tree = torch.tensor([[tgt[0, 0], tgt[0, 1], tgt[0, 2], tgt[0, 3], 40]])
        depth = torch.tensor([[0, 1, 2, 3, 3]])
        ancestors = torch.tensor([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0],
                                  [1, 1, 1, 0, 1]], dtype=torch.bool)
        one = model.encode(src[:1])
        first = model.decode(tree[:, :3], one, cache=None, offset=0, tgt_mask=ancestors[None, None, :3, :3],
                             position_ids=depth[:, :3])
        rest = model.decode(tree[:, 3:], one, cache=first.cache, offset=3, tgt_mask=ancestors[None, None, 3:],
                            position_ids=depth[:, 3:])
        branch = model.decode(torch.tensor([[tgt[0, 0], tgt[0, 1], tgt[0, 2], 40]]), one).hidden[:, -1]
    assert torch.allclose(fused, recorded, atol=1e-5, rtol=0)
    assert torch.allclose(steps, recorded, atol=1e-5, rtol=0)
    assert torch.allclose(model.logits(rest.hidden[:, 0]), recorded[0, 3], atol=1e-5, rtol=0)
    assert torch.allclose(model.logits(rest.hidden[:, 1]), model.logits(branch)[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("positional", SCORE_SCHEMES)
def test_without_positions_the_relative_schemes_see_a_bag_of_tokens(positional):
    model = tiny(positional)
    src = torch.tensor([[5, 9, 11, 3]])
    with torch.no_grad():
        plain = model.encode(src, positions=False).hidden
        swapped = model.encode(src[:, [1, 0, 2, 3]], positions=False).hidden
        positioned = model.encode(src[:, [1, 0, 2, 3]]).hidden
    assert torch.allclose(plain[:, [1, 0, 2, 3]], swapped, atol=1e-5, rtol=0)
    assert not torch.allclose(plain[:, [1, 0, 2, 3]], positioned, atol=1e-3, rtol=0)
    assert torch.equal(model.positional_encodings(4), torch.zeros(4, model.config.d_model))  # nothing is added


# --- files, training, the search, bad input ----------------------------------------------------------------------
@pytest.mark.parametrize("positional", SCORE_SCHEMES)
def test_a_model_directory_saves_and_loads_its_scheme_and_translates(positional, tmp_path, tokenizer):
    changes = {"rope": {"rope_base": 500.0}, "alibi": {"alibi_max_bias": 4.0},
               "relative": {"relative_buckets": 8, "relative_max_distance": 20}}[positional]
    torch.manual_seed(1)
    network = Transformer(tiny_model_config(tokenizer.vocab_size, positional=positional, **changes))
    save_model_dir(network, tokenizer, tmp_path / positional)
    saved = json.loads((tmp_path / positional / "config.json").read_text())
    assert saved["positional"] == positional and all(saved[k] == v for k, v in changes.items())
    for search in ("fp32", "int8"):
        model = viz_model.load(tmp_path / positional, device="cpu", precision=search)
        assert model.config == network.config
        for name, tensor in network.state_dict().items():
            assert torch.equal(model.network.state_dict()[name], tensor), name
        trace = model.trace("a man is sleeping .")
        assert len(trace.encoder_attentions) == model.config.encoder_layers and trace.target_tokens
        if positional == "alibi":  # built once with the model (on the meta device when loaded): real CPU slopes
            assert torch.equal(model.network.parameter_free_scheme.slopes, alibi_slopes(model.config.heads, 4.0))


def test_the_schemes_that_add_a_bias_to_the_scores():
    assert {p: tiny(p).adds_score_bias for p in POSITIONAL_KINDS} == {
        "sinusoidal": False, "learned": False, "rope": False, "alibi": True, "relative": True}


def test_configs_without_the_new_settings_read_and_digest_as_before():
    data = ModelConfig(vocab_size=100).to_dict()
    assert not {"rope_base", "alibi_max_bias", "relative_buckets", "relative_max_distance"} & data.keys()
    assert ModelConfig.from_dict(data) == ModelConfig(vocab_size=100)


def test_bad_schemes_and_settings_are_named_with_their_bounds():
    with pytest.raises(ConfigError, match="positional must be one of sinusoidal, learned, rope, alibi, relative; "
                                          "got 'rotary'"):
        ModelConfig(positional="rotary")
    for changes, words in (({"rope_base": 1.0}, r"rope_base must be in \[2.0, 1000000000.0\]"),
                           ({"alibi_max_bias": 100.0}, r"alibi_max_bias must be in \[0.5, 64.0\]"),
                           ({"relative_buckets": 2}, r"relative_buckets must be in \[4, 1024\]"),
                           ({"relative_buckets": 32, "relative_max_distance": 10},
                            r"relative_max_distance must be in \[17, 65536\]"),
                           ({"positional": "rope", "d_model": 36, "heads": 4}, "even head width")):
        with pytest.raises(ConfigError, match=words):
            ModelConfig(**changes)


@pytest.mark.parametrize("positional", SCORE_SCHEMES)
def test_train_with_each_scheme_from_the_command_line(positional, capsys, tmp_path, data_dir, finished_run):
    from test_cli import write_toml

    config = write_toml(tmp_path / "tiny.toml", tiny_train_config(data_dir, epochs=1, test_prefixes=()).to_dict())
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copyfile(finished_run / "tokenizer.model", run_dir / "tokenizer.model")  # skip tokenizer training
    code, _, err = run(capsys, "train", "--config", config, "--run-dir", run_dir, "max_steps=41",
                       f"model.positional={positional}")
    assert code == 0, err
    model = viz_model.load(run_dir / "model", device="cpu")
    assert model.config.positional == positional and model.translate("a man is sleeping .")
    losses = [json.loads(line)["loss"] for line in (run_dir / "log.jsonl").read_text().splitlines()
              if '"event": "train"' in line]
    assert losses and losses[-1] < losses[0]


def test_an_unknown_scheme_on_the_command_line_is_one_line(capsys, tmp_path, data_dir):
    from test_cli import write_toml

    config = write_toml(tmp_path / "tiny.toml", tiny_train_config(data_dir).to_dict())
    assert_user_error(capsys, ["train", "--config", config, "--run-dir", tmp_path / "r", "model.positional=rotary"],
                      "positional must be one of sinusoidal, learned, rope, alibi, relative")
