"""RoPE scaled by YaRN and by dynamic NTK (issue 60) opens exactly: small Llama, Qwen2 and Gemma 3 folders built here by
transformers with random weights, each run on prompts longer than the length its frequencies were trained at. Every
map within 1e-5 of transformers' eager attention, logits within 1e-4, greedy and beam continuations equal to
``generate``'s; a rope type still not implemented is refused in one line naming the implemented ones.

transformers' dynamic RoPE keeps state between calls (the longest length it has seen, until a pass shorter than
max_position_embeddings resets it); ours is that of a fresh model, so each comparison starts transformers afresh."""

from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from support.hf import WORDS_EN, sentences  # noqa: E402
from support.hf_lm import build_lm_folder, import_lm  # noqa: E402
from support.hf_rope import CONFIGS, TRAINED, full_rope  # noqa: E402

import viz_model  # noqa: E402
from viz_model.cli.main import main  # noqa: E402
from viz_model.hf.importer import HFImportError, import_model  # noqa: E402
from viz_model.lessons import position_length, position_rope, position_split  # noqa: E402

MAP_TOLERANCE, LOGIT_TOLERANCE = 1e-5, 1e-4
LONG = " ".join(sentences(WORDS_EN, 3, 11))  # past the trained length
PROMPTS = [LONG, sentences(WORDS_EN, 1, 12)[0]] + sentences(WORDS_EN, 6, 13)  # some cross it while continuing


@pytest.fixture(scope="module", params=list(CONFIGS))
def family(request):
    return request.param


@pytest.fixture(scope="module")
def folder(family, tmp_path_factory):
    return build_lm_folder(tmp_path_factory.mktemp("hf"), family, configs=CONFIGS)


@pytest.fixture(scope="module")
def hf(family, folder):
    """transformers' eager model of the folder, and its tokenizer."""
    model_class = getattr(transformers, CONFIGS[family][1])
    return (model_class.from_pretrained(folder, attn_implementation="eager").eval(),
            transformers.AutoTokenizer.from_pretrained(folder))


@pytest.fixture(scope="module")
def imported(folder, tmp_path_factory):
    return import_lm(folder, tmp_path_factory.mktemp("ours"))


def afresh(model) -> None:
    """transformers' dynamic RoPE back to its state at loading: one pass shorter than its trained length resets it."""
    with torch.no_grad():
        model(torch.tensor([[1]]))


def test_the_config_names_the_scaling(family, imported):
    cfg = imported.config
    assert cfg.rope_scaling == family.split("-")[1]
    rope = full_rope(CONFIGS[family][2])
    assert cfg.rope_factor == rope["factor"] and cfg.rope_base == rope["rope_theta"]
    assert cfg.rope_original_max_positions == TRAINED
    if family == "llama-yarn-given":
        assert (cfg.rope_attention_factor, cfg.rope_beta_fast, cfg.rope_beta_slow, cfg.rope_truncate) == \
            (0.8, 8.0, 2.0, False)


def test_every_map_and_the_logits_equal_transformers_eager(hf, imported):
    model, tok = hf
    for prompt in PROMPTS[:3]:
        ids = torch.tensor([tok(prompt).input_ids])
        afresh(model)
        with torch.no_grad():
            theirs = model(ids, output_attentions=True)
            ours = imported.network(ids, need_weights=True)
        for a, b in zip(ours.attentions, theirs.attentions, strict=True):
            assert a.shape == b.shape
            assert (a - b).abs().max() <= MAP_TOLERANCE
        assert (ours.logits - theirs.logits).abs().max() <= LOGIT_TOLERANCE
    assert ids.shape[1] > TRAINED or prompt != LONG


def test_the_long_prompt_is_past_the_trained_length(hf):
    assert len(hf[1](LONG).input_ids) > 2 * TRAINED


def test_the_forced_pass_equals_one_pass_of_transformers(hf, imported):
    model, tok = hf
    ids = tok(LONG).input_ids
    afresh(model)
    with torch.no_grad():
        theirs = model(torch.tensor([ids])).logits
        ours = imported.forced_pass(ids).logits
    assert (ours - theirs).abs().max() <= LOGIT_TOLERANCE


def generated(model, ids: list[int], **settings) -> list[int]:
    afresh(model)
    tensor = torch.tensor([ids])
    with torch.no_grad():
        out = model.generate(tensor, do_sample=False, attention_mask=torch.ones_like(tensor), **settings)
    new = out[0, len(ids):].tolist()
    while new and new[-1] == model.generation_config.pad_token_id and new[-1] not in [model.config.eos_token_id]:
        new.pop()  # generate pads a hypothesis that ended early
    return new


