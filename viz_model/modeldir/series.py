"""A checkpoint series: one model across its training, a folder of loadable model folders ``step-NNNNNN/`` and a
``series.json`` that names their steps in order (or any folder of checkpoint folders named for their steps), or a
hub repository whose revisions are its steps (Pythia's ``step1000``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from .checkpoint import CheckpointError, atomic_write_bytes

SERIES_FILE = "series.json"
STEP_FOLDER = "step-{:06d}"
MAX_HUB_STEPS = 200  # a hub series' steps: Pythia publishes 154 checkpoints; each step is a download when first shown
STEP_NAME = re.compile(r"(?:step[-_]?|checkpoint-)(\d{1,9})")


@dataclass(frozen=True)
class Series:
    """A series' steps in training order, each with the folder (or hub revision) that holds its model."""

    source: str  # the series folder, or the hub id whose revisions the steps are
    steps: tuple[int, ...]
    places: tuple[str, ...]  # per step: a model folder, or a hub revision of `source`

    def place(self, step: int) -> str:
        """The folder or revision of `step`; one line for a step the series does not hold."""
        if step not in self.steps:
            raise CheckpointError(f"step {step} is not in the series {self.source} (its steps: "
                                  f"{', '.join(map(str, self.steps))})")
        return self.places[self.steps.index(step)]


def step_folder(series_dir: Path, step: int) -> Path:
    """Where a series folder keeps the model of `step`."""
    return series_dir / STEP_FOLDER.format(step)


def record_step(series_dir: Path, step: int) -> None:
    """Add `step` (its folder already written) to the series' ``series.json``."""
    steps = set(read_steps(series_dir)) if (series_dir / SERIES_FILE).is_file() else set()
    steps.add(step)
    data = {"steps": sorted(steps), "folders": [step_folder(Path(), s).name for s in sorted(steps)]}
    atomic_write_bytes(series_dir / SERIES_FILE, (json.dumps(data, indent=2) + "\n").encode("utf-8"))


def read_steps(series_dir: Path) -> list[int]:
    """The steps ``series.json`` names; one line where it is missing or malformed."""
    path = series_dir / SERIES_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{series_dir}: not a checkpoint series ({SERIES_FILE} not found)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path}: unreadable ({err})") from None
    steps = data.get("steps") if isinstance(data, dict) else None
    if not isinstance(steps, list) or not steps or not all(isinstance(s, int) and s >= 0 for s in steps):
        raise CheckpointError(f"{path}: \"steps\" must be a non-empty list of training steps (integers >= 0)")
    if len(set(steps)) != len(steps):
        raise CheckpointError(f"{path}: a step is named twice")
    return sorted(steps)


def found_steps(series_dir: Path) -> dict[int, Path]:
    """The checkpoint folders directly in `series_dir` named for their step (``step-000100``, ``step_100``,
    ``step100``, or ``checkpoint-100`` as transformers' Trainer names them), by step."""
    found: dict[int, Path] = {}
    for path in sorted(series_dir.iterdir()) if series_dir.is_dir() else []:
        if path.is_dir() and (match := STEP_NAME.fullmatch(path.name)):
            found.setdefault(int(match.group(1)), path)
    return found


def is_series(path: Path) -> bool:
    """Whether `path` is a series folder: it holds ``series.json``, or no model of its own but checkpoint folders
    named for their steps (`found_steps`)."""
    if (path / SERIES_FILE).is_file():
        return True
    return path.is_dir() and not (path / "config.json").is_file() and bool(found_steps(path))


def folder_series(series_dir: Path) -> Series:
    """The series of a folder: the steps its ``series.json`` names (each in its ``step-NNNNNN`` folder), else every
    checkpoint folder named for its step; one line for a step whose folder is missing, or no step at all."""
    if (series_dir / SERIES_FILE).is_file():
        steps = read_steps(series_dir)
        for step in steps:
            if not step_folder(series_dir, step).is_dir():
                raise CheckpointError(f"{series_dir}: the folder of step {step} ({step_folder(Path(), step)}) is "
                                      "missing")
        return Series(str(series_dir), tuple(steps), tuple(str(step_folder(series_dir, s)) for s in steps))
    found = found_steps(series_dir)
    if not found:
        raise CheckpointError(f"{series_dir}: not a checkpoint series (no {SERIES_FILE} and no folder named for its "
                              "step, such as step-000100 or checkpoint-100)")
    steps = sorted(found)
    return Series(str(series_dir), tuple(steps), tuple(str(found[s]) for s in steps))


def hub_series(repo_id: str, steps: list[int], revision: str = "step{}") -> Series:
    """A hub model's series: `steps`, each the revision `revision` names (Pythia's ``step{}``)."""
    if not steps:
        raise CheckpointError(f"{repo_id}: a series needs at least one step")
    if any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in steps):
        raise CheckpointError(f"{repo_id}: a series' steps are whole numbers from 0, got {steps!r}")
    ordered = sorted(set(steps))
    if len(ordered) > MAX_HUB_STEPS:
        raise CheckpointError(f"{repo_id}: at most {MAX_HUB_STEPS} steps in a hub series (Pythia publishes 154), "
                              f"got {len(ordered)}")
    return Series(repo_id, tuple(ordered), tuple(revision.format(s) for s in ordered))


def available_series(roots: list[Path]) -> dict[str, Path]:
    """The series folders directly in `roots` (a name once, the first root's), by name: what the explorer offers
    beside its model directories."""
    found: dict[str, Path] = {}
    for root in roots:
        for path in sorted(root.iterdir()) if root.is_dir() else []:
            if path.name not in found and path.is_dir() and not path.is_symlink() and is_series(path):
                found[path.name] = root
    return found
