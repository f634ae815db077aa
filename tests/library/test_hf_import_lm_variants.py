"""The research families' settings that the one model of each in test_hf_import_lm does not take (issue 60), each
built small by transformers with random weights and imported with ``viz-model import``: GPT-NeoX's sequential layer
without attention biases, OPT-350m's post-norm layer without a final norm and its projected embeddings, Phi's
per-head query/key LayerNorms. fp32 on the CPU: every attention map within 1e-5 of transformers' eager attention,
logits within 1e-4, greedy and beam (4) continuations equal to ``generate(do_sample=False)``'s. What stays unsupported
is refused in one line naming what is.
"""

from __future__ import annotations

import re

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from support.hf import WORDS_EN, sentences  # noqa: E402
from support.hf_lm import CONFIGS, build_lm_folder, import_lm, refused  # noqa: E402

from viz_model.attribution.scoring import attribute_continuation  # noqa: E402
from viz_model.lessons.position_rope import frequency_table, rope_measures  # noqa: E402
from viz_model.lessons.position_split import split_lm_scores  # noqa: E402

MAP_TOLERANCE, LOGIT_TOLERANCE = 1e-5, 1e-4
PROMPTS = sentences(WORDS_EN, 4, 11)
VARIANTS = {  # name: (family, config changes, what our config reads of them)
    "gpt_neox-sequential": ("gpt_neox", {"use_parallel_residual": False, "attention_bias": False,
                                         "rotary_pct": 0.25}, {"parallel_residual": False, "attention_bias": False,
                                                               "rope_dims": 2}),
    "opt-350m": ("opt", {"do_layer_norm_before": False, "word_embed_proj_dim": 16},
                 {"norm": "post", "final_norm": False, "embedding_size": 16}),
    "phi-qk-norm": ("phi", {"qk_layernorm": True}, {"qk_norm": True, "joint_qk_norm": False}),
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def variant(request, tmp_path_factory):
    """(name, the folder, transformers' model of it, the imported model)."""
    family, changes, _ = VARIANTS[request.param]
    folder = build_lm_folder(tmp_path_factory.mktemp("hf"), family, folder_name=request.param, **changes)
    model = getattr(transformers, CONFIGS[family][1]).from_pretrained(folder, attn_implementation="eager").eval()
    return request.param, folder, model, import_lm(folder, tmp_path_factory.mktemp("ours"))


def test_the_config_reads_the_setting(variant):
    name, _, _, imported = variant
    for key, value in VARIANTS[name][2].items():
        assert getattr(imported.config, key) == value, key


def test_every_map_the_logits_and_the_continuations_equal_transformers(variant):
    _, folder, model, imported = variant
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    for prompt in PROMPTS:
        ids = tok(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            theirs = model(ids, output_attentions=True)
            ours = imported.network(ids, need_weights=True)
            greedy = model.generate(ids, do_sample=False, max_new_tokens=8, attention_mask=torch.ones_like(ids))
            beam = model.generate(ids, do_sample=False, num_beams=4, max_new_tokens=6,
                                  attention_mask=torch.ones_like(ids))
        assert len(ours.attentions) == len(theirs.attentions)
        for a, b in zip(ours.attentions, theirs.attentions):
            assert a.shape == b.shape and (a - b).abs().max() <= MAP_TOLERANCE
        assert (ours.logits - theirs.logits).abs().max() <= LOGIT_TOLERANCE
        assert imported.continue_ids(ids[0].tolist(), 8) == greedy[0, ids.shape[1]:].tolist()
        assert imported.beam_ids(ids[0].tolist(), 4, 6) == beam[0, ids.shape[1]:].tolist()


def test_the_positional_lessons_read_the_dimensions_that_turn(variant):
    """Partial rotary (GPT-NeoX: 2 of 8 dimensions, Phi: 4): one frequency per turned pair, and each head's scores
    split into content and rotation adding up to the forward's."""
    name, _, _, imported = variant
    if imported.config.positional != "rope":
        pytest.skip("no RoPE")
    ids = imported.encode(PROMPTS[0], 0)
    pairs = imported.config.rope_dims // 2
    assert len(frequency_table(imported.config)) == pairs < imported.config.d_head // 2
    assert rope_measures(imported, ids, 6).shares.shape[-1] == pairs
    for layer, head in ((0, 0), (1, 3)):
        assert split_lm_scores(imported, ids, layer, head).adds_up


def test_what_is_not_implemented_is_refused_in_one_line_naming_it(variant, tmp_path):
    name, folder, _, _ = variant
    if name.startswith("gpt_neox"):  # 3 of 8 dimensions: transformers' int() gives an odd count
        rope = {"rope_type": "default", "rope_theta": 5000.0, "partial_rotary_factor": 0.375}
        assert "rope_dims (3) needs rope positions and an even number" in refused(folder, tmp_path,
                                                                                  rope_parameters=rope)
        assert "hidden_act 'gelu_fast' is not implemented (gelu, " in refused(folder, tmp_path, hidden_act="gelu_fast")
    if name.startswith("opt"):
        assert "layer_norm_elementwise_affine = false is not implemented" in refused(
            folder, tmp_path, layer_norm_elementwise_affine=False)
    if name.startswith("phi"):
        assert "head_bias needs the head's own matrix" in refused(folder, tmp_path, tie_word_embeddings=True)
    assert "model_type 'qwen2_moe'" in refused(folder, tmp_path, model_type="qwen2_moe")


def test_a_llama_with_partial_rotary_is_refused_naming_the_families_that_have_it(tmp_path):
    folder = build_lm_folder(tmp_path, "smollm2")
    rope = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}
    said = refused(folder, tmp_path, rope_parameters=rope)
    assert "partial_rotary_factor 0.5 is not implemented for llama (GPT-NeoX's, Phi's and Phi-3's partial rotary is)" \
        in said


def test_gpt_neo_attention_types_of_another_kind_are_refused(tmp_path):
    folder = build_lm_folder(tmp_path, "gpt_neo")
    said = refused(folder, tmp_path, attention_types=[[["global", "sparse"], 1], [["local"], 1]])
    assert "attention_types must give one of global, local for each of the 3 layers" in said


def test_olmo2_by_hand_and_its_alti_refusal(tmp_path):
    """The Attention by hand page's steps of an OLMo 2 head (its query and key norms span every head) give the
    recorded map; ALTI, which cannot decompose a norm of the attention output, is skipped with one line naming it."""
    from app.views.by_hand.head_steps import head_steps

    lm = import_lm(build_lm_folder(tmp_path / "hf", "olmo2"), tmp_path / "ours")
    steps = head_steps(lm, lm.encode(PROMPTS[1], 0), 1, 3)
    assert steps.q_normed is not None and steps.difference <= MAP_TOLERANCE
    result = attribute_continuation(lm, PROMPTS[1], max_new_tokens=2, methods=["alti"])
    assert result.alti is None and re.search("norm of the attention output .* OLMo 2's", result.skipped["alti"])
    assert "\n" not in result.skipped["alti"]


@pytest.mark.parametrize("values, said", [
    ({"positional": "rope", "rope_dims": 3}, r"rope_dims \(3\) needs rope positions and an even number"),
    ({"positional": "learned", "rope_dims": 4}, r"rope_dims \(4\) needs rope positions"),
    ({"input_norm": False}, "input_norm = false needs sandwich_norm"),
    ({"joint_qk_norm": True}, "joint_qk_norm needs qk_norm"),
    ({"head_bias": True}, r"head_bias needs the head's own matrix \(tied_head = false\)"),
    ({"experts": 4, "experts_per_token": 5}, "experts_per_token"),
])
def test_the_research_families_options_are_checked_in_one_line(values, said):
    from viz_model.config import ModelConfig

    with pytest.raises(ValueError, match=said) as err:
        ModelConfig(kind="decoder", encoder_layers=0, d_model=32, heads=4, **values)
    assert "\n" not in str(err.value)


def test_the_research_families_options_belong_to_the_decoder_kind_and_stay_out_of_other_configs():
    from viz_model.config import ModelConfig

    lm = ModelConfig(kind="decoder", encoder_layers=0, d_model=32, heads=4, positional="rope", rope_dims=4,
                     parallel_residual=True, final_norm=False, experts=4, embedding_size=16, tied_head=False,
                     head_bias=True)
    assert ModelConfig.from_dict(lm.to_dict()) == lm
    assert not {"rope_dims", "parallel_residual", "final_norm", "input_norm", "joint_qk_norm", "head_bias", "experts",
                "experts_per_token"} & set(ModelConfig().to_dict())
    with pytest.raises(ValueError, match="options of the decoder-only kind"):
        ModelConfig(parallel_residual=True)
    with pytest.raises(ValueError, match="embedding_size: options of the encoder-only kind"):
        ModelConfig(embedding_size=16)
