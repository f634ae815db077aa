"""T5 and BART import on real published tokenizers and configs (`tests/fixtures/t5-bart/SOURCES.md`), with random
weights of a small size built from each config.json.

t5-small's tokenizer.json is a 32,100-piece unigram model behind SentencePiece's Precompiled normalizer, whitespace
split, with 100 ``<extra_id_N>`` tokens counted down from 32,099, in a model of 32,128 ids whose config names three
translation tasks (one chosen at import, its task prefix before every source). bart-large's is byte-level BPE of
50,265 ids with ``<mask>`` taking the space before it (lstrip). Ids of varied text, decoding, pieces, logits, every
attention map and greedy output equal transformers'."""

from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")
from support.hf import ODD, WORDS_EN, assert_same_forced_outputs, import_folder, sentences  # noqa: E402
from support.hf_families import assert_greedy_equals_generate, assert_same_ids  # noqa: E402
from support.published import build_published_folder, published  # noqa: E402

import viz_model  # noqa: E402
from viz_model.cli.main import main  # noqa: E402
from viz_model.translation_tasks import translation_tasks  # noqa: E402

MODELS = {"t5-small": transformers.T5ForConditionalGeneration, "bart-large": transformers.BartForConditionalGeneration}
LANGUAGES = ("--source-lang", "en", "--target-lang", "de")  # t5-small translates en to de, fr and ro: one chosen
VARIED = [
    "The 3 quick brown foxes jumped over 12 lazy dogs.", "It costs $1,299.99 (or €1.150,50) - a 15% discount!",
    "Call +1 (555) 010-4477 before 9:30 a.m. on 2024-03-15.", "Don't you think it's odd? I'd say we'll see...",
    "She said: \"Hello, world!\" and left.", "‘Curly quotes’ and “double ones” — with an em dash – and en dash.",
    "E-mail me at jane.doe@example.com or visit https://example.org/a?b=1&c=2#top.",
    "Das Mädchen läuft schnell über die Straße.", "L'élève a reçu une médaille à Noël, n'est-ce pas ?",
    "Ştiinţa şi tehnologia în România: ă, î, â, ș, ț.", "Ångström, smörgåsbord, fjord, Øresund, æble.",
    "Привет, как дела?", "Καλημέρα κόσμε.", "东京是日本的首都。", "こんにちは、世界！", "안녕하세요 세계",
    "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "I ❤ NY 🗽🍎 — 👍🏽 ok",
    "Math: x² + y² = z², π ≈ 3.14159, √2, ∞, ≤ ≥ ≠.",
    "Temperatures of -40°C and 100°F; H₂O; 1/2 ½ ¾.", "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ ａｎｄ １２３", "ﬁne ligatures ﬂow",
    "Non\u00a0breaking\u00a0spaces and a zero\u200bwidth space.", "  leading and trailing spaces  ",
    "many     spaces\tand\ttabs", "line one\nline two", "ALL CAPS SENTENCE WITH NUMBERS 42 AND 7.",
    "camelCaseWords and snake_case_names and kebab-case-ones", "def f(x): return x ** 2  # code",
    "<html><body>Tags & entities &amp; more</body></html>", "Hashtags #NLP and mentions @user!",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism", "1234567890 0987654321 3.14 2,718 1e-9",
    "U.S.A., e.g., i.e., etc., Dr. Smith, Mr. O'Neil.", "Wait... what?! No way!!! Really???", "(a) [b] {c} <d>",
    "The <extra_id_0> walks in <extra_id_1> park.", "<pad> </s> <unk> <s> <mask> as text",
    "naïve café résumé coöperate", "a", ".", "A man reads a book in the park.",
]
# T5's own task prefixes (task_specific_params) on text, as its translation and summarisation pipelines put them
TEXTS = VARIED + ["translate English to French: The house is wonderful.", "summarize: The dog ran home."] + \
    sentences(WORDS_EN, 48, 7) + ODD


