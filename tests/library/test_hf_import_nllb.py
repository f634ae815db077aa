"""Hugging Face NLLB models open exactly (issue 21): the M2M100 architecture with NLLB's tokenizer, whose ids come
from its tokenizer.json (pieces after <s> <pad> </s> <unk>, language codes such as ``eng_Latn`` as added tokens).

The reference tokenizer is Hugging Face's ``NllbTokenizer`` built from a SentencePiece BPE model trained here (its
vocabulary and merges extracted as transformers converts a slow tokenizer), saved with ``save_pretrained`` beside a
small random ``M2M100ForConditionalGeneration``.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
import sentencepiece as spm  # noqa: E402
from support.hf import (  # noqa: E402
    WORDS_DE,
    WORDS_EN,
    assert_same_forced_outputs,
    assert_same_ids,
    failed_import,
    import_folder,
    save_folder,
    sentences,
)
from transformers.convert_slow_tokenizer import NllbConverter, SentencePieceExtractor  # noqa: E402

import viz_model  # noqa: E402
from viz_model.cli.main import main  # noqa: E402
from viz_model.tokenization.pretrained import M2M100Tokenizer  # noqa: E402


def nllb_tokenizer(root):
    """Hugging Face's NllbTokenizer over a SentencePiece BPE model trained on the test's words."""
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences(WORDS_EN, 300, 0) + sentences(WORDS_DE, 300, 1)),
        model_prefix=str(root / "sentencepiece.bpe"), vocab_size=80, model_type="bpe", character_coverage=1.0,
        minloglevel=2, hard_vocab_limit=False)
    extractor = SentencePieceExtractor(str(root / "sentencepiece.bpe.model"))
    extracted = extractor.extract(None)
    vocab = NllbConverter.convert_from_spm(vocab=extracted["vocab"])["vocab"]
    return transformers.NllbTokenizer(vocab=vocab, merges=extracted["merges"], src_lang="eng_Latn",
                                      tgt_lang="deu_Latn",
                                      _spm_precompiled_charsmap=extractor.proto.normalizer_spec.precompiled_charsmap)


@pytest.fixture(scope="module")
def nllb_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    tokenizer = nllb_tokenizer(root)
    config = transformers.M2M100Config(
        vocab_size=len(tokenizer), d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=96,
        activation_function="relu", dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0, scale_embedding=True,
        pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
    folder = save_folder(transformers.M2M100ForConditionalGeneration(config), tokenizer, root / "nllb-tiny",
                         "cc-by-nc-4.0")
    shutil.copy(root / "sentencepiece.bpe.model", folder / "sentencepiece.bpe.model")
    assert not (folder / "vocab.json").exists() and (folder / "tokenizer.json").exists()
    return folder


@pytest.fixture(scope="module")
def hf(nllb_folder):
    model = transformers.M2M100ForConditionalGeneration.from_pretrained(nllb_folder, attn_implementation="eager")
    tokenizer = transformers.NllbTokenizer.from_pretrained(nllb_folder, src_lang="eng_Latn", tgt_lang="deu_Latn")
    return model.eval(), tokenizer


@pytest.fixture(scope="module")
def imported(nllb_folder, tmp_path_factory):
    return import_folder(nllb_folder, tmp_path_factory, "nllb-tiny")


def test_the_language_pair_and_codes_come_from_the_tokenizer(imported, hf):
    _, hf_tok = hf
    assert isinstance(imported.tokenizer, M2M100Tokenizer)
    assert imported.languages.label == "eng_Latn → deu_Latn"
    assert (imported.languages.source_name, imported.languages.target_name) == ("English", "German")
    assert imported.config.forced_first_id == hf_tok.convert_tokens_to_ids("deu_Latn")
    assert len(imported.target_languages) > 200 and "fra_Latn" in imported.target_languages


def test_tokenizer_ids_equal_hugging_face(hf, imported):
    assert_same_ids(hf[1], imported)


def test_logits_and_every_attention_map_equal_hugging_face(hf, imported):
    assert_same_forced_outputs(*hf, imported)


def test_greedy_output_equals_generate_with_the_language_code_forced(hf, imported):
    model, hf_tok = hf
    deu = hf_tok.convert_tokens_to_ids("deu_Latn")
    for text in sentences(WORDS_EN, 20, 11):
        ours = imported.trace(text, beam=1)
        with torch.no_grad():
            theirs = model.generate(hf_tok(text, return_tensors="pt").input_ids, num_beams=1, do_sample=False,
                                    max_new_tokens=ours.settings["max_output_length"], forced_bos_token_id=deu)
        assert ours.output_ids == theirs[0, 1:].tolist(), text
        assert ours.target_tokens[:2] == ["</s>", "deu_Latn"]


def test_another_target_language_per_request(hf, imported):
    model, hf_tok = hf
    french, text = imported.with_target_language("fra_Latn"), "A woman runs in the snow."
    with torch.no_grad():
        theirs = model.generate(hf_tok(text, return_tensors="pt").input_ids, num_beams=1, do_sample=False,
                                max_new_tokens=20, forced_bos_token_id=hf_tok.convert_tokens_to_ids("fra_Latn"))
    ours = french.trace(text, beam=1)
    assert ours.output_ids[:len(theirs[0]) - 1] == theirs[0, 1:].tolist()[:len(ours.output_ids)]
    assert ours.output_tokens[0] == "fra_Latn" and french.languages.target_name == "French"


@pytest.mark.parametrize("damage, named", [
    (lambda data: data.update(added_tokens=[t for t in data["added_tokens"] if "_" not in t["content"]]),
     "no language code"),
    (lambda data: data.pop("model"), "model.vocab"),
])
def test_a_broken_tokenizer_json_is_one_line_and_leaves_nothing(nllb_folder, tmp_path, capsys, damage, named):
    def change(folder):
        data = json.loads((folder / "tokenizer.json").read_text())
        damage(data)
        (folder / "tokenizer.json").write_text(json.dumps(data))

    err = failed_import(nllb_folder, tmp_path, capsys, change)
    assert "tokenizer.json" in err and named in err


def test_a_missing_sentencepiece_model_is_named(nllb_folder, tmp_path, capsys):
    err = failed_import(nllb_folder, tmp_path, capsys, lambda f: (f / "sentencepiece.bpe.model").unlink())
    assert "sentencepiece.bpe.model" in err


def test_fp16_storage_halves_the_weights_and_stays_close(nllb_folder, hf, imported, tmp_path):
    """NLLB-600M's fp32 weights (2.46 GB) are above the weight-file limit: --dtype fp16 stores them in half
    precision, loaded into fp32; the outputs are close to the source model's, and the card says they are not equal."""
    from safetensors import safe_open

    out = tmp_path / "nllb-fp16"
    assert main(["import", str(nllb_folder), "--out", str(out), "--dtype", "fp16"]) == 0
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F16"}  # noqa: SIM118 (not iterable)
    half = viz_model.load(out, device="cpu", precision="fp32")
    assert next(half.network.parameters()).dtype == torch.float32
    model, hf_tok = hf
    src = hf_tok("A man reads a book.", return_tensors="pt").input_ids
    tgt = torch.tensor([[2, hf_tok.convert_tokens_to_ids("deu_Latn"), 5, 6]])
    with torch.no_grad():
        np.testing.assert_allclose(half.network(src, tgt).logits.numpy(), imported.network(src, tgt).logits.numpy(),
                                   atol=0.05)
    assert "fp16" in (out / "MODEL_CARD.md").read_text()


def test_weights_above_the_file_limit_name_the_fp16_option(nllb_folder, tmp_path, capsys, monkeypatch):
    from viz_model.hf import importer as hf_import

    monkeypatch.setattr(hf_import, "MAX_WEIGHTS_BYTES", 1000)
    assert main(["import", str(nllb_folder), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--dtype fp16" in err and "weight-file limit" in err and err.count("\n") == 0
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_an_imported_nllb_model_opens_on_every_page(nllb_folder, tmp_path, monkeypatch):
    from support.app import check_every_page_opens

    assert main(["import", str(nllb_folder), "--out", str(tmp_path / "nllb-tiny")]) == 0
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    check_every_page_opens("A man reads a book.")
