"""AttentionTrace: lossless JSON / NPZ round trips, validation, and clear errors for tampered files."""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import math
import re
import zipfile

import numpy as np
import pytest
import torch
from support.data import tiny_model_config

from viz_model.kinds.translator import TranslationModel
from viz_model.nn.model import Transformer
from viz_model.trace import ARRAY_FIELDS, ARRAY_LIST_FIELDS, AttentionTrace, DecodingStep, TraceError


@pytest.fixture(scope="module")
def trace(tiny_model) -> AttentionTrace:
    return tiny_model.trace("Two dogs are playing in the snow.", beam=2, top_k=4)


@pytest.fixture(scope="module")
def forced_trace(tiny_model) -> AttentionTrace:
    return tiny_model.trace("A girl is jumping on the street.", target="Ein Mädchen springt auf der Straße.")


def assert_traces_identical(a: AttentionTrace, b: AttentionTrace) -> None:
    """Every field equal; arrays bit-for-bit with the same dtype and shape."""
    for f in dataclasses.fields(AttentionTrace):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name in ARRAY_LIST_FIELDS:
            assert len(x) == len(y), f.name
            for i, (u, v) in enumerate(zip(x, y)):
                assert u.dtype == v.dtype and u.shape == v.shape, (f.name, i)
                assert np.array_equal(u, v), (f.name, i)
                assert u.tobytes() == v.tobytes(), (f.name, i)  # bit-equal (also -0.0 vs 0.0)
        elif f.name in ARRAY_FIELDS:
            assert x.dtype == y.dtype and x.shape == y.shape, f.name
            assert x.tobytes() == y.tobytes(), f.name
        else:
            assert x == y, f.name
            assert type(x) is type(y), f.name


@pytest.mark.parametrize("suffix", [".json", ".npz"])
@pytest.mark.parametrize("which", ["trace", "forced_trace"])
def test_file_round_trip_is_lossless(request, tmp_path, suffix, which):
    original = request.getfixturevalue(which)
    path = original.save(tmp_path / f"t{suffix}")
    assert path.is_file()
    loaded = AttentionTrace.load(path)
    assert_traces_identical(original, loaded)
    assert all(isinstance(s, DecodingStep) for s in loaded.steps)
    assert loaded.steps == original.steps


def test_in_memory_round_trips(trace):
    assert_traces_identical(trace, AttentionTrace.from_json(trace.to_json()))
    assert_traces_identical(trace, AttentionTrace.from_npz_bytes(trace.to_npz_bytes()))
    assert_traces_identical(trace, AttentionTrace.from_dict(json.loads(json.dumps(trace.to_dict()))))


def test_json_keeps_float32_values_exactly(trace):
    data = json.loads(trace.to_json())
    for layer, a in enumerate(trace.cross_attentions):
        again = np.asarray(data["cross_attentions"][layer], dtype=np.float32)
        assert again.tobytes() == a.tobytes()
    assert data["source_tokens"] == trace.source_tokens
    assert data["translation"] == trace.translation


def test_unicode_pieces_survive(forced_trace, tmp_path):
    assert any("ä" in t for t in forced_trace.target_tokens + forced_trace.output_tokens)
    for suffix in (".json", ".npz"):
        loaded = AttentionTrace.load(forced_trace.save(tmp_path / f"u{suffix}"))
        assert loaded.translation == "Ein Mädchen springt auf der Straße."
        assert loaded.output_tokens == forced_trace.output_tokens


def test_the_trace_is_valid_and_its_axes_align(trace):
    trace.validate()
    s, t = len(trace.source_tokens), len(trace.target_tokens)
    assert trace.num_layers == {"encoder": len(trace.encoder_attentions), "decoder": len(trace.decoder_attentions),
                                "cross": len(trace.cross_attentions)}
    for kind in ("encoder", "decoder", "cross"):
        q, k = trace.axes(kind)
        for a in trace.attentions(kind):
            assert a.shape == (trace.num_heads, len(q), len(k))
        assert trace.mask(kind).shape == (len(q), len(k))
    assert (len(trace.steps), trace.source_positional.shape[0], trace.target_positional.shape[0]) == (t, s, t)
    with pytest.raises(ValueError, match="encoder, decoder or cross"):
        trace.attentions("self")


