"""A T5 model's translation tasks (those its config's task_specific_params lists, kept at import) and the model
switched to another of them, as `TranslationModel.with_target_language` switches a many-to-many model's target."""

from __future__ import annotations

import copy
from dataclasses import dataclass

from .kinds.translator import TranslationModel
from .modeldir.languages import LanguagePair
from .modeldir.languages import name as language_name
from .tokenization.tokenizer_json import JsonTokenizer


@dataclass(frozen=True)
class TranslationTask:
    """One translation task of a T5 model: its language pair and the prefix put before every source."""

    source: str
    target: str
    prefix: str

    @property
    def label(self) -> str:
        """"English to German"."""
        return f"{language_name(self.source)} to {language_name(self.target)}"


def translation_tasks(model: TranslationModel) -> list[TranslationTask]:
    """The translation tasks `model` can switch between, in its config's order (t5-small: English to German,
    French, Romanian); [] for a model whose config names one or none, and for any other family."""
    tokenizer = model.tokenizer
    return [TranslationTask(**task) for task in tokenizer.tasks] if isinstance(tokenizer, JsonTokenizer) else []


def with_translation_task(model: TranslationModel, target: str, source: str | None = None) -> TranslationModel:
    """`model` doing its translation task into `target` (from `source`, where given): that task's prefix before
    every source, its pair as the model's languages. Weights, the search network and the card are shared, not
    copied; `model` itself where that task is the one it does. ValueError in one line for a task it lacks."""
    tasks = translation_tasks(model)
    if not tasks:
        raise ValueError(f"{model.name or 'this model'} has no translation tasks to choose from (a T5 whose config "
                         "lists several has them)")
    found = [t for t in tasks if t.target == target and source in (None, t.source)]
    if not found:
        named = ", ".join(f"{t.source} to {t.target}" for t in tasks)
        raise ValueError(f"no translation task from {source or 'any language'} to {target!r}; "
                         f"{model.name or 'this model'} has {named}")
    task = found[0]
    assert isinstance(model.tokenizer, JsonTokenizer)
    if (model.languages.source, model.languages.target, model.task_prefix) == (task.source, task.target, task.prefix):
        return model
    view = copy.copy(model)
    view.tokenizer = model.tokenizer.for_task(task.source, task.target)
    view.languages = LanguagePair(task.source, task.target)
    return view
