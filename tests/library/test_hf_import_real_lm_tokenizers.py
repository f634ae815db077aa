"""Decoder-only import on real published tokenizers and configs (issue 51; `tests/fixtures/lm/SOURCES.md`): GPT-2's
tokenizer.json (byte-level BPE of 50,257 ids, ``<|endoftext|>`` 50,256) and Qwen2.5-0.5B-Instruct's vocab.json and
merges.txt (NFC, its own split pattern, 151,643 pieces and 22 added tokens in an id table of 151,936, a chat
template), each with random weights of a small size built from the published config.json. fp32 on the CPU: the ids of
100 varied texts, their decoding and their pieces equal transformers'."""

from __future__ import annotations

import json
import random
import shutil

import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from support.hf import randomise  # noqa: E402
from support.published import FIXTURES as PUBLISHED  # noqa: E402
from support.published import their_pieces, unpacked  # noqa: E402

import viz_model  # noqa: E402
from viz_model.cli.main import main  # noqa: E402

FIXTURES = PUBLISHED / "lm"
QWEN = "qwen2.5-0.5b-instruct"
MODELS = {"gpt2": "GPT2LMHeadModel", QWEN: "Qwen2ForCausalLM"}
SMALL = {"gpt2": {"n_embd": 32, "n_layer": 2, "n_head": 4},
         QWEN: {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                "num_key_value_heads": 2, "max_window_layers": 2}}
# per model: ids in the tokenizer (added tokens included), <|endoftext|>'s id, the ids that end a continuation
# (generation_config.json's), "Hello world"'s ids
PUBLISHED_IDS = {"gpt2": (50_257, 50_256, [50_256], [15_496, 995]),
                 QWEN: (151_665, 151_643, [151_645, 151_643], [9_707, 1_879])}
