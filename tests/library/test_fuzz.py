"""Property-based fuzzing (hypothesis) of tokenizing, translating and tracing arbitrary Unicode with the tiny models.

Every input, whatever its characters (controls, lone surrogates, private use, unassigned code points, right-to-left
marks, HTML) or length (up to just past the 2,000-character limit), gives either a valid result whose invariants
hold or a `ValueError` with a message that says what is wrong; never another exception, never a hang (each example
runs under a deadline, and decoding is bounded by max_positions). Example counts are bounded: < 60 s in all.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import viz_model
from viz_model.data.typed_text import MAX_INPUT_CHARS
from viz_model.kinds.translator import TranslationModel
from viz_model.tokenization.tokenizer import BOS_ID, EOS_ID
from viz_model.trace import AttentionTrace

CLEAR = re.compile(r"is empty|the limit is \d+|control characters \(U\+|surrogate code points \(U\+|"
                   r"tokens long; this model reads at most \d+ \(max_positions\)|must be a string")
FUZZ = settings(deadline=timedelta(seconds=5), database=None, suppress_health_check=[HealthCheck.too_slow])

ANY_CHARACTER = st.characters(exclude_categories=())  # every code point, surrogates and controls included
WORDS = ["Two", "dogs", "play", "in", "the", "snow", "a", "man", "is", "running", "Mann", "spielt", "<script>",
         "&amp;", "😀", "שלום", "\u200d", "\u202e", "ﷺ", "x\u0301", "\ufeff", "  ", "\n", "\t"]
SENTENCES = st.one_of(
    st.text(ANY_CHARACTER, max_size=200),
    st.lists(st.sampled_from(WORDS), max_size=60).map(" ".join),  # near the model's words: longer translations
    st.text(st.characters(categories=["L", "N", "P", "Zs", "So"]), min_size=MAX_INPUT_CHARS - 3,
            max_size=MAX_INPUT_CHARS + 3),  # both sides of the length limit
)


@pytest.fixture(scope="module")
def random_model(random_model_dir) -> TranslationModel:
    """The untrained tiny model: it rarely ends with </s>, so its decoding runs into the max_positions bound."""
    return viz_model.load(random_model_dir, device="cpu")


OUTCOMES: Counter[str] = Counter()  # "ok" or the kind of clear error, per example of the fuzz run in progress
MIN_ACCEPTED = 0.15  # a run that accepts fewer inputs than this did not test the results (a reject-all passes)


def result_or_clear_error(call, *args, **kwargs):
    """`call`'s result, or None after checking that the ValueError it raised says clearly what is wrong (any other
    exception fails the test). Each outcome is counted in OUTCOMES."""
    try:
        result = call(*args, **kwargs)
    except ValueError as err:
        found = CLEAR.search(str(err))
        assert found, f"unclear error message: {type(err).__name__}: {err}"
        OUTCOMES[found.group(0).split()[0]] += 1
        return None
    OUTCOMES["ok"] += 1
    return result


def run_counted(fuzz, min_error_kinds: int = 2, **fixtures) -> Counter[str]:
    """Run a hypothesis test and check that it exercised both sides: at least MIN_ACCEPTED of its examples gave a
    result (whose invariants were checked) and its rejections were of `min_error_kinds` different kinds."""
    OUTCOMES.clear()
    fuzz(**fixtures)
    counts = Counter(OUTCOMES)
    total = sum(counts.values())
    assert total and counts["ok"] >= MIN_ACCEPTED * total, f"too few inputs accepted: {dict(counts)}"
    assert len(set(counts) - {"ok"}) >= min_error_kinds, f"too few kinds of rejection: {dict(counts)}"
    return counts


def check_trace(trace: AttentionTrace, model: TranslationModel, text: str, truncate: bool,
                target: str | None = None) -> None:
    """The invariants of any trace: shapes match the tokens and the config, maps are distributions (rows sum to 1)
    with exactly 0 on masked cells, decoding is bounded, and the trace survives a save/load round trip."""
    cfg = model.config
    trace.validate()
    assert trace.source_text == text
    assert trace.source_ids == model.encode(text, truncate=truncate) and trace.source_ids[-1] == EOS_ID
    assert trace.source_tokens == model.tokenizer.pieces(trace.source_ids)
    assert trace.target_ids[0] == BOS_ID and trace.target_ids[1:] == trace.output_ids[:-1]
    s, t = len(trace.source_ids), len(trace.target_ids)
    assert s <= cfg.max_positions and t <= cfg.max_positions - (target is None)  # decoding stays within the model
    if target is None:
        assert trace.output_ids[-1] == EOS_ID or t == trace.settings["max_output_length"]
    else:
        assert trace.output_ids == model.tokenizer.encode(target) + [EOS_ID]
    assert trace.translation == model.tokenizer.decode(trace.output_ids)
    assert trace.num_layers == {"encoder": cfg.encoder_layers, "decoder": cfg.decoder_layers,
                                "cross": cfg.decoder_layers}
    assert np.array_equal(trace.decoder_mask, np.tril(np.ones((t, t), dtype=bool)))
    for kind in ("encoder", "decoder", "cross"):
        mask = trace.mask(kind)
        for weights in trace.attentions(kind):
            assert weights.shape[0] == cfg.heads and np.isfinite(weights).all() and (weights >= 0).all()
            np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-5)
            assert (weights[:, ~mask] == 0).all()
    for step, out in zip(trace.steps, trace.output_ids):
        assert step.token_id == out and 0.0 <= step.probability <= 1.0 + 1e-6
        assert step.top_probabilities == sorted(step.top_probabilities, reverse=True)
    back = AttentionTrace.from_json(trace.to_json())
    assert (back.source_text, back.translation, back.source_tokens, back.output_tokens) == (
        trace.source_text, trace.translation, trace.source_tokens, trace.output_tokens)
    assert all(np.array_equal(a, b) for a, b in zip(back.cross_attentions, trace.cross_attentions))


@settings(FUZZ, max_examples=300)
@given(text=SENTENCES, truncate=st.booleans())
def fuzz_tokenizing_any_text(tiny_model, text, truncate):
    ids = result_or_clear_error(tiny_model.encode, text, truncate=truncate)
    if ids is None:
        return
    assert ids[-1] == EOS_ID and 1 <= len(ids) <= tiny_model.config.max_positions
    assert all(0 <= i < tiny_model.config.vocab_size for i in ids)
    assert isinstance(tiny_model.tokenizer.decode(ids), str)


@settings(FUZZ, max_examples=60)
@given(text=SENTENCES, beam=st.integers(1, 4), truncate=st.booleans())
def fuzz_translating_any_text(tiny_model, text, beam, truncate):
    translation = result_or_clear_error(tiny_model.translate, text, beam=beam, truncate=truncate)
    if translation is None:
        return
    assert isinstance(translation, str)


@settings(FUZZ, max_examples=120)
@given(text=SENTENCES, beam=st.integers(1, 4), truncate=st.booleans())
def fuzz_tracing_any_text(tiny_model, text, beam, truncate):
    trace = result_or_clear_error(tiny_model.trace, text, beam=beam, truncate=truncate)
    if trace is None:
        return
    check_trace(trace, tiny_model, text, truncate)


@settings(FUZZ, max_examples=60)
@given(target=SENTENCES)
def fuzz_forcing_any_target(tiny_model, target):
    trace = result_or_clear_error(tiny_model.trace, "Two dogs are playing in the snow.", beam=1, target=target)
    if trace is None:
        return
    check_trace(trace, tiny_model, "Two dogs are playing in the snow.", False, target)


@settings(FUZZ, max_examples=25)
@given(text=SENTENCES, beam=st.integers(1, 4))
def fuzz_an_untrained_model_stops_at_its_maximum_length(random_model, text, beam):
    trace = result_or_clear_error(random_model.trace, text, beam=beam, truncate=True)
    if trace is None:
        return
    check_trace(trace, random_model, text, True)


@settings(FUZZ, max_examples=30)
@given(value=st.one_of(st.none(), st.integers(), st.floats(), st.binary(max_size=20), st.sets(st.integers())))
def test_anything_but_a_string_is_a_clear_error(tiny_model, value):
    for call in (tiny_model.encode, tiny_model.translate, tiny_model.trace):
        with pytest.raises(ValueError, match="must be a string"):
            call(value)


def test_tokenizing_any_text(tiny_model):
    run_counted(fuzz_tokenizing_any_text, 2, tiny_model=tiny_model)


def test_translating_any_text(tiny_model):
    run_counted(fuzz_translating_any_text, 2, tiny_model=tiny_model)


def test_tracing_any_text(tiny_model):
    run_counted(fuzz_tracing_any_text, 2, tiny_model=tiny_model)


def test_forcing_any_target(tiny_model):
    run_counted(fuzz_forcing_any_target, 1, tiny_model=tiny_model)


def test_an_untrained_model_stops_at_its_maximum_length(random_model):
    run_counted(fuzz_an_untrained_model_stops_at_its_maximum_length, 2, random_model=random_model)
