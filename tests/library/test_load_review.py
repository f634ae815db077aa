"""What `viz_model.load` must not ignore or mix up (a review of issues 50 and 51): a search precision given for a
language model (it has no such choice), two processes importing one hub model into the cache at once, language
codes that would make two choices one cache entry, and what a hub id fetches (one set of weights, a byte-level BPE's
merges.txt). Small random GPT-2 and Qwen2 built by transformers; the hub replaced by a local folder; CPU, fp32."""

from __future__ import annotations

import fnmatch
import json
import shutil
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from support.hf import randomise  # noqa: E402
from support.hf_lm import build_lm_folder  # noqa: E402
from support.published import FIXTURES, unpacked  # noqa: E402

import viz_model  # noqa: E402
from viz_model.hf import hub_cache  # noqa: E402
from viz_model.hf.hub_cache import CACHE_ENV, cache_name  # noqa: E402
from viz_model.hf.importer import HFImportError, import_model  # noqa: E402
from viz_model.kinds.language_model import LanguageModel  # noqa: E402


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    """A small random GPT-2 folder, as save_pretrained writes it."""
    return build_lm_folder(tmp_path_factory.mktemp("hf"), "gpt2")


def test_a_language_model_refuses_a_search_precision_instead_of_ignoring_it(gpt2, tmp_path):
    directory = import_model(str(gpt2), tmp_path / "lm")
    assert isinstance(viz_model.load(directory, device="cpu"), LanguageModel)  # "auto": nothing chosen
    for precision in ("int8", "fp32", "int4"):
        with pytest.raises(ValueError, match=rf"^precision='{precision}': .*language model") as info:
            viz_model.load(directory, device="cpu", precision=precision)
        assert "\n" not in str(info.value)


