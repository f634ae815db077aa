"""The T5, BART and mBART import stores the tokenizer transformers 5 builds from a folder (CPU, no search), not the
folder's tokenizer.json as it is: transformers 5's classes rebuild the pipeline around the file's vocabulary, so a file
written by an older converter (the original mBART's hub files keep SentencePiece's NFKC normalizer; older T5 files
split on spaces without dropping them) reads otherwise. A folder with only SentencePiece's model (hub mT5) imports;
without transformers 5 the file is read as it is, and a folder without either is refused in one line."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from support.hf_families import T5_PREFIX, build_mt5_folder, build_original_mbart_folder, build_t5_folder

import viz_model
from viz_model.cli.main import main

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

TEXTS = ["A man reads a book.", "ﬁne ﬂowers", "Ｆｕｌｌ ｗｉｄｔｈ ｔｅｘｔ", "two  spaces   and three",
         " leading and trailing ", "cafe\u0301 and café", "tab\tand\nnewline", "²³ ½ ™ ℃"]


def _older_file(folder, normalizer, pre_tokenizer) -> None:
    """The folder's tokenizer.json with the pipeline an older converter wrote (the vocabulary as it was)."""
    path = folder / "tokenizer.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "normalizer": normalizer, "pre_tokenizer": pre_tokenizer}))


def _imported_ids(folder, out, texts: list[str]) -> list[list[int]]:
    assert main(["import", str(folder), "--out", str(out)]) == 0
    model = viz_model.load(out, device="cpu")
    return [model.encode(t) for t in texts]


def _as_written(folder, texts: list[str]) -> list[list[int]]:
    """The pieces' ids of the folder's tokenizer.json read as it is (what the import stored before)."""
    raw = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    return [raw.encode(t, add_special_tokens=False).ids for t in texts]


OLD_METASPACE = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}


@pytest.mark.parametrize("family", ["mbart", "t5"])
def test_a_file_an_older_converter_wrote_gives_transformers_5s_ids(family, tmp_path):
    if family == "mbart":
        folder = build_original_mbart_folder(tmp_path)
        _older_file(folder, {"type": "NFKC"}, OLD_METASPACE)  # SentencePiece's normalizer, kept by the conversion
        theirs = transformers.AutoTokenizer.from_pretrained(folder, src_lang="en_XX")
        expected = [theirs(t).input_ids for t in TEXTS]
    else:
        folder = build_t5_folder(tmp_path, "1.1")
        _older_file(folder, json.loads((folder / "tokenizer.json").read_text())["normalizer"], OLD_METASPACE)
        theirs = transformers.AutoTokenizer.from_pretrained(folder)
        expected = [theirs(T5_PREFIX + t).input_ids for t in TEXTS]  # the folder's one translation task's prefix
    ours = _imported_ids(folder, tmp_path / "imported", TEXTS)
    assert ours == expected
    as_written = _as_written(folder, TEXTS if family == "mbart" else [T5_PREFIX + t for t in TEXTS])
    body = (lambda ids: ids[:-2]) if family == "mbart" else (lambda ids: ids[:-1])  # without </s> (and the code)
    assert [body(ids) for ids in ours] != as_written  # the file as it is reads some texts otherwise


def test_an_mt5_folder_with_only_sentencepieces_model_imports(tmp_path):
    folder = build_mt5_folder(tmp_path)
    texts = [*TEXTS, "Ein Mann liest.", "Мужчина читает книгу.", "男人在读书。"]
    with_file = _imported_ids(folder, tmp_path / "with-file", texts)
    shutil.copy(tmp_path / "spm.model", folder / "spiece.model")  # as hub mT5 folders are: no tokenizer.json
    (folder / "tokenizer.json").unlink()
    assert _imported_ids(folder, tmp_path / "from-spm", texts) == with_file
    theirs = transformers.AutoTokenizer.from_pretrained(folder)
    assert with_file == [theirs(t).input_ids for t in texts]
    assert json.loads((tmp_path / "from-spm" / "tokenizer.json").read_text())["model"]["type"] == "Unigram"


def test_without_transformers_the_file_is_read_as_it_is(tmp_path, monkeypatch, capsys):
    folder = build_original_mbart_folder(tmp_path)
    _older_file(folder, {"type": "NFKC"}, OLD_METASPACE)
    monkeypatch.setitem(sys.modules, "transformers", None)  # not installed: importing it fails
    ours = _imported_ids(folder, tmp_path / "imported", TEXTS)
    assert [ids[:-2] for ids in ours] == _as_written(folder, TEXTS)
    (folder / "tokenizer.json").unlink()
    capsys.readouterr()
    assert main(["import", str(folder), "--out", str(tmp_path / "none")]) != 0
    err = capsys.readouterr().err
    assert "tokenizer.json: missing" in err and len(err.strip().splitlines()) == 1, err


def test_a_tokenizer_transformers_cannot_build_is_refused_in_one_line(tmp_path, capsys):
    folder = build_t5_folder(tmp_path, "1.1")
    (folder / "tokenizer.json").write_text('{"model": {"type": "Unigram", "vocab": "not a vocabulary"}}')
    capsys.readouterr()
    assert main(["import", str(folder), "--out", str(tmp_path / "none")]) != 0
    err = capsys.readouterr().err.strip()
    assert f"{folder}: transformers {transformers.__version__} cannot build this folder's tokenizer (" in err, err
    assert len(err.splitlines()) == 1 and not (tmp_path / "none").exists()
