"""A language model across its training, opened as one model: a series of checkpoints (a folder of checkpoint
folders, `viz_model.modeldir.series`, or a hub id's revisions such as Pythia's ``step1000``), each step loaded on
demand; steps of another architecture or tokenizer are refused in one line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from .api import load
from .kinds.language_model import LanguageModel
from .modeldir.checkpoint import CheckpointError, config_digest, tokenizer_digest
from .modeldir.series import Series, folder_series, hub_series, is_series

PYTHIA_REVISION = "step{}"  # how Pythia's (and OLMo's) hub repositories name a checkpoint's revision


def open_series(source: str | Path, steps: Sequence[int] | None = None, revision: str = PYTHIA_REVISION) -> Series:
    """The series of a folder (its ``series.json``, or its checkpoint folders named for their steps), or of a hub id
    with the `steps` whose revisions (`revision` formatted with the step) hold them; one line otherwise."""
    path = Path(source)
    if path.is_dir():
        if steps is not None:
            raise CheckpointError(f"{source}: a series folder names its own steps; steps= is for a hub id")
        if not is_series(path):
            raise CheckpointError(f"{source}: not a checkpoint series (a folder of checkpoint folders named for "
                                  "their steps, such as step-000100/, with or without a series.json)")
        return folder_series(path)
    if steps is None:
        raise CheckpointError(f"{source}: no such folder; a hub id's series needs its steps (steps=[0, 1000, ...])")
    return hub_series(str(source), list(steps), revision)


def load_step(series: Series, step: int, device: str | torch.device = "auto") -> LanguageModel:
    """The model of `step` (a folder of the series, or the hub id at that revision, imported on first use); one line
    where it is no language model."""
    place = series.place(step)
    model = load(place, device) if Path(series.source).is_dir() else load(series.source, device, revision=place)
    if not isinstance(model, LanguageModel):
        raise CheckpointError(f"{series.source}: step {step} is not a decoder-only language model; a series is a "
                              "language model across its training")
    return model


def check_same_model(first: LanguageModel, model: LanguageModel, first_step: int, step: int) -> None:
    """One line where step `step`'s model has another architecture or tokenizer than step `first_step`'s: a series is
    one model at several points of its training."""
    if config_digest(model.config) != config_digest(first.config):
        raise CheckpointError(f"step {step} has another architecture than step {first_step} "
                              f"({describe(model)} against {describe(first)}): a series holds one model across its "
                              "training; mixed architectures cannot be compared step by step")
    if tokenizer_digest(model.tokenizer.files()) != tokenizer_digest(first.tokenizer.files()):
        raise CheckpointError(f"step {step} has another tokenizer than step {first_step}: a series holds one model "
                              "across its training; mixed tokenizers cannot be compared step by step")


def describe(model: LanguageModel) -> str:
    """A model's shape in a few words, for a message."""
    cfg = model.config
    return f"{cfg.decoder_layers} layers x {cfg.heads} heads, d_model {cfg.d_model}, vocabulary {cfg.vocab_size}"


def load_series(series: Series, device: str | torch.device = "auto") -> dict[int, LanguageModel]:
    """Every step's model, in training order, checked to be one model (`check_same_model`)."""
    models: dict[int, LanguageModel] = {}
    for step in series.steps:
        model = load_step(series, step, device)
        if models:
            check_same_model(models[series.steps[0]], model, series.steps[0], step)
        models[step] = model
    return models