def test_greedy_continuations_equal_generate(hf, imported):
    model, tok = hf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # past the trained length, said once per prompt
        for prompt in PROMPTS:
            ids = tok(prompt).input_ids
            assert imported.continue_ids(ids, 20) == generated(model, ids, max_new_tokens=20), prompt


def test_beam_continuations_equal_generate(hf, imported):
    model, tok = hf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for prompt in PROMPTS[::2]:
            ids = tok(prompt).input_ids
            assert imported.beam_ids(ids, 4, 12) == generated(model, ids, num_beams=4, max_new_tokens=12), prompt


def test_the_traces_maps_are_those_generate_records(family, hf, imported):
    """The trace's rows are computed as generate computes them, each new token in its own pass: under dynamic NTK
    the keys cached earlier keep the rotation of the length they were made at."""
    model, tok = hf
    prompt = PROMPTS[1]
    ids = tok(prompt).input_ids
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = imported.trace(prompt, max_new_tokens=24)
    afresh(model)
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=24, output_attentions=True,
                             return_dict_in_generate=True, attention_mask=torch.ones(1, len(ids), dtype=torch.long))
    assert trace.target_ids == out.sequences[0].tolist()
    assert len(trace.target_ids) > TRAINED + 1
    row = 0
    for step in out.attentions:  # per pass: per layer (1, heads, new, keys: a sliding layer's last ones alone)
        new = step[0].shape[-2]
        for layer, theirs in enumerate(step):
            keys = theirs.shape[-1]
            ours = trace.decoder_attentions[layer][:, row:row + new, row + new - keys:row + new]
            assert abs(ours - theirs[0].numpy()).max() <= MAP_TOLERANCE
        row += new


def test_a_dynamic_model_decodes_one_token_per_pass(family, imported):
    assert imported.network.one_token_per_pass == family.endswith("dynamic")
    if family.endswith("dynamic"):
        imported.draft = "int8"
        with pytest.raises(ValueError, match="dynamic RoPE scaling"):
            imported.draft_network()
        imported.draft = "auto"


def test_a_rope_type_still_not_implemented_is_refused_in_one_line(family, folder, tmp_path):
    if family != "llama-yarn":
        pytest.skip("one family is enough")
    config = json.loads((folder / "config.json").read_text())
    copy = tmp_path / "longrope"
    shutil.copytree(folder, copy)
    config["rope_parameters"] = {"rope_type": "longrope", "rope_theta": 1e4, "short_factor": [1.0] * 4,
                                 "long_factor": [2.0] * 4, "original_max_position_embeddings": TRAINED}
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(HFImportError) as err:
        import_model(str(copy), tmp_path / "out")
    said = str(err.value)
    assert "\n" not in said and not (tmp_path / "out").exists()
    assert "rope_type 'longrope' is not implemented (default, linear, llama3, yarn, dynamic are)" in said


# --- the Positional page's lesson ------------------------------------------------------------------------------------
def test_the_lessons_frequencies_equal_transformers(family, folder, imported):
    from transformers import modeling_rope_utils

    config = transformers.AutoConfig.from_pretrained(folder)
    layer_type = "full_attention" if family.startswith("gemma3") else None  # the scaled layers'
    table = position_rope.frequency_table(imported.config)
    if family.endswith("dynamic"):
        for length in (TRAINED, TRAINED + 1, 37, position_rope.shown_length(imported.config)):
            theirs, _ = modeling_rope_utils._compute_dynamic_ntk_parameters(config, "cpu", torch.tensor(length),
                                                                            layer_type)
            assert np.array_equal(position_rope.model_frequencies(imported.config, length), theirs.double().numpy())
        assert np.array_equal(table["theta"].to_numpy(), position_rope.model_frequencies(imported.config, 2 * TRAINED))
        return
    theirs, factor = modeling_rope_utils._compute_yarn_parameters(config, "cpu", layer_type=layer_type)
    assert np.array_equal(table["theta"].to_numpy(), theirs.double().numpy())
    assert position_rope.attention_factor(imported.config) == pytest.approx(factor, rel=1e-12)
    assert factor != 1.0


