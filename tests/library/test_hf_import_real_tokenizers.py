"""Marian import on real opus-mt tokenizers and configs (issue 21): the published files of two models
(`tests/fixtures/marian/SOURCES.md`), with random weights of a small size built from each config.json.

opus-mt-en-mg is a classic opus-mt model (``</s>`` = 0, ``<unk>`` = 1, SiLU, nothing forced at the length limit);
the tc-big en-pt one has ``</s>`` at 44,670 and ``<unk>`` at 52,024, ReLU, a shared vocabulary and a
generation_config.json that forces ``</s>`` at the limit: what the import must read from the files, not assume.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

transformers = pytest.importorskip("transformers")
from support.hf import (  # noqa: E402
    WORDS_EN,
    assert_same_forced_outputs,
    assert_same_ids,
    import_folder,
    randomise,
    sentences,
)
from support.published import FIXTURES as PUBLISHED  # noqa: E402
from support.published import unpacked  # noqa: E402

FIXTURES = PUBLISHED / "marian"
# per model: (source, target) languages, the activation, </s> and <unk> ids, sentences in the target language,
# whether </s> is forced at the length limit
MODELS = {
    "opus-mt-en-mg": (("en", "mg"), "swish", 0, 1,
                      ["Manao ahoana ianao?", "Tsara be ny andro androany.", "Mandeha any an-tsena ny zaza."], False),
    "opus-mt-tc-big-en-pt": (("en", "pt"), "relu", 44_670, 52_024,
                             ["O homem de camisa azul está numa escada.", "Não sei, ação rápida!", "Ela lê um livro."],
                             True),
}
SMALL = {"d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
         "decoder_attention_heads": 4, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
         "num_hidden_layers": 2}  # transformers reads it as encoder_layers: the published configs carry it


@pytest.fixture(scope="module", params=sorted(MODELS))
def real(request, tmp_path_factory):
    """(name, Hugging Face model with eager attention, their tokenizer, our import) for one published tokenizer."""
    name = request.param
    folder = tmp_path_factory.mktemp("hf") / name
    unpacked(FIXTURES / name, folder)  # the tokenizer files as published (vocab.json decompressed)
    # a small network; vocabulary, special ids and activation as published
    published = json.loads((FIXTURES / name / "config.json").read_text()) | SMALL
    model = transformers.MarianMTModel(transformers.MarianConfig.from_dict(published))
    randomise(model)
    model.save_pretrained(folder)
    # the published config.json and generation_config.json (or its absence) back, with only the dimensions changed
    (folder / "config.json").write_text(json.dumps(published))
    (folder / "generation_config.json").unlink()
    if (FIXTURES / name / "generation_config.json").is_file():
        shutil.copy(FIXTURES / name / "generation_config.json", folder)
    model = transformers.MarianMTModel.from_pretrained(folder, attn_implementation="eager").eval()
    return name, model, transformers.MarianTokenizer.from_pretrained(folder), import_folder(folder, tmp_path_factory,
                                                                                              name)


def test_special_ids_and_languages_come_from_the_files(real):
    name, model, hf_tok, imported = real
    languages, activation, eos, unk, _, at_limit = MODELS[name]
    cfg = imported.config
    assert (cfg.eos_id, imported.tokenizer.unk_id) == (eos, unk) == (hf_tok.eos_token_id, hf_tok.unk_token_id)
    assert cfg.pad_id == cfg.bos_id == model.config.decoder_start_token_id == hf_tok.pad_token_id
    assert cfg.vocab_size == len(hf_tok) and model.config.activation_function == activation
    assert (imported.languages.source, imported.languages.target) == languages
    # </s> forced at the limit exactly where transformers itself reads a forced_eos_token_id from the folder
    assert cfg.eos_at_limit is at_limit is (model.generation_config.forced_eos_token_id == eos)


def test_ids_equal_hugging_face_on_the_real_vocabularies(real):
    name, _, hf_tok, imported = real
    assert_same_ids(hf_tok, imported)
    for text in MODELS[name][4]:  # the target language through the target-side SentencePiece model
        assert imported.tokenizer.encode_target(text) + [imported.config.eos_id] == \
            hf_tok(text_target=text).input_ids, text
        ids = hf_tok(text_target=text).input_ids
        assert imported.tokenizer.decode(ids) == hf_tok.decode(ids, skip_special_tokens=True), text


def test_logits_and_every_attention_map_equal_hugging_face(real):
    _, model, hf_tok, imported = real
    cfg = imported.config
    keep = [i for i in range(cfg.vocab_size) if i not in cfg.never_emitted]
    for ours, _ in assert_same_forced_outputs(model, hf_tok, imported, keep=keep):
        assert torch.isinf(ours.logits[..., cfg.pad_id]).all()


@pytest.mark.slow
def test_greedy_output_and_axes_equal_generate(real):
    _, model, hf_tok, imported = real
    for text in sentences(WORDS_EN, 4, 13):
        ours = imported.trace(text, beam=1)
        with torch.no_grad():
            theirs = model.generate(hf_tok(text, return_tensors="pt").input_ids, num_beams=1, do_sample=False,
                                    max_new_tokens=ours.settings["max_output_length"],
                                    bad_words_ids=[[imported.config.pad_id]])
        assert ours.output_ids == theirs[0, 1:].tolist(), text
        # the random model never ends by itself: at the length limit </s> only where their generate forces it
        assert len(ours.output_ids) == ours.settings["max_output_length"]
        assert (ours.output_ids[-1] == imported.config.eos_id) is imported.config.eos_at_limit
        assert ours.source_tokens == hf_tok.convert_ids_to_tokens(hf_tok(text).input_ids)
        assert ours.output_tokens == hf_tok.convert_ids_to_tokens(theirs[0, 1:].tolist())


def test_beam_search_also_ends_in_eos_at_the_limit_where_forced(real):
    _, _, _, imported = real
    trace = imported.trace("A dog runs in the snow.", beam=4)
    assert len(trace.output_ids) == trace.settings["max_output_length"]
    forced = imported.config.eos_at_limit
    assert (trace.output_ids[-1] == imported.config.eos_id) is forced
    assert ("forced to be </s>" in imported.card) is forced
