"""Messages name a choice as the caller spells it: the ``viz-model`` command its flags (``--precision``, ``--out``),
a Python call its keywords (``precision=``, ``out=``); ``--search``, the name ``--precision`` had before a rename that
was never released, is gone. The tiny random translation model and a small random GPT-2 built by transformers; CPU,
fp32."""

from __future__ import annotations

import json

import pytest
from support.cli import assert_user_error, run

import viz_model
from viz_model.hf.arguments import argument, command_line_flags, keyword_arguments
from viz_model.hf.exporter import HFExportError, export_hf
from viz_model.hf.importer import HFImportError, import_model


def test_argument_names_keywords_by_default_and_flags_inside_the_command():
    assert argument("precision", "int8", quoted=False) == "precision='int8'"
    assert argument("out") == "out="
    with command_line_flags():
        assert argument("precision", "int8", quoted=False) == "--precision int8"
        assert argument("source_lang", "xx") == "--source-lang 'xx'"
        with keyword_arguments():  # a Python call the command makes
            assert argument("source_lang", "xx") == "source_lang='xx'"
        assert argument("out") == "--out"
    assert argument("out") == "out="


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_precision_flag_gives_the_search_and_its_old_name_is_gone(capsys, random_model_dir, precision):
    code, out, err = run(capsys, "info", "--model", random_model_dir, "--device", "cpu", "--precision", precision)
    assert code == 0 and err == "", err
    assert json.JSONDecoder().raw_decode(out)[0]["search"] == precision
    with pytest.raises(SystemExit) as info:  # argparse's usage error: an unknown flag, not a deprecated one
        run(capsys, "info", "--model", random_model_dir, "--device", "cpu", "--search", precision)
    assert info.value.code == 2
    assert "unrecognized arguments: --search" in capsys.readouterr().err


def test_precision_given_twice_takes_the_last_and_search_beside_it_is_refused(capsys, random_model_dir):
    code, out, err = run(capsys, "info", "--model", random_model_dir, "--device", "cpu", "--precision", "int8",
                         "--precision", "fp32")
    assert code == 0 and err == "", err
    assert json.JSONDecoder().raw_decode(out)[0]["search"] == "fp32"
    with pytest.raises(SystemExit):
        run(capsys, "translate", "A dog.", "--model", random_model_dir, "--precision", "fp32", "--search", "int8")
    assert "unrecognized arguments: --search int8" in capsys.readouterr().err


def test_an_existing_out_is_named_as_the_caller_spells_it(capsys, random_model_dir, tmp_path):
    taken = tmp_path / "taken"
    taken.mkdir()
    with pytest.raises(HFImportError) as info:
        import_model("owner/name", taken)
    assert str(info.value) == f"{taken}: already exists; choose another out= or remove it first"
    with pytest.raises(HFExportError) as info:
        export_hf(random_model_dir, taken)
    assert str(info.value) == f"{taken}: already exists; choose another out= or remove it first"
    assert_user_error(capsys, ["import", "owner/name", "--out", taken], f"{taken}: already exists; choose another "
                                                                        "--out or remove it first")
    assert_user_error(capsys, ["export-hf", random_model_dir, "--out", taken], "choose another --out or remove it")


def test_a_language_model_imported_on_load_refuses_a_precision_naming_the_flag(capsys, tmp_path, monkeypatch):
    """A Hugging Face folder (as a hub id) is imported on load: only then is it known to be a language model."""
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from support.hf_lm import build_lm_folder

    monkeypatch.setenv("VIZ_MODEL_CACHE", str(tmp_path / "cache"))
    folder = build_lm_folder(tmp_path, "gpt2")
    capsys.readouterr()  # transformers' progress bar
    refusal = ": a language model has no search precision to choose"
    line = assert_user_error(capsys, ["translate", "A dog.", "--model", folder, "--device", "cpu", "--precision",
                                      "int8"], f"--precision int8{refusal}")
    assert "precision=" not in line
    with pytest.raises(ValueError, match=f"^precision='int8'{refusal}"):
        viz_model.load(folder, device="cpu", precision="int8")
