"""Hugging Face BART, mBART-50 and original mBART models open exactly in the instrumented model (issue 45).

Small random `BartForConditionalGeneration` (post-norm, byte-level BPE tokenizer trained here, ``<s>`` forced first)
and `MBartForConditionalGeneration` (pre-norm with final norms, scaled embeddings; mBART-50's tokenizer with its
language codes, the target's forced first, or the original mBART's, the source's code after </s>, decoding from the
target's) models, saved as transformers 5 saves them and imported with ``viz-model import``: learned positions from
row 2 of their tables, the embedding norm, the logits bias. Logits, every attention map, greedy output and tokenizer
ids equal transformers'.
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
    assert_greedy_equals_generate,
    assert_same_ids,
    build_bart_folder,
    build_mbart50_folder,
    build_original_mbart_folder,
)

import viz_model  # noqa: E402
from viz_model.cli.main import main  # noqa: E402

BUILDERS = {"bart": build_bart_folder, "mbart50": build_mbart50_folder, "mbart": build_original_mbart_folder}
MODELS = {"bart": "BartForConditionalGeneration", "mbart50": "MBartForConditionalGeneration",
          "mbart": "MBartForConditionalGeneration"}
TARGETS = {"bart": None, "mbart50": "de_DE", "mbart": "ro_RO"}  # each folder's target language code


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


def told(family, code: int) -> dict:
    """What generate is told of the target language `code`: mBART-50's forced first, the original mBART's start."""
    return {"mbart50": {"forced_bos_token_id": code}, "mbart": {"decoder_start_token_id": code}}[family]


def test_the_config_names_what_bart_does(family, imported, hf):
    cfg, (model, hf_tok) = imported.config, hf
    code = hf_tok.convert_tokens_to_ids(TARGETS[family]) if TARGETS[family] else None
    assert (cfg.positional, cfg.position_offset, cfg.embedding_norm, cfg.output_bias) == ("learned", 2, True, True)
    assert (cfg.norm, cfg.scale_embeddings) == (("post", False) if family == "bart" else ("pre", True))
    assert cfg.eos_id == 2 and cfg.pad_id == 1 and cfg.eos_at_limit == (family != "mbart")
    # mBART-50 forces the target's code first, the original mBART starts from it
    assert (cfg.bos_id, cfg.forced_first_id) == {"bart": (2, 0), "mbart50": (2, code), "mbart": (code, None)}[family]
    table = model.model.encoder.embed_positions.weight
    assert torch.equal(imported.network.src_positions.embedding.weight, table)
    assert torch.equal(imported.network.positional_encodings(4), table[2:6])
    assert imported.languages.label == (f"en_XX → {TARGETS[family]}" if code else "en → de")


def test_tokenizer_ids_and_pieces_equal_hugging_face(family, hf, imported):
    _, hf_tok = hf
    assert_same_ids(hf_tok, imported)
    ids = hf_tok("A man reads a book.").input_ids
    theirs = hf_tok.convert_ids_to_tokens(ids)
    # byte-level pieces are shown as text, a word's leading space as ▁ (Ġman -> ▁man), as SentencePiece's are
    assert imported.tokenizer.pieces(ids) == [t.replace("Ġ", "▁") for t in theirs]
    ends = {"bart": ("<s>", "</s>"), "mbart50": ("en_XX", "</s>"), "mbart": ("▁", "en_XX")}[family]
    assert (imported.tokenizer.pieces(ids)[0], imported.tokenizer.pieces(ids)[-1]) == ends
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
    cfg = imported.config
    tgt = torch.tensor([[cfg.bos_id, *([] if cfg.forced_first_id is None else [cfg.forced_first_id]), 5, 6]] * 2)
    with torch.no_grad():
        theirs = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, decoder_input_ids=tgt).logits
        ours = imported.network(batch.input_ids, tgt).logits
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-4)


def test_greedy_output_equals_generate_from_the_start_and_first_token_of_the_target_language(family, hf, imported):
    model, hf_tok = hf
    extra = told(family, hf_tok.convert_tokens_to_ids("de_DE")) if family == "mbart50" else {}  # the user passes it
    assert_greedy_equals_generate(model, hf_tok, imported, **extra)
    trace = imported.trace("A woman runs.", beam=1)
    assert trace.target_tokens[0] == ("ro_RO" if family == "mbart" else "</s>")
    assert imported.config.forced_first_id in (None, trace.output_ids[0])


def test_a_long_source_is_cut_as_transformers_cuts_it(hf, imported):
    """Its pieces cut, what ends it kept (</s>, and the original mBART's language code after it)."""
    _, hf_tok = hf
    limit = imported.config.max_positions
    for text in (" ".join(sentences(WORDS_EN, 40, 5)), "Ünïcödé " * 100):
        assert len(imported.encode(text, truncate=True)) == limit
        assert imported.encode(text, truncate=True) == hf_tok(text, truncation=True, max_length=limit).input_ids


def test_the_imported_model_loads_as_built(imported):
    assert_loads_as_built(imported.directory)


def test_an_mbart_takes_another_target_language_at_import(family, folder, hf, tmp_path, capsys):
    if family == "bart":
        assert main(["import", str(folder), "--out", str(tmp_path / "out"), "--target-lang", "fr"]) == 2
        assert "a BART model translates one fixed pair" in capsys.readouterr().err
        return
    model, hf_tok = hf
    assert main(["import", str(folder), "--out", str(tmp_path / "fr"), "--target-lang", "fr_XX"]) == 0
    french = viz_model.load(tmp_path / "fr", device="cpu", precision="fp32")
    fr = hf_tok.convert_tokens_to_ids("fr_XX")
    assert (french.config.forced_first_id, french.config.bos_id) == ((fr, 2) if family == "mbart50" else (None, fr))
    assert french.languages.target_name == "French"
    assert (french.tokenizer.encode_target("Une femme.")[0] == fr) == (family == "mbart50")
    text = "A woman runs in the snow."
    with torch.no_grad():
        theirs = model.generate(hf_tok(text, return_tensors="pt").input_ids, num_beams=1, do_sample=False,
                                max_new_tokens=20, **told(family, fr))
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
    (lambda f: edit_json(f / "tokenizer_config.json", tokenizer_class="PegasusTokenizer"),
     "tokenizer_config.json: tokenizer_class 'PegasusTokenizer' is not one this model family's import follows"),
])
def test_what_the_model_cannot_express_is_refused_in_one_line(folder, tmp_path, capsys, change, names):
    err = failed_import(folder, tmp_path, capsys, change)
    assert names in err, err


