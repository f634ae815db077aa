"""A full-precision search drafted by the int8 copy and verified in one pass over the draft's tree of prefixes
(`viz_model.search.next_token.verified_search`, issue 36) decides exactly as the full-precision search step by step."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch

import viz_model
from viz_model.analysis.ablation import head_mask_for
from viz_model.config import ModelConfig
from viz_model.config.data_root import data_root
from viz_model.nn.quantize import int8_search_network
from viz_model.search import next_token as scorers
from viz_model.search.decoding import beam_search, beam_search_tree
from viz_model.search.next_token import PrefixTree, StepScorer, draft_pays, verified_search
from viz_model.search.project_rule import project_search

SHIPPED = viz_model.modeldir.shipped.ASSETS_DIR / viz_model.DEFAULT_MODEL
MULTI30K_VAL = data_root() / "multi30k" / "val.en.gz"  # the local copy (tests/conftest.py), where there is one
FALLBACK = ["Two dogs are playing in the snow.", "A man in a red jacket reads a newspaper on a bench.",
            "The children laugh while their father cooks dinner.", "Where is the station?",
            "Three people walk along a beach at sunset, carrying surfboards and a large cooler."]


@pytest.fixture(scope="module")
def shipped():
    return viz_model.load(SHIPPED, device="cpu", precision="fp32")


@pytest.fixture(scope="module")
def draft(shipped):
    return int8_search_network(shipped.network)


def sentences(count: int) -> list[str]:
    if not MULTI30K_VAL.is_file():
        return FALLBACK
    with gzip.open(MULTI30K_VAL, "rt", encoding="utf-8") as f:
        return [line.strip() for line in f][:count]


@pytest.mark.parametrize("rule", ["project", "transformers"])
def test_verified_decisions_equal_the_step_by_step_search(shipped, draft, rule, monkeypatch):
    search = shipped.search_settings(rule)
    rounds = []
    original = scorers.verified_search
    monkeypatch.setattr(viz_model.search.decoding, "verified_search",
                        lambda *a, **k: rounds.append((result := original(*a, **k))[1]) or result)
    texts = sentences(40)
    with torch.inference_mode():
        for text in texts:
            src = torch.tensor([shipped.encode(text)])
            plain = beam_search(shipped.network, src, search.beam, search.alpha, hf=search.hf)[0]
            verified = beam_search(shipped.network, src, search.beam, search.alpha, hf=search.hf, draft=draft)[0]
            assert verified.tokens == plain.tokens, text
            assert verified.score == pytest.approx(plain.score, abs=1e-4)
    assert len(rounds) == len(texts) and max(rounds) > 1  # the rounds after a miss ran, too


def test_the_tree_pass_gives_the_step_by_step_logits(shipped):
    text = "A man in a red jacket reads a newspaper on a bench."
    with torch.inference_mode():
        src = torch.tensor([shipped.encode(text)])
        encoded = shipped.network.encode(src, need_weights=True)
        output = beam_search(shipped.network, src, 4, 0.6, encoded=encoded)[0].tokens
        prefixes = {tuple(output[:k]) for k in range(len(output))} | {(5, 6, 7), (5, 9)}
        whole = PrefixTree(shipped.network, encoded)
        whole.extend(prefixes)
        grown = PrefixTree(shipped.network, encoded)
        grown.extend({(5, 9)})
        grown.extend(prefixes)  # the second pass reads the first one's keys and values from the cache
        for prefix in prefixes:
            step = StepScorer.from_prefixes(shipped.network, encoded, [prefix]).scores()[0]
            torch.testing.assert_close(whole.logits[whole.index[prefix]], step, atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(grown.logits[grown.index[prefix]], step, atol=1e-4, rtol=1e-4)


def test_after_its_last_round_it_searches_step_by_step(shipped, draft):
    text = "Three people walk along a beach at sunset, carrying surfboards and a large cooler."
    with torch.inference_mode():
        src = torch.tensor([shipped.encode(text)])
        encoded = shipped.network.encode(src, need_weights=True)
        plain = beam_search(shipped.network, src, 4, 0.6, encoded=encoded)[0]

        def run(scorer, final=True):
            return project_search(shipped.network, scorer, 1, 4, 0.6, [len(src[0]) + 50], None)

        result, rounds = verified_search(run, shipped.network, draft, encoded, 4, rounds=0)
    assert rounds == 1 and result[0].tokens == plain.tokens


def test_a_recorded_tree_is_the_step_by_step_searchs(shipped, draft):
    text = "The children laugh while their father cooks dinner."
    with torch.inference_mode():
        src = torch.tensor([shipped.encode(text)])
        for hf in (None, shipped.generation.transformers):
            plain = beam_search_tree(shipped.network, src, 4, 1.0, hf=hf)
            verified = beam_search_tree(shipped.network, src, 4, 1.0, hf=hf, draft=draft)
            assert verified.best.tokens == plain.best.tokens and len(verified.steps) == len(plain.steps)
            for a, b in zip(plain.steps, verified.steps):
                assert a.alive == b.alive
                assert [(c.parent, c.token, c.status) for c in a.candidates] == \
                       [(c.parent, c.token, c.status) for c in b.candidates]


def test_the_draft_is_used_only_where_a_step_streams_more_weights_than_a_cache_holds(shipped, monkeypatch):
    opus = ModelConfig(vocab_size=58_101, encoder_layers=6, decoder_layers=6, d_model=512, heads=8, d_ff=2048)
    assert draft_pays(opus) and not draft_pays(shipped.config)
    assert shipped.draft_network() is None
    monkeypatch.setattr(viz_model.kinds.translator, "draft_pays", lambda config: True)
    used = []
    original = scorers.verified_search
    monkeypatch.setattr(viz_model.search.decoding, "verified_search",
                        lambda *a, **k: used.append(1) or original(*a, **k))
    model = viz_model.load(SHIPPED, device="cpu", precision="fp32")
    assert model.draft_network() is not None and model.with_precision("fp32").draft_network() is model.draft_network()
    assert model.with_precision("int8").draft_network() is None  # an int8 search needs no draft
    trace = model.trace(FALLBACK[1])
    assert used and trace.translation == shipped.trace(FALLBACK[1]).translation
    assert model.translate(FALLBACK[:3]) == shipped.translate(FALLBACK[:3])  # a batch searches step by step


def test_a_trace_reuses_the_verified_logits_and_equals_the_step_by_step_trace(shipped, monkeypatch):
    """A drafted trace takes its steps' logits from the verified tree instead of projecting the recorded pass's states
    again: the same output, maps and candidates as the trace searched step by step, probabilities within 1e-5."""
    monkeypatch.setattr(viz_model.kinds.translator, "draft_pays", lambda config: True)
    projected = []
    original = viz_model.nn.model.Transformer.logits
    monkeypatch.setattr(viz_model.nn.model.Transformer, "logits",
                        lambda self, hidden, *a, **k: projected.append(hidden.shape[:-1]) or original(self, hidden, *a,
                                                                                                       **k))
    drafted = viz_model.load(SHIPPED, device="cpu", precision="fp32")
    for text in FALLBACK:
        for rule in ("project", "transformers"):
            projected.clear()
            a, b = shipped.trace(text, rule=rule), drafted.trace(text, rule=rule)
            assert b.output_ids == a.output_ids and b.settings == a.settings, text
            assert (1, len(b.target_ids)) not in projected  # the recorded pass's rows were not projected again
            for kind in ("encoder_attentions", "decoder_attentions", "cross_attentions"):
                for x, y in zip(getattr(a, kind), getattr(b, kind), strict=True):
                    np.testing.assert_array_equal(x, y)
            for x, y in zip(a.steps, b.steps, strict=True):
                assert (x.token_id, x.top_ids) == (y.token_id, y.top_ids), text
                assert y.probability == pytest.approx(x.probability, abs=1e-5)
                np.testing.assert_allclose(y.top_probabilities, x.top_probabilities, atol=1e-5)
            assert b.log_probability == pytest.approx(a.log_probability, abs=1e-4)
    mask = head_mask_for(drafted.config, [("decoder", 0, 0)])
    head_masked = drafted.trace(FALLBACK[0], head_mask=mask)  # other numbers than the search's: projected
    assert (1, len(head_masked.target_ids)) in projected


def test_logits_handed_to_the_recorded_pass_must_match_its_rows(shipped):
    src, tgt = torch.tensor([shipped.encode(FALLBACK[3])]), torch.tensor([[shipped.config.bos_id, 5, 6]])
    with torch.inference_mode():
        whole = shipped.network(src, tgt).logits
        raw = shipped.network.logits(shipped.network.teacher_forced(src, tgt)[1].hidden, mask_never_emitted=False)
        torch.testing.assert_close(shipped.network(src, tgt, raw_logits=raw).logits, whole, rtol=0, atol=0)
        with pytest.raises(ValueError, match=r"raw_logits must be \(batch, tgt_len, vocab\)"):
            shipped.network(src, tgt, raw_logits=raw[:, :2])
