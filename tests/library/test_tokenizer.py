"""SentencePiece wrapper: special ids, pieces for display, word groups, training and file errors."""

from __future__ import annotations

import pytest
import sentencepiece as spm

from viz_model.tokenization.tokenizer import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    WORD_START,
    Tokenizer,
    TokenizerError,
    train_tokenizer,
    word_ids,
)


def test_special_ids_and_vocabulary(tokenizer):
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    assert tokenizer.pieces([0, 1, 2, 3]) == ["<pad>", "<unk>", "<s>", "</s>"]
    assert 100 <= tokenizer.vocab_size <= 160
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id) == (0, 1, 2, 3)


def test_encode_decode_round_trip_for_both_languages(tokenizer, corpus):
    for en, de in corpus[:20]:
        for text in (en, de):
            ids = tokenizer.encode(text)
            assert ids and all(4 <= i < tokenizer.vocab_size for i in ids)  # no specials, no unknowns
            assert tokenizer.decode(ids) == text
    batch = tokenizer.encode_batch([en for en, _ in corpus[:5]])
    assert batch == [tokenizer.encode(en) for en, _ in corpus[:5]]


def test_decode_skips_pad_bos_eos_but_keeps_unk(tokenizer):
    ids = tokenizer.encode("Ein Mann")
    assert tokenizer.decode([BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]) == "Ein Mann"
    assert "⁇" in tokenizer.decode([*ids, UNK_ID])


def test_unknown_characters_become_unk_not_dropped(tokenizer):
    ids = tokenizer.encode("Ein Mann 😀 שלום")
    assert ids.count(UNK_ID) >= 2  # the emoji and the Hebrew word are unknown to this toy vocabulary
    assert "<unk>" in tokenizer.pieces(ids)


def test_pieces_mark_word_starts(tokenizer):
    pieces = tokenizer.pieces(tokenizer.encode("Two dogs are playing in the snow."))
    assert pieces[0].startswith(WORD_START)
    assert "".join(pieces).replace(WORD_START, " ").strip() == "Two dogs are playing in the snow."
    assert sum(p.startswith(WORD_START) for p in pieces) == 7  # one word start per word


def test_word_ids():
    assert word_ids([]) == []
    assert word_ids(["▁Two", "▁d", "og", "s", "."]) == [0, 1, 1, 1, 1]
    assert word_ids(["▁Two", "▁dogs", "</s>"]) == [0, 1, 2]
    assert word_ids(["<s>", "▁Zwei", "▁Hun", "de", "</s>"]) == [0, 1, 2, 2, 3]
    assert word_ids(["<s>", "de"]) == [0, 1]  # a piece after a special token starts a new word
    assert word_ids(["ab", "c"]) == [0, 0]  # the first piece always opens word 0


def test_word_ids_of_real_pieces(tokenizer):
    pieces = tokenizer.pieces(tokenizer.encode("Zwei Hunde spielen im Schnee.") + [EOS_ID])
    words = word_ids(pieces)
    assert len(words) == len(pieces)
    assert words == sorted(words) and words[0] == 0
    assert words[-1] == words[-2] + 1  # </s> is a word of its own
    for piece, word, before in zip(pieces[1:], words[1:], words[:-1]):
        assert (word == before + 1) == (piece.startswith(WORD_START) or piece == "</s>")


def test_missing_tokenizer_file(tmp_path):
    with pytest.raises(TokenizerError, match="tokenizer model file not found") as err:
        Tokenizer.load(tmp_path / "nope.model")
    assert "nope.model" in str(err.value)
    with pytest.raises(TokenizerError, match="not found"):
        Tokenizer.load(tmp_path)  # a directory is not a model file


@pytest.mark.parametrize("content", [b"", b"garbage bytes, not a protobuf" * 3, b"\x00\xff" * 50])
def test_garbage_tokenizer_file(tmp_path, content):
    path = tmp_path / "bad.model"
    path.write_bytes(content)
    with pytest.raises(TokenizerError, match="bad.model"):
        Tokenizer.load(path)


def test_truncated_tokenizer_file(tmp_path, tokenizer):
    path = tmp_path / "cut.model"
    path.write_bytes(tokenizer.serialized()[:500])
    with pytest.raises(TokenizerError, match="cut.model"):
        Tokenizer.load(path)


def test_foreign_special_ids_are_rejected(tmp_path, corpus):
    """A SentencePiece model trained with the default ids (unk=0, bos=1, eos=2, no pad) is not ours."""
    corpus_file = tmp_path / "c.txt"
    corpus_file.write_text("\n".join(en for en, _ in corpus), encoding="utf-8")
    prefix = tmp_path / "foreign"
    spm.SentencePieceTrainer.train(input=str(corpus_file), model_prefix=str(prefix), vocab_size=60,
                                   model_type="bpe", minloglevel=2, hard_vocab_limit=False)
    with pytest.raises(TokenizerError, match="id is"):
        Tokenizer.load(f"{prefix}.model")


def test_train_tokenizer_writes_a_loadable_model(tmp_path, corpus):
    path = tmp_path / "sub" / "tok.model"
    tok = train_tokenizer([de for _, de in corpus[:100]], path, vocab_size=80, model_type="unigram")
    assert path.is_file() and not list(path.parent.glob("*.tmp"))
    again = Tokenizer.load(path)
    assert again.vocab_size == tok.vocab_size and again.serialized() == path.read_bytes()
    assert again.decode(again.encode("Ein Mann spielt.")) == "Ein Mann spielt."


def test_train_tokenizer_on_no_text(tmp_path):
    with pytest.raises(TokenizerError, match="no text"):
        train_tokenizer(["", "   ", "\n"], tmp_path / "t.model", vocab_size=80)
