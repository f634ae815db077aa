"""Hugging Face mT5 models open exactly in the instrumented model (issue 45).

A small random `MT5ForConditionalGeneration` (``model_type`` "mt5": T5 v1.1's architecture, gated GELU, heads of d_kv
12 with 4 x 12 != d_model, the head its own matrix, never rescaled) with a SentencePiece tokenizer of
several scripts trained here, saved as transformers 5 saves it and imported with ``viz-model import``. Logits, every
attention map, greedy output and tokenizer ids equal transformers'; the model has no task prefix of its own.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
from support.data import assert_loads_as_built  # noqa: E402
from support.hf import WORDS_EN, assert_same_forced_outputs, failed_import, import_folder, sentences  # noqa: E402
from support.hf_families import (  # noqa: E402
    WORDS_MANY,
    assert_greedy_equals_generate,
    assert_same_ids,
    build_mt5_folder,
)

import viz_model  # noqa: E402
from viz_model.cli.main import main  # noqa: E402
from viz_model.tokenization.tokenizer_json import JsonTokenizer  # noqa: E402

MANY = sentences(WORDS_MANY, 20, 8)  # sentences of other scripts than the Latin one


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return build_mt5_folder(tmp_path_factory.mktemp("hf"))


@pytest.fixture(scope="module")
def hf(folder):
    model = transformers.MT5ForConditionalGeneration.from_pretrained(folder, attn_implementation="eager")
    return model.eval(), transformers.AutoTokenizer.from_pretrained(folder)


@pytest.fixture(scope="module")
def imported(folder, tmp_path_factory):
    return import_folder(folder, tmp_path_factory, folder.name)


def test_the_config_names_what_mt5_does(imported, hf):
    cfg, (model, _) = imported.config, hf
    assert (cfg.positional, cfg.norm, cfg.normalization, cfg.norm_eps) == ("relative", "pre", "rms", 1e-6)
    assert not (cfg.scale_scores or cfg.scale_embeddings or cfg.attention_bias or cfg.ffn_bias)
    assert (cfg.gated_ffn, cfg.activation, cfg.d_head) == (True, "gelu_new", 12)
    assert (cfg.tied_head, cfg.head_rescale) == (False, False) and model.lm_head.weight is not model.shared.weight
    assert torch.equal(imported.network.output_projection.weight, model.lm_head.weight)
    assert cfg.bos_id == cfg.pad_id == 0 and cfg.eos_id == 1 and cfg.vocab_size == model.config.vocab_size
    assert isinstance(imported.tokenizer, JsonTokenizer) and not (imported.directory / "languages.json").exists()
    assert "(mt5, model.safetensors)" in imported.card and "small random mT5 models" in imported.card


def test_tokenizer_ids_equal_hugging_face_in_every_script(hf, imported):
    _, hf_tok = hf
    assert_same_ids(hf_tok, imported)
    for text in MANY:
        assert imported.encode(text) == hf_tok(text).input_ids, text
        assert imported.tokenizer.decode(hf_tok(text).input_ids) == hf_tok.decode(hf_tok(text).input_ids,
                                                                                  skip_special_tokens=True), text
    ids = hf_tok(MANY[0]).input_ids
    assert imported.tokenizer.pieces(ids) == hf_tok.convert_ids_to_tokens(ids)


def test_logits_and_every_attention_map_equal_hugging_face(hf, imported):
    pairs = assert_same_forced_outputs(*hf, imported, texts=sentences(WORDS_EN, 4, 3) + MANY[:3])
    worst = max(float((o.logits - t.logits).abs().max()) for o, t in pairs)
    assert worst < 1e-5  # measured: ~7e-7 (the attention maps ~4e-7)


def test_greedy_output_equals_generate(hf, imported):
    assert_greedy_equals_generate(*hf, imported)


def test_the_imported_model_loads_as_built(imported):
    assert_loads_as_built(imported.directory)


def test_it_has_no_task_prefix_but_takes_one(imported, hf):
    _, hf_tok = hf
    assert imported.task_prefix == "" and imported.encode("A dog.") == hf_tok("A dog.").input_ids
    asked = imported.with_task_prefix("translate English to German: ")
    assert asked.task_prefix == "translate English to German: " and imported.task_prefix == ""
    assert asked.network is imported.network
    assert asked.encode("A dog.") == hf_tok("translate English to German: A dog.").input_ids
    assert asked.translate("A dog.", beam=1) == asked.trace("A dog.", beam=1).translation


def edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | changes))


def test_a_tied_head_is_never_rescaled(folder, tmp_path):
    """A checkpoint without lm_head is tied; unlike T5 v1.0, MT5ForConditionalGeneration does not rescale."""
    from safetensors.torch import load_file, save_file

    copy = tmp_path / "tied"
    shutil.copytree(folder, copy)
    tensors = load_file(str(copy / "model.safetensors"))
    tensors.pop("lm_head.weight")
    save_file(tensors, str(copy / "model.safetensors"), metadata={"format": "pt"})
    edit_config(copy, tie_word_embeddings=True, scale_decoder_outputs=True)  # not an mT5 setting: ignored
    assert main(["import", str(copy), "--out", str(tmp_path / "out")]) == 0
    ours = viz_model.load(tmp_path / "out", device="cpu", precision="fp32")
    theirs = transformers.MT5ForConditionalGeneration.from_pretrained(copy).eval()
    assert (ours.config.tied_head, ours.config.head_rescale) == (True, False)
    assert theirs.lm_head.weight is theirs.shared.weight
    src, tgt = torch.tensor([[5, 9, 11, 1]]), torch.tensor([[0, 7, 8]])
    with torch.no_grad():
        np.testing.assert_allclose(ours.network(src, tgt).logits.numpy(),
                                   theirs(input_ids=src, decoder_input_ids=tgt).logits.numpy(), atol=1e-5)


def test_without_feed_forward_proj_it_is_gated_gelu_as_mt5config_says(folder, tmp_path):
    copy = tmp_path / "default"
    shutil.copytree(folder, copy)
    config = json.loads((copy / "config.json").read_text())
    del config["feed_forward_proj"]  # T5Config's default is relu, MT5Config's gated-gelu
    (copy / "config.json").write_text(json.dumps(config))
    assert main(["import", str(copy), "--out", str(tmp_path / "out")]) == 0
    ours = viz_model.load(tmp_path / "out", device="cpu", precision="fp32")
    theirs = transformers.MT5ForConditionalGeneration.from_pretrained(copy).eval()
    assert (ours.config.gated_ffn, ours.config.activation) == (True, "gelu_new") == \
        (theirs.config.is_gated_act, theirs.config.dense_act_fn)
    src, tgt = torch.tensor([[5, 9, 11, 1]]), torch.tensor([[0, 7, 8]])
    with torch.no_grad():
        np.testing.assert_allclose(ours.network(src, tgt).logits.numpy(),
                                   theirs(input_ids=src, decoder_input_ids=tgt).logits.numpy(), atol=1e-5)


def test_the_model_in_memory_is_imported_too(hf, imported):
    model, hf_tok = hf
    mem = viz_model.from_transformers(model, hf_tok, device="cpu", precision="fp32")
    assert mem.config == imported.config and mem.encode(MANY[1]) == imported.encode(MANY[1])


@pytest.mark.parametrize("change, names", [
    (lambda f: edit_config(f, feed_forward_proj="gated-tanh"), "feed_forward_proj 'gated-tanh'"),
    (lambda f: edit_config(f, is_encoder_decoder=False), "is_encoder_decoder"),
    (lambda f: edit_config(f, relative_attention_num_buckets=2), "relative_buckets must be in"),
    (lambda f: (f / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "MT5Tokenizer"})),
     "tokenizer_class 'MT5Tokenizer'"),  # transformers 4's name, gone in 5
    (lambda f: (f / "tokenizer.json").unlink(), "tokenizer.json: missing"),
    (lambda f: edit_config(f, vocab_size=150), "150 ids, but the tokenizer has 160"),
])
def test_what_the_model_cannot_express_is_refused_in_one_line(folder, tmp_path, capsys, change, names):
    err = failed_import(folder, tmp_path, capsys, change)
    assert names in err, err


def test_an_unknown_architecture_names_mt5_among_those_it_can_import(folder, tmp_path, capsys):
    err = failed_import(folder, tmp_path, capsys, lambda f: edit_config(f, model_type="umt5"))
    assert "model_type 'umt5'" in err and "mt5: mT5" in err, err


@pytest.mark.slow
def test_an_imported_model_opens_on_every_page(folder, tmp_path, monkeypatch):
    from support.app import check_every_page_opens

    assert main(["import", str(folder), "--out", str(tmp_path / folder.name)]) == 0
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    check_every_page_opens("Мужчина читает книгу в парке.")
