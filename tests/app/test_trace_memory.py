"""The trace cache counts what a trace really holds (arrays, a long trace's recipes in place of its maps, its Python
objects), keeps within its bound, and lets a replaced trace go (gc and a weak reference); CPU, fp32."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from support.long_lm import long_language_model, long_text

from app import sessions


@pytest.fixture(scope="module")
def lm():
    return long_language_model()


def test_a_long_trace_is_counted_by_its_recipes_and_objects(lm):
    trace = lm.trace(long_text(620), 2)
    maps = trace.decoder_attentions
    assert type(maps).__name__ == "OnDemandMaps"
    held = sessions.held_bytes(trace)
    n = len(trace.target_tokens)
    objects = sessions.python_bytes(trace)
    assert held == trace.nbytes + objects and maps.nbytes < trace.nbytes
    assert objects > 200 * n  # steps and tokens: hundreds of bytes a token, uncounted before
    full_maps = sum(np.prod(maps.shape(layer)) * 4 for layer in range(len(maps)))
    assert held < full_maps / 4  # the recipes, not the maps


def test_python_bytes_counts_each_object_once():
    shared = "x" * 1000
    assert sessions.python_bytes([shared, shared]) < 2 * len(shared)
    assert sessions.python_bytes({"a": [1.5, shared]}) > len(shared)
    assert sessions.python_bytes(np.zeros(10_000)) == 0  # arrays are trace.nbytes's


def test_replaced_traces_are_let_go_and_the_bound_holds(lm):
    first = lm.trace(long_text(600, seed=1), 1)
    size = sessions.held_bytes(first)
    del first
    cache = sessions.TraceCache(entries=10, max_bytes=int(2.5 * size))
    refs = []
    for seed in range(5):
        trace = cache.get(("prompt", seed), lambda seed=seed: lm.trace(long_text(600, seed=seed), 1))
        refs.append(weakref.ref(trace))
        del trace
        gc.collect()
        assert cache.nbytes <= 2.5 * size * 1.05  # traces of about one size: two kept
    assert len(cache) == 2
    assert [ref() is None for ref in refs] == [True, True, True, False, False]  # the evicted ones are gone


def test_a_let_go_trace_is_handed_back_to_the_system(lm, monkeypatch):
    """The cache trims the allocator (`give_back_memory`) when it lets a trace go, and only then: without it glibc keeps
    the freed heap and the process stays at its peak (benchmarks/bench_soak.py)."""
    calls = []
    monkeypatch.setattr(sessions, "give_back_memory", lambda: calls.append(1) or True)
    cache = sessions.TraceCache(entries=1, max_bytes=2**40)
    cache.get(("a",), lambda: lm.trace("a man", 1))
    cache.get(("a",), lambda: lm.trace("a man", 1))
    assert calls == []
    cache.get(("b",), lambda: lm.trace("a woman", 1))
    assert calls == [1] and len(cache) == 1



def test_the_check_runs_on_a_miss_only_and_a_refusal_leaves_the_cache_as_it_was(lm):
    cache = sessions.TraceCache(entries=4, max_bytes=2**40)
    checks, computed = [], []

    def check() -> str:
        checks.append(1)
        return "Memory: fits"
    kept = cache.get(("a",), lambda: computed.append("a") or lm.trace("a man", 1), check)
    assert cache.get(("a",), lambda: computed.append("a") or lm.trace("a man", 1), check) is kept
    assert checks == [1] and computed == ["a"] and cache.note(kept) == "Memory: fits"

    def refuse() -> str:
        raise MemoryError("would need about 2 GB, but 1 GB is available")
    with pytest.raises(MemoryError, match="would need about 2 GB"):
        cache.get(("b",), lambda: computed.append("b") or lm.trace("a woman", 1), refuse)
    assert computed == ["a"] and len(cache) == 1  # nothing computed, nothing let go
    assert cache.get(("a",), lambda: lm.trace("a man", 1), refuse) is kept  # cached: served, not checked
    assert cache.note(lm.trace("a man", 1)) is None  # a trace the cache does not hold has no note
