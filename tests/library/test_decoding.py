"""Greedy and beam search with the key/value cache against plain full recomputation."""

from __future__ import annotations

import random

import pytest
import torch

from viz_model.data.batching import pad
from viz_model.search.batched import encode_source, translate_ids, translate_texts
from viz_model.search.decoding import beam_search, beam_search_tree, greedy_search, length_penalty, max_output_lengths
from viz_model.tokenization.tokenizer import BOS_ID, EOS_ID

SENTENCES = ["A man is running in the park.", "Two dogs are playing in the snow.",
             "The cat is sitting on the beach near the water.", "Hello", "An old man is waiting with a ball.",
             "Three people are jumping in front of a house."]


def src_tensor(tokenizer, text: str) -> torch.Tensor:
    return torch.tensor([encode_source(tokenizer, text)])


@torch.no_grad()
def greedy_by_recomputation(net, src: torch.Tensor, max_len: int) -> list[int]:
    """Greedy decoding the slow way: a full teacher-forced pass over the whole prefix at every step."""
    out: list[int] = []
    while len(out) < max_len:
        logits = net(src, torch.tensor([[BOS_ID] + out])).logits[0, -1]
        out.append(int(logits.argmax()))
        if out[-1] == EOS_ID:
            break
    return out


@torch.no_grad()
def beam_by_recomputation(net, src: torch.Tensor, beam: int, alpha: float, max_len: int) -> list[int]:
    """Reference beam search, one sentence, no cache: every hypothesis re-runs the whole decoder. A sentence stops
    when the best candidate of a step ends in </s> (OpenNMT's early stop), not before (so beam_search's earlier stop,
    when nothing alive can beat the best finished, must change nothing)."""
    alive = [([], 0.0)]
    finished = []
    for step in range(max_len):
        candidates = []
        for tokens, score in alive:
            log_probs = torch.log_softmax(net(src, torch.tensor([[BOS_ID] + tokens])).logits[0, -1].float(), -1)
            candidates += [(tokens + [t], score + float(lp)) for t, lp in enumerate(log_probs)]
        candidates.sort(key=lambda c: -c[1])
        alive = []
        for tokens, score in candidates[:2 * beam]:
            if tokens[-1] == EOS_ID or step + 1 >= max_len:
                finished.append((tokens, score / length_penalty(len(tokens), alpha)))
            else:
                alive.append((tokens, score))
            if len(alive) == beam:
                break
        if candidates[0][0][-1] == EOS_ID or step + 1 >= max_len:
            break
    return max(finished, key=lambda f: f[1])[0]


@pytest.mark.parametrize("text", SENTENCES[:4])
def test_beam_1_equals_greedy(trained_net, tokenizer, text):
    src = src_tensor(tokenizer, text)
    max_len = max_output_lengths(src, trained_net)[0]
    expected = greedy_by_recomputation(trained_net, src, max_len)
    assert beam_search(trained_net, src, beam=1, alpha=0.0)[0].tokens == expected
    assert beam_search(trained_net, src, beam=1, alpha=0.6)[0].tokens == expected  # alpha cannot matter at beam 1
    assert greedy_search(trained_net, src)[0].tokens == expected


def test_the_trained_fixture_stops_with_eos(trained_net, tokenizer):
    """Guard: the other tests are only meaningful if hypotheses end at </s> before the length limit."""
    src = src_tensor(tokenizer, SENTENCES[0])
    hyp = greedy_search(trained_net, src)[0]
    assert hyp.tokens[-1] == EOS_ID and len(hyp.tokens) < max_output_lengths(src, trained_net)[0]


@pytest.mark.parametrize("beam", [2, 4])
def test_cached_beam_search_equals_recomputed_beam_search(trained_net, tokenizer, beam):
    for text in SENTENCES[:3]:
        src = src_tensor(tokenizer, text)
        max_len = max_output_lengths(src, trained_net)[0]
        expected = beam_by_recomputation(trained_net, src, beam, 0.6, max_len)
        assert beam_search(trained_net, src, beam=beam, alpha=0.6)[0].tokens == expected, text


def test_beam_search_goes_on_after_beam_hypotheses_have_finished(trained_net, tokenizer):
    """Short hypotheses that finish early do not end the search (Hugging Face's early_stopping=True would): a
    longer one found later can have the better length-penalised score, and is the result."""
    rng = random.Random(0)
    words = ["a", "man", "woman", "dog", "runs", "in", "the", "park", "with", "red", "ball", "on", "street", "two",
             "children", "play"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 9))) for _ in range(30)]
    later_wins = 0
    for text in texts:
        src = src_tensor(tokenizer, text)
        for beam in (2, 3):
            tree = beam_search_tree(trained_net, src, beam=beam, alpha=0.6)
            expected = beam_by_recomputation(trained_net, src, beam, 0.6, tree.max_len)
            assert tree.best.tokens == expected, (text, beam)
            earlier = [h for h in tree.finished if len(h.tokens) < len(tree.best.tokens)]
            later_wins += len(earlier) >= beam  # `beam` had finished before the best did
    assert later_wins > 0  # the case this test is about did occur


def test_beam_search_on_a_random_model_hits_the_length_limit(random_net, tokenizer):
    src = src_tensor(tokenizer, SENTENCES[3])
    max_len = 7
    for beam in (1, 3):
        hyp = beam_search(random_net, src, beam=beam, alpha=0.6, max_lens=[max_len])[0]
        assert 1 <= len(hyp.tokens) <= max_len
    src = src_tensor(tokenizer, SENTENCES[1])
    expected = beam_by_recomputation(random_net, src, 3, 0.6, 9)
    assert beam_search(random_net, src, beam=3, alpha=0.6, max_lens=[9])[0].tokens == expected


