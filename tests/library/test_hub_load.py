"""Any hub model in one line (issue 50): `viz_model.load` of a hub id or a Hugging Face folder as it is, with the
import's choices (source_lang, target_lang, dtype) as arguments, on t5-small's published config and tokenizer
(three translation tasks; `tests/fixtures/t5-bart`) with small random weights. The hub download is replaced by the
local folder (no network). A choice the model cannot take is refused in one line naming the keyword, with nothing
written to the cache. CPU, fp32 search unless a test says otherwise."""

from __future__ import annotations

import sys
import warnings

import pytest

transformers = pytest.importorskip("transformers")
from support.hf import WORDS_EN, sentences  # noqa: E402
from support.published import build_published_folder  # noqa: E402

import viz_model  # noqa: E402
from viz_model.hf.hub_cache import CACHE_ENV  # noqa: E402
from viz_model.hf.importer import HFImportError  # noqa: E402
from viz_model.translation_tasks import translation_tasks, with_translation_task  # noqa: E402

HUB_ID = "google-t5/t5-small"
TEXTS = sentences(WORDS_EN, 3, 5)
PREFIXES = {"de": "translate English to German: ", "fr": "translate English to French: ",
            "ro": "translate English to Romanian: "}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """t5-small's published files with small random weights, as ``hf download`` or save_pretrained leaves them."""
    return build_published_folder("t5-small", tmp_path_factory.mktemp("hf") / "t5-small")


@pytest.fixture
def hub(folder, tmp_path, monkeypatch):
    """The hub replaced by `folder` for `HUB_ID` (any other id: no such repository); the downloads asked for."""
    import huggingface_hub

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    calls = []

    def download(repo_id, **kwargs):
        calls.append(repo_id)
        if repo_id != HUB_ID:
            raise OSError(f"404 Client Error: Repository Not Found for url: https://huggingface.co/{repo_id}")
        return str(folder)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", download)
    return calls


def cached(tmp_path) -> list[str]:
    """The entries of the cache folder (none where it was never made)."""
    root = tmp_path / "cache"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_the_three_task_t5_opens_in_one_line_with_its_first_task(hub, tmp_path):
    model = viz_model.load(HUB_ID, device="cpu", precision="fp32")
    assert model.languages.label == "en → de" and model.task_prefix == PREFIXES["de"]
    assert [(t.source, t.target, t.prefix) for t in translation_tasks(model)] == \
        [("en", t, p) for t, p in PREFIXES.items()]
    assert [t.label for t in translation_tasks(model)] == ["English to German", "English to French",
                                                           "English to Romanian"]
    assert hub == [HUB_ID] and cached(tmp_path) == ["google-t5--t5-small"]
    assert model.encode("A dog.")[:4] == model.tokenizer.encode_target(PREFIXES["de"])[:4]


def test_another_task_through_its_arguments_is_a_cache_entry_of_its_own(hub, tmp_path):
    french = viz_model.load(HUB_ID, device="cpu", target_lang="fr", precision="fp32")
    assert french.languages.label == "en → fr" and french.task_prefix == PREFIXES["fr"]
    romanian = viz_model.load(HUB_ID, device="cpu", source_lang="en", target_lang="ro", precision="fp32")
    assert romanian.task_prefix == PREFIXES["ro"]
    assert cached(tmp_path) == ["google-t5--t5-small__from-en__to-ro", "google-t5--t5-small__to-fr"]
    again = viz_model.load(HUB_ID, device="cpu", target_lang="fr", precision="fp32")
    assert len(hub) == 2 and again.directory == french.directory  # reused, not imported again
    # the task switched in memory (the explorer's sidebar) is the task imported
    switched = with_translation_task(viz_model.load(HUB_ID, device="cpu", precision="fp32"), "fr")
    assert switched.languages == french.languages and switched.task_prefix == french.task_prefix
    assert switched.translate(TEXTS) == french.translate(TEXTS)
    assert [switched.encode(t) for t in TEXTS] == [french.encode(t) for t in TEXTS]


