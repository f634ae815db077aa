"""Hugging Face Marian models open exactly in the instrumented model (issue 21).

A small random `MarianMTModel` with real SentencePiece models trained here is saved with ``save_pretrained`` and
imported with ``viz-model import``; then logits, every attention map, greedy output and tokenizer ids must equal
Hugging Face's, and broken folders must fail with one line naming the file, leaving no output directory.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
from support.data import assert_loads_as_built  # noqa: E402
from support.hf import (  # noqa: E402
    WORDS_DE,
    WORDS_EN,
    assert_same_forced_outputs,
    assert_same_ids,
    build_marian_folder,
    import_folder,
    sentences,
)

import viz_model  # noqa: E402
from viz_model.cli.main import main  # noqa: E402
from viz_model.tokenization.pretrained import MarianTokenizer  # noqa: E402


@pytest.fixture(scope="module")
def marian_folder(tmp_path_factory):
    return build_marian_folder(tmp_path_factory.mktemp("hf"))


@pytest.fixture(scope="module")
def hf(marian_folder):
    model = transformers.MarianMTModel.from_pretrained(marian_folder, attn_implementation="eager").eval()
    return model, transformers.MarianTokenizer.from_pretrained(marian_folder)


@pytest.fixture(scope="module")
def imported(marian_folder, tmp_path_factory):
    return import_folder(marian_folder, tmp_path_factory, "opus-mt-tiny")


def test_tokenizer_ids_equal_hugging_face(hf, imported):
    _, hf_tok = hf
    assert_same_ids(hf_tok, imported)


def test_logits_and_every_attention_map_equal_hugging_face(hf, imported):
    model, hf_tok = hf
    cfg = imported.config
    keep = [i for i in range(cfg.vocab_size) if i not in cfg.never_emitted]
    for ours, _ in assert_same_forced_outputs(model, hf_tok, imported, keep=keep):
        assert torch.isinf(ours.logits[..., cfg.pad_id]).all()  # the pad id is never emitted


def test_trace_axes_carry_the_marian_tokens(hf, imported):
    _, hf_tok = hf
    text = "A man reads a book in the park."
    trace = imported.trace(text, beam=1)
    assert trace.source_tokens == hf_tok.convert_ids_to_tokens(hf_tok(text).input_ids)
    assert trace.target_tokens[0] == "<pad>" and trace.source_tokens[-1] == "</s>"
    assert trace.target_tokens[1:] == trace.output_tokens[:-1]


def test_greedy_output_equals_generate(hf, imported):
    model, hf_tok = hf
    for text in sentences(WORDS_EN, 20, 11):
        src = hf_tok(text, return_tensors="pt").input_ids
        ours = imported.trace(text, beam=1)
        limit = ours.settings["max_output_length"]
        with torch.no_grad():
            theirs = model.generate(src, num_beams=1, do_sample=False, max_new_tokens=limit,
                                    bad_words_ids=[[imported.config.pad_id]])
        assert ours.output_ids == theirs[0, 1:].tolist(), text
        assert imported.translate(text, beam=1) == imported.tokenizer.decode(theirs[0, 1:].tolist())


def test_decoded_text_equals_hugging_face(hf, imported):
    _, hf_tok = hf
    for text in sentences(WORDS_DE, 30, 5):
        ids = hf_tok(text_target=text).input_ids
        assert imported.tokenizer.decode(ids) == hf_tok.decode(ids, skip_special_tokens=True), text


def test_model_card_names_the_source_and_licence(imported):
    assert "cc-by-4.0" in imported.card and "Imported from the Hugging Face model" in imported.card
    assert isinstance(imported.tokenizer, MarianTokenizer)


def add_tensor(path, name: str) -> None:
    """Add a random tensor of the shared embedding's shape under `name` (an untied output matrix)."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(path))
    tensors[name] = torch.randn_like(tensors["model.shared.weight"])
    save_file(tensors, str(path), metadata={"format": "pt"})


def broken(marian_folder, tmp_path, change) -> tuple[int, str, object]:
    folder = tmp_path / "broken"
    shutil.copytree(marian_folder, folder)
    change(folder)
    out = tmp_path / "out"
    return folder, out


