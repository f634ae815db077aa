"""The library hooks the teaching pages need: decoding without positional encodings, the recorded beam search,
float64 sinusoids. Each is an argument of a pass, never a change to the (shared) model."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from viz_model.data.batching import pad
from viz_model.nn.positional import shift_matrix, sinusoidal_table
from viz_model.search.decoding import beam_search, beam_search_tree, length_penalty, max_output_lengths
from viz_model.tokenization.tokenizer import BOS_ID, EOS_ID

SENTENCES = ["A man is running.", "Two dogs are playing in the snow near the water.", "The cat is waiting.",
             "An old man is sitting in a red car.", "three people"]


def source(tokenizer, text: str) -> torch.Tensor:
    return torch.tensor([tokenizer.encode(text) + [EOS_ID]])


def state_of(net) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in net.state_dict().items()}


# --- positions=False ---------------------------------------------------------------------------------------------
def test_embed_without_positions_is_the_embedding_alone(random_net, tokenizer):
    ids = source(tokenizer, SENTENCES[1])
    with torch.no_grad():
        with_pe = random_net.embed(ids, "source")
        without = random_net.embed(ids, "source", positions=False)
        pe = random_net.positional_encodings(ids.shape[1], "source")
    torch.testing.assert_close(with_pe - without, pe.expand_as(with_pe), atol=1e-5, rtol=0)
    assert not torch.allclose(with_pe, without)


def test_forward_without_positions_equals_a_model_whose_table_is_zero(random_net, tokenizer):
    src = source(tokenizer, SENTENCES[1])
    tgt = torch.tensor([[BOS_ID] + tokenizer.encode("Zwei Hunde spielen im Schnee.")])
    before = state_of(random_net)
    zeroed = copy.deepcopy(random_net)
    zeroed.src_positions.table.zero_()  # a private copy: the shared model is never touched
    with torch.no_grad():
        off = random_net(src, tgt, need_weights=True, positions=False)
        expected = zeroed(src, tgt, need_weights=True)
        normal = random_net(src, tgt, need_weights=True)
    torch.testing.assert_close(off.logits, expected.logits, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(off.logits, normal.logits, atol=1e-3)
    after = state_of(random_net)
    assert all(torch.equal(before[k], after[k]) for k in before)  # stateless
    assert torch.count_nonzero(random_net.src_positions.table) > 0


def test_without_positions_the_encoder_cannot_see_word_order(random_net):
    """Self-attention is permutation-equivariant: with no PE, shuffling the source permutes the maps, nothing more."""
    ids = torch.tensor([[5, 17, 23, 42, 8, 61, EOS_ID]])
    order = torch.tensor([3, 0, 5, 1, 4, 2, 6])
    shuffled = ids[:, order]
    with torch.no_grad():
        a = random_net.encode(ids, need_weights=True, positions=False)
        b = random_net.encode(shuffled, need_weights=True, positions=False)
        c = random_net.encode(ids, need_weights=True)
        d = random_net.encode(shuffled, need_weights=True)
    torch.testing.assert_close(b.hidden[0], a.hidden[0, order], atol=1e-5, rtol=1e-5)
    for wa, wb in zip(a.attentions, b.attentions):
        torch.testing.assert_close(wb[0], wa[0][:, order][:, :, order], atol=1e-6, rtol=1e-5)
    assert not torch.allclose(d.hidden[0], c.hidden[0, order], atol=1e-3)  # with PE, order matters


def test_trace_without_positions(tiny_model):
    text = SENTENCES[1]
    normal = tiny_model.trace(text, beam=2)
    off = tiny_model.trace(text, beam=2, positions=False)
    assert normal.settings["positions"] is True and off.settings["positions"] is False
    assert not off.source_positional.any() and not off.target_positional.any()
    assert normal.source_positional.any()
    src = torch.tensor([off.source_ids])
    expected = beam_search(tiny_model.search_network, src, 2, 0.6, max_output_lengths(src, tiny_model.network),
                           positions=False)[0]
    assert off.output_ids == expected.tokens
    assert not all(np.allclose(x, y) for x, y in zip(off.encoder_attentions, normal.encoder_attentions))
    again = tiny_model.trace(text, beam=2)  # the experiment left nothing behind
    assert again.output_ids == normal.output_ids
    for x, y in zip(again.cross_attentions, normal.cross_attentions):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("bad", ["no", 0, None])
def test_positions_flag_is_checked(tiny_model, bad):
    with pytest.raises(ValueError, match="positions must be True or False"):
        tiny_model.trace("A man.", positions=bad)
    with pytest.raises(ValueError, match="positions must be True or False"):
        tiny_model.beam_tree("A man.", positions=bad)


# --- the recorded beam search ------------------------------------------------------------------------------------
@pytest.mark.parametrize("beam, alpha", [(1, 0.0), (2, 0.6), (4, 0.6), (5, 2.0), (3, 0.0)])
def test_the_tree_chooses_what_beam_search_chooses(trained_net, tokenizer, beam, alpha):
    for text in SENTENCES:
        src = source(tokenizer, text)
        expected = beam_search(trained_net, src, beam, alpha)[0]
        tree = beam_search_tree(trained_net, src, beam, alpha)
        assert tree.best.tokens == expected.tokens, text
        assert tree.best.score == pytest.approx(expected.score) and tree.best.log_prob == pytest.approx(
            expected.log_prob)
        assert max(tree.finished, key=lambda h: h.score).tokens == expected.tokens
        check_tree(tree)


def check_tree(tree) -> None:
    """Every step's bookkeeping is consistent: kept rows become the next step's hypotheses, scores are right."""
    assert tree.steps[0].alive == [[]] and tree.steps[-1].stopped
    assert [s.step for s in tree.steps] == list(range(len(tree.steps)))
    for s, following in zip(tree.steps, tree.steps[1:] + [None]):
        assert 1 <= len(s.alive) <= tree.beam and not s.stopped or following is None
        kept = [c for c in s.candidates if c.status == "kept"]
        assert len(kept) <= tree.beam
        assert {c.status for c in s.candidates} <= {"kept", "finished", "pruned"}
        for c in s.candidates:
            assert c.score == pytest.approx(c.log_prob / length_penalty(s.step + 1, tree.alpha))
            assert c.log_prob <= s.alive_log_probs[c.parent] + 1e-6  # a continuation never gains probability
        if following is not None:
            assert sorted(c.row for c in kept) == list(range(len(following.alive)))
            for c in kept:
                assert following.alive[c.row] == s.alive[c.parent] + [c.token]
                assert following.alive_log_probs[c.row] == pytest.approx(c.log_prob)
        else:
            assert kept == []
    path = [tree.steps[t].candidates[i] for t, i in tree.chosen_path]
    assert [c.token for c in path] == tree.best.tokens
    assert path[-1].status == "finished" and all(c.status == "kept" for c in path[:-1])


def test_greedy_tree_follows_the_top_candidate(trained_net, tokenizer):
    tree = beam_search_tree(trained_net, source(tokenizer, SENTENCES[0]), beam=1, alpha=0.0)
    for s in tree.steps:
        assert len(s.alive) == 1
        best = max(s.candidates, key=lambda c: c.log_prob)
        assert best.status in ("kept", "finished")
        assert all(c.status == "pruned" for c in s.candidates if c is not best)


def test_the_tree_respects_the_length_limit(random_net, tokenizer):
    src = source(tokenizer, SENTENCES[0])
    tree = beam_search_tree(random_net, src, beam=3, alpha=0.6, max_len=4)
    assert len(tree.steps) <= 4 and len(tree.best.tokens) <= 4 and tree.max_len == 4
    assert tree.best.tokens == beam_search(random_net, src, 3, 0.6, [4])[0].tokens


def test_tree_without_positions_matches_beam_search_without_positions(trained_net, tokenizer):
    src = source(tokenizer, SENTENCES[3])
    tree = beam_search_tree(trained_net, src, 3, 0.6, positions=False)
    assert tree.best.tokens == beam_search(trained_net, src, 3, 0.6, positions=False)[0].tokens
    check_tree(tree)


def test_recording_needs_one_sentence(trained_net, tokenizer):
    batch = pad([tokenizer.encode(t) + [EOS_ID] for t in SENTENCES[:2]])
    with pytest.raises(ValueError, match="one sentence"):
        beam_search(trained_net, batch, 2, record=[])
    with pytest.raises(ValueError, match="one source"):
        beam_search_tree(trained_net, batch, 2)


def test_recording_does_not_change_a_batch_result(trained_net, tokenizer):
    batch = pad([tokenizer.encode(t) + [EOS_ID] for t in SENTENCES])
    together = beam_search(trained_net, batch, 4, 0.6)
    for text, hyp in zip(SENTENCES, together):
        assert beam_search_tree(trained_net, source(tokenizer, text), 4, 0.6).best.tokens == hyp.tokens


def test_api_beam_tree_equals_the_trace(tiny_model):
    for beam in (1, 3):
        trace = tiny_model.trace(SENTENCES[1], beam=beam, alpha=0.6)
        tree = tiny_model.beam_tree(SENTENCES[1], beam=beam, alpha=0.6)
        assert tree.best.tokens == trace.output_ids
    with pytest.raises(ValueError, match="beam must be"):
        tiny_model.beam_tree("A man.", beam=0)


# --- sinusoids in float64 ----------------------------------------------------------------------------------------
def test_sinusoidal_table_dtype():
    single, double = sinusoidal_table(50, 16), sinusoidal_table(50, 16, dtype=torch.float64)
    assert single.dtype == torch.float32 and double.dtype == torch.float64
    torch.testing.assert_close(double.float(), single, atol=0, rtol=0)
    assert (double - single.double()).abs().max() > 0  # float64 keeps digits float32 rounds away


@pytest.mark.parametrize("k", [1, 7, 100, -3])
def test_shift_linearity_in_float64(k):
    d, length = 64, 300
    table = sinusoidal_table(length + abs(k), d, dtype=torch.float64)
    start = abs(k) if k < 0 else 0
    p = torch.arange(start, length)
    shifted = table[p] @ shift_matrix(k, d).T
    error = (shifted - table[p + k]).abs().max().item()
    assert error < 1e-5
    assert error < 1e-10  # in fact float64 rounding only
