"""Hub ids and Hugging Face folders imported on first use into a cache of model directories (``$VIZ_MODEL_CACHE``,
else ``~/.cache/viz-model``), reused afterwards: one directory per source and import choices (language pair, dtype),
``owner--name`` for a hub id imported as it is. A language model's directory holds no weights: it reads them in the
hub's own cache (or the folder), and is imported again when the hub's files it names are gone or changed."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

from ..modeldir.checkpoint import CheckpointError, has_weight_source, weight_source
from .arguments import argument
from .common import MAX_HF_CONFIG_BYTES, HFImportError, read_json_file
from .importer import HUB_ID, check_dtype, import_model

CACHE_ENV = "VIZ_MODEL_CACHE"
HUB_ENV = "VIZ_MODEL_HUB"  # "off": the explorer offers no hub downloads to its visitors (`viz-model app --no-hub`)
# en, de_DE, deu_Latn, zh-Hant: safe in a directory name, and never "__" (the separator of the name's choices)
LANGUAGE_CODE = re.compile(r"(?=.{1,32}$)[A-Za-z0-9]+(?:[_-][A-Za-z0-9]+)*")
REVISION = re.compile(r"(?=.{1,96}$)[A-Za-z0-9](?:[A-Za-z0-9._-]|/(?!/))*")  # step1000, v1.0, refs/pr/1, a commit


def cache_root() -> Path:
    """Where imported hub models are kept: ``$VIZ_MODEL_CACHE``, else ``~/.cache/viz-model``."""
    value = os.environ.get(CACHE_ENV)
    return Path(value) if value else Path.home() / ".cache" / "viz-model"


def hub_offered() -> bool:
    """Whether the explorer may fetch hub models a visitor names (not where ``$VIZ_MODEL_HUB`` is ``off``)."""
    return os.environ.get(HUB_ENV, "").strip().lower() != "off"


def is_hub_id(source: str) -> bool:
    """Whether `source` reads as a hub id ``owner/name`` (and is no folder here)."""
    return HUB_ID.fullmatch(source) is not None and not Path(source).is_dir()


def is_hf_folder(path: Path) -> bool:
    """Whether `path` is a Hugging Face model folder as ``save_pretrained`` or ``hf download`` writes it: its
    config.json names a ``model_type`` (this project's model directories' never do)."""
    try:
        config = read_json_file(path / "config.json", MAX_HF_CONFIG_BYTES, "not a model config")
    except (OSError, HFImportError):
        return False
    return isinstance(config, dict) and "model_type" in config


def imported_on_load(path: str | Path) -> bool:
    """Whether `viz_model.load` imports `path` into the cache: a hub id (a string, no folder here) or a Hugging Face
    folder (`is_hf_folder`)."""
    if isinstance(path, str) and not Path(path).exists():
        return is_hub_id(path)
    return Path(path).is_dir() and is_hf_folder(Path(path))


def cache_name(source: str, source_lang: str | None = None, target_lang: str | None = None,
               dtype: str | None = None, revision: str | None = None) -> str:
    """The cache directory's name for `source` imported with these choices: ``owner--name`` for a hub id (a folder:
    ``folder--NAME--`` and a digest of its path and files' sizes and times, so an edited folder is imported again),
    then ``__rev-REVISION`` (a hub repository's version), ``__from-CODE``, ``__to-CODE``, ``__fp16`` for each choice
    made. Codes and the revision are checked first (one line naming the argument)."""
    check_dtype(dtype or "fp32")
    if revision is not None and not (isinstance(revision, str) and REVISION.fullmatch(revision)):
        raise HFImportError(f"{argument('revision', revision)}: not a revision (a branch, tag or commit of a hub "
                            "repository: letters, digits, '.', '_', '-' and '/')")
    for name, code in (("source_lang", source_lang), ("target_lang", target_lang)):
        if code is not None and not (isinstance(code, str) and LANGUAGE_CODE.fullmatch(code)):
            raise HFImportError(f"{argument(name, code)}: not a language code (letters and digits, parts joined "
                                "by _ or -)")
    if is_hub_id(source):
        key = source.replace("/", "--")
    else:
        folder = Path(source).resolve()
        stamp = [str(folder)] + [f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}"
                                 for f in sorted(folder.iterdir()) if f.is_file()]
        key = f"folder--{re.sub(r'[^A-Za-z0-9_.-]', '_', folder.name).lstrip('.')}--" + \
            hashlib.sha256("\n".join(stamp).encode()).hexdigest()[:16]
    return key + (f"__rev-{revision.replace('/', '--')}" if revision else "") \
        + (f"__from-{source_lang}" if source_lang else "") + (f"__to-{target_lang}" if target_lang else "") \
        + (f"__{dtype}" if dtype and dtype != "fp32" else "")


def cached_import(source: str, source_lang: str | None = None, target_lang: str | None = None,
                  dtype: str | None = None, revision: str | None = None) -> Path:
    """The model directory of `source` (a hub id or a Hugging Face folder; `revision`: a hub id's version) imported
    with these choices, in `cache_root`; imported first if it is not there. `HFImportError` in one line otherwise
    (the hub cannot be reached, huggingface_hub is not installed, a revision it does not have, a choice the model
    cannot take), with nothing written to the cache."""
    directory = cache_root() / cache_name(source, source_lang, target_lang, dtype, revision)
    if directory.is_dir() and is_hub_id(source) and has_weight_source(directory):
        try:
            weight_source(directory)
        except CheckpointError:  # the hub's cache lost or replaced the files it reads: imported again
            shutil.rmtree(directory)
    if not directory.is_dir():
        try:
            import_model(source, directory, source_lang, target_lang, dtype or "fp32",
                         label=source if is_hub_id(source) else Path(source).resolve().name, revision=revision)
        except HFImportError:
            if not directory.is_dir():
                raise
            # another process imported it meanwhile (renamed into place whole): its directory serves
    return directory