def with_changes(trace: AttentionTrace, **changes) -> AttentionTrace:
    return dataclasses.replace(copy.deepcopy(trace), **changes)


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_validate_catches_attention_shape_mismatches(trace, kind):
    maps = [a.copy() for a in trace.attentions(kind)]
    maps[-1] = maps[-1][:, :, :-1]
    broken = with_changes(trace, **{f"{kind}_attentions": maps})
    with pytest.raises(TraceError, match=rf"{kind}_attentions\[{len(maps) - 1}\] has shape"):
        broken.validate()
    flat = with_changes(trace, **{f"{kind}_attentions": [a[0] for a in trace.attentions(kind)]})
    with pytest.raises(TraceError, match="expected \\(heads"):
        flat.validate()


def test_validate_catches_token_mask_and_step_mismatches(trace):
    with pytest.raises(TraceError, match="token lists disagree"):
        with_changes(trace, source_tokens=trace.source_tokens[:-1]).validate()
    with pytest.raises(TraceError, match="token lists disagree"):
        with_changes(trace, output_ids=trace.output_ids + [3]).validate()
    with pytest.raises(TraceError, match="decoder_mask has shape"):
        with_changes(trace, decoder_mask=trace.decoder_mask[:-1]).validate()
    with pytest.raises(TraceError, match="decoding steps"):
        with_changes(trace, steps=trace.steps[:-1]).validate()


def tampered_json(trace: AttentionTrace, change) -> str:
    data = json.loads(trace.to_json())
    change(data)
    return json.dumps(data)


TAMPERINGS = {
    "wrong version": lambda d: d.update(version=99),
    "missing field": lambda d: d.pop("cross_attentions"),
    "unknown field": lambda d: d.update(surprise=1),
    "cut attention row": lambda d: d["encoder_attentions"][0][0].pop(),
    "ragged array": lambda d: d["cross_attentions"][0][0][0].pop(),
    "extra step": lambda d: d["steps"].append(d["steps"][0]),
    "step not an object": lambda d: d.update(steps=[1, 2]),
    "tokens not a list": lambda d: d.update(source_tokens=5),
    "positional not numbers": lambda d: d.update(source_positional="abc"),
}


@pytest.mark.parametrize("name", list(TAMPERINGS))
def test_tampered_json_raises_trace_error(trace, tmp_path, name):
    path = tmp_path / "t.json"
    path.write_text(tampered_json(trace, TAMPERINGS[name]), encoding="utf-8")
    with pytest.raises(TraceError):
        AttentionTrace.load(path)


@pytest.mark.parametrize("content", [b"", b"{", b"[1, 2]", b"null", b"42", b"\xff\xfe\x00\x01garbage",
                                     b'{"version": 1}'])
def test_garbage_json_files_raise_trace_error(tmp_path, content):
    path = tmp_path / "g.json"
    path.write_bytes(content)
    with pytest.raises(TraceError):
        AttentionTrace.load(path)


