"""Head roles of language models (`viz_model.analysis.lm_head_roles`): the scores of hand-built maps (an induction
head scores about 1 on induction and a previous-token head about 0, and the other way round on previous-token), the
repeated random sequences, the scores of a small random GPT-2 and Llama 3 (grouped-query) built by transformers and
imported, and the logit change of an ablation against a forward pass with the head zeroed by hand; head detectors
(`viz_model.analysis.head_detectors`): TransformerLens's patterns and scores of hand-built maps and of the models'
maps, and a pattern of the wrong size refused in one line; fp32 on the CPU."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch

from viz_model.analysis import lm_head_roles
from viz_model.analysis.head_detectors import (
    detect_heads,
    detection_scores,
    duplicate_token_pattern,
    induction_pattern,
    named_pattern,
    previous_token_pattern,
)
from viz_model.analysis.lm_head_roles import (
    ROLE_COLUMNS,
    corpus_roles,
    duplicate_token_score,
    english_corpus,
    entropy,
    first_token_share,
    induction_score,
    logit_change,
    map_scores,
    previous_token_score,
    prompt_roles,
    repeated_roles,
    repeated_tokens,
    start_ids,
)

L = 10  # random tokens in one copy
IDS = repeated_tokens(1000, L, 2, seed=3, start=[999], exclude=[999])  # BOS, r_1..r_L, r_1..r_L
N = len(IDS)


def one_hot_map(targets: dict[int, int]) -> np.ndarray:
    """A one-head causal map where query i puts all its weight on key targets[i] (key 0 for the others)."""
    w = np.zeros((1, N, N))
    for i in range(N):
        w[0, i, targets.get(i, 0)] = 1.0
    return w


INDUCTION = one_hot_map({L + i: i + 1 for i in range(1, L + 1)})  # query L+i (token r_i) -> key i+1 (r_{i+1})
PREVIOUS = one_hot_map({i: i - 1 for i in range(1, N)})
DUPLICATE = one_hot_map({L + i: i for i in range(1, L + 1)})  # query L+i -> key i, the earlier copy of r_i


def test_repeated_tokens_are_seeded_distinct_copies_after_the_start():
    assert IDS[0] == 999 and IDS[1:L + 1] == IDS[L + 1:] and len(set(IDS[1:L + 1])) == L and 999 not in IDS[1:]
    assert repeated_tokens(1000, L, 2, seed=3, start=[999], exclude=[999]) == IDS
    assert repeated_tokens(1000, L, 2, seed=4, start=[999], exclude=[999]) != IDS
    assert len(repeated_tokens(50, 5, 4)) == 20
    with pytest.raises(ValueError, match="vocabulary offers 3"):
        repeated_tokens(5, 4, 2, exclude=[0, 1])


def test_a_hand_built_induction_head_scores_one_on_induction_and_a_previous_token_head_zero():
    assert induction_score(INDUCTION, IDS)[0] == pytest.approx(1.0)
    assert induction_score(PREVIOUS, IDS)[0] == pytest.approx(0.0)
    assert induction_score(DUPLICATE, IDS)[0] == pytest.approx(0.0)
    assert previous_token_score(PREVIOUS)[0] == pytest.approx(1.0)
    assert previous_token_score(INDUCTION)[0] == pytest.approx(1 / (N - 1))  # query 1 puts its weight on key 0
    assert duplicate_token_score(DUPLICATE, IDS)[0] == pytest.approx(1.0)
    assert duplicate_token_score(INDUCTION, IDS)[0] == pytest.approx(0.0)
    assert duplicate_token_score(PREVIOUS, IDS)[0] == pytest.approx(0.0)


def test_scores_are_means_over_the_rows_they_are_defined_for():
    mixed = 0.75 * INDUCTION + 0.25 * PREVIOUS  # rows still sum to one
    both = np.concatenate([INDUCTION, mixed, PREVIOUS])
    np.testing.assert_allclose(induction_score(both, IDS), [1.0, 0.75, 0.0])
    np.testing.assert_allclose(first_token_share(INDUCTION), [L / (N - 1)])  # the first copy's queries: key 0
    uniform = np.tril(np.ones((N, N)))[None] / np.arange(1, N + 1)[None, :, None]
    np.testing.assert_allclose(first_token_share(uniform), [np.mean(1 / np.arange(2, N + 1))])
    np.testing.assert_allclose(entropy(uniform), [np.mean(np.log(np.arange(2, N + 1)))])
    np.testing.assert_allclose(entropy(INDUCTION), [0.0])
    plain = [1, 2, 3, 4]  # no token repeats: no row to score induction or duplicates on
    assert np.isnan(induction_score(PREVIOUS[:, :4, :4], plain)).all()
    assert np.isnan(duplicate_token_score(PREVIOUS[:, :4, :4], plain)).all()
    assert set(map_scores(uniform, IDS)) == set(ROLE_COLUMNS[2:])


def test_a_map_that_is_not_causal_square_or_finite_is_one_line():
    with pytest.raises(ValueError, match=r"\(heads, n, n\)"):
        induction_score(np.ones((1, 3, 4)), [1, 2, 3])
    with pytest.raises(ValueError, match="3 token ids for a map over 4"):
        induction_score(np.ones((1, 4, 4)), [1, 2, 3])
    with pytest.raises(ValueError, match="finite"):
        entropy(np.full((1, 2, 2), np.nan))


def test_the_corpus_is_the_data_roots_multi30k_else_the_shipped_sentences_else_one_line(tmp_path, monkeypatch):
    (tmp_path / "data" / "multi30k").mkdir(parents=True)
    with gzip.open(tmp_path / "data" / "multi30k" / "val.en.gz", "wt", encoding="utf-8") as f:
        f.write("A dog runs.\n\nTwo men sit.\nA girl reads.\n")
    monkeypatch.setenv("VIZ_MODEL_DATA", str(tmp_path / "data"))
    assert english_corpus(2) == (["A dog runs.", "Two men sit."], "Multi30k (val.en.gz) from the data root")
    monkeypatch.setenv("VIZ_MODEL_DATA", str(tmp_path / "empty"))
    monkeypatch.setattr(lm_head_roles, "ASSETS_DIR", tmp_path / "assets")
    with pytest.raises(ValueError, match="no English corpus found"):
        english_corpus()
    shipped = tmp_path / "assets" / lm_head_roles.DEFAULT_MODEL / "analysis"
    shipped.mkdir(parents=True)
    (shipped / "head_stats_sentences.txt").write_text("\nA cat sleeps.\n", encoding="utf-8")
    sentences, where = english_corpus()
    assert sentences == ["A cat sleeps."] and "shipped" in where


# --- a language model ---------------------------------------------------------------------------------------------
transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from support.hf_lm import build_lm_folder, import_lm  # noqa: E402

PROMPT = "The red dog reads a book in the park and the red dog reads"


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def model(request, tmp_path_factory):
    folder = build_lm_folder(tmp_path_factory.mktemp("hf"), request.param)
    lm = import_lm(folder, tmp_path_factory.mktemp("ours"))
    with torch.no_grad():  # random weights of std 0.02 leave the heads' outputs a trace of the residual stream:
        lm.network.embedding.weight.mul_(20.0)  # scaled to a trained model's sizes, where heads move the logits
        for layer in lm.network.layers:
            layer.self_attn.w_o.weight.mul_(30.0)
    return lm


def test_prompt_roles_score_the_maps_the_trace_shows(model):
    table = prompt_roles(model, PROMPT)
    config = model.config
    assert len(table) == config.decoder_layers * config.heads and list(table.columns) == [*ROLE_COLUMNS, "sequences"]
    trace = model.trace(PROMPT, 0)
    for row in table.itertuples():
        scores = map_scores(trace.decoder_attentions[row.layer], trace.target_ids)
        for name in ("previous_token", "induction", "duplicate_token", "first_token", "entropy"):
            assert getattr(row, name) == pytest.approx(float(scores[name][row.head]), abs=1e-5), name
    assert table["induction"].notna().all()  # the prompt repeats "the red dog reads"
    two = corpus_roles(model, [PROMPT, "A small girl sees the dog"])
    assert (two["sequences"] == 2).all()


def test_repeated_roles_average_seeded_repeated_sequences(model):
    start = start_ids(model)
    assert start == ([0] if model.tokenizer.encode("a")[0] == 0 else model.tokenizer.eos_ids[:1])
    first = repeated_roles(model, length=8, copies=2, samples=2, seed=5)
    assert first.equals(repeated_roles(model, length=8, copies=2, samples=2, seed=5))
    assert (first["sequences"] == 2).all() and first["induction"].between(0, 1).all()
    assert not first.equals(repeated_roles(model, length=8, copies=2, samples=2, seed=6))
    with pytest.raises(ValueError, match="positions; this model has"):
        repeated_roles(model, length=100, copies=4)


def manual_log_probs(model, ids, layer: int, head: int) -> torch.Tensor:
    """Next-token log-probabilities with one head's slice of the output projection's input zeroed by a hook."""
    attn = model.network.layers[layer].self_attn
    width = attn.d_head

    def zero(_module, args):
        x = args[0].clone()
        x[..., head * width:(head + 1) * width] = 0
        return (x,)

    handle = attn.w_o.register_forward_pre_hook(zero)
    try:
        with torch.no_grad():
            logits = model.network(torch.tensor([ids])).logits[0]
    finally:
        handle.remove()
    return torch.log_softmax(logits.double(), dim=-1)


def test_logit_change_equals_a_forward_pass_with_the_head_zeroed_by_hand(model):
    ids = model.encode(PROMPT)
    layer, head = model.config.decoder_layers - 1, 1
    table = logit_change(model, ids, [("decoder", layer, head)])
    with torch.no_grad():
        intact = torch.log_softmax(model.network(torch.tensor([ids])).logits[0].double(), dim=-1)
    ablated = manual_log_probs(model, ids, layer, head)
    following = torch.tensor(ids[1:])
    steps = torch.arange(len(ids) - 1)
    np.testing.assert_allclose(table["log_prob_intact"][:-1], intact[steps, following].numpy(), atol=1e-5)
    np.testing.assert_allclose(table["log_prob_ablated"][:-1], ablated[steps, following].numpy(), atol=1e-5)
    kl = (intact.exp() * (intact - ablated)).sum(-1).numpy()
    np.testing.assert_allclose(table["kl"], kl, atol=1e-6)
    assert table["kl"].max() > 1e-4 and np.isnan(table["log_prob_intact"].iloc[-1])  # the head matters here
    assert list(table["next_token"][:-1]) == model.tokenizer.pieces(ids[1:])
    several = logit_change(model, ids, [("decoder", 0, 0), ("decoder", layer, head)])
    assert not np.allclose(several["kl"], table["kl"])


def test_a_head_or_layer_outside_the_model_is_one_line(model):
    ids = model.encode(PROMPT)
    with pytest.raises(ValueError, match="head must be an integer from 0 to 3, got 4"):
        logit_change(model, ids, [("decoder", 0, 4)])
    with pytest.raises(ValueError, match="decoder layer must be an integer from 0 to 1, got 2"):
        logit_change(model, ids, [("decoder", 2, 0)])
    with pytest.raises(ValueError, match="decoder self-attention heads only"):
        logit_change(model, ids, [("cross", 0, 0)])
    with pytest.raises(ValueError, match="at least one head"):
        logit_change(model, ids, [])


# --- head detectors (issue 61): TransformerLens's head_detector ------------------------------------------------------
def transformer_lens_patterns(ids: list[int]) -> dict[str, torch.Tensor]:
    """The detection patterns as TransformerLens's head_detector builds them (its code, in torch)."""
    n = len(ids)
    previous = torch.zeros(n, n)
    previous[1:, :-1] = torch.eye(n - 1)
    tokens = torch.tensor(ids).repeat(n, 1)
    equal = (tokens == tokens.T).int()
    equal.fill_diagonal_(0)
    duplicate = torch.tril(equal.float())
    shifted = torch.roll(duplicate, shifts=1, dims=1)
    induction = torch.tril(torch.cat((torch.zeros(n, 1), shifted[:, 1:]), dim=1))
    return {"previous_token": torch.tril(previous), "duplicate_token": duplicate, "induction": induction}


