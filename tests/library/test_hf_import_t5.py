"""Hugging Face T5 models open exactly in the instrumented model (issue 45).

Small random `T5ForConditionalGeneration` models with a SentencePiece tokenizer trained here, saved as transformers 5
saves them and imported with ``viz-model import``: v1.0 (ReLU, the head tied, the decoder's output rescaled by
d_model^-0.5) and v1.1 (gated GELU, heads of d_kv 12 with 4 x 12 != d_model, the head its own matrix in the
checkpoint, no rescale), both pre-norm with T5's RMS norm, unscaled scores, no biases and the relative position bias.
Logits, every attention map, greedy output and tokenizer ids (the task prefix before the source) equal transformers'.
"""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
from support.data import assert_loads_as_built  # noqa: E402
from support.hf import assert_same_forced_outputs, failed_import, import_folder  # noqa: E402
from support.hf_families import (  # noqa: E402
    T5_PREFIX,
    assert_greedy_equals_generate,
    assert_same_ids,
    build_t5_folder,
)

import viz_model  # noqa: E402
from viz_model.cli.main import main  # noqa: E402
from viz_model.tokenization.tokenizer_json import JsonTokenizer  # noqa: E402

VERSIONS = ("1.0", "1.1")


@pytest.fixture(scope="module", params=VERSIONS)
def folder(request, tmp_path_factory):
    return build_t5_folder(tmp_path_factory.mktemp("hf"), request.param)


@pytest.fixture(scope="module")
def hf(folder):
    model = transformers.T5ForConditionalGeneration.from_pretrained(folder, attn_implementation="eager")
    return model.eval(), transformers.AutoTokenizer.from_pretrained(folder)


@pytest.fixture(scope="module")
def imported(folder, tmp_path_factory):
    return import_folder(folder, tmp_path_factory, folder.name)


def test_the_config_names_what_t5_does(imported, hf, folder):
    cfg, (model, _) = imported.config, hf
    assert (cfg.positional, cfg.norm, cfg.normalization, cfg.norm_eps) == ("relative", "pre", "rms", 1e-6)
    assert not (cfg.scale_scores or cfg.scale_embeddings or cfg.attention_bias or cfg.ffn_bias)
    assert (cfg.relative_buckets, cfg.relative_max_distance) == (8, 20)
    assert cfg.bos_id == cfg.pad_id == 0 and cfg.eos_id == 1 and cfg.vocab_size == model.config.vocab_size
    v11 = folder.name.startswith("t5-v1.1")
    assert (cfg.gated_ffn, cfg.activation, cfg.d_head) == ((True, "gelu_new", 12) if v11 else (False, "relu", 8))
    assert (cfg.tied_head, cfg.head_rescale) == ((False, False) if v11 else (True, True))
    assert cfg.head_rescale == model.config.scale_decoder_outputs
    assert (model.lm_head.weight is model.shared.weight) == cfg.tied_head  # transformers' own reading
    if not cfg.tied_head:
        assert torch.equal(imported.network.output_projection.weight, model.lm_head.weight)
    assert isinstance(imported.tokenizer, JsonTokenizer) and imported.languages.label == "en → de"
    assert "T5" in imported.card and "task prefix" in imported.card


def test_tokenizer_ids_equal_hugging_face_with_the_task_prefix(hf, imported):
    _, hf_tok = hf
    assert_same_ids(hf_tok, imported, T5_PREFIX)
    trace = imported.trace("A man reads a book.", beam=1)
    assert trace.source_text == "A man reads a book." and trace.source_tokens[-1] == "</s>"
    assert "".join(trace.source_tokens).replace("▁", " ").strip().startswith("translate English to German: A man")
    ids = hf_tok("Ünïcödé ☃ snow.").input_ids  # theirs drops <unk>; ours shows it, as for every model here
    assert hf_tok.unk_token_id in ids and "⁇" in imported.tokenizer.decode(ids)


def test_logits_and_every_attention_map_equal_hugging_face(hf, imported):
    pairs = assert_same_forced_outputs(*hf, imported)
    worst = max(float((o.logits - t.logits).abs().max()) for o, t in pairs)
    assert worst < 1e-5  # measured: ~1e-7 (v1.0) and ~6e-7 (v1.1)


