"""``viz-model export-hf``: this project's models as Hugging Face Marian folders that compute the same function
(issue 34). transformers loads the folder and gives the same logits and attention maps; imported back, the model
traces exactly as the original; CTranslate2's converter accepts it; what Marian cannot express is refused."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
from support.data import tiny_model_config  # noqa: E402
from support.hf import import_folder  # noqa: E402

import viz_model  # noqa: E402
from viz_model.cli.main import main  # noqa: E402
from viz_model.hf.exporter import to_ctranslate2  # noqa: E402
from viz_model.modeldir.checkpoint import save_model_dir  # noqa: E402
from viz_model.nn.model import Transformer  # noqa: E402

SHIPPED = viz_model.modeldir.shipped.ASSETS_DIR / viz_model.DEFAULT_MODEL
TEXTS = ["Two dogs are playing in the snow.", "A man in a red jacket reads a newspaper on a bench.",
         "The children laugh while their father cooks dinner in the kitchen.", "Where is the station?",
         "She bought three apples, two pears and a melon at the market yesterday morning."]


@pytest.fixture(scope="module")
def shipped():
    return viz_model.load(SHIPPED, device="cpu", precision="fp32")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("hf") / "marian"
    assert main(["export-hf", str(SHIPPED), "--out", str(out)]) == 0
    return out


def test_the_folder_holds_what_transformers_and_ctranslate2_read(exported, shipped):
    assert sorted(p.name for p in exported.iterdir()) == [
        "README.md", "config.json", "generation_config.json", "model.safetensors", "source.spm", "target.spm",
        "tokenizer_config.json", "vocab.json"]
    vocab = json.loads((exported / "vocab.json").read_text())
    config = json.loads((exported / "config.json").read_text())
    size = shipped.config.vocab_size
    assert len(vocab) == size and vocab["<pad>"] == size - 1 == config["pad_token_id"]  # CTranslate2: pad last
    assert vocab["</s>"] == config["eos_token_id"] and vocab["<s>"] == config["decoder_start_token_id"]
    assert all(vocab[shipped.tokenizer.piece(i)] == i - 1 for i in range(1, size))  # the others keep their order


def test_transformers_computes_the_same_logits_and_maps(exported, shipped):
    model = transformers.MarianMTModel.from_pretrained(exported, attn_implementation="eager").eval()
    tokenizer = transformers.MarianTokenizer.from_pretrained(exported)
    new_id = {old: old - 1 for old in range(1, shipped.config.vocab_size)} | {0: shipped.config.vocab_size - 1}
    for text in TEXTS:
        trace = shipped.trace(text)
        ids = tokenizer(text, return_tensors="pt").input_ids
        assert ids[0].tolist() == [new_id[i] for i in trace.source_ids]  # MarianTokenizer gives our pieces
        decoder_input = torch.tensor([[new_id[i] for i in trace.target_ids]])
        with torch.no_grad():
            theirs = model(input_ids=ids, decoder_input_ids=decoder_input, output_attentions=True)
        log_probs = torch.log_softmax(theirs.logits[0], dim=-1)
        chosen = log_probs.gather(1, torch.tensor([[new_id[i]] for i in trace.output_ids]))[:, 0]
        np.testing.assert_allclose(chosen.exp().numpy(), [s.probability for s in trace.steps], atol=1e-5)
        for ours, other in ((trace.encoder_attentions, theirs.encoder_attentions),
                            (trace.decoder_attentions, theirs.decoder_attentions),
                            (trace.cross_attentions, theirs.cross_attentions)):
            assert len(ours) == len(other)
            for a, b in zip(ours, other):
                np.testing.assert_allclose(a, b[0].numpy(), atol=1e-5)


def test_exported_then_imported_traces_exactly_as_the_original(exported, shipped, tmp_path_factory):
    imported = import_folder(exported, tmp_path_factory, "round-trip")
    for text in TEXTS:
        ours, back = shipped.trace(text), imported.trace(text, rule="project")
        assert back.output_tokens == ours.output_tokens and back.source_tokens == ours.source_tokens
        for kind in ("encoder_attentions", "decoder_attentions", "cross_attentions"):
            for a, b in zip(getattr(ours, kind), getattr(back, kind)):
                np.testing.assert_allclose(a, b, atol=1e-5)
        np.testing.assert_allclose([s.probability for s in ours.steps], [s.probability for s in back.steps],
                                   atol=1e-5)
        assert back.translation == ours.translation


def test_ctranslate2_converts_it_and_translates_as_transformers(exported, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    tokenizer = transformers.MarianTokenizer.from_pretrained(exported)
    model = transformers.MarianMTModel.from_pretrained(exported).eval()
    stock = ctranslate2.converters.TransformersConverter(str(exported)).convert(str(tmp_path / "stock"))
    ours = to_ctranslate2(exported, tmp_path / "ct2")
    for path in (stock, ours):
        assert (tmp_path / path / "model.bin").is_file()
    translator = ctranslate2.Translator(str(ours), device="cpu")
    for text in TEXTS:
        tokens = tokenizer.convert_ids_to_tokens(tokenizer(text).input_ids)
        theirs = translator.translate_batch([tokens], beam_size=1)[0].hypotheses[0]
        with torch.no_grad():
            generated = model.generate(tokenizer(text, return_tensors="pt").input_ids, num_beams=1)[0, 1:]
        assert tokenizer.convert_tokens_to_ids(theirs) + [tokenizer.eos_token_id] == generated.tolist()


def test_what_marian_cannot_express_is_refused_in_one_line(tmp_path, tokenizer, capsys):
    for name, changes, words in (("learned", {"positional": "learned"}, "its positions are learned"),
                                 ("rope", {"positional": "rope"}, "its positions are rope"),
                                 ("alibi", {"positional": "alibi"}, "its positions are alibi"),
                                 ("relative", {"positional": "relative"}, "its positions are relative"),
                                 ("pre-norm", {"norm": "pre"}, "pre-norm"),
                                 ("untied", {"share_embeddings": False}, "not one matrix"),
                                 ("rms", {"normalization": "rms"}, "its normalization is 'rms' (a Marian model has "
                                                                   "'layer')"),
                                 ("gated", {"gated_ffn": True}, "its gated_ffn is True")):
        directory = tmp_path / name
        save_model_dir(Transformer(tiny_model_config(tokenizer.vocab_size, **changes)), tokenizer, directory)
        assert main(["export-hf", str(directory), "--out", str(tmp_path / f"{name}-hf")]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and words in err and not (tmp_path / f"{name}-hf").exists(), err
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left


def test_every_reason_marian_cannot_express_is_named_in_one_line(tmp_path, tokenizer, capsys):
    directory = tmp_path / "several"
    config = tiny_model_config(tokenizer.vocab_size, positional="rope", norm="pre", share_embeddings=False,
                               normalization="rms", gated_ffn=True)
    save_model_dir(Transformer(config), tokenizer, directory)
    assert main(["export-hf", str(directory), "--out", str(tmp_path / "several-hf")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and not (tmp_path / "several-hf").exists(), err
    for words in ("its positions are rope", "pre-norm", "not one matrix", "its normalization is 'rms'",
                  "its gated_ffn is True"):
        assert words in err, (words, err)


def test_an_existing_folder_or_an_imported_model_is_refused(exported, tmp_path, tmp_path_factory, capsys):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    assert main(["export-hf", str(SHIPPED), "--out", str(tmp_path / "taken")]) == 2
    assert "already exists" in capsys.readouterr().err and (tmp_path / "taken" / "keep.txt").read_text() == "mine"
    imported = import_folder(exported, tmp_path_factory, "imported")
    capsys.readouterr()
    assert main(["export-hf", str(imported.directory), "--out", str(tmp_path / "again")]) == 2
    err = capsys.readouterr().err.strip()
    assert "already a Hugging Face model" in err and err.count("\n") == 0 and not (tmp_path / "again").exists()
    assert main(["export-hf", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")]) == 2
    assert "not found" in capsys.readouterr().err
