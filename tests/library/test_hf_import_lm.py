"""Hugging Face decoder-only language models open exactly (issue 51): GPT-2, Llama 3 (grouped-query attention, llama3
RoPE scaling), Llama 2 (linear scaling, attention biases), SmolLM2 (a Llama: multi-query, tied head), Mistral (sliding
window), Qwen2 (Q/K/V biases, sliding layers), Qwen3 (query/key norms), Gemma (its norm, scaled embeddings), Gemma 2
(sandwich norms, soft caps, query_pre_attn_scalar, sliding layers), Gemma 3 text (two RoPEs, query/key norms) and
BLOOM (ALiBi, embedding norm); the research families of tests/support/hf_lm.py, gpt-oss's learned sinks and the
mixtures' routing among them. Small random
models built here by transformers, imported with ``viz-model import``; fp32 on the CPU: every attention map within
1e-5 of transformers' eager attention, logits within 1e-4, greedy and beam (4) continuations equal to
``generate(do_sample=False)``'s, tokenizer ids equal to transformers'; heads patched from another prompt's run
(`patched_logits`, the batched `restored_by_head`) within 1e-4 of transformers with a forward pre-hook on each layer's
output projection swapping those heads' slices (issue 61).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from support.hf import WORDS_EN, eager_model, imported_model, sentences  # noqa: E402
from support.hf_lm import CHAT, CONFIGS, build_lm_folder, refused  # noqa: E402
from support.lens_check import assert_lens_equals_hidden_states  # noqa: E402
from support.patch_check import assert_patching_equals_pre_hooks, equal_length_prompts  # noqa: E402

import viz_model  # noqa: E402
from viz_model.analysis.head_patching import restored_by_head  # noqa: E402
from viz_model.cli.main import main  # noqa: E402
from viz_model.config import ModelConfig  # noqa: E402
from viz_model.hf.importer import HFImportError, import_model  # noqa: E402

MAP_TOLERANCE, LOGIT_TOLERANCE = 1e-5, 1e-4
PROMPTS = sentences(WORDS_EN, 6, 7) + ["The red dog reads a book in the park, and the old man runs in the snow."]
SEARCHED = PROMPTS + sentences(WORDS_EN, 18, 8)  # the prompts whose continuations are compared with generate()'s
SLIDING = ("mistral", "qwen2", "gemma2", "gemma3", "gpt_neo", "phi3", "gpt_oss")  # a window on some layers
LEARNED = ("gpt2", "gpt_neo", "opt")  # learned positions added to the input
UNGROUPED = ("gpt2", "llama2", "bloom", "gpt_neox", "gpt_neo", "opt")  # one key/value head per query head


@pytest.fixture(scope="module", params=list(CONFIGS))
def family(request):
    return request.param


@pytest.fixture(scope="module")
def folder(family, tmp_path_factory):
    return build_lm_folder(tmp_path_factory.mktemp("hf"), family)


@pytest.fixture(scope="module")
def hf(family, folder):
    return eager_model(CONFIGS[family][1], folder)


@pytest.fixture(scope="module")
def imported(folder, tmp_path_factory):
    return imported_model(folder, tmp_path_factory.mktemp("ours"))


def test_the_translation_commands_refuse_a_language_model_in_one_line(family, imported, capsys):
    if family != "gpt2":
        pytest.skip("one family is enough")
    assert main(["translate", "--model", str(imported.directory), "A dog."]) == 2
    err = capsys.readouterr().err
    assert "a decoder-only language model" in err and err.count("\n") == 1


def test_load_returns_a_language_model_of_the_decoder_only_kind(imported, family):
    assert isinstance(imported, viz_model.LanguageModel)
    cfg = imported.config
    assert (cfg.kind, cfg.encoder_layers, cfg.norm) == ("decoder", 0, "pre")
    assert cfg.positional == {"bloom": "alibi", **dict.fromkeys(LEARNED, "learned")}.get(family, "rope")
    assert cfg.position_offset == (2 if family == "opt" else 0)
    assert cfg.embedding_norm == (family == "bloom")
    assert cfg.kv_heads == {"smollm2": 1, "gemma": 1, **dict.fromkeys(UNGROUPED)}.get(family, 2)
    gemma = family in ("gemma", "gemma2", "gemma3")
    assert (cfg.qk_norm, cfg.normalization == "gemma", cfg.scale_embeddings) == (
        family in ("qwen3", "gemma3", "olmo2"), gemma, gemma)
    assert (cfg.joint_qk_norm, cfg.input_norm) == ((True, False) if family == "olmo2" else (False, True))
    assert (cfg.sandwich_norm, cfg.query_scalar, cfg.attention_softcap, cfg.logit_softcap) == {
        "gemma2": (True, 12.0, 2.0, 1.5), "gemma3": (True, 12.0, None, 3.0), "olmo2": (True, None, None, None)}.get(
        family, (False, None, None, None))
    assert cfg.rope_scaling == {"llama": "llama3", "llama2": "linear", "gemma3": "linear", "gpt_oss": "yarn"}.get(
        family, "default")
    assert cfg.sliding_window == {"mistral": 5, "qwen2": 4, "gemma2": 6, "gemma3": 6, "gpt_neo": 5, "phi3": 6,
                                  "gpt_oss": 5}.get(family)
    assert cfg.sliding_layers == {"qwen2": (1, 2), "gemma2": (0, 2), "gemma3": (0, 2), "gpt_neo": (1, 2),
                                  "gpt_oss": (0,)}.get(family)
    assert cfg.scale_scores == (family != "gpt_neo")
    assert (cfg.local_rope_base, cfg.rope_base) == ((1e4, 1e6) if family == "gemma3" else (None, cfg.rope_base))
    partial = {"gpt_neox": (4, True), "phi": (4, True), "phi3": (6, False)}  # 4 (6) of 8 dimensions turned
    assert (cfg.rope_dims, cfg.parallel_residual) == partial.get(family, (None, False))
    assert cfg.head_bias == (family == "phi")
    assert (cfg.experts, cfg.experts_per_token) == ((4, 2) if family in ("mixtral", "gpt_oss") else (0, 2))
    assert (cfg.learned_sinks, cfg.expert_limit) == ((True, 7.0) if family == "gpt_oss" else (False, None))


def test_tokenizer_ids_equal_transformers(hf, imported):
    texts = PROMPTS + ["Ünïcödé ☃ snow 🙂 中文", "code: x = f(1, 2)  # 3", "numbers 12345   runs of   spaces"]
    for text in texts:
        assert imported.tokenizer.encode(text) == hf[1](text).input_ids, text


def test_every_map_and_the_logits_equal_transformers_eager(hf, imported):
    model, tok = hf
    for prompt in PROMPTS:
        ids = torch.tensor([tok(prompt).input_ids])
        with torch.no_grad():
            theirs = model(ids, output_attentions=True)
            ours = imported.network(ids, need_weights=True)
        assert len(ours.attentions) == len(theirs.attentions)
        for a, b in zip(ours.attentions, theirs.attentions):
            assert a.shape == b.shape
            assert (a - b).abs().max() <= MAP_TOLERANCE
        assert (ours.logits - theirs.logits).abs().max() <= LOGIT_TOLERANCE


def test_the_sliding_window_hides_the_keys_before_it(family, imported):
    if family not in SLIDING:
        pytest.skip("no sliding window in this family")
    ids = torch.tensor([imported.tokenizer.encode(PROMPTS[-1])])
    window = imported.config.sliding_window
    with torch.no_grad():
        maps = imported.network(ids, need_weights=True).attentions
    for layer, weights in enumerate(maps):
        old = np.tril(np.ones(weights.shape[-2:], dtype=bool), -window)  # key j <= i - window
        hidden = bool((weights[0][:, torch.from_numpy(old)] == 0).all())
        assert hidden == (imported.network.window(layer) is not None)


def test_the_trace_carries_each_layers_own_mask_and_the_decoders_heads(family, imported):
    trace = imported.trace(PROMPTS[-1], max_new_tokens=4)
    assert trace.num_heads == imported.config.heads > 0
    n = len(trace.target_ids)
    q, k = np.arange(n)[:, None], np.arange(n)[None, :]
    assert np.array_equal(trace.decoder_mask, k <= q)
    for layer, weights in enumerate(trace.decoder_attentions):
        window = imported.network.window(layer)
        mask = trace.mask("decoder", layer)
        assert np.array_equal(mask, (k <= q) & (k > q - (window or n)))
        assert (weights[:, ~mask] == 0).all()
    sliding = [imported.network.window(i) is not None for i in range(imported.config.decoder_layers)]
    assert any(sliding) == (family in SLIDING)


def test_greedy_continuations_equal_generate(hf, imported):
    model, tok = hf
    for prompt in SEARCHED:
        ids = tok(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            out = model.generate(ids, do_sample=False, max_new_tokens=12, attention_mask=torch.ones_like(ids))
        new = out[0, ids.shape[1]:].tolist()
        assert imported.continue_ids(ids[0].tolist(), 12) == new
        assert imported.complete(prompt, max_new_tokens=12) == tok.decode(new, skip_special_tokens=True)


def test_beam_continuations_equal_generate(hf, imported):
    model, tok = hf
    for prompt in SEARCHED[::3]:
        ids = tok(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            out = model.generate(ids, do_sample=False, num_beams=4, max_new_tokens=10,
                                 attention_mask=torch.ones_like(ids))
        new = out[0, ids.shape[1]:].tolist()
        while new and new[-1] == model.generation_config.pad_token_id and new[-1] not in imported.tokenizer.eos_ids:
            new.pop()  # generate pads a hypothesis that ended early
        assert imported.beam_ids(ids[0].tolist(), 4, 10) == new
        assert imported.complete(prompt, max_new_tokens=10, beam=4) == tok.decode(new, skip_special_tokens=True)


def test_the_trace_covers_prompt_and_continuation(hf, imported):
    model, tok = hf
    prompt = PROMPTS[0]
    trace = imported.trace(prompt, max_new_tokens=5)
    prompt_ids = tok(prompt).input_ids
    n = len(trace.target_ids)
    assert trace.target_ids[:len(prompt_ids)] == prompt_ids and n <= len(prompt_ids) + 5
    assert trace.encoder_attentions == [] and trace.cross_attentions == []
    assert trace.translation == imported.complete(prompt, max_new_tokens=5)
    heads = imported.config.heads
    assert [a.shape for a in trace.decoder_attentions] == [(heads, n, n)] * imported.config.decoder_layers
    assert trace.num_heads == heads  # the query heads, with no encoder to count them from
    with torch.no_grad():
        theirs = model(torch.tensor([trace.target_ids]), output_attentions=True).attentions
    for ours, their in zip(trace.decoder_attentions, theirs):
        assert np.abs(ours - their[0].numpy()).max() <= MAP_TOLERANCE
    assert len(trace.steps) == n and all(len(step.top_ids) == 5 for step in trace.steps)
    assert trace.steps[-2].token_id == trace.target_ids[-1] == trace.steps[-2].top_ids[0]  # the greedy choice
    cfg, network = imported.config, imported.network
    tokens = network.embedding.weight[trace.target_ids] * (cfg.d_model ** 0.5 if cfg.scale_embeddings else 1.0)
    assert np.allclose(trace.target_embeddings, tokens.detach().numpy(), atol=1e-6)
    first = cfg.position_offset  # OPT's table: position p at row p + 2
    added = network.positions.embedding.weight[first:first + n] if cfg.positional == "learned" else \
        torch.zeros(n, cfg.d_model)
    assert np.array_equal(trace.target_positional, added.detach().numpy())
    alone = imported.trace(prompt, max_new_tokens=0)
    assert alone.target_ids == prompt_ids and alone.translation == ""


def test_a_head_mask_switches_heads_off(imported):
    ids = torch.tensor([imported.tokenizer.encode(PROMPTS[0])])
    cfg = imported.config
    ones = torch.ones(cfg.decoder_layers, cfg.heads)
    off = ones.clone()
    off[0, 1] = 0.0
    with torch.no_grad():
        plain, kept, cut = (imported.network(ids, head_mask=m).logits for m in (None, ones, off))
    assert torch.equal(plain, kept) and not torch.allclose(plain, cut)


def test_grouped_records_say_which_key_value_head_each_query_head_reads(family, imported):
    record = imported.network(torch.tensor([[5, 6, 7]]), need_weights=True).records[0]
    expected = {"smollm2": [0] * 4, "gemma": [0] * 4, **dict.fromkeys(UNGROUPED)}.get(family, [0, 0, 1, 1])
    assert record.kv_heads == expected


def test_a_mixture_routes_each_token_as_transformers_and_the_trace_keeps_it(family, hf, imported):
    if family not in ("mixtral", "gpt_oss"):
        pytest.skip("no mixture of experts")
    model, tok = hf
    ids = tok(PROMPTS[-1]).input_ids
    with torch.no_grad():
        router_logits = model(torch.tensor([ids]), output_router_logits=True).router_logits
    trace = imported.trace(PROMPTS[-1], max_new_tokens=0)
    experts, weights = trace.expert_routing()
    k = imported.config.experts_per_token
    assert experts.shape == weights.shape == (imported.config.decoder_layers, len(ids), k)
    for layer, theirs in enumerate(router_logits):  # (tokens, experts) per layer
        top, index = theirs.float().topk(k, dim=-1)
        assert np.array_equal(experts[layer], index.numpy())
        # Mixtral's renormalised top k of the softmax over all experts is the softmax over the top k, as gpt-oss's
        assert np.abs(weights[layer] - torch.softmax(top, dim=-1).numpy()).max() <= 1e-6
    assert trace.sink_logits() is None if family == "mixtral" else trace.sink_logits() is not None


def test_learned_sinks_take_the_share_each_row_misses(family, hf, imported):
    if family != "gpt_oss":
        pytest.skip("no learned sinks")
    model, tok = hf
    ids = torch.tensor([tok(PROMPTS[0]).input_ids])
    trace = imported.trace(PROMPTS[0], max_new_tokens=0)
    theirs = np.stack([layer.self_attn.sinks.detach().numpy() for layer in model.model.layers])
    assert np.array_equal(trace.sink_logits(), theirs) and trace.expert_routing() is not None
    with torch.no_grad():
        records = imported.network(ids, need_weights=True).records
    for layer, record in enumerate(records):
        assert torch.equal(record.sinks, torch.from_numpy(theirs[layer]))
        missing = 1 - record.weights[0].sum(dim=-1)  # (heads, rows)
        # the sink's softmax share: exp(sink) / (exp(sink) + the sum over the keys of exp(score))
        share = torch.sigmoid(record.sinks[:, None] - torch.logsumexp(record.masked_scores[0], dim=-1))
        assert (missing > 0).all() and (missing - share).abs().max() <= 1e-6


def test_from_transformers_equals_its_folder_twin(hf, imported):
    twin = viz_model.from_transformers(*hf, device="cpu")
    assert isinstance(twin, viz_model.LanguageModel) and twin.directory is None
    ids = torch.tensor([imported.tokenizer.encode(PROMPTS[1])])
    assert torch.equal(twin.network(ids).logits, imported.network(ids).logits)


def test_bad_prompts_get_one_line(family, imported):
    for prompt, said in (("", "prompt is empty"), ("   ", "prompt is empty")):
        with pytest.raises(ValueError, match=said) as err:
            imported.complete(prompt)
        assert "\n" not in str(err.value)
    long = " ".join(["dog"] * 200)
    if family == "gpt2":
        with pytest.raises(ValueError, match=r"this model has 128 \(max_position_embeddings\)") as err:
            imported.complete(long)
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="max_new_tokens must be"):
        imported.trace("A dog.", max_new_tokens=-1)


def test_past_a_rope_models_trained_length_it_runs_with_a_warning(family, hf, imported):
    if family != "llama2":
        pytest.skip("the test's llama2 has 32 trained positions")
    prompt = PROMPTS[-1]
    with pytest.warns(UserWarning, match="past the 32 this model was trained on"):
        ids = imported.encode(prompt, 10)
    assert len(ids) + 10 > 32
    model, tok = hf
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=10)
    assert imported.continue_ids(ids, 10) == out[0, len(ids):].tolist()


def test_what_is_not_implemented_is_refused_in_one_line_naming_it(family, folder, tmp_path):
    assert "model_type 'qwen2_moe'" in refused(folder, tmp_path, model_type="qwen2_moe")
    if family == "gpt2":
        assert "scale_attn_weights = false is not implemented" in refused(folder, tmp_path, scale_attn_weights=False)
    if family in ("bloom", *LEARNED):  # no RoPE
        return
    longrope = {"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": [1.0] * 4, "long_factor": [2.0] * 4}
    if family == "gemma3":  # one RoPE per kind of layer
        longrope = {"full_attention": longrope, "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}
    if family == "phi3":  # its 128k models' scaling: three pairs of its partial rotary
        longrope = {"rope_type": "longrope", "rope_theta": 1e4, "short_factor": [1.0] * 3, "long_factor": [2.0] * 3}
    assert "rope_type 'longrope' is not implemented" in refused(folder, tmp_path, rope_parameters=longrope)
    if family not in ("mixtral", "gpt_oss"):  # their experts
        assert "num_local_experts" in refused(folder, tmp_path, num_local_experts=8)
    if family == "gpt_oss":  # the hub's MXFP4 checkpoints
        assert "quantization_config (mxfp4) is not implemented" in refused(
            folder, tmp_path, quantization_config={"quant_method": "mxfp4"})


def test_a_translation_config_reads_and_digests_as_before():
    data = ModelConfig().to_dict()
    assert not {"kind", "kv_heads", "qkv_bias", "rope_scaling", "sliding_window", "sliding_layers"} & set(data)
    lm = ModelConfig(kind="decoder", encoder_layers=0, heads=4, kv_heads=2, sliding_window=3, sliding_layers=(1,))
    assert ModelConfig.from_dict(lm.to_dict()) == lm
    with pytest.raises(ValueError, match="encoder_layers must be 0"):
        ModelConfig(kind="decoder")
    with pytest.raises(ValueError, match="kv_heads"):
        ModelConfig(kv_heads=4)


MESSAGES = [{"role": "system", "content": "You read books."}, {"role": "user", "content": "A dog runs in the park?"}]


def test_chat_applies_the_models_own_template(family, hf, imported):
    if family not in CHAT:
        with pytest.raises(ValueError, match="no chat template") as err:
            imported.chat(MESSAGES)
        assert "\n" not in str(err.value)
        return
    model, tok = hf
    expected = tok.apply_chat_template(MESSAGES, add_generation_prompt=True)
    expected = list(expected["input_ids"] if hasattr(expected, "keys") else expected)
    assert imported.tokenizer.chat_ids(MESSAGES) == expected
    with torch.no_grad():
        out = model.generate(torch.tensor([expected]), do_sample=False, max_new_tokens=8)
    assert imported.chat(MESSAGES, max_new_tokens=8) == tok.decode(out[0, len(expected):], skip_special_tokens=True)
    trace = imported.trace(MESSAGES, max_new_tokens=3)
    assert trace.target_ids[:len(expected)] == expected and "<|assistant|>" in trace.source_text
    for bad, said in (([{"role": "robot", "content": "hi"}], "role 'robot'"), ([], "non-empty list"),
                      ([{"role": "user"}], "text 'content'")):
        with pytest.raises(ValueError, match=said) as err:
            imported.chat(bad)
        assert "\n" not in str(err.value)


def test_a_sampling_generation_config_is_decoded_greedily_and_said_once(family, folder, tmp_path):
    if family not in CHAT:
        pytest.skip("only the instruct model's generation config samples")
    lm = viz_model.load(import_model(str(folder), tmp_path / "lm"), device="cpu")
    with pytest.warns(UserWarning, match="decodes greedily") as said:
        lm.complete("A dog", max_new_tokens=2)
        lm.complete("A cat", max_new_tokens=2)
    assert len([w for w in said if "greedily" in str(w.message)]) == 1


def test_searches_that_end_at_the_end_of_text_equal_generate(tmp_path):
    """A Llama whose end-of-text row of the head copies (louder) the token greedy search picks most: the
    continuations end early, at different steps in different beams, as generate()'s do."""
    folder = build_lm_folder(tmp_path, "llama")
    model = transformers.LlamaForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    eos = model.config.eos_token_id
    with torch.no_grad():
        picks = [model.generate(tok(p, return_tensors="pt").input_ids, do_sample=False, max_new_tokens=6)[0, -6:]
                 for p in PROMPTS]
        common = int(torch.cat(picks).mode().values)
        model.lm_head.weight[eos] = model.lm_head.weight[common] * 1.1
    model.save_pretrained(folder)
    lm = viz_model.load(import_model(str(folder), tmp_path / "ours"), device="cpu")
    ended = 0
    for prompt in PROMPTS:
        ids = tok(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            greedy = model.generate(ids, do_sample=False, max_new_tokens=10)[0, ids.shape[1]:].tolist()
            beam = model.generate(ids, do_sample=False, num_beams=4, max_new_tokens=10)[0, ids.shape[1]:].tolist()
        beam = beam[:beam.index(eos) + 1] if eos in beam else beam  # generate pads after the end
        assert lm.continue_ids(ids[0].tolist(), 10) == greedy
        assert lm.beam_ids(ids[0].tolist(), 4, 10) == beam
        ended += (eos in greedy) + (eos in beam)
    assert ended >= 4, ended


def test_load_of_a_hugging_face_folder_gives_a_language_model(tmp_path, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_CACHE", str(tmp_path / "cache"))
    folder = build_lm_folder(tmp_path, "qwen2")
    lm = viz_model.load(str(folder), device="cpu")
    assert isinstance(lm, viz_model.LanguageModel)
    with pytest.raises(ValueError, match="source_lang= / target_lang= choose a translation model's pair") as err:
        viz_model.load(str(folder), device="cpu", source_lang="en")
    assert "\n" not in str(err.value)


def test_beam_search_ends_at_any_of_several_end_of_text_ids_as_generate(tmp_path):
    """A Llama whose generation config names two end-of-text ids (as Llama 3's and Qwen2.5's instruct models do), the
    second a token its searches pick often: greedy and beam (4) continuations end at either, as generate()'s."""
    folder = build_lm_folder(tmp_path, "llama")
    model = transformers.LlamaForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    with torch.no_grad():
        picks = [model.generate(tok(p, return_tensors="pt").input_ids, do_sample=False, num_beams=4,
                                max_new_tokens=6)[0, -6:] for p in PROMPTS]
    ends = [model.config.eos_token_id, int(torch.cat(picks).mode().values)]
    generation = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**generation, "eos_token_id": ends}))
    model = transformers.LlamaForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    lm = viz_model.load(import_model(str(folder), tmp_path / "ours"), device="cpu")
    assert lm.tokenizer.eos_ids == ends
    ended = 0
    for prompt in SEARCHED[::2]:
        ids = tok(prompt, return_tensors="pt").input_ids
        for beam in (1, 4):
            with torch.no_grad():
                new = model.generate(ids, do_sample=False, num_beams=beam, max_new_tokens=10)[0, ids.shape[1]:].tolist()
            stop = [i for i, token in enumerate(new) if token in ends]
            new = new[:stop[0] + 1] if stop else new  # generate pads after the end
            assert lm.beam_ids(ids[0].tolist(), beam, 10) == new, (prompt, beam)
            ended += bool(new) and new[-1] == ends[1]
    assert ended >= 5, ended


