"""Models already in memory (issue 45): `viz_model.from_transformers` against its folder twin, and hub ids in `load`.

A small random Marian, T5, BART, M2M100, mBART-50 and original mBART model is saved as a folder (tests/support) and
imported with ``viz-model import``; the same folder loaded by transformers and handed to `from_transformers` must give
the same model: config, weights, tokenizer ids, card, settings, translations and every attention map of the trace,
equal. Nothing is left on disk, and the transformers model passed in is not changed. The hub download itself is not
run (no network here): the cache's reuse and the offline and missing-package errors are, with the hub client replaced.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
from support.hf import WORDS_EN, build_m2m100_folder, build_marian_folder, import_folder, sentences  # noqa: E402
from support.hf_families import (  # noqa: E402
    build_bart_folder,
    build_mbart50_folder,
    build_original_mbart_folder,
    build_t5_folder,
)

import viz_model  # noqa: E402
from viz_model.hf.hub_cache import CACHE_ENV  # noqa: E402
from viz_model.hf.importer import HFImportError, import_model  # noqa: E402
from viz_model.hf.in_memory import SUPPORTED  # noqa: E402

BUILDERS = {"marian": (build_marian_folder, "MarianMTModel"), "t5": (build_t5_folder, "T5ForConditionalGeneration"),
            "bart": (build_bart_folder, "BartForConditionalGeneration"),
            "m2m100": (build_m2m100_folder, "M2M100ForConditionalGeneration"),  # NLLB's class too
            "mbart50": (build_mbart50_folder, "MBartForConditionalGeneration"),
            "mbart": (build_original_mbart_folder, "MBartForConditionalGeneration")}
TEXTS = sentences(WORDS_EN, 3, 21)
TRACE_MAPS = ("encoder_attentions", "decoder_attentions", "cross_attentions")


@pytest.fixture(scope="module", params=list(BUILDERS))
def family(request):
    return request.param


@pytest.fixture(scope="module")
def folder(family, tmp_path_factory):
    return BUILDERS[family][0](tmp_path_factory.mktemp("hf"))


@pytest.fixture(scope="module")
def hf(folder, family):
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()
    assert type(model).__name__ == BUILDERS[family][1]
    return model, transformers.AutoTokenizer.from_pretrained(folder)


@pytest.fixture(scope="module")
def twin(folder, tmp_path_factory):
    return import_folder(folder, tmp_path_factory, folder.name)


@pytest.fixture(scope="module")
def pair(hf, twin, tmp_path_factory):
    """`from_transformers` of the loaded model, with the temporary folder pointed at a directory of its own, and
    that directory's contents afterwards."""
    model, tok = hf
    before = {k: v.clone() for k, v in model.state_dict().items()}
    scratch = tmp_path_factory.mktemp("scratch")
    saved, tempfile.tempdir = tempfile.tempdir, str(scratch)
    try:
        mem = viz_model.from_transformers(model, tok, device="cpu", precision="fp32")
    finally:
        tempfile.tempdir = saved
    return mem, twin, before, list(scratch.iterdir())


def test_the_model_in_memory_is_its_folder_twin(pair, folder):
    mem, twin, _, _ = pair
    assert isinstance(mem, viz_model.TranslationModel) and mem.imported
    assert dataclasses.asdict(mem.config) == dataclasses.asdict(twin.config)
    mine, theirs = mem.network.state_dict(), twin.network.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    assert mem.name == twin.name == folder.name and mem.languages == twin.languages
    assert mem.generation == twin.generation and mem.target_languages == twin.target_languages
    # the card names the same source; only the licence, read from the folder's README, is not in memory
    licence = re.compile(r"Licence: .+?\. ")  # "apache-2.0. ", "cc-by-4.0. ", "mit. ", ...
    assert licence.sub("Licence: L. ", mem.card) == licence.sub("Licence: L. ", twin.card)
    assert "Licence: not stated in the folder" in mem.card
    for text in TEXTS:
        assert mem.encode(text) == twin.encode(text)


def test_translations_and_every_trace_map_equal_the_twins(pair):
    mem, twin, _, _ = pair
    assert mem.translate(TEXTS) == twin.translate(TEXTS)
    for text in TEXTS:
        ours, theirs = mem.trace(text, beam=2), twin.trace(text, beam=2)
        assert ours.output_ids == theirs.output_ids and ours.target_tokens == theirs.target_tokens
        for name in TRACE_MAPS:
            a, b = getattr(ours, name), getattr(theirs, name)
            assert len(a) == len(b) > 0 and all(np.array_equal(x, y) for x, y in zip(a, b)), name


def test_nothing_is_kept_on_disk_and_the_model_passed_in_is_unchanged(pair, hf):
    mem, _, before, left = pair
    model, tok = hf
    assert left == [] and mem.directory is None
    assert not model.training
    after = model.state_dict()
    assert after.keys() == before.keys() and all(torch.equal(before[k], after[k]) for k in before)
    with torch.no_grad():  # still usable by transformers
        ids = tok(TEXTS[0], return_tensors="pt").input_ids
        out = model.generate(ids, num_beams=1, do_sample=False, max_new_tokens=3)
    assert out.shape[0] == 1
    with pytest.raises(ValueError, match="no directory"):
        mem.worker_pool(1)


