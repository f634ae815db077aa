"""The front of the library for the app, the CLI and tests: `load()` a model directory (or a hub id, a Hugging Face
folder) or `from_transformers()` a model in memory, as the kind of model it is (`viz_model.kinds`)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from .kinds.encoder import EncoderModel
from .kinds.language_model import LanguageModel
from .kinds.translator import TranslationModel
from .modeldir.checkpoint import CheckpointError, model_kind
from .modeldir.shipped import DEFAULT_MODEL, asset_roots, model_root
from .nn.devices import resolve_device


def load(path: str | Path | None = None, device: str | torch.device = "auto", *, source_lang: str | None = None,
         target_lang: str | None = None, dtype: str | None = None, precision: str = "auto",
         revision: str | None = None) -> TranslationModel | LanguageModel | EncoderModel:
    """Load a model directory (default: the shipped model in ``assets/``; a bare name such as ``multi30k-lm-en``: that
    model of `available_models`): a `TranslationModel`, a `LanguageModel` for a decoder-only one, an `EncoderModel`
    for an encoder-only one (BERT); errors name the file at fault.

    `precision`: the precision of beam search, ``auto`` (int8 on the CPU, see `viz_model.nn.quantize`), ``int8`` or
    ``fp32``; a language model has none to choose (only ``auto``). Traces are
    always computed in full precision.

    A hub id ``owner/name`` (a string that is no folder here) or a Hugging Face model folder (what
    ``save_pretrained`` or ``hf download`` writes) is imported on first use into a cache (``$VIZ_MODEL_CACHE``, else
    ``~/.cache/viz-model``) and loaded from there afterwards, as ``viz-model import`` would import it: `source_lang` /
    `target_lang` choose a many-to-many model's pair or a T5's translation task (default: the folder's own; the first
    task its config lists), `dtype` ``fp16`` stores the weights in half precision (default ``fp32``); the cache keeps
    one directory per choice. A choice the model cannot take is refused in one line naming the argument, with nothing
    written to the cache. `revision`: a hub id's version (a branch, tag or commit, such as Pythia's ``step1000``),
    fetched and cached apart from its main branch; one that does not exist is refused in one line."""
    from .hf.arguments import argument, keyword_arguments

    chosen = {"source_lang": source_lang, "target_lang": target_lang, "dtype": dtype, "revision": revision}
    if path is not None:
        from .hf.hub_cache import cached_import, imported_on_load
        from .hf.importer import HFImportError
        from .modeldir.shipped import named_model

        path = named_model(path)  # a shipped model (or one of $VIZ_MODEL_ASSETS) by its name

        if imported_on_load(path):
            try:
                with keyword_arguments():
                    path = cached_import(str(path), source_lang, target_lang, dtype, revision)
            except HFImportError as err:
                raise CheckpointError(str(err)) from None
            chosen = {}
    given = [f"{name}={value!r}" for name, value in chosen.items() if value is not None]
    if given:
        raise CheckpointError(f"{', '.join(given)}: choose how a hub id or a Hugging Face folder is imported; "
                              f"{path or DEFAULT_MODEL} is one of this project's model directories")
    if path is None:
        root = model_root(DEFAULT_MODEL)
        if root is None:
            raise CheckpointError(f"no default model ({DEFAULT_MODEL}) in {os.pathsep.join(map(str, asset_roots()))}: "
                                  "train one with `viz-model train` (see the docs) or pass a model directory")
        path = root / DEFAULT_MODEL
    directory = Path(path)
    kind = model_kind(directory)
    if kind in ("decoder", "encoder"):  # a language model or an encoder: its own door
        what = "a language model" if kind == "decoder" else "an encoder"
        if precision != "auto":  # refused, not ignored: it has no search precision to choose
            raise CheckpointError(f"{argument('precision', precision, quoted=False)}: {what} has no search "
                                  "precision to choose (fp32 on the CPU, its weights' dtype on a GPU); leave it out")
        door = LanguageModel if kind == "decoder" else EncoderModel
        return door.load(directory, resolve_device(device))
    return TranslationModel.load(directory, device, precision)


def from_transformers(model: object, tokenizer: object, *, source_lang: str | None = None,
                      target_lang: str | None = None, dtype: str | None = None, device: str | torch.device = "auto",
                      precision: str = "auto") -> TranslationModel | LanguageModel | EncoderModel:
    """A transformers translation model in memory (Marian, M2M100/NLLB, T5, mT5, BART, mBART) and its tokenizer as a
    `TranslationModel` (a decoder-only language model: a `LanguageModel`, its weights copied; an encoder with its
    masked-LM head, BERT to ALBERT: an `EncoderModel`), exactly as their saved
    folder imported with ``viz-model import`` loads; nothing is kept on disk (`directory` is None). Anything else:
    ``HFImportError`` (a ValueError) in one line, before anything is written. `source_lang` / `target_lang` /
    `dtype`: as for `load` of a hub id; `precision`: the search's."""
    import tempfile

    from .hf.arguments import keyword_arguments
    from .hf.in_memory import import_loaded

    with tempfile.TemporaryDirectory(prefix="viz-model.") as tmp:
        with keyword_arguments():
            directory = import_loaded(model, tokenizer, Path(tmp), source_lang, target_lang, dtype or "fp32")
        loaded = load(directory, device, precision=precision)
    loaded.directory = None  # removed: the network, tokenizer, card and settings were read in full
    return loaded
