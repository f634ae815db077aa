"""Resource limits on the server side (Streamlit AppTest): hostile URL parameters get a clear message or a clamped
value, never a traceback; a CUDA out-of-memory error is a message and the next request works; every cache the app
keeps is bounded. The API's own limits (beam, top_k, text length) are tested in test_api.py."""

from __future__ import annotations

import ast
import uuid

import pytest
import torch
from support.app import ROOT, TINY_CONFIG, charts, messages, ok, start, titles  # noqa: E402  # noqa: E402

from app import sessions  # noqa: E402
from viz_model.data.typed_text import MAX_INPUT_CHARS  # noqa: E402
from viz_model.kinds.translator import TranslationModel  # noqa: E402
from viz_model.plot import map_figures  # noqa: E402
from viz_model.search.settings import MAX_BEAM  # noqa: E402

OOM = "CUDA out of memory. Tried to allocate 20.00 GiB (simulated)"


def text_of(at) -> str:
    return messages(at).replace("\\", "")  # the messages quote the URL values Markdown-escaped


def test_the_issue_url_gives_messages_and_no_crash(tiny):
    at = ok(start(beam="999", sentence="x" * 5000, layer="99", head="abc"))
    text = text_of(at)
    assert f"beam=999` ignored: use a beam size from 1 to {MAX_BEAM}" in text
    assert "head=abc` ignored" in text
    assert f"the limit is {MAX_INPUT_CHARS}" in text
    assert charts(at) == []


def test_out_of_range_values_with_a_valid_sentence_are_clamped(tiny):
    at = ok(start(sentence="Two dogs play in the snow.", beam="999", layer="99", head="abc"))
    layers = TINY_CONFIG["encoder_layers"]
    assert titles(at) == [f"Encoder self-attention: layer {layers}, head 1"]
    assert f"Layer 99 does not exist here; showing {layers}" in text_of(at)
    assert "beam 4, α 0.6" in "\n".join(c.value for c in at.caption)  # the default beam, not 999


@pytest.mark.parametrize("key", ["layer", "head", "beam"])
@pytest.mark.parametrize("value", ["²", "٣", "1e9", "-1", "0", "9" * 5000, " 2", "0x10", "1_0"],
                         ids=lambda v: v[:8])
def test_numbers_in_the_url_that_are_not_small_whole_numbers(tiny, key, value):
    at = ok(start(**{key: value}))
    assert f"{key}={value[:60]}` ignored" in text_of(at)
    assert titles(at) == ["Encoder self-attention: layer 1, head 1"]


@pytest.mark.parametrize("value", ["1e999", "nan", "-0.5", "5.5", "x", "1" * 5000])
def test_alpha_in_the_url_outside_its_range(tiny, value):
    at = ok(start(alpha=value))
    assert f"alpha={value[:60]}` ignored" in text_of(at)
    assert charts(at)


def test_a_target_above_the_input_limit_in_the_url(tiny):
    at = ok(start(sentence="Two dogs.", target="y" * (MAX_INPUT_CHARS + 1)))
    assert f"the limit is {MAX_INPUT_CHARS}" in text_of(at) and charts(at) == []


def _fail_once(monkeypatch, owner, name: str) -> list[str]:
    """Make `owner.name` raise a CUDA out-of-memory error on its first call only; returns the call log."""
    real, calls = getattr(owner, name), []

    def flaky(*args, **kwargs):
        calls.append(name)
        if len(calls) == 1:
            raise torch.cuda.OutOfMemoryError(OOM)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, flaky)
    return calls


def test_cuda_out_of_memory_while_translating_is_a_message_and_the_next_request_works(tiny, monkeypatch):
    calls = _fail_once(monkeypatch, TranslationModel, "trace")
    sentence = f"A dog runs {uuid.uuid4().hex[:8]}."  # never translated before: not in the app's trace cache
    at = ok(start(sentence=sentence))
    assert "The GPU ran out of memory" in text_of(at) and charts(at) == []
    at.run()  # the same session asks again
    ok(at)
    assert "out of memory" not in text_of(at) and len(calls) == 2
    assert titles(at) == ["Encoder self-attention: layer 1, head 1"]