SEARCH = {"repetition_penalty": 1.3, "no_repeat_ngram_size": 2, "num_beams": 3, "length_penalty": 0.7,
          "early_stopping": True}


def test_the_generation_configs_search_settings_apply_as_generate_applies_them(tmp_path):
    """A GPT-2 folder whose generation config sets a repetition penalty, an n-gram ban, its own beam width, length
    penalty and early stopping: complete() finds generate(do_sample=False)'s continuation (its num_beams), and so
    do greedy and 4 beams, the penalties applied over prompt and continuation."""
    folder = build_lm_folder(tmp_path, "gpt2")
    generation = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**generation, **SEARCH}))
    model = transformers.GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager").eval()
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    lm = viz_model.load(import_model(str(folder), tmp_path / "ours"), device="cpu")
    assert (lm.search.num_beams, lm.search.repetition_penalty, lm.search.no_repeat_ngram_size) == (3, 1.3, 2)
    changed = 0
    for prompt in PROMPTS:
        ids = tok(prompt, return_tensors="pt").input_ids
        for beam in (None, 1, 4):
            with torch.no_grad():
                new = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=10,
                                     **({} if beam is None else {"num_beams": beam}))[0, ids.shape[1]:].tolist()
            assert lm.beam_ids(ids[0].tolist(), beam or 3, 10) == new, (prompt, beam)
            if beam is None:
                assert lm.complete(prompt, max_new_tokens=10) == tok.decode(new, skip_special_tokens=True)
        plain = viz_model.LanguageModel(lm.network, lm.tokenizer)
        plain.search = type(lm.search)()
        changed += plain.continue_ids(ids[0].tolist(), 10) != lm.continue_ids(ids[0].tolist(), 10)
    assert changed >= 3, changed  # the settings change the continuations: the comparison can fail


