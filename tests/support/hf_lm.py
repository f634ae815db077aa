"""Small decoder-only Hugging Face folders built locally by transformers (random weights, a byte-level BPE tokenizer
trained here): GPT-2, Llama 3 (grouped-query, llama3 RoPE scaling), Llama 2 (linear scaling, biases), SmolLM2,
Mistral (sliding window), Qwen2 (Q/K/V biases, sliding layers), Qwen3 (query/key norms, a head width of its own),
Gemma (its norm, scaled embeddings, legacy ``hidden_act="gelu"``), BLOOM (ALiBi with 6 heads, embedding norm); the
research families: GPT-NeoX (parallel residual, partial rotary), GPT-Neo (unscaled scores, local layers), OPT
(positions offset by 2), Phi (a parallel layer with one norm, partial rotary, head bias), OLMo 2
(norms after the sub-layers, query/key norms over all heads), Mixtral (4 experts, top 2), gpt-oss (learned sinks,
a sliding layer, YaRN, 4 clamped experts with a biased router, top 2), Phi-3 (fused
projections, partial rotary, a sliding window)."""

from __future__ import annotations

import json
import shutil

from support.hf import WORDS_DE, WORDS_EN, imported_model, sentences

TEXTS = sentences(WORDS_EN, 300, 0) + sentences(WORDS_DE, 300, 1)
SMALL = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
CONFIGS = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", {"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 128}),
    "llama": ("LlamaConfig", "LlamaForCausalLM", {
        **SMALL, "num_key_value_heads": 2, "max_position_embeddings": 256, "tie_word_embeddings": False,
        "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": 64}}),
    "llama2": ("LlamaConfig", "LlamaForCausalLM", {**SMALL, "max_position_embeddings": 32, "attention_bias": True,
                                                  "rope_parameters": {"rope_type": "linear", "rope_theta": 10000.0,
                                                                      "factor": 2.0}}),
    "smollm2": ("LlamaConfig", "LlamaForCausalLM", {**SMALL, "num_key_value_heads": 1, "max_position_embeddings": 256,
                                                   "tie_word_embeddings": True}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {**SMALL, "num_key_value_heads": 2, "sliding_window": 5,
                                                        "max_position_embeddings": 256}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {**SMALL, "num_hidden_layers": 3, "num_key_value_heads": 2,
                                                  "use_sliding_window": True, "sliding_window": 4,
                                                  "max_window_layers": 1, "max_position_embeddings": 256}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {**SMALL, "num_key_value_heads": 2, "head_dim": 16,
                                                  "max_position_embeddings": 256, "tie_word_embeddings": True}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {**SMALL, "num_key_value_heads": 1, "head_dim": 16,
                                                  "hidden_act": "gelu", "max_position_embeddings": 256}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {**SMALL, "num_hidden_layers": 3, "num_key_value_heads": 2,
                                                    "head_dim": 16, "query_pre_attn_scalar": 12, "sliding_window": 6,
                                                    "attn_logit_softcapping": 2.0, "final_logit_softcapping": 1.5,
                                                    "max_position_embeddings": 256}),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", {
        **SMALL, "num_hidden_layers": 3, "num_key_value_heads": 2, "head_dim": 16, "query_pre_attn_scalar": 12,
        "sliding_window": 6, "final_logit_softcapping": 3.0, "attn_logit_softcapping": 2.0,  # the latter unused
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention"], "max_position_embeddings": 256,
        "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}),
    "bloom": ("BloomConfig", "BloomForCausalLM", {"hidden_size": 48, "n_layer": 2, "n_head": 6}),
    # the research families (issue 60)
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {**SMALL, "max_position_embeddings": 256,
                                                        "rotary_pct": 0.5, "rotary_emb_base": 5000}),
    "gpt_neo": ("GPTNeoConfig", "GPTNeoForCausalLM", {"hidden_size": 32, "num_layers": 3, "num_heads": 4,
                                                      "attention_types": [[["global", "local"], 1], [["local"], 1]],
                                                      "window_size": 5, "max_position_embeddings": 128}),
    "opt": ("OPTConfig", "OPTForCausalLM", {"hidden_size": 32, "ffn_dim": 64, "num_hidden_layers": 2,
                                            "num_attention_heads": 4, "max_position_embeddings": 128}),
    "phi": ("PhiConfig", "PhiForCausalLM", {**SMALL, "num_key_value_heads": 2, "max_position_embeddings": 256,
                                            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                                                "partial_rotary_factor": 0.5}}),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", {**SMALL, "num_key_value_heads": 2, "max_position_embeddings": 256}),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", {**SMALL, "num_key_value_heads": 2, "num_local_experts": 4,
                                                        "num_experts_per_tok": 2, "max_position_embeddings": 256}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {**SMALL, "num_key_value_heads": 2, "max_position_embeddings": 256,
                                               "sliding_window": 6, "original_max_position_embeddings": 256,
                                               "pad_token_id": None,
                                               "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                                                   "partial_rotary_factor": 0.75}}),
    # last: the families before it keep their index (a test group per index)
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", {
        **SMALL, "num_key_value_heads": 2, "head_dim": 8, "num_local_experts": 4, "num_experts_per_tok": 2,
        "sliding_window": 5, "layer_types": ["sliding_attention", "full_attention"], "max_position_embeddings": 256,
        "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "beta_fast": 32.0,
                            "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 64}}),
}
RESEARCH = ("gpt_neox", "gpt_neo", "opt", "phi", "olmo2", "mixtral", "gpt_oss", "phi3")  # the families of issue 60
CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n"
                 "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
