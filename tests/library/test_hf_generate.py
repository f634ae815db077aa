"""An imported model translates as transformers' ``generate`` does (issue 34), checked on trained weights.

The shipped model is written as a Hugging Face Marian folder (``viz-model export-hf``): real trained weights that
transformers loads with ``from_pretrained``, with no hub. Imported back, its default search (transformers' rule, full
precision) must give ``generate``'s output on Multi30K validation sentences, every one, with the folder's generation
config and with configs the tests write (early_stopping True / "never", another length_penalty, min_length,
no_repeat_ngram_size); this project's own rule is checked to differ, so the comparison can fail. M2M100's settings
(num_beams 5, max_length 200, early_stopping True, the language code forced) are checked on a small model fitted here.
"""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")
from support.fit_cache import cache_dir, cached_folder  # noqa: E402
from support.hf import WORDS_EN, build_m2m100_folder, fit, import_folder, sentences  # noqa: E402
from support.hf_batches import translations  # noqa: E402

import viz_model  # noqa: E402
from viz_model.cli.main import main  # noqa: E402
from viz_model.config.data_root import data_root  # noqa: E402

MULTI30K_VAL = data_root() / "multi30k" / "val.en.gz"  # the local copy (tests/conftest.py), where there is one
SHIPPED = viz_model.modeldir.shipped.ASSETS_DIR / viz_model.DEFAULT_MODEL

pytestmark = pytest.mark.slow
SPLIT_BY_TEST = True  # on the suite's workers (tests/support/parallel.py): `exported` takes a second, each test minutes


def val_sentences(count: int, start: int = 0) -> list[str]:
    if not MULTI30K_VAL.is_file():
        pytest.skip(f"{MULTI30K_VAL} is not here (`viz-model data fetch multi30k` puts it there)")
    with gzip.open(MULTI30K_VAL, "rt", encoding="utf-8") as f:
        return [line.strip() for line in f][start:start + count]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The shipped model as a Marian folder."""
    out = tmp_path_factory.mktemp("hf") / "mixed-en-de-marian"
    assert main(["export-hf", str(SHIPPED), "--out", str(out)]) == 0
    return out


def with_generation(exported: Path, tmp_path: Path, settings: dict) -> Path:
    """A copy of the exported folder whose generation_config.json has `settings` on top of the exported ones."""
    folder = tmp_path / "folder"
    shutil.copytree(exported, folder)
    path = folder / "generation_config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | settings))
    return folder


def assert_same_as_generate(folder: Path, tmp_path_factory, texts: list[str], name: str, **settings):
    """Import `folder`, translate `texts` by its default search; every output equals generate's. Returns the
    imported model and generate's outputs."""
    model = transformers.MarianMTModel.from_pretrained(folder).eval()
    tokenizer = transformers.MarianTokenizer.from_pretrained(folder)
    imported = import_folder(folder, tmp_path_factory, name)
    assert imported.generation.rule == "transformers"
    theirs = translations(model, tokenizer, texts, imported.config.eos_id, **settings)
    ours = [imported.trace(text).output_ids for text in texts]
    different = [(t, tokenizer.decode(a), tokenizer.decode(b)) for t, a, b in zip(texts, ours, theirs) if a != b]
    assert not different, different[:3]
    return imported, theirs


def test_beam_outputs_equal_generate_on_200_validation_sentences(exported, tmp_path_factory):
    texts = val_sentences(200)
    imported, theirs = assert_same_as_generate(exported, tmp_path_factory, texts, "exported")
    assert imported.search_precision == "fp32" and imported.search_settings().beam == 4
    assert all(ids[-1] == imported.config.eos_id for ids in theirs)  # trained: every translation ends
    # the same sentences by this project's rule differ somewhere: the comparison above can fail (translated 20 at a
    # time up to the first batch that differs: a sentence's translation does not depend on its batch)
    generates = [imported.tokenizer.decode(ids) for ids in theirs]
    assert any(imported.translate(texts[i:i + 20], rule="project") != generates[i:i + 20]
               for i in range(0, len(texts), 20))
    # batched translation gives each sentence the translation it gets alone
    assert imported.translate(texts[:40]) == generates[:40]


def test_greedy_outputs_equal_generate_on_100_validation_sentences(exported, tmp_path_factory):
    """generate with num_beams=1 (a test of its own beside the beam search's: the two take minutes each)."""
    texts = val_sentences(100)
    imported = import_folder(exported, tmp_path_factory, "exported")
    greedy_model = transformers.MarianMTModel.from_pretrained(exported).eval()
    tokenizer = transformers.MarianTokenizer.from_pretrained(exported)
    greedy = translations(greedy_model, tokenizer, texts, imported.config.eos_id, num_beams=1)
    assert [imported.trace(t, beam=1).output_ids for t in texts] == greedy