def test_the_detection_patterns_are_transformer_lens_s():
    theirs = transformer_lens_patterns(IDS)
    np.testing.assert_array_equal(previous_token_pattern(N), theirs["previous_token"].numpy())
    np.testing.assert_array_equal(duplicate_token_pattern(IDS), theirs["duplicate_token"].numpy())
    np.testing.assert_array_equal(induction_pattern(IDS), theirs["induction"].numpy())
    for name, pattern in theirs.items():
        np.testing.assert_array_equal(named_pattern(name, IDS), pattern.numpy())
    assert duplicate_token_pattern(IDS).sum() == L and induction_pattern(IDS).sum() == L


def test_hand_built_heads_score_one_on_their_own_pattern():
    heads = np.concatenate([PREVIOUS, DUPLICATE, INDUCTION])  # (3, N, N): a previous-token, duplicate, induction head
    previous = detection_scores(heads, previous_token_pattern(N))
    assert previous[0] == pytest.approx((N - 1) / N) and previous[1:].max() < 0.2  # query 0 sees key 0 alone
    assert detection_scores(heads, previous_token_pattern(N), exclude_bos=True)[0] == pytest.approx(1.0)
    duplicate = detection_scores(heads, duplicate_token_pattern(IDS))
    assert duplicate[1] == pytest.approx(L / N) and duplicate[0] == 0 and duplicate[2] == 0  # the rest on key 0
    assert detection_scores(heads, duplicate_token_pattern(IDS), exclude_bos=True)[1] == pytest.approx(1.0)
    induction = detection_scores(heads, induction_pattern(IDS), exclude_bos=True)
    np.testing.assert_allclose(induction, [0.0, 0.0, 1.0])
    uniform = np.tril(np.ones((1, N, N))) / np.arange(1, N + 1)[None, :, None]
    own = detection_scores(uniform, np.eye(N), exclude_current_token=True)  # its own weight left out: none inside
    assert own[0] == 0 and detection_scores(uniform, np.eye(N))[0] == pytest.approx(np.mean(1 / np.arange(1, N + 1)))
    # "abs": 1 - n x the mean absolute difference (the previous-token head differs from its pattern in row 0 alone)
    assert detection_scores(PREVIOUS, previous_token_pattern(N), measure="abs")[0] == pytest.approx(1 - round(1 / N, 3))


