"""How a model was trained, as data: ``training_facts.json`` in the model directory.

`viz-model export` writes it from the run's config and log; the model card (for people) is written from the same
facts, and the app's training page reads this file, never the card's prose. A file that is not valid is a
`FactsError` naming the file and the field.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..config import ConfigError, TrainConfig
from ..config.recipe import schedule_config
from .checkpoint import optional_json

TRAINING_FACTS = "training_facts.json"
FACTS_VERSION = 1
MAX_FACTS_BYTES = 4 * 2**20


class FactsError(ValueError):
    """A training_facts.json that cannot be used; the message names the file and the field."""


def read_log(path: Path) -> list[dict[str, Any]]:
    """Events of a JSON-lines run log (unreadable lines are skipped)."""
    events = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(event, dict):
                events.append(event)
    return events


@dataclass(frozen=True)
class PrecisionSpan:
    """From optimizer step `from_step` on, the run trained in `precision` ("fp32" or "bf16 autocast")."""

    from_step: int
    precision: str


@dataclass(frozen=True)
class Validation:
    """One end-of-epoch validation: loss (and BLEU, chrF where the run scored them)."""

    epoch: int
    step: int
    loss: float
    bleu: float | None = None
    chrf: float | None = None


@dataclass(frozen=True)
class TrainingFacts:
    """The recipe and the course of one training run (see the module docstring)."""

    d_model: int
    warmup_steps: int
    lr_peak: float  # 0: the paper's formula times lr_scale
    lr_scale: float
    label_smoothing: float
    dropout: float
    batch_tokens: int
    seed: int
    epochs: int  # the run's configured length (a cooldown counts back from its end)
    cooldown_epochs: int
    trained_epochs: int  # epochs actually trained (an early export has fewer than `epochs`)
    steps: int  # optimizer steps trained
    max_len: int  # longest training sequence kept, pieces + </s>
    precision: list[PrecisionSpan] = field(default_factory=list)
    validation: list[Validation] = field(default_factory=list)
    version: int = FACTS_VERSION

    @property
    def steps_per_epoch(self) -> int:
        """Optimizer steps in one epoch (the mean over the trained epochs)."""
        return max(1, round(self.steps / max(self.trained_epochs, 1)))

    def schedule_config(self) -> TrainConfig:
        """A TrainConfig carrying what the trainer's schedule reads, to redraw this run's learning rate."""
        return schedule_config(self.d_model, self.warmup_steps, self.lr_scale, self.lr_peak, self.epochs,
                               self.cooldown_epochs)

    def precision_summary(self) -> str:
        """"fp32" or "bf16 autocast", with the first step of each span where a resume changed the precision
        ("" when not known)."""
        if len(self.precision) <= 1:
            return self.precision[0].precision if self.precision else ""
        return ", ".join(f"{s.precision} from step {s.from_step}" for s in self.precision)

    def precision_note(self) -> str:
        """The precision summary as the card appends it: ", fp32" (or "" when not known)."""
        return f", {self.precision_summary()}" if self.precision else ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"

    @classmethod
    def from_dict(cls, data: object, where: str = TRAINING_FACTS) -> TrainingFacts:
        """The facts in `data` (a parsed JSON object), every field checked; errors name `where` and the field."""
        if not isinstance(data, dict):
            raise FactsError(f"{where}: not a training facts object (a JSON object is expected)")
        if data.get("version") != FACTS_VERSION:
            raise FactsError(f"{where}: version {data.get('version')!r} is not supported (expected {FACTS_VERSION})")
        ints = ("d_model", "warmup_steps", "batch_tokens", "seed", "epochs", "cooldown_epochs", "trained_epochs",
                "steps", "max_len")
        floats = ("lr_peak", "lr_scale", "label_smoothing", "dropout")
        values: dict[str, Any] = {"version": FACTS_VERSION}
        for name in ints:
            values[name] = _number(data, name, int, where)
        for name in floats:
            values[name] = _number(data, name, float, where)
        values["precision"] = [PrecisionSpan(_number(s, "from_step", int, f"{where} precision"),
                                             _text(s, "precision", f"{where} precision"))
                               for s in _list(data, "precision", where)]
        values["validation"] = [Validation(_number(v, "epoch", int, f"{where} validation"),
                                           _number(v, "step", int, f"{where} validation"),
                                           _number(v, "loss", float, f"{where} validation"),
                                           _optional(v, "bleu", f"{where} validation"),
                                           _optional(v, "chrf", f"{where} validation"))
                                for v in _list(data, "validation", where)]
        facts = cls(**values)
        try:
            facts.schedule_config()
        except ConfigError as err:
            raise FactsError(f"{where}: the schedule it describes is not valid ({err})") from None
        return facts


def _number(data: object, name: str, kind: type, where: str) -> Any:
    value = data.get(name) if isinstance(data, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        raise FactsError(f"{where}: field {name!r} must be {'an integer' if kind is int else 'a number'}, "
                         f"got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise FactsError(f"{where}: field {name!r} must be a finite number >= 0, got {value!r}")
    return kind(value)


def _optional(data: object, name: str, where: str) -> float | None:
    return None if isinstance(data, dict) and data.get(name) is None else _number(data, name, float, where)


def _text(data: object, name: str, where: str) -> str:
    value = data.get(name) if isinstance(data, dict) else None
    if not isinstance(value, str) or not value:
        raise FactsError(f"{where}: field {name!r} must be a non-empty string, got {value!r}")
    return value


def _list(data: dict[str, Any], name: str, where: str) -> list[Any]:
    value = data.get(name)
    if not isinstance(value, list):
        raise FactsError(f"{where}: field {name!r} must be a list, got {value!r}")
    return value


def precision_spans(events: list[dict[str, Any]], bf16: bool) -> list[PrecisionSpan]:
    """The precision of each stretch of the run, from its start and resume events.

    Logs written before the precision was logged trained in bf16 only on CUDA (with `bf16`), fp32 elsewhere; a
    stretch that trained nothing (killed before its first checkpoint) is dropped."""
    spans: list[PrecisionSpan] = []
    for e in events:
        if e.get("event") not in ("start", "resume"):
            continue
        name = e.get("precision")
        if not isinstance(name, str):
            name = "bf16 autocast" if bf16 and str(e.get("device", "")).startswith("cuda") else "fp32"
        step = int(e.get("step", 0))
        while spans and spans[-1].from_step >= step:
            spans.pop()
        if not spans or spans[-1].precision != name:
            spans.append(PrecisionSpan(step, name))
    return spans


def facts_from_run(cfg: TrainConfig, events: list[dict[str, Any]]) -> TrainingFacts:
    """The facts of a run from its config and its log's events."""
    vals = [e for e in events if e.get("event") == "val" and isinstance(e.get("epoch"), int)
            and isinstance(e.get("val_loss"), (int, float))]
    validation = [Validation(e["epoch"], int(e.get("step", 0)), float(e["val_loss"]), _score(e.get("val_bleu")),
                             _score(e.get("val_chrf"))) for e in vals]
    last = vals[-1] if vals else {}
    return TrainingFacts(
        d_model=cfg.model.d_model, warmup_steps=cfg.warmup_steps, lr_peak=cfg.lr_peak, lr_scale=cfg.lr_scale,
        label_smoothing=cfg.label_smoothing, dropout=cfg.model.dropout, batch_tokens=cfg.batch_tokens,
        seed=cfg.seed, epochs=cfg.epochs, cooldown_epochs=cfg.cooldown_epochs,
        trained_epochs=int(last.get("epoch", 0)), steps=int(last.get("step", 0)), max_len=cfg.max_len,
        precision=precision_spans(events, cfg.bf16), validation=validation)


def _score(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def load_training_facts(directory: str | Path) -> TrainingFacts | None:
    """The model directory's facts, None when it has none; a broken file is a `FactsError` naming it."""
    data = optional_json(directory, TRAINING_FACTS, MAX_FACTS_BYTES, FactsError)
    return None if data is None else TrainingFacts.from_dict(data, str(Path(directory) / TRAINING_FACTS))
