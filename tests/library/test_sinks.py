"""Attention sinks (CPU, fp32): the share on the first token and on other heavy tokens of hand-built maps, and the
switch that hides the first token, checked against transformers' eager attention given the same 4D mask and against
a greedy search written out here; one-line refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from support.hf_lm import CONFIGS, build_lm_folder, import_lm  # noqa: E402

from viz_model.analysis.sinks import key_shares, remove_sink, sink_mask, sink_shares  # noqa: E402

PROMPT = "a man plays in the snow and the dog runs"
LOGIT_TOLERANCE = 1e-4


def causal_rows(rows: list[list[float]]) -> np.ndarray:
    """A ``(n, n)`` map from its rows' visible weights (row i: i + 1 weights summing to 1)."""
    n = len(rows)
    out = np.zeros((n, n))
    for i, row in enumerate(rows):
        assert len(row) == i + 1 and abs(sum(row) - 1) < 1e-12
        out[i, :i + 1] = row
    return out


SINK = causal_rows([[1.0], [0.8, 0.2], [0.6, 0.2, 0.2], [0.7, 0.1, 0.1, 0.1], [0.5, 0.1, 0.3, 0.05, 0.05]])
DIAGONAL = np.eye(5)  # every query on itself: no key is ever read by a later query
HEAVY = causal_rows([[1.0], [0.5, 0.5], [0.1, 0.8, 0.1], [0.1, 0.6, 0.1, 0.2], [0.2, 0.2, 0.2, 0.2, 0.2]])


def test_the_first_tokens_share_is_the_mean_over_the_later_queries():
    shares = sink_shares([np.stack([SINK, DIAGONAL]), np.stack([HEAVY, SINK])], list("abcde"))
    expected = np.array([[(0.8 + 0.6 + 0.7 + 0.5) / 4, 0.0], [(0.5 + 0.1 + 0.1 + 0.2) / 4, 0.65]])
    assert np.allclose(shares.first_token, expected, atol=1e-12)
    assert shares.sink_rate == 0.5  # two of the four heads above 0.3
    assert np.allclose(shares.head(1, 0), [0.225, (0.8 + 0.6 + 0.2) / 3, (0.1 + 0.2) / 2, 0.2, np.nan], equal_nan=True)


def test_another_token_drawing_a_large_share_is_listed_with_its_heads():
    shares = sink_shares([np.stack([SINK, DIAGONAL]), np.stack([HEAVY, SINK])], list("abcde"))
    assert [(t.position, t.token, t.heads) for t in shares.heavy] == [(1, "b", 1)]  # HEAVY's key 1: 1.6 / 3
    heavy = shares.heavy[0]
    assert (heavy.top_layer, heavy.top_head) == (1, 0) and heavy.top_share == pytest.approx(1.6 / 3)
    assert heavy.head_share == 0.25
    assert [t.position for t in sink_shares([HEAVY[None]], list("abcde"), threshold=0.12).heavy] == [1, 3, 2]


def test_a_sliding_window_counts_only_the_queries_that_see_the_key():
    shares = key_shares([SINK[None]], [2])  # query i sees keys i - 1 and i: key 0 is seen by query 1 alone
    assert shares[0, 0, 0] == pytest.approx(0.8)
    assert shares[0, 0, 2] == pytest.approx(0.1)  # key 2: query 3 only (query 4 is past its window)
    masked = causal_rows([[1.0], [0.8, 0.2], [0.0, 0.5, 0.5], [0.0, 0.0, 0.5, 0.5], [0.0, 0.0, 0.0, 0.5, 0.5]])
    assert key_shares([masked[None]], [2])[0, 0, 0] == pytest.approx(0.8)
    assert key_shares([masked[None]])[0, 0, 0] == pytest.approx(0.2)  # without the window: 0.8 / 4


def test_the_sink_mask_hides_each_key_from_the_queries_after_it():
    mask = sink_mask(4, (0, 2)).numpy()
    assert mask.tolist() == [[True, True, True, True], [False, True, True, True], [False, True, True, True],
                             [False, True, False, True]]


@pytest.mark.parametrize("call, said", [
    (lambda: sink_shares([SINK[None]], ["a"] * 5, threshold=1.5), "threshold must be a share between 0 and 1"),
    (lambda: sink_shares([SINK[None, :1, :1]], ["a"]), "at least two tokens: query 0 can only see itself"),
    (lambda: sink_shares([SINK[None]], ["a"] * 4), "4 tokens for maps over 5 positions"),
    (lambda: sink_shares([SINK[None]], ["a"] * 5).head(1, 0), "layer must be an integer from 0 to 0, got 1"),
    (lambda: sink_shares([SINK[None]], ["a"] * 5).head(0, -1), "head must be an integer from 0 to 0, got -1"),
    (lambda: key_shares([SINK[None]], [None, 4]), "2 windows for 1 layers"),
    (lambda: sink_mask(3, (3,)), "a hidden key must be a position from 0 to 2, got 3"),
])
def test_bad_inputs_get_one_line(call, said):
    with pytest.raises(ValueError, match=said):
        call()