def test_a_half_precision_model_in_memory_is_its_half_precision_folders_twin(family, folder, tmp_path,
                                                                            tmp_path_factory):
    """A model loaded in fp16 (as people load big ones) imports as the fp16 folder it saves: weights in float32."""
    half = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder, dtype=torch.float16).eval()
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    mem = viz_model.from_transformers(half, tok, device="cpu", precision="fp32")
    half.save_pretrained(tmp_path / folder.name)
    tok.save_pretrained(tmp_path / folder.name)
    twin = import_folder(tmp_path / folder.name, tmp_path_factory, folder.name)
    assert next(mem.network.parameters()).dtype == torch.float32 and half.dtype == torch.float16
    mine, theirs = mem.network.state_dict(), twin.network.state_dict()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)
    assert mem.translate(TEXTS) == twin.translate(TEXTS)


def refused(tmp_path, model, tokenizer) -> str:
    """`from_transformers` must refuse in one line and write nothing; returns the line."""
    saved, tempfile.tempdir = tempfile.tempdir, str(tmp_path)
    try:
        with pytest.raises(HFImportError) as info:
            viz_model.from_transformers(model, tokenizer, device="cpu")
    finally:
        tempfile.tempdir = saved
    message = str(info.value)
    assert "\n" not in message and list(tmp_path.iterdir()) == [], message
    return message


def test_a_model_of_another_class_is_refused_naming_the_supported_ones(tmp_path):
    tok = object()
    bert = transformers.BertModel(transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                                          num_attention_heads=2, intermediate_size=32))
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=50, n_embd=16, n_layer=1, n_head=2,
                                                             bos_token_id=0, eos_token_id=0))
    headless = transformers.MarianModel(transformers.MarianConfig(vocab_size=50, d_model=16, encoder_layers=1,
                                                                  decoder_layers=1, encoder_attention_heads=2,
                                                                  decoder_attention_heads=2, encoder_ffn_dim=32,
                                                                  decoder_ffn_dim=32, pad_token_id=1,
                                                                  decoder_start_token_id=1, eos_token_id=0))
    for model, kind in ((bert, "bert"), (gpt2, "gpt2"), (headless, "marian")):
        message = refused(tmp_path, model, tok)
        assert message.startswith(f"{type(model).__name__} ({kind}): not a class") and SUPPORTED in message
    assert "MarianMTModel" in SUPPORTED and "T5ForConditionalGeneration" in SUPPORTED


def test_what_is_no_transformers_model_or_tokenizer_is_refused(tmp_path, hf, monkeypatch):
    model, tok = hf
    assert refused(tmp_path, "Helsinki-NLP/opus-mt-en-de", tok).startswith("str: not a transformers model")
    assert refused(tmp_path, model, "tokenizer").startswith("str: not a transformers tokenizer")
    monkeypatch.setitem(sys.modules, "transformers", None)
    assert refused(tmp_path, model, tok) == 'transformers is not installed: pip install "viz-model[hf]"'


def test_a_hub_id_is_imported_once_into_the_cache_and_reused(folder, twin, tmp_path, monkeypatch):
    import huggingface_hub

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    calls = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *a, **k: calls.append(a) or str(folder))
    first = viz_model.load("org/tiny-model", device="cpu", precision="fp32")
    assert calls == [("org/tiny-model",)] and first.directory == tmp_path / "cache" / "org--tiny-model"
    assert "# org/tiny-model (imported)" in first.card
    again = viz_model.load("org/tiny-model", device="cpu", precision="fp32")
    assert len(calls) == 1 and again.directory == first.directory
    assert again.translate(TEXTS) == twin.translate(TEXTS)


def test_a_cache_filled_beforehand_is_used_without_the_hub(folder, tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    import_model(str(folder), tmp_path / "org--name")
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # the hub client is never asked
    assert viz_model.load("org/name", device="cpu").directory == tmp_path / "org--name"


def test_offline_or_without_the_hub_client_one_line_says_what_to_do(tmp_path, monkeypatch):
    import huggingface_hub

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))

    def offline(*args, **kwargs):
        raise OSError("offline")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(viz_model.CheckpointError) as info:
        viz_model.load("org/name", device="cpu")
    message = str(info.value)
    assert "\n" not in message and message.startswith("org/name: the hub could not be reached")
    assert "`hf download org/name --local-dir DIR`" in message
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(viz_model.CheckpointError, match=r'huggingface_hub is not installed \(pip install '
                                                         r'"viz-model\[hf\]"\)'):
        viz_model.load("org/name", device="cpu")
    assert not (tmp_path / "cache" / "org--name").exists()
    for path in (str(tmp_path / "missing" / "model"), Path("org/name")):  # no hub id: no hub lookup
        with pytest.raises(viz_model.CheckpointError) as info:
            viz_model.load(path, device="cpu")
        assert "huggingface_hub" not in str(info.value)