def test_a_hugging_face_folder_loads_as_it_is_imported_once(folder, tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # a folder needs no hub client
    model = viz_model.load(folder, device="cpu", precision="fp32")  # a Path, as the issue's user gave it
    assert model.languages.label == "en → de" and "# t5-small (imported)" in model.card
    (entry,) = cached(tmp_path)
    assert entry.startswith("folder--t5-small--") and model.directory == tmp_path / "cache" / entry
    stamp = (model.directory / "model.safetensors").stat().st_mtime_ns
    again = viz_model.load(str(folder), device="cpu", precision="fp32")
    assert again.directory == model.directory and (again.directory / "model.safetensors").stat().st_mtime_ns == stamp
    assert again.translate(TEXTS) == model.translate(TEXTS)
    assert viz_model.load(folder, device="cpu", dtype="fp16").directory.name == entry + "__fp16"


@pytest.mark.parametrize("choice, expected", [
    ({"target_lang": "xx"}, "task_specific_params translates en to de, en to fr, en to ro; none matches "
                            "target_lang='xx'"),
    ({"source_lang": "de", "target_lang": "fr"}, "none matches source_lang='de' and target_lang='fr'"),
    ({"dtype": "int4"}, "dtype= must be one of fp32, fp16, got 'int4'"),
    ({"dtype": "bf16"}, "dtype= must be one of fp32, fp16, got 'bf16'"),
    ({"target_lang": "../../x"}, "target_lang='../../x': not a language code"),
])
def test_a_choice_the_model_cannot_take_names_the_keyword_and_writes_nothing(hub, tmp_path, choice, expected):
    with pytest.raises(viz_model.CheckpointError) as info:
        viz_model.load(HUB_ID, device="cpu", **choice)
    message = str(info.value)
    assert "\n" not in message and expected in message, message
    assert "--" not in message.replace("google-t5--", "")  # no CLI flag in a Python call's message
    assert cached(tmp_path) == []
    if "dtype" in choice or "../" in str(choice):
        assert hub == []  # checked before anything is downloaded


def test_a_model_too_large_for_fp32_names_the_dtype_keyword_and_writes_nothing(hub, tmp_path, monkeypatch):
    from viz_model.hf import importer

    monkeypatch.setattr(importer, "MAX_WEIGHTS_BYTES", 64 * 1024)  # this small T5 as NLLB-600M is at 2 GiB
    with pytest.raises(viz_model.CheckpointError) as info:
        viz_model.load(HUB_ID, device="cpu")
    message = str(info.value)
    assert "\n" not in message and "weight-file limit; import with dtype='fp16' (half the size" in message, message
    assert cached(tmp_path) == []


def test_a_hub_id_that_names_no_model_is_one_line_and_writes_nothing(hub, tmp_path):
    with pytest.raises(viz_model.CheckpointError) as info:
        viz_model.load("google-t5/t5-smal", device="cpu")
    message = str(info.value)
    assert "\n" not in message and message.startswith("google-t5/t5-smal: the hub could not be reached or has no such "
                                                      "model (OSError)")
    assert "`hf download google-t5/t5-smal --local-dir DIR`" in message and "huggingface-cli" not in message
    assert cached(tmp_path) == []


def test_a_model_of_ours_takes_no_import_choice(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    for choice in ({"target_lang": "fr"}, {"dtype": "fp16"}, {"source_lang": "en", "target_lang": "de"}):
        with pytest.raises(viz_model.CheckpointError) as info:
            viz_model.load(device="cpu", **choice)
        message = str(info.value)
        assert "\n" not in message and message.startswith(", ".join(f"{k}={v!r}" for k, v in choice.items()))
        assert "a hub id or a Hugging Face folder" in message
    assert cached(tmp_path) == []


def test_precision_is_the_one_name_of_the_search_precision():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert viz_model.load(device="cpu", precision="fp32").search_precision == "fp32"
    with pytest.raises(TypeError, match="search"):  # its name before a rename that was never released: gone
        viz_model.load(device="cpu", search="fp32")


def test_from_transformers_takes_the_same_choices(folder):
    model = transformers.T5ForConditionalGeneration.from_pretrained(folder)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    first = viz_model.from_transformers(model, tokenizer, device="cpu", precision="fp32")
    assert first.task_prefix == PREFIXES["de"] and len(translation_tasks(first)) == 3
    romanian = viz_model.from_transformers(model, tokenizer, target_lang="ro", device="cpu", dtype="fp16")
    assert romanian.languages.label == "en → ro" and "Weights stored in fp16" in romanian.card
    assert romanian.search_precision == "fp32"  # an imported model searches as transformers does: full precision
    for choice, expected in (({"target_lang": "xx"}, "none matches target_lang='xx'"),
                             ({"dtype": "int4"}, "dtype= must be one of fp32, fp16")):
        with pytest.raises(HFImportError, match=expected):
            viz_model.from_transformers(model, tokenizer, device="cpu", **choice)
    assert viz_model.from_transformers(model, tokenizer, device="cpu", precision="int8").search_precision == "int8"
    with pytest.raises(TypeError, match="search"):
        viz_model.from_transformers(model, tokenizer, device="cpu", search="int8")


def test_a_model_without_tasks_says_so_when_asked_for_one():
    model = viz_model.load(device="cpu")
    assert translation_tasks(model) == []
    with pytest.raises(ValueError, match="has no translation tasks to choose from"):
        with_translation_task(model, "fr")
