"""The public API: viz_model.load(), TranslationModel.translate / trace, bad input, thread safety."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

import viz_model
from viz_model.data.typed_text import MAX_INPUT_CHARS
from viz_model.modeldir.shipped import available_models
from viz_model.nn.devices import resolve_device
from viz_model.nn.model import HeadMask
from viz_model.nn.positional import sinusoidal_table
from viz_model.search.requests import MAX_TOP_K
from viz_model.search.settings import MAX_BEAM
from viz_model.tokenization.tokenizer import BOS_ID, EOS_ID, UNK_ID, word_ids

TEXT = "Two dogs are playing in the snow."


@pytest.fixture(scope="module")
def trace(tiny_model):
    return tiny_model.trace(TEXT, beam=4)


def test_load_a_model_directory(tiny_model, model_dir, tiny_config):
    assert isinstance(tiny_model, viz_model.TranslationModel)
    assert tiny_model.name == model_dir.name and tiny_model.directory == model_dir
    assert tiny_model.config == tiny_config
    assert tiny_model.card.startswith("# tiny-en-de")
    assert tiny_model.device == torch.device("cpu") and tiny_model.device_label == "CPU"
    assert not tiny_model.network.training


def test_trace_shapes_follow_the_config_and_the_token_lists(trace, tiny_model):
    cfg = tiny_model.config
    s, t = len(trace.source_tokens), len(trace.target_tokens)
    assert len(trace.encoder_attentions) == cfg.encoder_layers
    assert len(trace.decoder_attentions) == len(trace.cross_attentions) == cfg.decoder_layers
    assert all(a.shape == (cfg.heads, s, s) for a in trace.encoder_attentions)
    assert all(a.shape == (cfg.heads, t, t) for a in trace.decoder_attentions)
    assert all(a.shape == (cfg.heads, t, s) for a in trace.cross_attentions)
    assert all(a.dtype == np.float32 for a in trace.encoder_attentions + trace.cross_attentions)
    assert trace.num_heads == cfg.heads
    assert (len(trace.source_ids), len(trace.source_words)) == (s, s)
    assert (len(trace.target_ids), len(trace.target_words), len(trace.output_ids), len(trace.steps)) == (t, t, t, t)
    assert trace.source_positional.shape == trace.source_embeddings.shape == (s, cfg.d_model)
    assert trace.target_positional.shape == trace.target_embeddings.shape == (t, cfg.d_model)
    assert trace.config == cfg.to_dict()
    trace.validate()


def test_trace_tokens_include_the_special_tokens(trace, tiny_model):
    tok = tiny_model.tokenizer
    assert trace.source_ids == tok.encode(TEXT) + [EOS_ID] and trace.source_tokens[-1] == "</s>"
    assert trace.target_ids == [BOS_ID] + trace.output_ids[:-1] and trace.target_tokens[0] == "<s>"
    assert trace.output_ids[-1] == EOS_ID and trace.output_tokens[-1] == "</s>"
    assert trace.source_tokens == tok.pieces(trace.source_ids)
    assert trace.source_words == word_ids(trace.source_tokens)
    assert trace.translation == tok.decode(trace.output_ids)
    assert trace.translation == tiny_model.translate(TEXT, beam=4)
    assert trace.source_text == TEXT


def test_trace_maps_are_distributions_with_the_recorded_masks(trace):
    for kind in ("encoder", "decoder", "cross"):
        mask = trace.mask(kind)
        assert mask.dtype == np.bool_
        for a in trace.attentions(kind):
            np.testing.assert_allclose(a.sum(-1), 1.0, atol=1e-5)
            assert np.all(a[:, ~mask] == 0.0)
    t = len(trace.target_tokens)
    assert np.array_equal(trace.decoder_mask, np.tril(np.ones((t, t), dtype=bool)))
    assert trace.encoder_mask.all() and trace.cross_mask.all()  # one sentence: nothing padded


def test_trace_maps_equal_a_direct_forward_pass(trace, tiny_model):
    net = tiny_model.network
    with torch.no_grad():
        out = net(torch.tensor([trace.source_ids]), torch.tensor([trace.target_ids]), need_weights=True)
    for ours, theirs in ((trace.encoder_attentions, out.encoder_attentions),
                         (trace.decoder_attentions, out.decoder_attentions),
                         (trace.cross_attentions, out.cross_attentions)):
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b[0].numpy(), atol=1e-6)


def test_trace_positions_embeddings_and_steps(trace, tiny_model):
    cfg = tiny_model.config
    s, t = len(trace.source_tokens), len(trace.target_tokens)
    table = sinusoidal_table(cfg.max_positions, cfg.d_model).numpy()
    np.testing.assert_array_equal(trace.source_positional, table[:s])
    np.testing.assert_array_equal(trace.target_positional, table[:t])
    weight = tiny_model.network.src_embedding.weight.detach().numpy()
    np.testing.assert_allclose(trace.source_embeddings, weight[trace.source_ids] * math.sqrt(cfg.d_model), rtol=1e-6)
    total = 0.0
    for i, step in enumerate(trace.steps):
        assert (step.position, step.input_id, step.token_id) == (i, trace.target_ids[i], trace.output_ids[i])
        assert step.input_token == trace.target_tokens[i] and step.token == trace.output_tokens[i]
        assert len(step.top_ids) == len(step.top_tokens) == len(step.top_probabilities) == 5
        assert step.top_probabilities == sorted(step.top_probabilities, reverse=True)
        assert 0 < step.probability <= step.top_probabilities[0] + 1e-6
        if step.token_id in step.top_ids:
            assert step.top_probabilities[step.top_ids.index(step.token_id)] == pytest.approx(step.probability)
        total += math.log(step.probability)
    assert trace.log_probability == pytest.approx(total, abs=1e-4)
    assert trace.settings == {"beam": 4, "alpha": 0.6, "top_k": 5, "forced": False,
                              "max_output_length": s + 50 if s + 50 < cfg.max_positions else cfg.max_positions - 1,
                              "head_mask": False, "positions": True, "search": "int8", "rule": "project"}
    forced = tiny_model.trace("A dog runs.", target="Ein Hund läuft.").settings
    assert forced["search"] == forced["rule"] == "forced"
    assert set(trace.timings) >= {"decode_ms", "trace_ms", "total_ms"}
    assert trace.device == "CPU" and trace.model_name == tiny_model.name


def test_greedy_trace_picks_the_top_candidate(tiny_model):
    trace = tiny_model.trace("A man is running in the park.", beam=1, top_k=3)
    assert all(step.token_id == step.top_ids[0] for step in trace.steps)
    assert all(len(step.top_ids) == 3 for step in trace.steps)


def test_forced_target(tiny_model):
    target = "Ein alter Mann wartet am Strand."
    trace = tiny_model.trace(TEXT, target=target)
    assert trace.output_ids == tiny_model.tokenizer.encode(target) + [EOS_ID]
    assert trace.translation == target
    assert trace.settings["forced"] is True
    cfg = tiny_model.config
    t = len(trace.target_tokens)
    assert all(a.shape == (cfg.heads, t, t) for a in trace.decoder_attentions)
    assert trace.log_probability < 0
    with pytest.raises(ValueError, match="target is empty"):
        tiny_model.trace(TEXT, target="  ")
    with pytest.raises(ValueError, match=str(cfg.max_positions)):
        tiny_model.trace(TEXT, target="Hund " * 100)


def test_forced_output_ids(tiny_model, trace):
    forced = tiny_model.trace(TEXT, forced_ids=trace.output_ids)
    assert forced.output_ids == trace.output_ids and forced.settings["forced"] is True
    assert forced.log_probability == pytest.approx(trace.log_probability, abs=1e-4)
    without_eos = tiny_model.trace(TEXT, forced_ids=trace.output_ids[:-1])
    assert without_eos.output_ids == trace.output_ids
    vocab = tiny_model.config.vocab_size
    for bad in ([], [vocab], [-1], [True], "Hund", [1.5]):
        with pytest.raises(ValueError, match="forced_ids must be a non-empty list of piece ids"):
            tiny_model.trace(TEXT, forced_ids=bad)
    with pytest.raises(ValueError, match="not both"):
        tiny_model.trace(TEXT, target="Hund", forced_ids=[5])
    with pytest.raises(ValueError, match=f"at most {tiny_model.config.max_positions}"):
        tiny_model.trace(TEXT, forced_ids=[5] * tiny_model.config.max_positions)


def test_head_mask_in_a_trace(tiny_model, trace):
    cfg = tiny_model.config
    mask = torch.ones(cfg.encoder_layers, cfg.heads)
    mask[0, 0] = 0
    ablated = tiny_model.trace(TEXT, target=trace.translation, head_mask=HeadMask(encoder=mask))
    assert ablated.settings["head_mask"] is True
    assert not np.allclose(ablated.encoder_attentions[-1], trace.encoder_attentions[-1])
    np.testing.assert_allclose(ablated.encoder_attentions[0], trace.encoder_attentions[0], atol=1e-6)


def test_translate_single_and_batched(tiny_model):
    texts = ["A man is running in the park.", TEXT, "The cat is sitting near the water.", "Hello"]
    single = tiny_model.translate(texts[0])
    assert isinstance(single, str) and single
    batched = tiny_model.translate(texts, beam=4)
    assert isinstance(batched, list) and len(batched) == 4
    assert batched == [tiny_model.translate(t, beam=4) for t in texts]
    assert tiny_model.translate(texts, beam=1) == [tiny_model.trace(t, beam=1).translation for t in texts]
    assert tiny_model.translate([]) == []


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_empty_input_is_a_value_error(tiny_model, text):
    with pytest.raises(ValueError, match="empty"):
        tiny_model.trace(text)
    with pytest.raises(ValueError, match="empty"):
        tiny_model.translate(text)
    with pytest.raises(ValueError, match="empty"):
        tiny_model.translate(["A man.", text])


def test_too_long_input_names_the_limit_and_truncate_works(tiny_model):
    limit = tiny_model.config.max_positions
    text = " ".join(["The dogs are playing."] * 40)
    with pytest.raises(ValueError) as err:
        tiny_model.trace(text)
    assert str(limit) in str(err.value) and "truncate" in str(err.value)
    with pytest.raises(ValueError, match=str(limit)):
        tiny_model.translate(text)
    trace = tiny_model.trace(text, truncate=True, beam=2)
    assert len(trace.source_tokens) == limit and trace.source_tokens[-1] == "</s>"
    assert max(len(trace.target_tokens), len(trace.source_tokens)) <= limit
    trace.validate()
    assert isinstance(tiny_model.translate(text, truncate=True), str)
    with pytest.raises(ValueError, match=str(MAX_INPUT_CHARS)):
        tiny_model.trace("a" * (MAX_INPUT_CHARS + 1), truncate=True)


@pytest.mark.parametrize("text", [
    "A dog 😀🐶 is running.",  # emoji
    "שלום עולם, הכלב רץ בשלג",  # right-to-left script
    "مرحبا بالعالم",  # Arabic
    "A man\u200d is\u200f running.",  # zero-width joiner, right-to-left mark
    "Ω≈ç√∫˜µ≤ ¯˘¿ ЖЁ",
    "a" * 500,  # a 500-character word
    "Supercalifragilisticexpialidocious" * 15,
])
def test_odd_input_gives_a_translation_or_a_clear_value_error(tiny_model, text):
    try:
        trace = tiny_model.trace(text, beam=2)
    except ValueError as err:
        assert "max_positions" in str(err) or "characters" in str(err), err
        trace = tiny_model.trace(text, beam=2, truncate=True)
    trace.validate()
    assert isinstance(trace.translation, str)
    assert isinstance(tiny_model.translate(text, beam=2, truncate=True), str)


def test_unknown_characters_are_shown_as_unk(tiny_model):
    trace = tiny_model.trace("A dog 😀 שלום", beam=1)
    assert UNK_ID in trace.source_ids and "<unk>" in trace.source_tokens
    assert len(trace.source_tokens) == len(tiny_model.tokenizer.encode("A dog 😀 שלום")) + 1


@pytest.mark.parametrize("text", ["A man\x00 is running.", "\x00", "bell\x07", "esc \x1b[31m red"])
def test_control_characters_are_a_value_error(tiny_model, text):
    with pytest.raises(ValueError, match="control characters"):
        tiny_model.trace(text)
    with pytest.raises(ValueError, match="U\\+00"):
        tiny_model.translate(text)


@pytest.mark.parametrize("value", [None, 42, b"bytes", ["nested", ["list"]]])
def test_non_string_input_is_a_value_error(tiny_model, value):
    with pytest.raises(ValueError, match="must be a string"):
        tiny_model.trace(value)


@pytest.mark.parametrize("kwargs, match", [
    ({"beam": 0}, "beam"), ({"beam": MAX_BEAM + 1}, "beam"), ({"beam": 2.0}, "beam"), ({"beam": True}, "beam"),
    ({"beam": "4"}, "beam"), ({"alpha": -0.1}, "alpha"), ({"alpha": float("nan")}, "alpha"),
    ({"alpha": float("inf")}, "alpha"), ({"alpha": "0.6"}, "alpha"), ({"alpha": 6}, "alpha"),
    ({"top_k": 0}, "top_k"), ({"top_k": MAX_TOP_K + 1}, "top_k"), ({"top_k": 1.5}, "top_k"),
])
def test_bad_decoding_settings(tiny_model, kwargs, match):
    with pytest.raises(ValueError, match=match):
        tiny_model.trace(TEXT, **kwargs)
    kwargs.pop("top_k", None)
    if kwargs:
        with pytest.raises(ValueError, match=match):
            tiny_model.translate(TEXT, **kwargs)


def test_threads_sharing_one_model_get_sequential_results(tiny_model):
    texts = ["A man is running in the park.", TEXT, "The cat is sitting near the water.",
             "Three people are jumping in front of a house.", "A girl is waiting.", "The boy is walking.",
             "An old man is standing on the street.", "A young woman is sitting in a red car."]
    settings = [{"beam": 1 + i % 4, "target": "Ein Mann." if i == 5 else None} for i in range(len(texts))]
    sequential = [tiny_model.trace(t, **s) for t, s in zip(texts, settings)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        parallel = list(pool.map(lambda args: tiny_model.trace(args[0], **args[1]), zip(texts, settings)))
        translated = list(pool.map(lambda t: tiny_model.translate(t, beam=3), texts))
    for a, b in zip(sequential, parallel):
        assert a.translation == b.translation and a.output_ids == b.output_ids
        assert a.log_probability == pytest.approx(b.log_probability, abs=1e-6)
        for kind in ("encoder", "decoder", "cross"):
            for x, y in zip(a.attentions(kind), b.attentions(kind)):
                np.testing.assert_allclose(x, y, atol=1e-6, rtol=1e-6)
    assert translated == tiny_model.translate(texts, beam=3)


def test_load_errors(tmp_path, monkeypatch):
    with pytest.raises(viz_model.CheckpointError, match="model directory not found"):
        viz_model.load(tmp_path / "missing")
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    with pytest.raises(viz_model.CheckpointError, match="no default model"):
        viz_model.load()


def test_default_model_comes_from_the_assets_directory(tmp_path, monkeypatch, model_dir):
    import shutil

    shutil.copytree(model_dir, tmp_path / viz_model.DEFAULT_MODEL)
    shutil.copytree(model_dir, tmp_path / "another")
    (tmp_path / "not-a-model").mkdir()
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    assert available_models() == [viz_model.DEFAULT_MODEL, "another"]
    assert available_models(tmp_path / "nothing") == []
    model = viz_model.load(device="cpu")
    assert model.name == viz_model.DEFAULT_MODEL


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="device must be"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA"):
            resolve_device("cuda")


def test_request_is_the_one_check_of_a_translation(tiny_model):
    """`request` checks text and target and gives the ids `trace` uses; a length is a `TooLong` with its numbers."""
    from viz_model.search.requests import TooLong

    checked = tiny_model.request("A man is running.", "Ein Mann läuft.")
    trace = tiny_model.trace("A man is running.", target="Ein Mann läuft.")
    assert checked.source_ids == trace.source_ids and checked.forced_ids == trace.output_ids
    assert tiny_model.request("A man.").forced_ids is None
    limit = tiny_model.config.max_positions
    with pytest.raises(TooLong) as too_long:
        tiny_model.request("word " * limit)
    assert (too_long.value.side, too_long.value.limit) == ("source", limit) and too_long.value.tokens > limit
    with pytest.raises(TooLong) as too_long:
        tiny_model.request("A man.", "Wort " * limit)
    assert too_long.value.side == "target" and "the target is" in str(too_long.value)
    with pytest.raises(ValueError, match="the sentence is empty"):
        tiny_model.request(" ", names=("the sentence", "the target text"))
    assert len(tiny_model.request("word " * limit, truncate=True).source_ids) == limit