def test_cuda_out_of_memory_anywhere_on_a_page_is_a_message_not_a_bug_report(tiny, monkeypatch):
    _fail_once(monkeypatch, map_figures, "map_heatmap")
    at = ok(start())
    assert "The GPU ran out of memory" in text_of(at)
    at.run()
    assert titles(ok(at)) == ["Encoder self-attention: layer 1, head 1"]


def _cache_decorators() -> list[tuple[str, ast.expr]]:
    """(where, decorator) of every st.cache_data / st.cache_resource in the app's source."""
    found = []
    for path in sorted((ROOT / "app").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in node.decorator_list:
                    target = decorator.func if isinstance(decorator, ast.Call) else decorator
                    if ast.unparse(target) in ("st.cache_data", "st.cache_resource"):
                        found.append((f"{path.relative_to(ROOT)}:{node.name}", decorator))
    return found


def test_every_cache_of_the_app_is_bounded():
    """Traces, models and tables are cached with a maximum number of entries: memory stays bounded however many
    sessions and sentences come (a bare decorator would keep every result forever)."""
    decorators = _cache_decorators()
    assert any(where.endswith(":trace_cache") for where, _ in decorators)  # the one TraceCache of the process
    for where, decorator in decorators:
        keywords = {k.arg: k.value for k in decorator.keywords} if isinstance(decorator, ast.Call) else {}
        assert "max_entries" in keywords, f"{where}: a cache without max_entries grows without bound"
    assert sessions.TRACE_CACHE_ENTRIES <= 32 and sessions.TRACE_CACHE_BYTES <= 512 * 2**20
    cache = sessions.trace_cache()
    assert (cache.entries, cache.max_bytes) == (sessions.TRACE_CACHE_ENTRIES, sessions.TRACE_CACHE_BYTES)


def test_the_trace_cache_is_bounded_in_entries_and_bytes(app_model):
    """Traces of a large model (an imported opus-mt one: up to ~150 MB each) are bounded by bytes, not only by count;
    the least recently used goes first, the newest is always kept, and a cached trace cannot be written."""
    trace = app_model.trace("A man.", beam=1)
    size = trace.nbytes
    assert size == sum(a.nbytes for a in [*trace.encoder_attentions, *trace.decoder_attentions,
                                          *trace.cross_attentions, trace.encoder_mask, trace.decoder_mask,
                                          trace.cross_mask, trace.source_positional, trace.target_positional,
                                          trace.source_embeddings, trace.target_embeddings])
    computed = []

    def compute(text):
        computed.append(text)
        return app_model.trace(text, beam=1)

    held = sessions.held_bytes(trace)  # its arrays and its Python objects
    cache = sessions.TraceCache(entries=3, max_bytes=int(2.5 * held))
    for text in ("A man.", "A dog.", "A cat."):
        cache.get((text,), lambda text=text: compute(text))
    assert len(cache) == 2 and cache.nbytes <= 2.5 * held  # the bytes bound evicted "A man."
    cache.get(("A dog.",), lambda: compute("A dog."))  # a hit: nothing computed, "A dog." is now the newest
    assert computed == ["A man.", "A dog.", "A cat."]
    cache.get(("A man.",), lambda: compute("A man."))  # evicts "A cat.", the least recently used
    cache.get(("A cat.",), lambda: compute("A cat."))
    assert computed[-2:] == ["A man.", "A cat."] and len(cache) == 2
    tiny = sessions.TraceCache(entries=3, max_bytes=1)
    kept = tiny.get(("A man.",), lambda: compute("A man."))
    assert len(tiny) == 1  # the newest stays, however large
    with pytest.raises(ValueError, match="read-only"):
        kept.cross_attentions[0][0, 0, 0] = 1.0