@torch.no_grad()
def test_kv_cache_decoding_equals_the_full_teacher_forced_pass(trained_net, tokenizer, tiny_config):
    net = trained_net
    src = pad([encode_source(tokenizer, SENTENCES[0]), encode_source(tokenizer, SENTENCES[3])])  # padded batch
    target = tokenizer.encode("Ein Mann läuft im Park.")
    tgt = torch.tensor([[BOS_ID] + target] * 2)
    full = net(src, tgt, need_weights=True)
    encoded = net.encode(src)
    cache = None
    for t in range(tgt.shape[1]):
        step = net.decode(tgt[:, t:t + 1], encoded, need_weights=True, cache=cache, offset=t)
        cache = step.cache
        torch.testing.assert_close(net.logits(step.hidden[:, 0]), full.logits[:, t], atol=1e-5, rtol=1e-4)
        for layer in range(tiny_config.decoder_layers):
            # the step's self-attention row = row t of the full map, over the keys 0..t it may see
            torch.testing.assert_close(step.self_attentions[layer][:, :, 0],
                                       full.decoder_attentions[layer][:, :, t, :t + 1], atol=1e-6, rtol=1e-4)
            torch.testing.assert_close(step.cross_attentions[layer][:, :, 0], full.cross_attentions[layer][:, :, t],
                                       atol=1e-6, rtol=1e-4)
    assert cache[0].self_attn.key.shape[2] == tgt.shape[1]


def test_beam_log_prob_equals_the_teacher_forced_pass(tiny_model, trained_net, tokenizer):
    """The trace of the final hypothesis is what a full teacher-forced pass over it computes (both searches in full
    precision: the model's default on the CPU searches with int8 weights)."""
    tiny_model = tiny_model.with_precision("fp32")
    for text in SENTENCES[:4]:
        src = torch.tensor([tiny_model.encode(text)])
        for beam, alpha in ((1, 0.0), (4, 0.6), (3, 1.0)):
            hyp = beam_search(trained_net, src, beam=beam, alpha=alpha)[0]
            trace = tiny_model.trace(text, beam=beam, alpha=alpha)
            assert trace.output_ids == hyp.tokens
            assert trace.log_probability == pytest.approx(hyp.log_prob, abs=1e-4)
            assert sum(torch.tensor([s.probability for s in trace.steps]).log().tolist()) == pytest.approx(
                hyp.log_prob, abs=1e-4)
            assert hyp.score == pytest.approx(hyp.log_prob / length_penalty(len(hyp.tokens), alpha))
            # forcing that same output gives the same trace numbers
            forced = tiny_model.trace(text, target=trace.translation)
            if forced.output_ids == trace.output_ids:
                assert forced.log_probability == pytest.approx(trace.log_probability, abs=1e-5)


def test_beam_search_picks_the_best_normalised_score(trained_net, tokenizer):
    src = src_tensor(tokenizer, SENTENCES[2])
    greedy = greedy_search(trained_net, src)[0]
    best = beam_search(trained_net, src, beam=4, alpha=0.6)[0]
    assert best.score >= greedy.log_prob / length_penalty(len(greedy.tokens), 0.6) - 1e-5


def test_batched_beam_search_equals_one_by_one(trained_net, tokenizer):
    sources = [encode_source(tokenizer, t) for t in SENTENCES]
    for beam in (1, 4):
        batched = beam_search(trained_net, pad(sources), beam=beam, alpha=0.6)
        for source, hyp in zip(sources, batched):
            alone = beam_search(trained_net, torch.tensor([source]), beam=beam, alpha=0.6)[0]
            assert hyp.tokens == alone.tokens
            assert hyp.log_prob == pytest.approx(alone.log_prob, abs=1e-4)


def test_translate_texts_and_ids_keep_the_input_order(trained_net, tokenizer):
    one_by_one = [translate_texts(trained_net, tokenizer, [t], beam=4)[0] for t in SENTENCES]
    assert translate_texts(trained_net, tokenizer, SENTENCES, beam=4) == one_by_one
    done = []
    sources = [encode_source(tokenizer, t) for t in SENTENCES]
    hyps = translate_ids(trained_net, sources, beam=2, batch_tokens=40, progress=done.append)  # several batches
    assert sum(done) == len(SENTENCES) and len(done) > 1
    for source, hyp in zip(sources, hyps):
        assert hyp.tokens == beam_search(trained_net, torch.tensor([source]), beam=2)[0].tokens
    assert translate_ids(trained_net, [], beam=2) == []


def test_max_output_length_is_source_length_plus_50_capped(random_net):
    cap = random_net.config.max_positions - 1  # <s> + output must fit the positions
    src = torch.tensor([[5] * 4 + [0] * 16, [5] * 20])
    assert max_output_lengths(src, random_net) == [54, cap]
    assert max_output_lengths(src, random_net, extra=3) == [7, 23]


def test_length_penalty_formula():
    assert length_penalty(1, 0.6) == pytest.approx(1.0)
    assert length_penalty(7, 0.6) == pytest.approx((12 / 6) ** 0.6)
    assert length_penalty(100, 0.0) == 1.0


def test_decoding_argument_errors(random_net):
    src = torch.tensor([[5, 3]])
    with pytest.raises(ValueError, match="beam must be >= 1"):
        beam_search(random_net, src, beam=0)
    with pytest.raises(ValueError, match="max_lens has 2 entries for a batch of 1"):
        beam_search(random_net, src, max_lens=[3, 4])