def test_a_padded_batch_gives_each_sentence_its_own_logits(hf, imported):
    model, hf_tok = hf
    batch = hf_tok([T5_PREFIX + "A man reads a book in the park.", T5_PREFIX + "A dog."], return_tensors="pt",
                   padding=True)
    tgt = torch.tensor([[0, 5, 6, 7]] * 2)
    with torch.no_grad():
        theirs = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, decoder_input_ids=tgt).logits
        ours = imported.network(batch.input_ids, tgt).logits
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-4)


def test_greedy_output_equals_generate(hf, imported):
    assert_greedy_equals_generate(*hf, imported, T5_PREFIX)


def test_the_imported_model_loads_as_built(imported):
    assert_loads_as_built(imported.directory)


def test_a_checkpoint_whose_head_is_the_shared_matrix_is_tied(folder, tmp_path):
    """transformers ties lm_head to the embeddings unless the checkpoint's differ, whatever the config says."""
    from safetensors.torch import load_file, save_file

    copy = tmp_path / "tied"
    shutil.copytree(folder, copy)
    tensors = load_file(str(copy / "model.safetensors"))
    tensors.pop("lm_head.weight", None)
    save_file(tensors, str(copy / "model.safetensors"), metadata={"format": "pt"})
    assert main(["import", str(copy), "--out", str(tmp_path / "out")]) == 0
    ours = viz_model.load(tmp_path / "out", device="cpu", precision="fp32")
    theirs = transformers.T5ForConditionalGeneration.from_pretrained(copy).eval()
    assert ours.config.tied_head and theirs.lm_head.weight is theirs.shared.weight
    src, tgt = torch.tensor([[5, 9, 11, 1]]), torch.tensor([[0, 7, 8]])
    with torch.no_grad():
        np.testing.assert_allclose(ours.network(src, tgt).logits.numpy(),
                                   theirs(input_ids=src, decoder_input_ids=tgt).logits.numpy(), atol=1e-5)


def edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | changes))


