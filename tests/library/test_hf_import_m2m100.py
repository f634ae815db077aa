"""Hugging Face M2M100 models open exactly in the instrumented model (issue 21).

A small random `M2M100ForConditionalGeneration` with a SentencePiece model trained here is saved with
``save_pretrained`` and imported with ``viz-model import``: pre-norm stacks with final norms, fairseq's sinusoids
from row 2, ``</s>`` as the decoder's start and the target language's code forced as the first output. Logits,
every attention map, greedy output and tokenizer ids must equal Hugging Face's.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
from support.data import assert_loads_as_built  # noqa: E402
from support.hf import (  # noqa: E402
    ODD,
    WORDS_DE,
    WORDS_EN,
    assert_same_forced_outputs,
    assert_same_ids,
    build_m2m100_folder,
    failed_import,
    import_folder,
    sentences,
)

import viz_model  # noqa: E402
from viz_model.cli.main import main  # noqa: E402
from viz_model.tokenization.pretrained import M2M100_LANGUAGE_CODES, M2M100Tokenizer  # noqa: E402

LANGUAGES = M2M100_LANGUAGE_CODES["m2m100"]


@pytest.fixture(scope="module")
def m2m_folder(tmp_path_factory):
    return build_m2m100_folder(tmp_path_factory.mktemp("hf"))


@pytest.fixture(scope="module")
def hf(m2m_folder):
    model = transformers.M2M100ForConditionalGeneration.from_pretrained(m2m_folder, attn_implementation="eager")
    return model.eval(), transformers.M2M100Tokenizer.from_pretrained(m2m_folder, src_lang="en", tgt_lang="de")


@pytest.fixture(scope="module")
def imported(m2m_folder, tmp_path_factory):
    return import_folder(m2m_folder, tmp_path_factory, "m2m100-tiny")


def test_the_config_names_what_m2m100_does(imported, hf):
    cfg, (_, hf_tok) = imported.config, hf
    assert (cfg.norm, cfg.sinusoid_layout, cfg.sinusoid_frequencies, cfg.position_offset) == (
        "pre", "halves", "fairseq", 2)
    assert cfg.bos_id == cfg.eos_id == 2 and cfg.forced_first_id == hf_tok.get_lang_id("de")
    assert isinstance(imported.tokenizer, M2M100Tokenizer) and imported.languages.label == "en → de"


def test_tokenizer_ids_equal_hugging_face(hf, imported):
    _, hf_tok = hf
    assert_same_ids(hf_tok, imported)
    for text in sentences(WORDS_DE, 30, 5):  # their decode keeps the language code (not a special token in
        ids = hf_tok(text_target=text).input_ids  # transformers 5): a translation is the text after it
        assert ids[0] == hf_tok.get_lang_id("de")
        assert imported.tokenizer.decode(ids) == hf_tok.decode(ids[1:], skip_special_tokens=True), text
    ids = hf_tok(text_target=ODD[0]).input_ids  # theirs drops <unk>; ours shows it, as for every model here
    assert hf_tok.unk_token_id in ids and "⁇" in imported.tokenizer.decode(ids)


def test_logits_and_every_attention_map_equal_hugging_face(hf, imported):
    assert_same_forced_outputs(*hf, imported)


def test_a_padded_batch_gives_each_sentence_its_own_logits(hf, imported):
    """fairseq counts positions over non-pad tokens; with right padding that is the index + 2 we add."""
    model, hf_tok = hf
    texts = ["A man reads a book in the park.", "A dog."]
    batch = hf_tok(texts, return_tensors="pt", padding=True)
    tgt = torch.tensor([[2, hf_tok.get_lang_id("de"), 5, 6]] * 2)
    with torch.no_grad():
        theirs = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, decoder_input_ids=tgt).logits
        ours = imported.network(batch.input_ids, tgt).logits
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-4)


def test_greedy_output_equals_generate_with_the_language_code_forced(hf, imported):
    model, hf_tok = hf
    de = hf_tok.get_lang_id("de")
    for text in sentences(WORDS_EN, 20, 11):
        src = hf_tok(text, return_tensors="pt").input_ids
        ours = imported.trace(text, beam=1)
        limit = ours.settings["max_output_length"]
        with torch.no_grad():
            theirs = model.generate(src, num_beams=1, do_sample=False, max_new_tokens=limit, forced_bos_token_id=de)
        assert ours.output_ids == theirs[0, 1:].tolist(), text
        assert ours.output_ids[0] == de and ours.target_tokens[:2] == ["</s>", "__de__"]
        assert imported.translate(text, beam=1) == imported.tokenizer.decode(theirs[0].tolist())


def test_another_target_language_is_chosen_at_import(m2m_folder, hf, tmp_path):
    model, hf_tok = hf
    assert main(["import", str(m2m_folder), "--out", str(tmp_path / "en-fr"), "--target-lang", "fr"]) == 0
    en_fr = viz_model.load(tmp_path / "en-fr", device="cpu", precision="fp32")
    fr = hf_tok.get_lang_id("fr")
    assert en_fr.config.forced_first_id == fr and en_fr.languages.target_name == "French"
    text = "A woman runs in the snow."
    with torch.no_grad():
        theirs = model.generate(hf_tok(text, return_tensors="pt").input_ids, num_beams=1, do_sample=False,
                                max_new_tokens=30, forced_bos_token_id=fr)
    ours = en_fr.trace(text, beam=1)
    assert ours.output_ids[:len(theirs[0]) - 1] == theirs[0, 1:].tolist()[:len(ours.output_ids)]
    assert ours.output_tokens[0] == "__fr__"


@pytest.mark.parametrize("args, names", [
    (["--target-lang", "xx"], "--target-lang 'xx'"),
    (["--source-lang", "klingon"], "--source-lang 'klingon'"),
])
def test_an_unknown_language_is_one_line_and_leaves_nothing(m2m_folder, tmp_path, capsys, args, names):
    out = tmp_path / "out"
    assert main(["import", str(m2m_folder), "--out", str(out), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and names in err and "de, " not in err[:20] and not out.exists(), err


def test_missing_sentencepiece_model_is_named(m2m_folder, tmp_path, capsys):
    err = failed_import(m2m_folder, tmp_path, capsys, lambda f: (f / "sentencepiece.bpe.model").unlink())
    assert "sentencepiece.bpe.model" in err


@pytest.mark.slow
def test_an_imported_m2m100_model_opens_on_every_page(m2m_folder, tmp_path, monkeypatch):
    from support.app import check_every_page_opens

    assert main(["import", str(m2m_folder), "--out", str(tmp_path / "m2m100-tiny")]) == 0
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    check_every_page_opens("A man reads a book.")


def test_the_pe_lab_draws_fairseqs_sinusoids_from_row_two(m2m_folder, imported, tmp_path, monkeypatch):
    from support.app import arr, open_page

    from viz_model.nn.positional import sinusoidal_table

    assert main(["import", str(m2m_folder), "--out", str(tmp_path / "m2m100-tiny")]) == 0
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    at = open_page("positional", beam="1", sentence="A man reads a book.")
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    drawn = arr(next(s for s in specs if s["layout"]["title"]["text"].startswith("PE matrix"))["data"][0]["z"])
    own = imported.network.positional_encodings(drawn.shape[0]).numpy()
    np.testing.assert_allclose(drawn, own, atol=1e-6)
    their_table = transformers.models.m2m_100.modeling_m2m_100.M2M100SinusoidalPositionalEmbedding.get_embedding(
        drawn.shape[0] + 2, imported.config.d_model, padding_idx=1)
    np.testing.assert_allclose(own, their_table[2:].numpy(), atol=1e-5)  # Hugging Face's rows 2.. are ours 0..
    paper = sinusoidal_table(drawn.shape[0], imported.config.d_model, layout="halves").numpy()
    assert np.abs(drawn - paper).max() > 0.1  # not the paper's frequencies


def test_the_target_language_is_chosen_per_request_too(hf, imported):
    """`with_target_language` gives the same model translating into another language: generate's output with that
    language forced; weights shared; a fixed-pair model or an unknown code is refused by name."""
    model, hf_tok = hf
    french = imported.with_target_language("fr")
    assert french.network.encoder_layers is imported.network.encoder_layers  # shared, not copied
    assert imported.config.forced_first_id == hf_tok.get_lang_id("de")  # the original is unchanged
    assert french.languages.label == "en → fr" and imported.with_target_language("de") is imported
    text = "A woman runs in the snow."
    with torch.no_grad():
        theirs = model.generate(hf_tok(text, return_tensors="pt").input_ids, num_beams=1, do_sample=False,
                                max_new_tokens=30, forced_bos_token_id=hf_tok.get_lang_id("fr"))
    ours = french.trace(text, beam=1)
    assert ours.output_ids[:len(theirs[0]) - 1] == theirs[0, 1:].tolist()[:len(ours.output_ids)]
    assert french.tokenizer.encode_target("Une femme.")[0] == hf_tok.get_lang_id("fr")
    with pytest.raises(ValueError, match="not one of this model's target languages"):
        imported.with_target_language("tlh")
    with pytest.raises(ValueError, match="only a many-to-many model"):
        viz_model.load(None, device="cpu").with_target_language("fr")


def test_the_app_translates_into_the_language_picked(m2m_folder, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest
    from support.app import APP, charts, messages, ok

    assert main(["import", str(m2m_folder), "--out", str(tmp_path / "m2m100-tiny")]) == 0
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    at = AppTest.from_file(str(APP), default_timeout=240)
    at.query_params.update({"beam": "1", "sentence": "A man reads a book.", "kind": "cross"})
    ok(at.run())
    assert "__de__" in json.dumps(charts(at)) and "__fr__" not in json.dumps(charts(at))
    picker = at.selectbox(key="w_lang")
    assert picker.value == "" and "German (de), as imported" in picker.format_func("")
    picker.set_value("fr").run()
    ok(at)
    assert at.query_params["lang"] == ["fr"] or at.query_params["lang"] == "fr"
    assert "__fr__" in json.dumps(charts(at))  # the cross-attention map's queries: </s> __fr__ ...
    again = AppTest.from_file(str(APP), default_timeout=240)
    again.query_params.update({"beam": "1", "sentence": "A man.", "lang": "tlh"})
    ok(again.run())
    assert "`lang=tlh` ignored" in messages(again) and again.session_state["lang"] == ""


def test_the_imported_model_loads_as_built(imported):
    """Loading without random init recomputes the fixed buffers
    (M2M100's: pre-norm with final norms, position offset 2)."""
    assert_loads_as_built(imported.directory)