VARIED = [
    # accents and other Latin letters, composed and decomposed (Qwen's NFC joins the latter)
    "Das Mädchen läuft schnell über die Straße.", "L'élève a reçu une médaille à Noël, n'est-ce pas ?",
    "Ştiinţa şi tehnologia în România: ă, î, â, ș, ț.", "Ångström, smörgåsbord, fjord, Øresund, æble.",
    "naïve café résumé coöperate", "Cafe\u0301 and cafe\u0301 once more: e\u0301 a\u0300 o\u0308",
    "¿Dónde está la biblioteca? ¡Allí!", "Łódź, Kraków, Gdańsk, Wrocław", "Ðe þorn and ðe eth", "ﬁne ligatures ﬂow",
    # other scripts
    "Привет, как дела?", "Καλημέρα κόσμε.", "东京是日本的首都。", "我爱自然语言处理，也爱机器学习！",
    "こんにちは、世界！カタカナとひらがな。", "안녕하세요 세계", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया",
    "สวัสดีครับ", "Xin chào thế giới", "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ ａｎｄ １２３", "中文English混合mixed文本",
    # emoji, joined and modified
    "I ❤ NY 🗽🍎 — 👍🏽 ok", "🙂🙃😀😂🤣", "family 👨‍👩‍👧‍👦 and flags 🇫🇷🇯🇵", "🧑🏿‍💻 codes at night 🌙",
    "Math: x² + y² = z², π ≈ 3.14159, √2, ∞, ≤ ≥ ≠.", "Temperatures of -40°C and 100°F; H₂O; 1/2 ½ ¾.",
    # code
    "def f(x): return x ** 2  # code", "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "    if x:\n        return [y for y in x if y % 2 == 0]\n", "import numpy as np\nprint(np.arange(10).sum())",
    "<html><body>Tags & entities &amp; more</body></html>", '{"key": [1, 2.5, null], "ok": true}',
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name;", "fn main() { println!(\"{}\", 1 << 4); }",
    "camelCaseWords and snake_case_names and kebab-case-ones", "git commit -m 'fix: off-by-one' && git push",
    "E-mail me at jane.doe@example.com or visit https://example.org/a?b=1&c=2#top.",
    "C:\\Users\\name\\file.txt and /usr/local/bin", "regex: ^\\d{3}-\\d{4}$ matches 555-0100",
    # numbers
    "1234567890 0987654321 3.14 2,718 1e-9", "It costs $1,299.99 (or €1.150,50) - a 15% discount!",
    "Call +1 (555) 010-4477 before 9:30 a.m. on 2024-03-15.", "0.000001 and 1000000000000 and -42",
    "Version 3.10.12, build 20240315, port 8080", "٣٤٥ and ४५६ and 一二三",
    # runs of spaces, newlines, tabs
    "  leading and trailing spaces  ", "many     spaces\tand\ttabs", "line one\nline two", "a\n\n\nb",
    "\ttab first", "trailing newline\n", "\n\nstarts with newlines", "windows\r\nline ends\r\n", "          ",
    "mixed \t \n \t spaces", "a  b   c    d     e", " ", "\n",
    # punctuation, contractions, case, special tokens written as text
    "Don't you think it's odd? I'd say we'll see...", "She said: \"Hello, world!\" and left.",
    "‘Curly quotes’ and “double ones” — with an em dash – and en dash.", "Wait... what?! No way!!! Really???",
    "ALL CAPS SENTENCE WITH NUMBERS 42 AND 7.", "U.S.A., e.g., i.e., etc., Dr. Smith, Mr. O'Neil.",
    "Hashtags #NLP and mentions @user!", "(a) [b] {c} <d>", "Supercalifragilisticexpialidocious",
    "Non\u00a0breaking\u00a0spaces and a zero\u200bwidth space.", "soft\u00adhyphen and\u2028line separator",
    "text <|endoftext|> more text", "<|im_start|>user\nHi<|im_end|>", "a", ".", "Hello world",
]
PIECES = ["über", "東京", "🙂", "x = 1", "3.14", "  ", "\n", "\t", "naïve", "def", "Привет", "😂", "१२३", "—"]


def varied_texts() -> list[str]:
    """100 texts: the hand-written ones and mixtures of their kinds joined by runs of spaces, tabs and newlines."""
    rng = random.Random(51)
    mixed = ["".join(rng.choice(PIECES) + rng.choice([" ", "  ", "   ", "\t", "\n", "\n\n", " \t"])
                     for _ in range(rng.randint(3, 8))) for _ in range(100 - len(VARIED))]
    return VARIED + mixed


TEXTS = varied_texts()


def published(name: str, file: str = "config.json") -> dict:
    return json.loads((FIXTURES / name / file).read_text())


@pytest.fixture(scope="module", params=sorted(MODELS))
def real(request, tmp_path_factory):
    """(name, transformers' tokenizer of the folder, our import loaded) for one published tokenizer."""
    name = request.param
    folder = unpacked(FIXTURES / name, tmp_path_factory.mktemp("hf") / name)
    config = published(name) | SMALL[name]  # a small network; vocabulary and special ids as published
    model_class = getattr(transformers, MODELS[name])
    model = model_class(model_class.config_class.from_dict(config))
    randomise(model)
    model.save_pretrained(folder)
    # the published config.json (only the dimensions changed) and generation_config.json back
    (folder / "config.json").write_text(json.dumps(config))
    shutil.copy(FIXTURES / name / "generation_config.json", folder)
    out = tmp_path_factory.mktemp("ours") / name
    assert main(["import", str(folder), "--out", str(out)]) == 0
    return name, transformers.AutoTokenizer.from_pretrained(folder), viz_model.load(out, device="cpu")


def test_the_texts_are_a_hundred_and_varied():
    assert len(TEXTS) == len(set(TEXTS)) == 100
    assert sum("  " in t for t in TEXTS) >= 20 and sum("\n" in t for t in TEXTS) >= 20
    assert sum("\t" in t for t in TEXTS) >= 10


def test_the_published_ids_are_the_import_s(real):
    name, hf_tok, imported = real
    size, end_of_text, eos, hello = PUBLISHED_IDS[name]
    tok = imported.tokenizer
    assert len(hf_tok) == tok.backend.get_vocab_size(with_added_tokens=True) == size
    assert imported.config.vocab_size == published(name)["vocab_size"] == tok.vocab_size >= size
    assert hf_tok.convert_tokens_to_ids("<|endoftext|>") == end_of_text == published(name)["bos_token_id"]
    assert tok.eos_ids == eos == hf_tok.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"][-len(eos):])
    assert tok.encode("Hello world") == hf_tok("Hello world").input_ids == hello
    assert tok.encode("<|endoftext|>") == [end_of_text]
    if name == QWEN:
        assert hf_tok.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"]) == [151_644, 151_645]


def test_ids_of_varied_texts_equal_transformers(real):
    _, hf_tok, imported = real
    for text in TEXTS:
        assert imported.tokenizer.encode(text) == hf_tok(text).input_ids, repr(text)


def test_decoding_equals_transformers_skipping_special_tokens(real):
    _, hf_tok, imported = real
    tok = imported.tokenizer
    for text in TEXTS:
        ids = hf_tok(text).input_ids
        assert tok.decode(ids) == hf_tok.decode(ids, skip_special_tokens=True), repr(text)
        # one id at a time: part of a character decodes as transformers' replacement character too
        assert [tok.decode([i]) for i in ids] == [hf_tok.decode([i], skip_special_tokens=True) for i in ids]


def test_pieces_are_theirs_with_whole_characters_shown(real):
    _, hf_tok, imported = real
    for text in TEXTS:
        ids = hf_tok(text).input_ids
        assert imported.tokenizer.pieces(ids) == their_pieces(hf_tok, ids, byte_level=True), repr(text)


def test_the_chat_template_is_the_published_one_and_its_text_encodes_as_transformers(real):
    name, hf_tok, imported = real
    template = imported.tokenizer.rules["chat_template"]
    if name == "gpt2":
        assert template is None
        return
    assert template == published(name, "tokenizer_config.json")["chat_template"]
    messages = [{"role": "user", "content": "Wie heißt du? 🙂 名前は？"},
                {"role": "assistant", "content": "  spaces\tand\nlines  "}, {"role": "user", "content": "x = 1"}]
    text = hf_tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud.")
    assert text.endswith("<|im_start|>assistant\n")
    theirs = hf_tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=True)
    assert imported.tokenizer.encode(text) == theirs["input_ids"]


def test_chat_reads_the_templates_ids_and_replies_as_generate(real):
    """Qwen2.5's published template and generation config (two end-of-text ids, a repetition penalty of 1.1): chat()
    continues apply_chat_template(add_generation_prompt=True)'s ids as generate(do_sample=False) does, and its trace
    shows the template's tokens."""
    import warnings

    import torch

    name, hf_tok, imported = real
    if name == "gpt2":
        pytest.skip("GPT-2 has no chat template")
    messages = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Wie heißt du? 🙂"}]
    text = hf_tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = hf_tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=True)["input_ids"]
    assert imported.encode(messages) == ids == imported.tokenizer.chat_ids(messages)
    model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config.from_dict(published(QWEN) | SMALL[QWEN]))
    randomise(model)  # the fixture's weights (seeded)
    model.generation_config = transformers.GenerationConfig.from_dict(published(QWEN, "generation_config.json"))
    with torch.no_grad():
        out = model.eval().generate(torch.tensor([ids]), do_sample=False, max_new_tokens=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the config samples: decoded greedily, said once (tested)
        reply = imported.chat(messages, max_new_tokens=8)
        trace = imported.trace(messages, max_new_tokens=3)
    assert reply == hf_tok.decode(out[0, len(ids):], skip_special_tokens=True)
    assert trace.source_text == text and trace.target_ids[:len(ids)] == ids
    assert trace.target_tokens[:len(ids)] == their_pieces(hf_tok, ids, byte_level=True)
    assert trace.target_tokens.count("<|im_start|>") == 3 and trace.target_tokens.count("<|im_end|>") == 2
