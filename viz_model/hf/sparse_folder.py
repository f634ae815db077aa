"""A Hugging Face Llama folder of a published config (Llama-3.1-8B, Llama-3.2-1B) with no hub: config.json written
by transformers' `LlamaConfig`, a small byte-level BPE tokenizer trained here, and the weights as sparse safetensors
shards (`viz_model.modeldir.sparse_weights`: holes that read as zeros, the norms ones), so an 8B model costs no disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..modeldir.sparse_weights import write_sparse_shards

LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
# the published config.json values (meta-llama/Llama-3.1-8B, meta-llama/Llama-3.2-1B); the token ids are the
# tokenizer's made here (its vocabulary is smaller than the embeddings', as an import allows)
LLAMA_3_1_8B: dict[str, Any] = {
    "vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5, "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
    "tie_word_embeddings": False, "rope_parameters": {**LLAMA3_ROPE, "factor": 8.0}}
LLAMA_3_2_1B: dict[str, Any] = {
    "vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5, "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
    "tie_word_embeddings": True, "rope_parameters": {**LLAMA3_ROPE, "factor": 32.0}}
PUBLISHED = {"llama-3.1-8b": LLAMA_3_1_8B, "llama-3.2-1b": LLAMA_3_2_1B}
WORDS = "the a of and to in is was it for on with as by at from that this an be are or old new long short"
SHARD_BYTES = 5 * 1024**3  # transformers' default shard size


def small_tokenizer() -> Any:
    """A byte-level BPE tokenizer of about 300 ids trained on a fixed word list (the same one every time)."""
    import transformers
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    words = WORDS.split()
    text = [" ".join(words[i:] + words[:i]) for i in range(len(words))]
    bpe.train_from_iterator(text, vocab_size=300, min_frequency=1, special_tokens=["<s>", "</s>"])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<s>", eos_token="</s>")


def sparse_llama_folder(folder: Path, values: dict[str, Any], dtype: torch.dtype = torch.bfloat16,
                        shard_bytes: int = SHARD_BYTES) -> Path:
    """Write `folder`: a Llama of config `values` (such as `LLAMA_3_1_8B`) stored in `dtype` as sparse shards; every
    weight zero but the norms' (one). Returns `folder`."""
    import transformers

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = small_tokenizer()
    config = transformers.LlamaConfig(**values, bos_token_id=tokenizer.bos_token_id,
                                      eos_token_id=tokenizer.eos_token_id, dtype=dtype)
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    shapes = {name: tuple(t.shape) for name, t in model.state_dict().items()
              if not (config.tie_word_embeddings and name == "lm_head.weight")}
    ones = {name: torch.ones(shape) for name, shape in shapes.items() if name.endswith("norm.weight")}
    write_sparse_shards(folder, shapes, dtype, shard_bytes, ones)
    config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
