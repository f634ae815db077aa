"""Analysis and attribution of decoder-only language models (issue 51): head importance, ablation, gradients and
integrated gradients over the prompt, value-weighted attention and ALTI on self-attention, each on a small random
GPT-2, Llama 3 (grouped-query, RoPE) and BLOOM (ALiBi) built here by transformers and imported; fp32 on the CPU.
What reads cross-attention (word alignment, the attention and rollout attributions) refuses in one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from support.hf_lm import CONFIGS, build_lm_folder, import_lm  # noqa: E402

from viz_model.analysis import (  # noqa: E402
    ablate,
    analyze_corpus,
    attention_aer,
    corpus_aer,
    head_importance,
    head_mask_for,
)
from viz_model.analysis.word_alignment import Alignment  # noqa: E402
from viz_model.attribution import attribute  # noqa: E402
from viz_model.attribution.corpus_scores import corpus_faithfulness  # noqa: E402
from viz_model.attribution.method_aer import attribution_aer  # noqa: E402

PROMPT = "The red dog reads a book in the park"
PROMPTS = ["The old man runs in the snow", "A small girl sees the dog", "The dog reads a red book"]
CONTINUATIONS = [" and the dog plays", " in the park", " to the old man"]


@pytest.fixture(scope="module", params=["gpt2", "llama", "bloom"])
def family(request):
    return request.param


EMBEDDING_SCALE = 20.0  # random GPT-2 embeddings (std 0.02) beside biases of std 0.2 leave an attention output all
# bias, where no token contributes positively and ALTI has no distribution to give: scaled to a trained model's size


@pytest.fixture(scope="module")
def folder(family, tmp_path_factory):
    built = build_lm_folder(tmp_path_factory.mktemp("hf"), family)
    hf = getattr(transformers, CONFIGS[family][1]).from_pretrained(built)
    with torch.no_grad():
        hf.get_input_embeddings().weight.mul_(EMBEDDING_SCALE)
    hf.save_pretrained(built)
    return built


@pytest.fixture(scope="module")
def model(folder, tmp_path_factory):
    return import_lm(folder, tmp_path_factory.mktemp("ours"))


def test_continuation_log_probs_equal_transformers(family, folder, model):
    hf = getattr(transformers, CONFIGS[family][1]).from_pretrained(folder, attn_implementation="eager").eval()
    prompts = [model.encode(p) for p in PROMPTS]
    continuations = [model.continuation_ids(c) for c in CONTINUATIONS]
    ours = model.sequence_log_probs(prompts, continuations)
    for prompt, continuation, value in zip(prompts, continuations, ours):
        with torch.no_grad():
            logits = hf(torch.tensor([prompt + continuation])).logits[0, len(prompt) - 1:-1]
        expected = torch.log_softmax(logits.double(), -1)[torch.arange(len(continuation)), continuation].sum()
        assert value == pytest.approx(float(expected), abs=1e-4)


def test_head_importance_switches_every_head_off_in_turn(model):
    table = head_importance(model, PROMPTS, CONTINUATIONS)
    cfg = model.config
    assert list(table["kind"].unique()) == ["decoder"] and len(table) == cfg.decoder_layers * cfg.heads
    assert (table["nll_rise"].abs() > 1e-6).all()  # every head changes the loss
    row = table.iloc[1]
    mask_heads = {(row["kind"], int(row["layer"]), int(row["head"]))}
    prompts = [model.encode(p) for p in PROMPTS]
    continuations = [model.continuation_ids(c) for c in CONTINUATIONS]
    mask = head_mask_for(cfg, mask_heads)
    tokens = sum(len(c) for c in continuations)
    assert row["nll"] == pytest.approx(-model.sequence_log_probs(prompts, continuations, mask).sum() / tokens)


def test_ablate_a_head_of_a_language_model(model):
    result = ablate(model, PROMPT, {("decoder", 0, 1)}, max_new_tokens=6)
    prompt_length = result.intact.settings["prompt_length"]
    new = result.intact.target_ids[prompt_length:]
    assert result.ablated.target_ids == result.intact.target_ids and result.ablated.settings["search"] == "forced"
    assert result.log_prob_intact == pytest.approx(result.intact.log_probability, abs=1e-4)
    assert result.log_prob_change != 0.0
    assert not all(np.allclose(a, b) for a, b in zip(result.intact.decoder_attentions,
                                                     result.ablated.decoder_attentions))
    searched = model.continue_ids(result.intact.target_ids[:prompt_length], 6,
                                  head_mask=head_mask_for(model.config, {("decoder", 0, 1)}))
    assert result.ablated_tokens == model.tokenizer.pieces(searched)
    assert result.ablated_translation == model.tokenizer.decode(searched)
    assert len(new) == 6 or new[-1] in model.tokenizer.eos_ids


@pytest.fixture(scope="module")
def attribution(model):
    return attribute(model, PROMPT, methods=["value_weighted", "alti", "saliency", "input_x_gradient",
                                             "integrated_gradients"])


def test_the_attribution_covers_prompt_and_continuation(model, attribution):
    prompt_ids = model.encode(PROMPT)
    outputs = len(attribution.output_ids)
    assert attribution.source_ids == prompt_ids and outputs > 0
    assert attribution.prefix_tokens == attribution.output_tokens[:-1]
    columns = len(prompt_ids) + outputs - 1
    for method in ("alti", "saliency", "input_x_gradient", "integrated_gradients"):
        scores = attribution.alti if method == "alti" else attribution.gradients[method]
        assert scores.shape == (outputs, columns)
        # causal: output i is read at position len(prompt) - 1 + i and sees nothing after it
        for i in range(outputs):
            assert np.all(scores[i, len(prompt_ids) + i:] == 0.0), method
        assert attribution.source_scores(method).shape == (outputs, len(prompt_ids))
        assert attribution.prefix_scores(method).shape == (outputs, outputs - 1)
    assert attribution.source_scores("value_weighted").shape == (outputs, len(prompt_ids))
    assert attribution.methods == ["value_weighted", "alti", "saliency", "input_x_gradient", "integrated_gradients"]


def test_integrated_gradients_are_complete(attribution):
    assert attribution.relative_gap.max() <= 0.01
    assert np.allclose(attribution.gradients["integrated_gradients"].sum(axis=1), attribution.score_change,
                       atol=0.01 * np.abs(attribution.score_change).max())


def test_alti_rows_are_distributions(attribution):
    assert (attribution.alti >= 0).all() and np.allclose(attribution.alti.sum(axis=1), 1.0, atol=1e-9)
    for block in attribution.alti_layers["decoder"]:
        assert np.allclose(block.sum(axis=1), 1.0, atol=1e-9) and np.allclose(block, np.tril(block))


def test_input_x_gradient_equals_a_finite_difference(model, attribution):
    """Output 0's input x gradient of the last prompt token: d score / d t at t = 1 of the embedding scaled by t."""
    ids = attribution.source_ids + attribution.output_ids[:-1]
    column, first = len(attribution.source_ids) - 1, len(attribution.source_ids) - 1
    embedded = model.embeddings(ids).double()

    def score(t: float) -> float:
        scaled = embedded.clone()
        scaled[0, column] *= t
        with torch.no_grad():
            network = model.network.double()
            try:
                logits = network(torch.tensor([ids]), token_embeddings=scaled).logits[0, first]
            finally:
                model.network.float()
        return float(torch.log_softmax(logits, -1)[attribution.output_ids[0]])

    h = 1e-2  # the norms compute in float32 even in a float64 network: a wide step (central: error of order h^2)
    assert attribution.gradients["input_x_gradient"][0, column] == pytest.approx(
        (score(1 + h) - score(1 - h)) / (2 * h), rel=1e-2, abs=1e-6)


