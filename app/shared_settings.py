"""The settings every page shares, declared once: the sidebar's model and decoding, the submitted sentence and the
explorer's view, with their session keys, defaults and link parameters (see `setting_types`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.link_values import from_one, number, number_text, one_line, one_of, whole_number
from app.setting_types import Link, PageSettings, Setting
from app.texts import EXAMPLES
from viz_model.nn.kinds import KIND_LABELS
from viz_model.plot.map_figures import AGGREGATES
from viz_model.search.requests import MAX_TASK_PREFIX_CHARS, MAX_TOP_K
from viz_model.search.settings import MAX_BEAM, MAX_LENGTH_PENALTY

VIEWS = {"heatmap": "Head heatmap", "model": "Model view", "head": "Head view", "focus": "Token focus"}
LEVEL_LABELS = {"piece": "Subword pieces", "word": "Words (pieces merged)"}
MAX_TOP_K_SHOWN = min(MAX_TOP_K, 20)  # the sidebar's top-k slider
SEARCH_LABELS = {"auto": "Auto (int8 for this project's models on the CPU, else full precision)", "int8": "int8",
                 "fp32": "Full precision (fp32)"}
RULE_LABELS = {"auto": "The model's own", "transformers": "As transformers' generate",
               "project": "This project's (GNMT penalty, OpenNMT stop)"}
HELD = ("beam", "alpha")  # a link's beam and alpha wait for the search rule's defaults (`state.search_defaults`)


def _changed(name: str, parse=str, format=str) -> Link:
    """A link parameter written only where the setting differs from its default."""
    return Link(name, parse, format, omit_default=True)


@dataclass(frozen=True)
class SharedSettings(PageSettings):
    """The shared settings, in the order the link names them. The layer is 1-based; the head is 1..H or "mean" /
    "max"; the beam written into the link is 1 for greedy search."""

    sentence: Setting[str] = Setting("sentence", EXAMPLES[0], Link("sentence"))
    model: Setting[str] = Setting("model", "", Link("model"))  # its choices: `for_models`
    target: Setting[str] = Setting("target", "", _changed("target"))
    view: Setting[str] = Setting("view", "heatmap", Link("view", one_of(VIEWS)))
    kind: Setting[str] = Setting("kind", "encoder", Link("kind", one_of(KIND_LABELS, "use encoder, decoder or cross")))
    layer: Setting[int] = Setting("layer", 1, Link("layer", from_one("a layer number")))
    head: Setting[int | str] = Setting("head", 1, Link("head", from_one("a head number", AGGREGATES)))
    level: Setting[str] = Setting("level", "piece", _changed("level", one_of(LEVEL_LABELS)))
    rule: Setting[str] = Setting("rule", "auto", _changed("rule", one_of(RULE_LABELS)))
    beam: Setting[int] = Setting("beam", 4, _changed("beam", whole_number(1, MAX_BEAM, "a beam size")))
    alpha: Setting[float] = Setting("alpha", 0.6, _changed(
        "alpha", number(-MAX_LENGTH_PENALTY, MAX_LENGTH_PENALTY, "a length penalty", digits=2), number_text))
    search: Setting[str] = Setting("search", "auto", _changed("search", one_of(SEARCH_LABELS)))
    top_k: Setting[int] = Setting("top_k", 5, _changed(
        "top_k", whole_number(1, MAX_TOP_K_SHOWN, "a number of candidates")))
    lang: Setting[str] = Setting("lang", "", _changed("lang"))  # checked against the model's codes by the sidebar
    # a T5-family model's task prefix; None: the model's own (checked by the model when the sidebar applies it)
    prefix: Setting[str | None] = Setting("prefix", None, _changed(
        "prefix", one_line(MAX_TASK_PREFIX_CHARS, "a task prefix")))
    decoding: Setting[str] = Setting("decoding", "beam")  # "greedy" or "beam"
    truncate: Setting[bool] = Setting("truncate", False)

    def for_models(self, models: Sequence[str]) -> SharedSettings:
        """These settings with the model picker's choices: a linked model must be one of `models`, the first is the
        default."""
        why = f"no such model; available: {', '.join(models)}"
        return replace(self, model=Setting("model", models[0], Link("model", one_of(models, why))))


@dataclass(frozen=True)
class SentenceForm(PageSettings):
    """The sentence form's boxes (submitted into `SharedSettings.sentence` / `target`) and its example picker."""

    sentence_box: Setting[str] = Setting("sentence_input", "")
    target_box: Setting[str] = Setting("target_input", "")
    example: Setting[str | None] = Setting("example", None)


SHARED = SharedSettings()
FORM = SentenceForm()