def test_two_processes_importing_one_hub_model_both_get_it(gpt2, tmp_path, monkeypatch):
    """The other process's import lands between this one's look into the cache and its own rename."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    real = hub_cache.import_model

    def raced(source, out, *args, **kwargs):
        real(str(gpt2), out, label="the other process")  # finished first
        return real(str(gpt2), out, *args, **kwargs)

    monkeypatch.setattr(hub_cache, "import_model", raced)
    monkeypatch.setattr(hub_cache, "is_hub_id", lambda source: source == "owner/gpt2")
    directory = hub_cache.cached_import("owner/gpt2")
    assert directory == tmp_path / "cache" / "owner--gpt2"
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["owner--gpt2"]  # no staging folder left
    assert isinstance(viz_model.load(directory, device="cpu"), LanguageModel)


def test_a_failed_import_is_still_an_error_when_nothing_is_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))

    def failing(source, out, *args, **kwargs):
        raise HFImportError(f"{out}: could not be written (no space left on device)")

    monkeypatch.setattr(hub_cache, "import_model", failing)
    monkeypatch.setattr(hub_cache, "is_hub_id", lambda source: True)
    with pytest.raises(HFImportError, match="could not be written"):
        hub_cache.cached_import("owner/gpt2")


@pytest.mark.parametrize("source_lang, target_lang", [("en__to-de", None), ("en", "de__fp16")])
def test_language_codes_that_would_share_another_choice_s_cache_entry_are_refused(source_lang, target_lang):
    with pytest.raises(HFImportError, match="not a language code"):
        cache_name("owner/name", source_lang, target_lang)
    assert cache_name("owner/name", "deu_Latn", "zh-Hant") == "owner--name__from-deu_Latn__to-zh-Hant"


def test_the_cli_says_a_language_model_is_not_its_kind_whatever_search_precision_is_given(gpt2, tmp_path, capsys):
    from viz_model.cli.main import main

    directory = import_model(str(gpt2), tmp_path / "lm")
    for flags in ([], ["--precision", "int8"]):
        assert main(["translate", "A dog.", "--model", str(directory), "--device", "cpu", *flags]) == 2
        err = capsys.readouterr().err.strip()
        assert err.endswith(f"{directory}: a decoder-only language model; this command works on translation models "
                            "(in Python: viz_model.load(...).complete(prompt) or .trace(prompt))"), err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["translate", "A dog.", "--model", str(empty), "--device", "cpu"]) == 2
    assert "config.json" in capsys.readouterr().err


def test_a_folder_given_as_dot_is_named_by_its_own_name(gpt2, tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.chdir(gpt2)
    model = viz_model.load(".", device="cpu")
    assert model.card.startswith(f"# {gpt2.name} (imported)"), model.card[:80]


def hub_serving(repo: Path, snapshot: Path, monkeypatch) -> list[list[str]]:
    """The hub replaced by `repo`: ``snapshot_download`` copies the repository's files that `allow_patterns` match
    into `snapshot` (as the hub's cache does) and returns it; the patterns of each call."""
    import huggingface_hub

    asked: list[list[str]] = []

    def download(repo_id, allow_patterns=None, **kwargs):
        asked.append(list(allow_patterns))
        snapshot.mkdir(parents=True, exist_ok=True)
        for file in repo.iterdir():
            if any(fnmatch.fnmatch(file.name, p) for p in allow_patterns) and not (snapshot / file.name).exists():
                shutil.copy(file, snapshot)
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", download)
    return asked


def test_a_hub_id_fetches_one_set_of_weights_and_the_merges_of_a_byte_level_bpe(tmp_path, monkeypatch):
    """Qwen2.5's tokenizer as published in vocab.json + merges.txt, safetensors and a pytorch_model.bin beside them
    (as many repositories publish both): merges.txt was not fetched (the import failed), the .bin copy was."""
    repo = unpacked(FIXTURES / "lm" / "qwen2.5-0.5b-instruct", tmp_path / "repo")
    config = json.loads((repo / "config.json").read_text()) | {
        "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_window_layers": 2}
    model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config.from_dict(config))
    randomise(model)
    model.save_pretrained(repo)
    (repo / "config.json").write_text(json.dumps(config))
    shutil.copy(FIXTURES / "lm" / "qwen2.5-0.5b-instruct" / "generation_config.json", repo)
    torch.save(model.state_dict(), repo / "pytorch_model.bin")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    hub_serving(repo, tmp_path / "hub" / "snapshot", monkeypatch)
    lm = viz_model.load("Qwen/Qwen2.5-0.5B-Instruct", device="cpu")
    assert isinstance(lm, LanguageModel) and (tmp_path / "hub" / "snapshot" / "merges.txt").is_file()
    assert not (tmp_path / "hub" / "snapshot" / "pytorch_model.bin").exists()  # the safetensors are read
    ids = transformers.AutoTokenizer.from_pretrained(repo)("Hello world, café")["input_ids"]
    assert lm.tokenizer.encode("Hello world, café") == ids


def test_a_hub_id_published_as_pytorch_model_bin_only_still_fetches_it(gpt2, tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    shutil.copytree(gpt2, repo)
    model = transformers.GPT2LMHeadModel.from_pretrained(gpt2)
    (repo / "model.safetensors").unlink()
    torch.save(model.state_dict(), repo / "pytorch_model.bin")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    hub_serving(repo, tmp_path / "hub" / "snapshot", monkeypatch)
    lm = viz_model.load("openai-community/gpt2", device="cpu")
    assert isinstance(lm, LanguageModel) and (tmp_path / "hub" / "snapshot" / "pytorch_model.bin").is_file()


def test_from_transformers_refuses_a_language_model_s_precision_without_naming_its_temporary_folder(gpt2):
    model = transformers.GPT2LMHeadModel.from_pretrained(gpt2)
    tokenizer = transformers.AutoTokenizer.from_pretrained(gpt2)
    with pytest.raises(ValueError) as info:
        viz_model.from_transformers(model, tokenizer, device="cpu", precision="int8")
    assert str(info.value) == ("precision='int8': a language model has no search precision to choose (fp32 on the "
                               "CPU, its weights' dtype on a GPU); leave it out")
    assert isinstance(viz_model.from_transformers(model, tokenizer, device="cpu"), LanguageModel)


def test_chat_refuses_a_string_rather_than_continuing_it_without_the_template(gpt2, tmp_path):
    lm = viz_model.load(import_model(str(gpt2), tmp_path / "lm"), device="cpu")
    with pytest.raises(ValueError, match=r"^messages must be a list of .* got a string \(to continue text as it is, "
                                         r"without the chat template, use complete\)$"):
        lm.chat("Hello there")