@pytest.mark.parametrize("what, change, names", [
    ("deberta", lambda f: (f / "config.json").write_text(json.dumps({"model_type": "deberta-v2"})), "config.json"),
    ("t5", lambda f: (f / "config.json").write_text(json.dumps({"model_type": "t5"})), "config.json"),
    ("no vocab", lambda f: (f / "vocab.json").unlink(), "vocab.json"),
    ("no weights", lambda f: (f / "model.safetensors").unlink(), "pytorch_model.bin"),
    ("truncated", lambda f: (f / "model.safetensors").write_bytes((f / "model.safetensors").read_bytes()[:5000]),
     "model.safetensors"),
    ("shapes", lambda f: (f / "config.json").write_text(json.dumps(
        {**json.loads((f / "config.json").read_text()), "encoder_ffn_dim": 48, "decoder_ffn_dim": 48})),
     "model.safetensors"),
    ("untied", lambda f: add_tensor(f / "model.safetensors", "lm_head.weight"), "lm_head.weight"),
    ("vocab mismatch", lambda f: (f / "vocab.json").write_text(json.dumps(
        {**json.loads((f / "vocab.json").read_text()), "extra": 10_000})), "vocab.json"),
])
def test_broken_folders_fail_with_one_line_and_leave_nothing(marian_folder, tmp_path, capsys, what, change, names):
    folder, out = broken(marian_folder, tmp_path, change)
    assert main(["import", str(folder), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("viz-model: error:") and names in err, err
    assert not out.exists() and not [p for p in out.parent.iterdir() if p.name.startswith(".out.")]


def test_offline_hub_id_says_how_to_fetch_the_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["import", "Helsinki-NLP/opus-mt-en-de", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "pass that folder" in err and "--local-dir" in err and not (tmp_path / "x").exists()


def test_existing_output_is_refused(marian_folder, tmp_path, capsys):
    (tmp_path / "taken").mkdir()
    assert main(["import", str(marian_folder), "--out", str(tmp_path / "taken")]) == 2
    assert "already exists" in capsys.readouterr().err


@pytest.mark.slow
def test_an_imported_model_opens_on_every_page(marian_folder, tmp_path, monkeypatch):
    from support.app import check_every_page_opens

    assert main(["import", str(marian_folder), "--out", str(tmp_path / "opus-mt-tiny")]) == 0
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    check_every_page_opens("A man reads a book.")


def test_the_pe_lab_draws_the_layout_the_imported_model_uses(marian_folder, tmp_path, monkeypatch):
    from support.app import arr, open_page

    assert main(["import", str(marian_folder), "--out", str(tmp_path / "opus-mt-tiny")]) == 0
    model = viz_model.load(tmp_path / "opus-mt-tiny", device="cpu")
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    at = open_page("positional", beam="1", sentence="A man reads a book.")
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    matrix = next(s for s in specs if s["layout"]["title"]["text"].startswith("PE matrix"))
    drawn = arr(matrix["data"][0]["z"])
    own = model.network.positional_encodings(drawn.shape[0]).numpy()
    np.testing.assert_allclose(drawn, own, atol=1e-6)  # the model's own (halves) table, not the paper's order
    curves = next(s for s in specs if s["layout"]["title"]["text"].startswith("Sinusoids"))
    half = model.config.d_model // 2
    names = {t["name"] for t in curves["data"] if t.get("name")}
    assert "dim 0 (sin)" in names and f"dim {half} (cos)" in names


def test_the_language_pair_comes_from_the_model(marian_folder, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest
    from support.app import APP

    from viz_model.modeldir.languages import guess_languages

    folder = tmp_path / "opus-mt-fr-en"
    shutil.copytree(marian_folder, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "source_lang": "fr", "target_lang": "en"}))
    assert main(["import", str(folder), "--out", str(tmp_path / "assets" / "fr-en")]) == 0
    model = viz_model.load(tmp_path / "assets" / "fr-en", device="cpu")
    assert (model.languages.source_name, model.languages.target_name) == ("French", "English")
    assert guess_languages("Helsinki-NLP/opus-mt-en-de").label == "en → de" and guess_languages("bert") is None
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path / "assets"))
    at = AppTest.from_file(str(APP), default_timeout=240)
    at.query_params.update({"beam": "1", "sentence": "Un homme lit un livre."})
    at.run()
    assert not at.exception
    assert at.text_area(key="sentence_input").label == "Sentence to translate (French)"
    assert "fr-en" in at.selectbox(key="w_model").options
    # the name and pair under the picker (markdown-escaped: fr\-en shows as fr-en)
    assert "fr-en · fr → en" in [c.value.replace("\\", "") for c in at.sidebar.caption]


def test_a_broken_languages_file_names_itself(marian_folder, tmp_path):
    assert main(["import", str(marian_folder), "--out", str(tmp_path / "m")]) == 0
    (tmp_path / "m" / "languages.json").write_text('{"source": "<script>", "target": "de"}')
    with pytest.raises(viz_model.CheckpointError, match="languages.json"):
        viz_model.load(tmp_path / "m", device="cpu")


def test_a_pytorch_model_bin_is_read_with_weights_only(marian_folder, hf, tmp_path):
    model, _ = hf
    folder = tmp_path / "bin"
    shutil.copytree(marian_folder, folder)
    (folder / "model.safetensors").unlink()
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    assert main(["import", str(folder), "--out", str(tmp_path / "out")]) == 0
    ours = viz_model.load(tmp_path / "out", device="cpu", precision="fp32")
    src = torch.tensor([ours.encode("A man reads a book.")])
    tgt = torch.tensor([[ours.config.bos_id, 5, 6, 7]])
    with torch.no_grad():
        theirs = model(input_ids=src, decoder_input_ids=tgt).logits
        mine = ours.network(src, tgt).logits
    keep = [i for i in range(ours.config.vocab_size) if i not in ours.config.never_emitted]
    np.testing.assert_allclose(mine[..., keep].numpy(), theirs[..., keep].numpy(), rtol=1e-4, atol=1e-4)
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x04 not a pickle of tensors")
    assert main(["import", str(folder), "--out", str(tmp_path / "out2")]) == 2 and not (tmp_path / "out2").exists()


