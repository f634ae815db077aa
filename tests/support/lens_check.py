"""The logit lens checked against transformers: each row equals the model's ``output_hidden_states`` read through its
own final norm and lm_head (used on random weights by test_hf_import_lm and on fitted ones by test_hf_generate_lm)."""

from __future__ import annotations

import numpy as np
import torch

PROBABILITY_TOLERANCE = 1e-4
# where each family's final norm is in transformers' model: the logit lens reads its hidden states through it
FINAL_NORMS = {"gpt2": "transformer.ln_f", "llama": "model.norm", "llama2": "model.norm", "smollm2": "model.norm",
               "mistral": "model.norm", "qwen2": "model.norm", "qwen3": "model.norm", "gemma": "model.norm",
               "gemma2": "model.norm", "gemma3": "model.norm", "bloom": "transformer.ln_f",
               "gpt_neox": "gpt_neox.final_layer_norm", "gpt_neo": "transformer.ln_f",
               "opt": "model.decoder.final_layer_norm", "phi": "model.final_layernorm", "olmo2": "model.norm",
               "mixtral": "model.norm", "phi3": "model.norm", "gpt_oss": "model.norm"}


def assert_lens_equals_hidden_states(family: str, model, tokenizer, imported, prompts: list[str]) -> None:
    """Each row's top-5 ids equal transformers' hidden states through its final norm and lm_head (soft-capped where
    the model caps its logits; the last hidden state is normed already: its logits), the probabilities within 1e-4;
    a tracked token's probability and rank too."""
    norm, head = model.get_submodule(FINAL_NORMS[family]), model.get_output_embeddings()
    cap = getattr(model.config, "final_logit_softcapping", None)
    for prompt in prompts:
        ids = tokenizer(prompt).input_ids
        lens = imported.logit_lens(prompt, top_k=5, track=[ids[-1]])
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_hidden_states=True)
            rows = [head(norm(h)) for h in out.hidden_states[:-1]]
            rows = [row if cap is None else torch.tanh(row / cap) * cap for row in rows] + [out.logits]
        assert lens.top_ids.shape == lens.top_probs.shape == (model.config.num_hidden_layers + 1, len(ids), 5)
        for r, logits in enumerate(rows):
            probabilities = torch.softmax(logits[0].float(), dim=-1)
            top = probabilities.topk(5)
            assert np.array_equal(lens.top_ids[r], top.indices.numpy()), (prompt, r)
            assert np.abs(lens.top_probs[r] - top.values.numpy()).max() <= PROBABILITY_TOLERANCE
            chosen = probabilities[:, ids[-1]]
            assert np.abs(lens.tracked_probs[r, :, 0] - chosen.numpy()).max() <= PROBABILITY_TOLERANCE
            ranks = (probabilities > chosen[:, None]).sum(-1) + 1
            assert np.abs(lens.tracked_ranks[r, :, 0] - ranks.numpy()).max() <= 1  # a near tie may swap two