@pytest.fixture(scope="module", params=sorted(MODELS))
def real(request, tmp_path_factory):
    """(name, Hugging Face model with eager attention, their tokenizer, our import) for one published tokenizer."""
    name = request.param
    folder = build_published_folder(name, tmp_path_factory.mktemp("hf") / name)
    model = MODELS[name].from_pretrained(folder, attn_implementation="eager").eval()
    options = LANGUAGES if name == "t5-small" else ()
    return name, model, transformers.AutoTokenizer.from_pretrained(folder), import_folder(folder, tmp_path_factory,
                                                                                           name, *options)


def prefix(imported) -> str:
    """The task prefix the import put before every source ("" for BART)."""
    return imported.task_prefix or ""


def test_special_ids_and_the_task_come_from_the_files(real):
    name, model, hf_tok, imported = real
    cfg, hf = imported.config, published(name)
    assert cfg.vocab_size == hf["vocab_size"] == model.config.vocab_size >= len(hf_tok)
    assert (cfg.eos_id, cfg.pad_id, imported.tokenizer.unk_id) == \
        (hf_tok.eos_token_id, hf_tok.pad_token_id, hf_tok.unk_token_id) == \
        (hf["eos_token_id"], hf["pad_token_id"], 2 if name == "t5-small" else 3)
    assert cfg.bos_id == hf["decoder_start_token_id"] == model.generation_config.decoder_start_token_id
    assert f"{name}'s published tokenizer" in imported.card
    if name == "t5-small":
        assert imported.task_prefix == hf["task_specific_params"]["translation_en_to_de"]["prefix"]
        assert imported.languages.label == "en → de"
        assert imported.encode("<extra_id_0>")[-2:] == [32_099, 1]  # the sentinels count down from 32,099
    else:
        assert imported.task_prefix is None and cfg.forced_first_id is None
        assert imported.encode("a <mask> b") == [0, 102, 50_264, 741, 2]  # <mask> takes the space before it


def test_t5_small_imports_its_first_task_and_any_other_by_its_languages(tmp_path, capsys):
    """t5-small's config lists en to de, en to fr and en to ro: the import takes the first unless the languages
    choose another, and keeps all three; a pair it lacks is refused in one line naming the flag."""
    folder = build_published_folder("t5-small", tmp_path / "t5-small")
    assert main(["import", str(folder), "--out", str(tmp_path / "first")]) == 0
    first = viz_model.load(tmp_path / "first", device="cpu")
    assert first.languages.label == "en → de" and first.task_prefix == "translate English to German: "
    assert [(t.source, t.target) for t in translation_tasks(first)] == [("en", "de"), ("en", "fr"), ("en", "ro")]
    assert main(["import", str(folder), "--out", str(tmp_path / "ro"), "--target-lang", "ro"]) == 0
    romanian = viz_model.load(tmp_path / "ro", device="cpu")
    assert romanian.languages.label == "en → ro" and romanian.task_prefix == "translate English to Romanian: "
    capsys.readouterr()
    assert main(["import", str(folder), "--out", str(tmp_path / "xx"), "--target-lang", "xx"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "translates en to de, en to fr, en to ro; none matches --target-lang 'xx'" in err
    assert not (tmp_path / "xx").exists()


def test_ids_and_decoding_equal_hugging_face_on_varied_text(real):
    _, _, hf_tok, imported = real
    assert_same_ids(hf_tok, imported, prefix(imported), TEXTS)


def test_pieces_are_theirs_with_whole_characters_of_byte_level_ones_shown(real):
    _, _, hf_tok, imported = real
    for text in TEXTS:
        ids = hf_tok(prefix(imported) + text).input_ids
        theirs = hf_tok.convert_ids_to_tokens(ids)
        if imported.tokenizer.byte_level:  # a piece of whole characters as its text, a leading space as ▁
            shown = [hf_tok.decode([i]) for i in ids]
            theirs = [t.replace("Ġ", "▁") if "\ufffd" in s else "▁" + s[1:] if s.startswith(" ") else s
                      for t, s in zip(theirs, shown)]
        assert imported.tokenizer.pieces(ids) == theirs, text


def test_logits_and_every_attention_map_equal_hugging_face(real):
    _, model, hf_tok, imported = real
    assert_same_forced_outputs(model, hf_tok, imported)


@pytest.mark.slow
def test_greedy_output_equals_generate(real):
    _, model, hf_tok, imported = real
    assert_greedy_equals_generate(model, hf_tok, imported, prefix(imported))