CHAT = {"smollm2"}  # an instruct model: a chat template, a generation config that samples
STRICT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception("
                   "'System role not supported') }}{% endif %}[INST] {{ m['content'] }} [/INST]{% endfor %}")
# families whose one special token is <|endoftext|>
ENDOFTEXT = {"gpt2", "qwen2", "qwen3", "bloom", "gpt_neox", "gpt_neo", "phi", "olmo2"}
# families whose tokenizer puts <s> first
BOS = {"llama", "llama2", "smollm2", "mistral", "gemma", "gemma2", "gemma3", "opt", "mixtral", "gpt_oss", "phi3"}


def build_lm_folder(root, name: str, seed: int = 0, chat_template: str | None = None, folder_name: str | None = None,
                    configs: dict | None = None, **changes):
    """A saved folder of family `name` (one of CONFIGS, or of `configs`): random weights (biases too), its tokenizer
    (`chat_template`: this one, such as `STRICT_TEMPLATE`, Mistral's kind that refuses a system message); `changes`:
    config settings beside or in place of CONFIGS' (saved as `folder_name`); returns it."""
    import torch
    import transformers
    from tokenizers import ByteLevelBPETokenizer, processors

    bpe = ByteLevelBPETokenizer()
    specials = ["<|endoftext|>"] if name in ENDOFTEXT else ["<s>", "</s>"]
    bpe.train_from_iterator(TEXTS, vocab_size=300, min_frequency=2, special_tokens=specials)
    eos = specials[-1]
    if name in BOS:
        bpe.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token=eos,
                                                     bos_token=specials[0])
    config_class, model_class, settings = (CONFIGS if configs is None else configs)[name]
    vocab = bpe.get_vocab_size()
    ids = {"bos_token_id": bpe.token_to_id(specials[0]), "eos_token_id": bpe.token_to_id(eos)}
    config = getattr(transformers, config_class)(vocab_size=vocab + 4, **ids, **{**settings, **changes})
    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(config)
    with torch.no_grad():
        for param_name, p in model.named_parameters():
            if param_name.endswith("bias") or "norm" in param_name or "ln_" in param_name:
                p.normal_(0, 0.2 if param_name.endswith("bias") else 1.0).add_(0.0 if param_name.endswith("bias")
                                                                                 else 0.0)
    folder = root / (folder_name or name)
    if name in CHAT:
        tokenizer.chat_template = CHAT_TEMPLATE
        model.generation_config.update(do_sample=True, temperature=0.6, top_p=0.9)
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def import_lm(folder, root):
    """`folder` imported with ``viz-model import`` into `root`, loaded on the CPU (a `LanguageModel`)."""
    return imported_model(folder, root)


def lm_models_folder(tmp_path_factory, families: tuple[str, ...]):
    """A models folder holding each family of `families` built and imported (``viz-model import``); returns it."""
    root = tmp_path_factory.mktemp("lm-models")
    for family in families:
        import_lm(build_lm_folder(tmp_path_factory.mktemp("hf-lm"), family), root)
    return root


def refused(folder, tmp_path, **changes) -> str:
    """The one-line `HFImportError` importing a copy of `folder` whose config.json has `changes` raises (nothing
    written)."""
    import pytest

    from viz_model.hf.importer import HFImportError, import_model

    config = json.loads((folder / "config.json").read_text())
    copy = tmp_path / f"changed-{len(list(tmp_path.iterdir()))}"
    shutil.copytree(folder, copy)
    (copy / "config.json").write_text(json.dumps({**config, **changes}))
    with pytest.raises(HFImportError) as err:
        import_model(str(copy), tmp_path / "out")
    assert "\n" not in str(err.value) and not (tmp_path / "out").exists()
    return str(err.value)
