"""Hugging Face BART and mBART-50 models open exactly in the instrumented model (issue 45).

Small random `BartForConditionalGeneration` (post-norm, byte-level BPE tokenizer trained here, ``<s>`` forced first)
and `MBartForConditionalGeneration` (pre-norm with final norms, scaled embeddings, mBART-50's tokenizer with its
language codes, the target's forced first) models, saved as transformers 5 saves them and imported with
``viz-model import``: learned positions from row 2 of their tables, the embedding norm, the logits bias. Logits, every
attention map, greedy output and tokenizer ids equal transformers'.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
from support.data import assert_loads_as_built  # noqa: E402
from support.hf import assert_same_forced_outputs, failed_import, import_folder  # noqa: E402
from support.hf_families import (  # noqa: E402
    assert_greedy_equals_generate,
    assert_same_ids,
    build_bart_folder,
    build_mbart50_folder,
    build_original_mbart_folder,
)

import viz_model  # noqa: E402
from viz_model.cli.main import main  # noqa: E402

BUILDERS = {"bart": build_bart_folder, "mbart50": build_mbart50_folder}
MODELS = {"bart": "BartForConditionalGeneration", "mbart50": "MBartForConditionalGeneration"}


@pytest.fixture(scope="module", params=BUILDERS)
def family(request):
    return request.param


@pytest.fixture(scope="module")
def folder(family, tmp_path_factory):
    return BUILDERS[family](tmp_path_factory.mktemp("hf"))


@pytest.fixture(scope="module")
def hf(family, folder):
    model = getattr(transformers, MODELS[family]).from_pretrained(folder, attn_implementation="eager")
    return model.eval(), transformers.AutoTokenizer.from_pretrained(folder)


@pytest.fixture(scope="module")
def imported(folder, tmp_path_factory):
    return import_folder(folder, tmp_path_factory, folder.name)


def forced_first(family, hf_tok) -> dict:
    """What generate needs beside the folder's settings: mBART-50's target language (the user passes it)."""
    return {"forced_bos_token_id": hf_tok.convert_tokens_to_ids("de_DE")} if family == "mbart50" else {}


def test_the_config_names_what_bart_does(family, imported, hf):
    cfg, (model, hf_tok) = imported.config, hf
    assert (cfg.positional, cfg.position_offset, cfg.embedding_norm, cfg.output_bias) == ("learned", 2, True, True)
    assert (cfg.norm, cfg.scale_embeddings) == (("pre", True) if family == "mbart50" else ("post", False))
    assert cfg.bos_id == cfg.eos_id == 2 and cfg.pad_id == 1 and cfg.eos_at_limit
    assert cfg.forced_first_id == (hf_tok.convert_tokens_to_ids("de_DE") if family == "mbart50" else 0)
    table = model.model.encoder.embed_positions.weight
    assert torch.equal(imported.network.src_positions.embedding.weight, table)
    assert torch.equal(imported.network.positional_encodings(4), table[2:6])
    assert imported.languages.label == ("en_XX → de_DE" if family == "mbart50" else "en → de")


def test_tokenizer_ids_and_pieces_equal_hugging_face(family, hf, imported):
    _, hf_tok = hf
    assert_same_ids(hf_tok, imported)
    ids = hf_tok("A man reads a book.").input_ids
    theirs = hf_tok.convert_ids_to_tokens(ids)
    # byte-level pieces are shown as text, a word's leading space as ▁ (Ġman -> ▁man), as SentencePiece's are
    assert imported.tokenizer.pieces(ids) == [t.replace("Ġ", "▁") for t in theirs]
    assert imported.tokenizer.pieces(ids)[0] == ("en_XX" if family == "mbart50" else "<s>")
    if family == "bart":
        umlaut = hf_tok("Ü").input_ids
        assert "Ü" in imported.tokenizer.pieces(umlaut) or len(umlaut) > 3


def test_logits_and_every_attention_map_equal_hugging_face(hf, imported):
    pairs = assert_same_forced_outputs(*hf, imported)
    worst = max(float((o.logits - t.logits).abs().max()) for o, t in pairs)
    assert worst < 1e-5  # measured: ~1e-6


def test_a_padded_batch_gives_each_sentence_its_own_logits(hf, imported):
    model, hf_tok = hf
    batch = hf_tok(["A man reads a book in the park.", "A dog."], return_tensors="pt", padding=True)
    tgt = torch.tensor([[2, imported.config.forced_first_id, 5, 6]] * 2)
    with torch.no_grad():
        theirs = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, decoder_input_ids=tgt).logits
        ours = imported.network(batch.input_ids, tgt).logits
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-4)


def test_greedy_output_equals_generate_with_the_first_token_forced(family, hf, imported):
    model, hf_tok = hf
    assert_greedy_equals_generate(model, hf_tok, imported, **forced_first(family, hf_tok))
    trace = imported.trace("A woman runs.", beam=1)
    assert trace.output_ids[0] == imported.config.forced_first_id and trace.target_tokens[0] == "</s>"


def test_the_imported_model_loads_as_built(imported):
    assert_loads_as_built(imported.directory)


def test_mbart50_takes_another_target_language_at_import(family, folder, hf, tmp_path, capsys):
    if family != "mbart50":
        assert main(["import", str(folder), "--out", str(tmp_path / "out"), "--target-lang", "fr"]) == 2
        assert "a BART model translates one fixed pair" in capsys.readouterr().err
        return
    model, hf_tok = hf
    assert main(["import", str(folder), "--out", str(tmp_path / "fr"), "--target-lang", "fr_XX"]) == 0
    french = viz_model.load(tmp_path / "fr", device="cpu", search="fp32")
    fr = hf_tok.convert_tokens_to_ids("fr_XX")
    assert french.config.forced_first_id == fr and french.languages.target_name == "French"
    assert french.tokenizer.encode_target("Une femme.")[0] == fr
    text = "A woman runs in the snow."
    with torch.no_grad():
        theirs = model.generate(hf_tok(text, return_tensors="pt").input_ids, num_beams=1, do_sample=False,
                                max_new_tokens=20, forced_bos_token_id=fr)
    assert french.trace(text, beam=1).output_ids == theirs[0, 1:].tolist()
    capsys.readouterr()
    assert main(["import", str(folder), "--out", str(tmp_path / "x"), "--target-lang", "xx_XX"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--target-lang 'xx_XX' is not one of the model's languages" in err


def edit_json(path, **changes):
    (path).write_text(json.dumps(json.loads(path.read_text()) | changes))


@pytest.mark.parametrize("change, names", [
    (lambda f: edit_json(f / "config.json", activation_function="tanh"), "activation_function 'tanh'"),
    (lambda f: edit_json(f / "config.json", decoder_ffn_dim=32), "encoder_ffn_dim = 64 but decoder_ffn_dim = 32"),
    (lambda f: edit_json(f / "config.json", max_position_embeddings=40), "src_positions.embedding.weight has shape"),
    (lambda f: (f / "tokenizer.json").unlink(), "tokenizer.json: missing"),
    (lambda f: edit_json(f / "tokenizer_config.json", tokenizer_class="MBartTokenizer"),
     "tokenizer_class 'MBartTokenizer'"),
])
def test_what_the_model_cannot_express_is_refused_in_one_line(folder, tmp_path, capsys, change, names):
    err = failed_import(folder, tmp_path, capsys, change)
    assert names in err, err


def test_without_a_decoder_start_bart_starts_from_its_default_and_mbart_is_refused(family, folder, tmp_path, capsys):
    """BartConfig's default start is </s> (2); MBartConfig has none (the original mBART starts from a language
    code, which this project does not import)."""
    if family == "bart":
        copy = tmp_path / "copy"
        copy.mkdir()
        for path in folder.iterdir():
            (copy / path.name).write_bytes(path.read_bytes())
        config = json.loads((copy / "config.json").read_text())
        del config["decoder_start_token_id"]
        (copy / "config.json").write_text(json.dumps(config))
        assert transformers.BartConfig.from_pretrained(copy).decoder_start_token_id == 2
        assert main(["import", str(copy), "--out", str(tmp_path / "out")]) == 0
        assert viz_model.load(tmp_path / "out", device="cpu").config.bos_id == 2
        return
    err = failed_import(folder, tmp_path, capsys, lambda f: edit_json(f / "config.json", decoder_start_token_id=None))
    assert "only mBART-50's start from </s>" in err


@pytest.fixture(scope="module")
def original_mbart(tmp_path_factory):
    return build_original_mbart_folder(tmp_path_factory.mktemp("hf"))


@pytest.mark.parametrize("change, names", [
    (lambda f: None, "tokenizer_config.json: tokenizer_class 'MBartTokenizer' is the original mBART's"),
    (lambda f: (f / "tokenizer_config.json").unlink(),  # as mbart-large-cc25's folder: transformers' default class
     "tokenizer_config.json: names no tokenizer_class (transformers reads MBartTokenizer), the original mBART's"),
    (lambda f: edit_json(f / "config.json", tokenizer_class="MBartTokenizerFast"),
     "config.json: tokenizer_class 'MBartTokenizerFast' is the original mBART's"),
    (lambda f: edit_json(f / "config.json", decoder_start_token_id=None), "no decoder_start_token_id"),
])
def test_the_original_mbart_is_refused_in_one_line_naming_its_tokenizer(original_mbart, tmp_path, capsys, change,
                                                                         names):
    tokenizer = transformers.AutoTokenizer.from_pretrained(original_mbart)
    ids = tokenizer("A dog.").input_ids  # why: the code after </s>, which this project's encoders do not put there
    assert type(tokenizer).__name__ == "MBartTokenizer" and tokenizer.convert_ids_to_tokens(ids)[-2:] == \
        ["</s>", "en_XX"]
    err = failed_import(original_mbart, tmp_path, capsys, change)
    assert names in err, err


def test_an_unsupported_architecture_names_every_supported_one(folder, tmp_path, capsys):
    err = failed_import(folder, tmp_path, capsys, lambda f: edit_json(f / "config.json", model_type="pegasus"))
    assert "model_type 'pegasus'" in err
    assert all(f"{kind}: " in err for kind in ("marian", "m2m_100", "t5", "mt5", "bart", "mbart")), err


@pytest.mark.slow
def test_an_imported_model_opens_on_every_page(folder, tmp_path, monkeypatch):
    from support.app import check_every_page_opens

    assert main(["import", str(folder), "--out", str(tmp_path / folder.name)]) == 0
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    check_every_page_opens("A man reads a book.")