def without_start(folder, tmp_path):
    """A copy of `folder` whose config.json and generation config name no decoder_start_token_id (as
    mbart-large-cc25's folder names none)."""
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    for name in ("config.json", "generation_config.json"):
        settings = json.loads((copy / name).read_text())
        del settings["decoder_start_token_id"]
        (copy / name).write_text(json.dumps(settings))
    return copy


def test_without_a_decoder_start_each_family_starts_as_its_rules_say(family, folder, hf, tmp_path, capsys):
    """BartConfig's default start is </s> (2); MBartConfig has none: mBART-50's is refused (generate would start from
    <s>), the original mBART's is its target language's code (here tokenizer_config.json's tgt_lang)."""
    if family == "mbart50":
        err = failed_import(folder, tmp_path, capsys,
                            lambda f: edit_json(f / "config.json", decoder_start_token_id=None))
        assert "config.json: no decoder_start_token_id; mBART-50 decodes from </s>" in err
        return
    copy = without_start(folder, tmp_path)
    if family == "bart":
        assert transformers.BartConfig.from_pretrained(copy).decoder_start_token_id == 2
    assert main(["import", str(copy), "--out", str(tmp_path / "out")]) == 0
    start = 2 if family == "bart" else hf[1].convert_tokens_to_ids("ro_RO")
    assert viz_model.load(tmp_path / "out", device="cpu").config.bos_id == start


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