@pytest.mark.parametrize("settings, start", [
    ({"early_stopping": True}, 200),
    ({"early_stopping": "never"}, 250),
    ({"length_penalty": 2.0, "num_beams": 5}, 300),
    ({"length_penalty": 0.3, "min_length": 12, "no_repeat_ngram_size": 2}, 350),
])
def test_other_generation_configs_equal_generate(exported, tmp_path_factory, tmp_path, settings, start):
    folder = with_generation(exported, tmp_path, settings)
    imported, _ = assert_same_as_generate(folder, tmp_path_factory, val_sentences(40, start), "variant")
    hf = imported.generation.transformers
    for key, value in settings.items():
        assert getattr(hf, key) == value


def fit_m2m100(staging: Path) -> None:
    """A tiny M2M100 (256 positions: room for max_length 200) fitted to end its translations, with m2m100_418M's
    kind of generation config, written into `staging`."""
    with tempfile.TemporaryDirectory() as root:
        folder = build_m2m100_folder(Path(root), positions=256)
        model = transformers.M2M100ForConditionalGeneration.from_pretrained(folder)
        fit(model, transformers.M2M100Tokenizer.from_pretrained(folder, src_lang="en", tgt_lang="de"), steps=300)
        model.save_pretrained(folder)
        (folder / "generation_config.json").write_text(json.dumps({
            "bos_token_id": 0, "decoder_start_token_id": 2, "early_stopping": True, "eos_token_id": 2,
            "max_length": 200, "num_beams": 5, "pad_token_id": 1}))
        shutil.copytree(folder, staging, dirs_exist_ok=True)


def test_m2m100_settings_on_a_fitted_model_equal_generate(request, tmp_path_factory):
    """num_beams 5, max_length 200, early_stopping True (m2m100_418M's generation config), the target language's
    code forced first, on a tiny M2M100 fitted to end its translations (`fit_m2m100`, cached in pytest's cache
    folder)."""
    folder = cached_folder(cache_dir(request, tmp_path_factory, "fitted-translators"), "m2m100", [], fit_m2m100,
                           code=("support/hf.py", "library/test_hf_generate.py"))
    tokenizer = transformers.M2M100Tokenizer.from_pretrained(folder, src_lang="en", tgt_lang="de")
    model = transformers.M2M100ForConditionalGeneration.from_pretrained(folder).eval()  # with that config
    imported = import_folder(folder, tmp_path_factory, "m2m100-fitted")
    hf = imported.generation.transformers
    assert (hf.num_beams, hf.max_length, hf.early_stopping) == (5, 200, True)
    texts = sentences(WORDS_EN, 30, 77)
    de = tokenizer.get_lang_id("de")
    theirs = translations(model, tokenizer, texts, 2, forced_bos_token_id=de)
    assert sum(ids[-1] == 2 for ids in theirs) >= 25  # fitted: it ends its translations
    assert [imported.trace(t).output_ids for t in texts] == theirs


@pytest.mark.parametrize("generation, config", [
    (None, {}),  # neither file sets anything: transformers' defaults (greedy, 20 new tokens)
    (None, {"num_beams": 4, "max_length": 60, "bad_words_ids": [[5], [6, 7]], "forced_eos_token_id": 0}),
    ({"num_beams": 3, "max_new_tokens": 30, "length_penalty": 0.5}, {"num_beams": 6}),  # the file decides
    ({"early_stopping": "never", "min_new_tokens": 3, "no_repeat_ngram_size": 3}, {}),
    ({"min_length": 4, "renormalize_logits": True, "forced_eos_token_id": [0]}, {"max_length": 30}),
])
def test_generation_settings_are_read_as_transformers_reads_them(tmp_path, tmp_path_factory, generation, config):
    """Our reading of the folder against transformers' own (``from_pretrained``'s generation_config, with the
    defaults and the length rules ``generate`` applies)."""
    from support.hf import build_marian_folder

    folder = build_marian_folder(tmp_path)
    hf_config = json.loads((folder / "config.json").read_text())
    for key in ("forced_eos_token_id", "num_beams", "max_length", "bad_words_ids"):
        hf_config.pop(key, None)
    hf_config |= config
    (folder / "config.json").write_text(json.dumps(hf_config))
    (folder / "generation_config.json").unlink(missing_ok=True)
    if generation is not None:
        (folder / "generation_config.json").write_text(json.dumps(generation))
    model = transformers.MarianMTModel.from_pretrained(folder)
    own = model.generation_config  # what generate() starts from; then its defaults and its length rules
    theirs, _ = model._prepare_generation_config(None)
    theirs = model._prepare_generated_length(theirs, own.max_length is None, own.min_length is None, "input_ids",
                                             1, None)
    imported = import_folder(folder, tmp_path_factory, "read")
    ours = imported.generation.transformers
    assert ours.num_beams == theirs.num_beams and ours.length_penalty == theirs.length_penalty
    assert ours.early_stopping == theirs.early_stopping and ours.max_length == theirs.max_length
    assert ours.min_length == theirs.min_length and ours.no_repeat_ngram_size == theirs.no_repeat_ngram_size
    assert [list(w) for w in ours.bad_words_ids] == (theirs.bad_words_ids or [])
    assert ours.forced_eos is (theirs.forced_eos_token_id is not None)
    assert ours.renormalize_logits is bool(theirs.renormalize_logits)