def test_the_translation_task_is_chosen_by_the_languages(folder, tmp_path, capsys):
    copy = tmp_path / "tasks"
    shutil.copytree(folder, copy)
    tasks = {"translation_en_to_de": {"prefix": T5_PREFIX}, "translation_en_to_fr": {"prefix": "to French: "}}
    edit_config(copy, task_specific_params=tasks)
    assert main(["import", str(copy), "--out", str(tmp_path / "first")]) == 0  # no languages: the first task
    first = viz_model.load(tmp_path / "first", device="cpu")
    assert first.languages.label == "en → de" and first.task_prefix == T5_PREFIX
    capsys.readouterr()
    assert main(["import", str(copy), "--out", str(tmp_path / "none"), "--source-lang", "de"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "en to de, en to fr; none matches --source-lang 'de'" in err, err
    assert main(["import", str(copy), "--out", str(tmp_path / "fr"), "--target-lang", "fr"]) == 0
    french = viz_model.load(tmp_path / "fr", device="cpu")
    assert french.languages.label == "en → fr" and french.encode("A dog.")[:3] == french.tokenizer.encode("to")[:3]
    edit_config(copy, task_specific_params=None)  # Flan-T5 style: instructions in the text, no prefix added
    assert main(["import", str(copy), "--out", str(tmp_path / "flan")]) == 0
    flan = viz_model.load(tmp_path / "flan", device="cpu")
    assert flan.encode("A dog.") == flan.tokenizer.encode_target("A dog.") + [1]
    assert flan.task_prefix == "" and flan.with_task_prefix("Translate to German: ").encode("A dog.")[:2] == \
        flan.tokenizer.encode_target("Translate")[:2]  # no task of its own: the user may give one
    assert not (tmp_path / "flan" / "languages.json").exists()


def test_the_task_prefix_can_be_seen_and_changed(imported, hf):
    model, tokenizer = hf
    assert imported.task_prefix == T5_PREFIX
    french = imported.with_task_prefix("translate English to French: ")
    assert french.task_prefix == "translate English to French: " and imported.task_prefix == T5_PREFIX
    assert french.network is imported.network and french.search_network is imported.search_network
    assert french.encode("A dog.") == tokenizer("translate English to French: A dog.").input_ids
    trace = french.trace("A dog.", beam=1)
    assert "".join(trace.source_tokens).replace("▁", " ").strip().startswith("translate English to French:")
    assert french.translate("A dog.", beam=1) == trace.translation
    as_given = imported.with_task_prefix("")
    assert as_given.encode("A dog.") == tokenizer("A dog.").input_ids and as_given.task_prefix == ""
    assert imported.with_task_prefix(T5_PREFIX) is imported


@pytest.mark.parametrize("prefix, words", [
    (5, "the task prefix must be a string, got int"),
    ("x" * 201, "the task prefix has 201 characters; the limit is 200"),
    ("translate:\nto German: ", "the task prefix is one line"),
    ("translate\x00: ", "the task prefix contains control characters (U+0000)"),
])
def test_a_bad_task_prefix_is_named(imported, prefix, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        imported.with_task_prefix(prefix)


def test_only_a_t5_model_takes_a_task_prefix(tiny_model):
    assert tiny_model.task_prefix is None
    with pytest.raises(ValueError, match="reads no task from its text: only a T5-family model takes a task prefix"):
        tiny_model.with_task_prefix("translate: ")


@pytest.mark.parametrize("change, names", [
    (lambda f: edit_config(f, feed_forward_proj="gated-tanh"), "feed_forward_proj 'gated-tanh'"),
    (lambda f: edit_config(f, feed_forward_proj="double-gated-gelu"), "feed_forward_proj"),
    (lambda f: edit_config(f, is_encoder_decoder=False), "is_encoder_decoder"),
    (lambda f: edit_config(f, relative_attention_num_buckets=2), "relative_buckets must be in"),
    (lambda f: (f / "tokenizer.json").unlink(), "tokenizer.json: missing"),
    (lambda f: (f / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer"})),
     "tokenizer_class 'BertTokenizer'"),
    (lambda f: edit_config(f, vocab_size=50), "50 ids, but the tokenizer has 90"),
])
def test_what_the_model_cannot_express_is_refused_in_one_line(folder, tmp_path, capsys, change, names):
    err = failed_import(folder, tmp_path, capsys, change)
    assert names in err, err


@pytest.mark.slow
def test_an_imported_model_opens_on_every_page(folder, tmp_path, monkeypatch):
    from support.app import check_every_page_opens

    assert main(["import", str(folder), "--out", str(tmp_path / folder.name)]) == 0
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    check_every_page_opens("A man reads a book.")


def test_the_sidebar_shows_the_task_prefix_and_a_changed_one_reaches_the_trace(folder, tmp_path, monkeypatch):
    from support.app import charts, messages, ok, start

    assert main(["import", str(folder), "--out", str(tmp_path / folder.name)]) == 0
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))

    def source_tokens(at) -> list[str]:
        return [str(t) for t in charts(at)[0]["layout"]["xaxis"]["ticktext"]]

    at = ok(start(sentence="A dog."))
    box = at.sidebar.text_input(key="w_prefix")
    assert box.label == "Task prefix" and box.value == T5_PREFIX and "prefix" not in at.query_params
    own = source_tokens(at)
    box.set_value("summarize: ").run()
    ok(at)
    changed = source_tokens(at)
    assert changed != own and at.query_params["prefix"] == "summarize: " and not messages(at)
    linked = ok(start(sentence="A dog.", prefix="summarize: "))  # the link opens with it
    assert linked.sidebar.text_input(key="w_prefix").value == "summarize: " and source_tokens(linked) == changed
    refused = ok(start(sentence="A dog.", prefix="to\u0000German: "))  # the model names what it refuses
    assert "Task prefix ignored: the task prefix contains control characters (U+0000)" in messages(refused)
    assert refused.sidebar.text_input(key="w_prefix").value == T5_PREFIX