def test_the_lesson_names_what_the_scaling_did_to_each_pair(family, imported):
    table = position_rope.frequency_table(imported.config)
    stretch, named = table["stretch"].to_numpy(), list(table["scaling"])
    assert named[0] == position_rope.KEPT and stretch[0] == 1.0  # the fastest pair turns as before
    if family.endswith("dynamic"):  # every other pair slower, the slower ones the more
        assert named[1:] == [position_rope.GROWN] * (len(named) - 1)
        assert (np.diff(stretch) > 0).all()
        return
    factor = imported.config.rope_factor  # YaRN: kept, then the ramp (smoothed), then divided by the factor
    order = {position_rope.KEPT: 0, position_rope.SMOOTHED: 1, position_rope.STRETCHED: 2}
    assert [order[n] for n in named] == sorted(order[n] for n in named)
    assert named[-1] == position_rope.STRETCHED and np.isclose(stretch[-1], factor)
    smoothed = table["scaling"] == position_rope.SMOOTHED
    assert ((stretch[smoothed] > 1) & (stretch[smoothed] < factor)).all()
    assert smoothed.any() or family != "llama-yarn"  # its ramp ends between two pairs


def test_the_score_split_adds_up_past_the_trained_length(imported):
    ids = position_length.text_ids(imported)[:3 * TRAINED]
    records = imported.forced_pass(ids, need_weights=True).records
    for layer, record in enumerate(records):  # Gemma 3's sliding layers: their own unscaled RoPE
        split = position_split.split_lm_scores(imported, ids, layer, 1)
        assert split.adds_up and split.residual < 1e-4, (layer, split.residual)
        assert np.allclose(split.parts["rotation"], record.position_bias[0, 1].detach().numpy(), atol=1e-4)


def test_the_rotation_decay_at_distance_zero_is_the_mean_content_score(family, imported):
    """At distance 0 nothing turns: the rotation's curve is the mean q·k, times YaRN's factor squared."""
    ids = position_length.text_ids(imported)[:3 * TRAINED]
    measures = position_rope.rope_measures(imported, ids, 8)
    records = imported.forced_pass(ids, need_weights=True).records
    for layer, record in enumerate(records):
        factor = position_rope.layer_attention_factor(imported, layer)
        q, k, divisor = position_rope.unrotated_queries_keys(imported, record.residual, layer)
        expected = (q.mean(-2) * k.mean(-2)).sum(-1).numpy() * factor ** 2 / divisor
        assert np.allclose(measures.rotation[layer][:, 0], expected)
    assert position_rope.layer_attention_factor(imported, len(records) - 1) == \
        (1.0 if family.startswith("gemma3") else position_rope.attention_factor(imported.config))  # sliding: own


def test_a_top_level_original_length_wins_as_in_transformers(family, folder, tmp_path):
    """Phi-3 keeps original_max_position_embeddings beside rope_parameters; transformers reads that one."""
    if family != "llama-yarn":
        pytest.skip("one family is enough")
    copy = tmp_path / "top-level"
    shutil.copytree(folder, copy)
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "original_max_position_embeddings": TRAINED // 2}))
    out = tmp_path / "ours"
    assert main(["import", str(copy), "--out", str(out)]) == 0
    ours = viz_model.load(out, device="cpu")
    assert ours.config.rope_original_max_positions == TRAINED // 2
    theirs = transformers.LlamaForCausalLM.from_pretrained(copy, attn_implementation="eager").eval()
    ids = torch.tensor([ours.tokenizer.encode(LONG)])
    with torch.no_grad():
        expected, got = theirs(ids).logits, ours.network(ids).logits
    assert (got - expected).abs().max() <= LOGIT_TOLERANCE


def test_yarn_and_dynamic_settings_are_checked_and_left_out_where_unused():
    from viz_model.config import ConfigError, ModelConfig

    base = {"kind": "decoder", "encoder_layers": 0, "positional": "rope", "d_model": 32, "heads": 4}
    plain = ModelConfig(**base).to_dict()
    assert not any(key.startswith(("rope_beta", "rope_truncate", "rope_attention", "rope_mscale")) for key in plain)
    yarn = ModelConfig(**base, rope_scaling="yarn", rope_factor=4.0, rope_attention_factor=0.9, rope_mscale=1.0)
    assert ModelConfig.from_dict(yarn.to_dict()) == yarn
    for bad, said in [({"rope_beta_fast": 0.0}, "rope_beta_fast"), ({"rope_truncate": "yes"}, "rope_truncate"),
                      ({"rope_attention_factor": -1.0}, "rope_attention_factor"),
                      ({"rope_mscale": -1.0}, "rope_mscale"),
                      ({"rope_scaling": "longrope"}, "rope_scaling")]:
        with pytest.raises(ConfigError, match=said):
            ModelConfig(**base, **bad)
    with pytest.raises(ConfigError, match="head width above 2"):
        ModelConfig(**{**base, "heads": 16}, rope_scaling="dynamic", rope_factor=2.0)