@pytest.mark.parametrize("setting, said", [
    ({"min_new_tokens": 3}, "min_new_tokens = 3 is not implemented"),
    ({"sequence_bias": [[[5], 1.0]]}, "sequence_bias = "), ({"suppress_tokens": [7]}, r"suppress_tokens = \[7\]"),
    ({"repetition_penalty": 0}, "repetition_penalty must be a number above 0"),
    ({"num_beams": 0}, "num_beams must be an integer >= 1")])
def test_generation_settings_not_applied_are_refused_in_one_line(setting, said, tmp_path):
    folder = build_lm_folder(tmp_path, "qwen2")
    generation = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**generation, **setting}))
    with pytest.raises(HFImportError, match=said) as err:
        import_model(str(folder), tmp_path / "out")
    assert "\n" not in str(err.value) and not (tmp_path / "out").exists()


def test_the_logit_lens_equals_transformers_hidden_states_through_its_norm_and_head(family, hf, imported):
    """Issue 61: each row's top-5 ids equal transformers' ``output_hidden_states`` read through its own final norm
    and lm_head (support/lens_check.py: every family), the probabilities within 1e-4; a tracked token's
    probability and rank too."""
    assert_lens_equals_hidden_states(family, *hf, imported, PROMPTS[:3])


def test_patched_heads_equal_transformers_with_a_pre_hook_on_the_output_projection(hf, imported):
    """Issue 61: `patched_logits` (and `patched_runs` over a shared start) equal transformers with forward pre-hooks
    on each layer's output projection swapping those heads' slices for the source run's (support/patch_check.py)."""
    assert_patching_equals_pre_hooks(hf[0], imported)