def test_garbage_and_tampered_npz_raise_trace_error(trace, tmp_path):
    good = trace.to_npz_bytes()
    cases = {"empty": b"", "garbage": b"garbage" * 20, "truncated": good[:len(good) // 2],
             "zip without header": _zip_with({"a.npy": b"nothing"})}
    # a well-formed npz whose header says another version, or whose arrays do not fit the tokens
    with np.load(io.BytesIO(good)) as npz:
        arrays = {k: npz[k] for k in npz.files}
    header = json.loads(arrays["header"].tobytes())
    for name, change in (("version", {"version": 7}), ("tokens", {"source_tokens": header["source_tokens"][:-1]}),
                         ("not an object", None)):
        new = dict(arrays)
        text = json.dumps([1, 2]) if change is None else json.dumps({**header, **change})
        new["header"] = np.frombuffer(text.encode(), np.uint8)
        buffer = io.BytesIO()
        np.savez(buffer, **new)
        cases[name] = buffer.getvalue()
    new = dict(arrays)
    new["encoder_attentions/0"] = new["encoder_attentions/0"][:, :1]
    buffer = io.BytesIO()
    np.savez(buffer, **new)
    cases["shape"] = buffer.getvalue()
    for name, data in cases.items():
        path = tmp_path / f"{name.replace(' ', '_')}.npz"
        path.write_bytes(data)
        with pytest.raises(TraceError):
            AttentionTrace.load(path)
        with pytest.raises(TraceError):
            AttentionTrace.from_npz_bytes(data)


def _zip_with(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buffer.getvalue()


def test_npz_never_unpickles(trace, tmp_path):
    """An .npz holding a pickled object array is refused (allow_pickle=False), not executed."""
    with np.load(io.BytesIO(trace.to_npz_bytes())) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["source_positional"] = np.array([object()], dtype=object)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    with pytest.raises(TraceError):
        AttentionTrace.from_npz_bytes(buffer.getvalue())


def test_file_name_errors(trace, tmp_path):
    with pytest.raises(TraceError, match="unknown trace format"):
        trace.save(tmp_path / "t.txt")
    (tmp_path / "t.txt").write_text("{}")
    with pytest.raises(TraceError, match="unknown trace format"):
        AttentionTrace.load(tmp_path / "t.txt")
    with pytest.raises(TraceError, match="not found"):
        AttentionTrace.load(tmp_path / "missing.json")
    assert issubclass(TraceError, ValueError)


# each family's settings (as its import writes them), whether its token embeddings are scaled by sqrt(d_model), and
# whether anything is added to them
FAMILIES = {
    "Marian": ({}, True, True),
    "T5": ({"positional": "relative", "norm": "pre", "normalization": "rms", "scale_scores": False,
            "scale_embeddings": False, "attention_bias": False, "ffn_bias": False}, False, False),
    "BART": ({"positional": "learned", "position_offset": 2, "scale_embeddings": False, "embedding_norm": True},
             False, True),
    "mBART": ({"positional": "learned", "position_offset": 2, "embedding_norm": True, "norm": "pre"}, True, True),
}


def docstring_entry(name: str) -> str:
    """The `AttentionTrace` docstring's entry for one field, on one line."""
    found = re.search(rf":ivar {name}:(.*?)(?=:ivar|$)", AttentionTrace.__doc__, re.S)
    return " ".join(found.group(1).split())


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_embedding_fields_hold_what_the_docstring_says_for_each_family(tokenizer, family):
    """CPU, float32: T5's and BART's token embeddings are not scaled by sqrt(d_model), and the docstring says so."""
    changes, scaled, added = FAMILIES[family]
    torch.manual_seed(0)
    network = Transformer(tiny_model_config(tokenizer.vocab_size, **changes))
    trace = TranslationModel(network, tokenizer, device="cpu").trace("Two dogs are playing.", beam=1)
    weight = network.src_embedding.weight.detach().numpy()
    factor = math.sqrt(network.config.d_model) if scaled else 1.0
    np.testing.assert_allclose(trace.source_embeddings, weight[trace.source_ids] * factor, rtol=1e-6)
    assert bool(np.abs(trace.source_positional).max() > 0) == added
    entry, positional = docstring_entry("source_embeddings"), docstring_entry("source_positional")
    said = entry.split("not scaled")[1] if not scaled else entry.split("times sqrt(d_model)")[1].split("not scaled")[0]
    assert family in said, (family, entry)
    assert family in (positional.split("zeros")[1] if not added else positional.split("zeros")[0]), positional