def test_unimplemented_settings_are_named_in_one_line_and_in_the_card(exported, tmp_path, capsys):
    folder = with_generation(exported, tmp_path, {"do_sample": True, "repetition_penalty": 1.3, "top_k": 5,
                                                  "num_beam_groups": 2, "made_up": 1})
    out = tmp_path / "out"
    assert main(["import", str(folder), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    note = [line for line in err.splitlines() if "not implemented" in line]
    assert len(note) == 1 and all(key in note[0] for key in ("do_sample", "repetition_penalty", "num_beam_groups",
                                                             "made_up"))
    assert "top_k" not in note[0]  # a sampling setting: without sampling, transformers ignores it too
    model = viz_model.load(out)
    assert "repetition_penalty" in model.card and "as if it were 1.0" in model.card
    assert len(model.generation.transformers.notes) == 4


def test_a_broken_generation_config_is_refused_in_one_line(exported, tmp_path, capsys):
    for settings, words in (({"eos_token_id": [2, 5]}, "eos_token_id"), ({"num_beams": "four"}, "num_beams"),
                            ({"max_length": -3}, "max_length"), ({"bad_words_ids": [[10**6]]}, "outside")):
        folder = with_generation(exported, tmp_path / words, settings)
        out = tmp_path / words / "out"
        assert main(["import", str(folder), "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "generation_config.json" in err and words in err and not out.exists(), err


def test_the_rule_is_switchable_and_recorded(exported, tmp_path_factory):
    imported = import_folder(exported, tmp_path_factory, "switch")
    text = val_sentences(1, 7)[0]
    trace = imported.trace(text)
    assert trace.settings["rule"] == "transformers" and trace.settings["search"] == "fp32"
    assert (trace.settings["beam"], trace.settings["alpha"]) == (4, 1.0)
    project = imported.trace(text, rule="project")
    assert project.settings["rule"] == "project" and project.settings["alpha"] == 0.6
    tree = imported.beam_tree(text)
    assert tree.rule == "transformers" and tree.best.tokens == trace.output_ids
    assert any(c.status == "finished" for s in tree.steps for c in s.candidates)
    assert imported.with_precision("int8").trace(text).settings["search"] == "int8"
    # this project's own model keeps its rule, and can search as transformers
    shipped = viz_model.load(SHIPPED, device="cpu")
    assert shipped.trace(text).settings["rule"] == "project"
    assert shipped.with_precision("fp32").translate(text, rule="transformers") == trace.translation
    with pytest.raises(ValueError, match="rule must be one of project, transformers"):
        imported.translate(text, rule="marian")


def test_the_app_shows_generates_translation_and_switches_the_rule(exported, tmp_path, monkeypatch):
    """The explorer, on the imported trained model: its translation is generate's; the sidebar's rule switch and
    the link's ``rule`` give this project's search; the beam and alpha defaults follow the rule."""
    from streamlit.testing.v1 import AppTest
    from support.app import APP

    assets = tmp_path / "assets"
    assert main(["import", str(exported), "--out", str(assets / "mixed-marian")]) == 0
    model = viz_model.load(assets / "mixed-marian", device="cpu")
    tokenizer = transformers.MarianTokenizer.from_pretrained(exported)
    hf = transformers.MarianMTModel.from_pretrained(exported).eval()
    text = next(t for t in val_sentences(200) if model.translate(t) != model.translate(t, rule="project"))
    theirs = translations(hf, tokenizer, [text], model.config.eos_id)[0]
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(assets))

    def shown(at: AppTest) -> str:
        return next(m.value for m in at.markdown if "Translation" not in m.value and m.value.strip()
                    and m.value.replace("\\", "") in (model.translate(text), model.translate(text, rule="project")))

    at = AppTest.from_file(str(APP), default_timeout=240)
    at.query_params.update({"sentence": text})
    at.run()
    assert not at.exception
    assert at.slider(key="w_alpha").value == 1.0 and at.slider(key="w_beam").value == 4  # the generation config's
    assert shown(at).replace("\\", "") == model.tokenizer.decode(theirs)
    assert "rule" not in at.query_params and "alpha" not in at.query_params  # defaults stay out of the link
    at.radio(key="w_rule").set_value("project").run()
    assert at.slider(key="w_alpha").value == 0.6 and at.query_params["rule"] == "project"
    assert shown(at).replace("\\", "") == model.translate(text, rule="project")
    linked = AppTest.from_file(str(APP), default_timeout=240)
    linked.query_params.update({"sentence": text, "rule": "project", "alpha": "0.9"})
    linked.run()
    assert not linked.exception and linked.slider(key="w_alpha").value == 0.9
    assert shown(linked).replace("\\", "") == model.translate(text, rule="project", alpha=0.9)
