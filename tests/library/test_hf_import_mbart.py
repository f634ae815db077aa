"""The original mBART (mbart-large-cc25, mbart-large-en-ro) beside what test_hf_import_bart.py checks of every family.

Its MBartTokenizer puts the source's language code after </s> and its decoder starts from the target's: another
target language chosen on the loaded model (the explorer's sidebar) starts the decoder from that code, as
``generate(decoder_start_token_id=...)`` does; a folder as mbart-large-cc25's (no tokenizer_config.json, no decoder
start) reads MBartTokenizer's default source and the target given at import; a tokenizer class of neither mBART is
refused in one line.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

transformers = pytest.importorskip("transformers")
from support.hf import WORDS_EN, failed_import, import_folder, sentences  # noqa: E402
from support.hf_families import assert_same_ids, build_original_mbart_folder  # noqa: E402

import viz_model  # noqa: E402
from viz_model.cli.main import main  # noqa: E402


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return build_original_mbart_folder(tmp_path_factory.mktemp("hf"))


@pytest.fixture(scope="module")
def hf(folder):
    model = transformers.MBartForConditionalGeneration.from_pretrained(folder, attn_implementation="eager")
    return model.eval(), transformers.AutoTokenizer.from_pretrained(folder)


@pytest.fixture(scope="module")
def imported(folder, tmp_path_factory):
    return import_folder(folder, tmp_path_factory, folder.name)


def assert_starts_as_generate(model, hf_tok, translator, code: int) -> None:
    """Greedy output ids of 10 sentences equal generate's when it is told to start from `code`."""
    for text in sentences(WORDS_EN, 10, 31):
        ours = translator.trace(text, beam=1)
        with torch.no_grad():
            theirs = model.generate(hf_tok(text, return_tensors="pt").input_ids, num_beams=1, do_sample=False,
                                    max_new_tokens=ours.settings["max_output_length"], decoder_start_token_id=code)
        assert ours.target_ids[0] == code and ours.output_ids == theirs[0, 1:].tolist(), text


def test_a_view_in_another_language_drafts_from_its_own_start(hf, imported, monkeypatch):
    """The int8 draft of a large model (forced on here) is built once and shared by the views of every language:
    each view's draft decodes from that view's start, or its drafts would all be rejected."""
    monkeypatch.setattr(viz_model.kinds.translator, "draft_pays", lambda config: True)
    model = viz_model.load(imported.directory, device="cpu", precision="fp32")
    french = model.with_target_language("fr_XX")
    assert model.draft_network().config.bos_id == model.config.bos_id
    assert french.draft_network().config.bos_id == french.config.bos_id != model.config.bos_id
    assert french.draft_network().decoder_layers is model.draft_network().decoder_layers  # one int8 copy
    plain = imported.with_target_language("fr_XX")
    for text in sentences(WORDS_EN, 5, 7):
        assert french.trace(text, beam=2).output_ids == plain.trace(text, beam=2).output_ids, text


def test_another_target_language_on_the_loaded_model_starts_the_decoder_from_its_code(hf, imported):
    model, hf_tok = hf
    fr = hf_tok.convert_tokens_to_ids("fr_XX")
    french = imported.with_target_language("fr_XX")
    assert (french.config.bos_id, french.config.forced_first_id) == (fr, None)
    assert french.tokenizer.bos_id == fr and french.languages.target_name == "French"
    assert french.network.src_embedding is imported.network.src_embedding  # a view: the weights shared
    assert imported.with_target_language("ro_RO") is imported
    assert french.trace("A dog.", beam=1).target_tokens[0] == "fr_XX"
    assert_starts_as_generate(model, hf_tok, french, fr)


def cc25_like(folder, tmp_path):
    """A copy of `folder` as mbart-large-cc25's is: no tokenizer_config.json, no decoder start anywhere."""
    copy = tmp_path / "cc25"
    shutil.copytree(folder, copy)
    (copy / "tokenizer_config.json").unlink()
    for name in ("config.json", "generation_config.json"):
        settings = json.loads((copy / name).read_text())
        del settings["decoder_start_token_id"]
        (copy / name).write_text(json.dumps(settings))
    return copy


def test_a_folder_without_tokenizer_settings_or_start_translates_into_the_language_given(folder, hf, tmp_path,
                                                                                         capsys):
    model, _ = hf
    copy = cc25_like(folder, tmp_path)
    assert main(["import", str(copy), "--out", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "names no target language; give --target-lang" in err, err
    assert main(["import", str(copy), "--out", str(tmp_path / "ro"), "--target-lang", "ro_RO"]) == 0
    romanian = viz_model.load(tmp_path / "ro", device="cpu", precision="fp32")
    # MBartTokenizer, its source en_XX by default; told the target, which its targets end with (else the source's)
    hf_tok = transformers.AutoTokenizer.from_pretrained(copy, tgt_lang="ro_RO")
    assert type(hf_tok).__name__ == "MBartTokenizer" and romanian.languages.label == "en_XX → ro_RO"
    assert_same_ids(hf_tok, romanian)
    assert_starts_as_generate(model, hf_tok, romanian, hf_tok.convert_tokens_to_ids("ro_RO"))


def test_the_fast_class_named_in_config_json_is_read_as_mbart_tokenizer(folder, hf, tmp_path):
    copy = cc25_like(folder, tmp_path)
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps(config | {"tokenizer_class": "MBartTokenizerFast"}))
    options = ["--source-lang", "de_DE", "--target-lang", "ro_RO"]
    assert main(["import", str(copy), "--out", str(tmp_path / "fast"), *options]) == 0
    imported = viz_model.load(tmp_path / "fast", device="cpu")
    hf_tok = transformers.AutoTokenizer.from_pretrained(copy, src_lang="de_DE")
    assert imported.encode("A dog.") == hf_tok("A dog.").input_ids
    assert imported.tokenizer.pieces(imported.encode("A dog."))[-2:] == ["</s>", "de_DE"]


def test_a_tokenizer_class_of_neither_mbart_named_in_config_json_is_refused_in_one_line(folder, tmp_path, capsys):
    def change(copy):
        (copy / "tokenizer_config.json").unlink()
        config = json.loads((copy / "config.json").read_text())
        (copy / "config.json").write_text(json.dumps(config | {"tokenizer_class": "PegasusTokenizer"}))

    err = failed_import(folder, tmp_path, capsys, change)
    assert "config.json: tokenizer_class 'PegasusTokenizer' is not one this model family's import follows " \
           "(MBart50Tokenizer, MBart50TokenizerFast, MBartTokenizer, MBartTokenizerFast)" in err, err


def test_a_decoder_start_that_is_no_language_code_is_refused_in_one_line(folder, tmp_path, capsys):
    def change(copy):  # generate would start from </s>, where the original mBART's rule starts from the target's code
        for name in ("config.json", "generation_config.json"):
            settings = json.loads((copy / name).read_text())
            (copy / name).write_text(json.dumps(settings | {"decoder_start_token_id": 2}))

    err = failed_import(folder, tmp_path, capsys, change)
    assert "config.json: decoder_start_token_id 2 is not a language code, but the original mBART (MBartTokenizer) " \
           "decodes from the target language's code" in err, err