def test_value_weighted_equals_a_hand_computation_on_one_layer(model, attribution):
    ids = attribution.source_ids + attribution.output_ids[:-1]
    network, cfg = model.network, model.config
    attention = network.layers[0].self_attn
    with torch.no_grad():
        record = network(torch.tensor([ids]), need_weights=True).records[0]
        h = network.layers[0].attn_residual.enter(network.embed(torch.tensor([ids])))[0]  # (n, d_model)
        kv = attention.kv_heads
        values = (h @ attention.w_v.weight.T + (0 if attention.w_v.bias is None else attention.w_v.bias))
        values = values.view(len(ids), kv, cfg.d_head).transpose(0, 1).repeat_interleave(cfg.heads // kv, dim=0)
        w_o = attention.w_o.weight  # (d_model, heads * d_head)
        norms = torch.stack([(values[i] @ w_o[:, i * cfg.d_head:(i + 1) * cfg.d_head].T).norm(dim=-1)
                             for i in range(cfg.heads)])  # (heads, n)
        expected = record.weights[0] * norms[:, None, :]
    assert np.allclose(attribution.value_weighted["decoder"][0], expected.double().numpy(), atol=1e-5)


def test_what_reads_cross_attention_refuses_in_one_line(model, attribution):
    for method in ("attention", "rollout"):
        with pytest.raises(ValueError, match=f"'{method}' reads cross-attention.*language model") as err:
            attribute(model, PROMPT, methods=[method, "alti"])
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=r"corpus_aer \(word alignment\) does not apply to a language model"):
        corpus_aer(model, PROMPTS[:1], CONTINUATIONS[:1], [Alignment()])
    with pytest.raises(ValueError, match="attention_aer .* does not apply to a language model"):
        attention_aer([model.trace(PROMPT, 2)], [Alignment()])
    with pytest.raises(ValueError, match=r"attribution_aer \(word alignment\) does not apply to a language model"):
        attribution_aer([attribution], [Alignment()])
    with pytest.raises(ValueError, match="'attention_mean' reads cross-attention; a language model's attribution"):
        attribution.source_scores("attention_mean")
    with pytest.raises(ValueError, match="corpus_faithfulness does not apply to a language model"):
        corpus_faithfulness(model, PROMPTS)
    with pytest.raises(ValueError, match="analyze_corpus does not apply to a language model"):
        analyze_corpus(model, PROMPTS)
    with pytest.raises(ValueError, match="head kind must be one of decoder; got 'cross'.*decoder self-attention"):
        ablate(model, PROMPT, {("cross", 0, 0)})
    with pytest.raises(ValueError, match="bleu, beam, alpha and rule are translation settings"):
        head_importance(model, PROMPTS, CONTINUATIONS, bleu=True)
    with pytest.raises(ValueError, match="foil, beam, alpha and rule do not apply"):
        attribute(model, PROMPT, foil="dog")


def test_a_language_models_attribution_round_trips_through_a_file(attribution, tmp_path):
    loaded = type(attribution).load(attribution.save(tmp_path / "lm.npz"))
    assert loaded.methods == attribution.methods and loaded.attentions == []
    for method in attribution.methods:
        assert np.array_equal(loaded.source_scores(method), attribution.source_scores(method))