# --- the switch on tiny imported models ---------------------------------------------------------------------------
@pytest.fixture(scope="module", params=["llama", "gpt2", "mistral"])
def models(request, tmp_path_factory):
    """A tiny model of each family (Llama: grouped-query heads and a start token; GPT-2: learned positions, no start
    token; Mistral: a sliding window): transformers' eager model and ours, imported with ``viz-model import``, on the
    CPU in fp32."""
    family = request.param
    folder = build_lm_folder(tmp_path_factory.mktemp("hf"), family)
    hf = getattr(transformers, CONFIGS[family][1]).from_pretrained(folder, attn_implementation="eager").eval()
    return hf, import_lm(folder, tmp_path_factory.mktemp("ours"))


def hf_log_probs(hf, ids: list[int], mask: torch.Tensor) -> torch.Tensor:
    """transformers' next-token log-probabilities at every position, given `mask` ``(n, n)`` (True = may attend)
    with the causal mask as one 4D float mask (transformers uses a 4D mask as it is)."""
    n = len(ids)
    allowed = mask & torch.ones(n, n, dtype=torch.bool).tril()
    if getattr(hf.config, "sliding_window", None):
        allowed &= ~torch.ones(n, n, dtype=torch.bool).tril(-hf.config.sliding_window)
    bias = torch.zeros(n, n).masked_fill(~allowed, torch.finfo(torch.float32).min)[None, None]
    with torch.no_grad():
        return torch.log_softmax(hf(torch.tensor([ids]), attention_mask=bias).logits[0].float(), dim=-1)


def test_hiding_the_first_token_equals_transformers_with_the_same_mask(models):
    hf, ours = models
    ids = ours.encode(PROMPT)
    mask = sink_mask(len(ids))
    theirs = hf_log_probs(hf, ids, mask)
    with torch.no_grad():
        mine = torch.log_softmax(ours.forced_pass(ids, key_mask=mask).logits[0].float(), dim=-1)
        intact = torch.log_softmax(ours.forced_pass(ids).logits[0].float(), dim=-1)
    assert (mine - theirs).abs().max() <= LOGIT_TOLERANCE
    assert (intact - hf_log_probs(hf, ids, torch.ones_like(mask))).abs().max() <= LOGIT_TOLERANCE
    assert (mine[1:] - intact[1:]).abs().max() > 1e-3  # the switch changes every position that sees another token
    assert (mine[0] - intact[0]).abs().max() <= 1e-6  # query 0 keeps itself


def test_the_switch_reports_the_change_in_the_next_token_distribution(models):
    hf, ours = models
    ids = ours.encode(PROMPT)
    result = remove_sink(ours, PROMPT, max_new_tokens=6)
    before = hf_log_probs(hf, ids, torch.ones(len(ids), len(ids), dtype=torch.bool))[-1].double()
    after = hf_log_probs(hf, ids, sink_mask(len(ids)))[-1].double()
    assert result.kl == pytest.approx(float((before.exp() * (before - after)).sum()), abs=1e-5)
    assert result.total_variation == pytest.approx(float((before.exp() - after.exp()).abs().sum() / 2), abs=1e-5)
    first = result.top_intact[0]
    assert first.id == int(before.argmax()) and first.first == pytest.approx(float(before.exp().max()), abs=1e-5)
    assert first.second == pytest.approx(float(after[first.id].exp()), abs=1e-5)
    assert result.top_switched[0].id == int(after.argmax())
    assert result.tokens == ours.trace(PROMPT, 0).target_tokens and result.hidden == [0]
    window, layers = ours.network.window(0), ours.config.decoder_layers
    if window is not None and len(ids) - 1 > layers * (window - 1):  # Mistral: the last token cannot reach the first
        assert result.kl == 0.0 and result.ids_switched == result.ids
    else:
        assert result.kl > 0.0
    assert first.token == ours.tokenizer.piece(first.id)


def test_the_switched_continuation_is_the_greedy_search_over_masked_passes(models):
    _, ours = models
    ids = ours.encode(PROMPT)
    result = remove_sink(ours, PROMPT, max_new_tokens=6)
    assert result.ids == ours.continue_ids(ids, 6)
    new: list[int] = []  # by hand: the whole sequence again each step, the first key hidden, the best token
    while len(new) < 6 and not (new and new[-1] in ours.tokenizer.eos_ids):
        seq = ids + new
        with torch.no_grad():
            logits = ours.forced_pass(seq, key_mask=sink_mask(len(seq))).logits[0, -1]
        new.append(int(logits.argmax()))
    assert result.ids_switched == new
    assert result.continuation_switched == ours.tokenizer.decode(new)
    every = torch.ones(len(ids) + 6, len(ids) + 6, dtype=torch.bool)
    assert ours.continue_with_key_mask(ids, 6, every) == result.ids  # nothing hidden: the cached search's own


def test_a_mask_that_leaves_a_query_nothing_is_one_line_naming_it(models):
    _, ours = models
    ids = ours.encode(PROMPT)
    mask = sink_mask(len(ids))
    mask[3, :4] = False  # query 3 sees keys 0..3 only
    with pytest.raises(ValueError, match=r"key_mask leaves query 3 \(0-based position\) with no key to attend to"):
        ours.forced_pass(ids, key_mask=mask)
    with pytest.raises(ValueError, match="key_mask must be a bool tensor of shape"):
        ours.forced_pass(ids, key_mask=mask.float())
    if len(ours.encode("a")) == 1:  # no start token put first (GPT-2)
        with pytest.raises(ValueError, match="one token: it has nothing to attend to but itself"):
            remove_sink(ours, "a")
    with pytest.raises(ValueError, match=r"a hidden key must be a prompt position from 0 to \d+, got 99"):
        remove_sink(ours, PROMPT, keys=(0, 99))