@pytest.mark.parametrize("pattern, said", [
    (np.eye(N - 1), rf"is {N - 1}x{N - 1}; this sequence of {N} tokens needs {N}x{N}"),
    (np.ones(3), rf"is 3; this sequence of {N} tokens needs {N}x{N}"),
    (np.triu(np.ones((N, N))), "above the diagonal"), (np.full((N, N), np.nan), "not a finite number"),
    ([["a"] * N] * N, "a matrix of numbers")])
def test_a_pattern_of_the_wrong_size_or_shape_is_refused_in_one_line(pattern, said):
    with pytest.raises(ValueError, match=said) as err:
        detection_scores(PREVIOUS, pattern)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="measure must be one of mul, abs"):
        detection_scores(PREVIOUS, previous_token_pattern(N), measure="max")


def test_detect_heads_scores_every_head_of_the_model_s_maps(model):
    ids = model.encode("the dog sees the dog and the cat sees the cat")
    with torch.no_grad():
        maps = model.network(torch.tensor([ids]), need_weights=True).attentions
    drawn = np.tril(np.ones((len(ids), len(ids))), k=-2) * 0.5  # a pattern the user draws: two or more keys back
    for pattern, matrix in (("duplicate_token", duplicate_token_pattern(ids)), (drawn, drawn)):
        table = detect_heads(model, ids, pattern, exclude_bos=True)
        assert len(table) == model.config.decoder_layers * model.num_heads and table["score"].nunique() > 1
        for row in table.itertuples():
            weights = maps[row.layer][0, row.head].double().numpy().copy()
            weights[:, 0] = 0
            assert row.score == pytest.approx((weights * matrix).sum() / weights.sum(), abs=1e-6)
    with pytest.raises(ValueError, match=f"needs {len(ids)}x{len(ids)}"):
        detect_heads(model, ids, np.eye(3))