def test_the_batched_sweep_equals_patched_logits_head_by_head(family, imported):
    if family not in ("gpt2", "llama", "qwen2"):
        pytest.skip("the sweep batches what patched_logits runs: three families are enough")
    clean, corrupted = equal_length_prompts(imported)
    logits = imported.head_outputs(imported.encode(clean))[0]
    answer, wrong = (int(i) for i in logits.topk(2).indices)
    found = restored_by_head(imported, clean, corrupted, answer, wrong)
    layers, heads = imported.config.decoder_layers, imported.num_heads
    assert found.restored.shape == (layers, heads)
    span = found.clean_difference - found.corrupted_difference
    for layer in range(layers):
        for head in range(heads):
            one = imported.patched_logits(corrupted, clean, [(layer, head)]).double()
            batched = found.corrupted_difference + found.restored[layer, head] * span  # its logit difference
            assert abs(batched - float(one[answer] - one[wrong])) <= 1e-5, (layer, head)
    assert np.ptp(found.restored) > 1e-3  # heads differ: the comparison can fail


def test_patching_refuses_bad_input_in_one_line(family, imported):
    if family != "gpt2":
        pytest.skip("one family is enough")
    prompt, source = equal_length_prompts(imported)
    cases = [(lambda: imported.patched_logits(prompt, source + " and the dog", [(0, 0)]), "the same token count"),
             (lambda: imported.patched_logits(prompt, source, [(2, 0)]), r"head \(2, 0\) is outside the model"),
             (lambda: imported.patched_logits(prompt, source, [(0, 4)]), "heads 0 to 3"),
             (lambda: restored_by_head(imported, prompt, source, " reads quickly", 5), "a logit difference compares "
              "single tokens"),
             (lambda: restored_by_head(imported, prompt, prompt, 5, 6), "nothing for a head to restore")]
    for call, said in cases:
        with pytest.raises(ValueError, match=said) as err:
            call()
        assert "\n" not in str(err.value)