@pytest.mark.browser
@pytest.mark.slow
def test_an_imported_model_in_a_real_browser(marian_folder, hf, tmp_path, request):
    """The imported Marian in the explorer: the encoder map's keys are its pieces (the worker's one Chromium,
    support.browser's `page`: a second Playwright in the same worker cannot start)."""
    from support.browser import CHROMIUM, FIRST_LOAD_S, streamlit_server

    if not CHROMIUM.exists():
        pytest.skip("needs Debian's Chromium at /usr/bin/chromium")
    pytest.importorskip("playwright.sync_api")
    _, hf_tok = hf
    assets = tmp_path / "assets"
    assert main(["import", str(marian_folder), "--out", str(assets / "opus-mt-tiny")]) == 0
    sentence = "A man reads a book in the park."
    expected = hf_tok.convert_ids_to_tokens(hf_tok(sentence).input_ids)
    with streamlit_server(assets, tmp_path / "streamlit.log") as url:
        page = request.getfixturevalue("page")
        page.goto(f"{url}/?beam=1&sentence={sentence.replace(' ', '+')}")
        page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=FIRST_LOAD_S * 1000)
        ticks = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot .xtick text')]"
                              ".map(e => e.textContent)")
        assert ticks == expected  # the encoder map's keys are the Marian pieces of the sentence
        assert page.locator('[data-testid="stException"]').count() == 0
        sidebar = page.locator('[data-testid="stSidebar"]').inner_text()
        assert "opus-mt-tiny · en → de" in sidebar, sidebar  # the caption under the picker names the pair


def test_the_imported_model_loads_as_built(imported):
    """Loading without random init recomputes the fixed buffers
    (Marian's: sinusoid halves, position offset, output bias, never-emitted pad)."""
    assert_loads_as_built(imported.directory)


@pytest.mark.parametrize("generation, config", [
    (None, {}),  # neither file names it: nothing forced (transformers 5 no longer applies MarianConfig's default)
    (None, {"forced_eos_token_id": 0}),
    (None, {"forced_eos_token_id": None}),
    ({"forced_eos_token_id": 0}, {}),
    ({"forced_eos_token_id": None}, {"forced_eos_token_id": 0}),  # generation_config.json decides when present
    ({"num_beams": 4}, {"forced_eos_token_id": 0}),  # ... even without the key
    ({"forced_eos_token_id": [0]}, {}),
])
def test_forced_eos_at_the_limit_is_read_as_transformers_reads_it(marian_folder, tmp_path, generation, config):
    from viz_model.hf.importer import model_config
    from viz_model.search.settings import read_hf_generation

    folder = tmp_path / "folder"
    shutil.copytree(marian_folder, folder)
    hf_config = json.loads((folder / "config.json").read_text())
    hf_config.pop("forced_eos_token_id", None)
    (folder / "config.json").write_text(json.dumps(hf_config | config))
    (folder / "generation_config.json").unlink(missing_ok=True)
    if generation is not None:
        (folder / "generation_config.json").write_text(json.dumps(generation))
    theirs = transformers.MarianMTModel.from_pretrained(folder).generation_config.forced_eos_token_id
    cfg = model_config(hf_config | config, folder / "config.json", unk_id=1)
    assert read_hf_generation(folder, hf_config | config, cfg).forced_eos is (theirs in (0, [0]))


def test_forcing_another_token_at_the_limit_is_refused(marian_folder, tmp_path):
    from viz_model.hf.importer import model_config
    from viz_model.search.settings import GenerationError, read_hf_generation

    hf_config = json.loads((marian_folder / "config.json").read_text())
    (tmp_path / "generation_config.json").write_text(json.dumps({"forced_eos_token_id": 7}))
    cfg = model_config(hf_config, marian_folder / "config.json", unk_id=1)
    with pytest.raises(GenerationError, match="generation_config.json: forced_eos_token_id 7 is not eos_token_id 0"):
        read_hf_generation(tmp_path, hf_config, cfg)


def test_the_training_page_says_where_an_imported_models_training_is_documented(marian_folder, tmp_path,
                                                                                 monkeypatch):
    from support.app import open_page

    assert main(["import", str(marian_folder), "--out", str(tmp_path / "opus-mt-tiny")]) == 0
    assert viz_model.load(tmp_path / "opus-mt-tiny", device="cpu").imported
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    at = open_page("training", beam="1", sentence="A man reads a book.")
    shown = " ".join(m.value for m in [*at.info, *at.caption, *at.markdown])
    assert "was not trained by this project" in shown and "How the model on this page was trained" not in shown
    assert not viz_model.load(viz_model.modeldir.shipped.ASSETS_DIR / viz_model.DEFAULT_MODEL).imported
