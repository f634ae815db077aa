#!/usr/bin/env python
"""Check every figure README.md and docs/ quote against the results file it names.

A measured figure carries a marker right after its number, invisible on GitHub and in the site:
``189<!-- fig bench_peers.json ours_transformers_fp32.p50_ms .0f --> ms``. The marker names a results file
(a bare name is in ``benchmarks/results/``, or for a model card in its own model directory; else a path from the
repository root), a key path in it (keys joined by ``.``; quote a path with spaces; ``*`` takes every record of a
list, as of a ``.jsonl`` log, that has the rest of the path) and a format spec (Python's, after ``x100`` or ``/1000``
to scale and ``max`` or ``median`` to reduce a list). A figure without a unit-like word after it needs no marker; one
that looks measured (``12 s``, ``3.1x``, ``41.8 BLEU``) needs a marker or an entry in ``NOT_MEASURED`` (limits,
settings, targets). The model cards under ``assets/`` (what the explorer's "Model card" shows) are checked as the
docs are.

A machine is named between two markers: ``<!-- machine FILE -->2-core AMD EPYC (AVX-512), 2026-11-26<!-- /machine -->``.

    python benchmarks/docs_figures.py          # list every mismatch and unmarked figure; exit status 1 if any
    python benchmarks/docs_figures.py --fix    # first rewrite every marked figure and machine from its file
"""

from __future__ import annotations

import json
import re
import shlex
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
MARKER = re.compile(r"(\d[\d,]*(?:\.\d+)?%?)<!-- fig (.+?) -->")
SHALLOW = "a shallow clone"
MACHINE = re.compile(r"<!-- machine (\S+) -->(.*?)<!-- /machine -->")
UNITS = r"(?:\s?(?:ms|s|seconds|min|minutes|h|MB|GB|tok/s|tokens/s|steps/s|visits/s|BLEU|nats)|x|%)"
TARGET = r"(?<!<= )(?<!>= )(?<![^-]> )(?<!< )"  # "<= 60 ms" is a target, "15.4 -> 10.7 s" a measurement
MEASURED = re.compile(rf"{TARGET}(?<![\w.<>=-])(\d[\d,]*(?:\.\d+)?)(?:-\d[\d,]*(?:\.\d+)?)?{UNITS}(?![\w/])")
# Figures that look measured but are settings, limits, targets or facts of the code, by page.
MASKING_RULE = ("15% of the", "15% of each", "80% of", "10% by a random", "10% a random", "10% kept", "10% stay")
"""BERT's masking rule, a setting of the encoder's training (viz_model/train/mlm_objective.py)."""
NOT_MEASURED: dict[str, tuple[str, ...]] = {
    "docs/training.md": MASKING_RULE,
    "assets/multi30k-mlm-en/MODEL_CARD.md": (*MASKING_RULE, "about 35 minutes"),  # the training's wall-time budget
    "README.md": ("one Translate every 30 s", "p50 under 1 s"),
    "docs/attributions.md": ("within 1%", "(default 1%)", "under 1% (at most"),
    "docs/benchmarks.md": ("within 1%", "p50 < 1 s", "per 30 s", "misses 150 ms", "Under 150 ms", "misses 3 s",
                           "Below 3 s", "99% held-out accuracy", "99% after", "30 s for both runs",
                           "default budget, 60 s"),
    "docs/deploy.md": ("10 s (", "raised 1.4x", "under 1 s", "within 1.4x", "rate, 1.4x higher", "every 30 s", "x 30 s",
                       "400 MB per", "about 1 GB", "2 GB at"),
    "docs/contributing.md": ("0.3 s a test",),  # the suite's guess for a group its seconds table does not name
    "docs/explorer.md": ("a 5-60 s budget",),
    "docs/python-api.md": ("at least 99%",),  # issue 59's target for the fitted encoders (the tests assert it)
    # Pythia's rotary_pct (16 of 64 dimensions of a head rotate): a config's share, not a measurement
    "docs/language-models.md": ("default budget is 60 s", "up to 120 s", "(25%); the rest"),
    "docs/positional-encodings.md": ("rotate (25%); the rest",),
    "docs/long-prompts.md": ("the aim of 5 s",),  # issue 53's aim for a page's settle time
    "docs/patching.md": ("under 10 s",),  # issue 61's aim for every head of a GPT-2-small-sized model
    "docs/models.md": ("beam 4 BLEU", "under 50% (20%)", *MASKING_RULE),
    "docs/pretrained.md": ("weights (2.46 GB)",),  # the published checkpoint's size
    # sizes computed from the arrays' shapes, and the fuzzer's settings
    "docs/reliability.md": ("(400 MB", "~0.17 MB", "~25 MB", "~150 MB", "5 s deadline"),
    "docs/troubleshooting.md": ("bounded at 400 MB",),  # TRACE_CACHE_BYTES
    # the weights' file size (parameters x 2 bytes), the warm-up's share of the steps, the project's target
    "assets/multi30k-en-de/MODEL_CARD.md": ("(15 MB;", "the 40 BLEU the"),
}


@dataclass
class Problem:
    page: str
    line: int
    text: str
    why: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text!r}: {self.why}"


def pages() -> list[Path]:
    """README.md, every docs page but the generated API reference, and every shipped model's card."""
    return [REPO / "README.md", *sorted(p for p in (REPO / "docs").glob("*.md") if p.name != "reference.md"),
            *cards()]


def cards() -> list[Path]:
    """The shipped models' cards: the explorer's "Model card" shows them and the wheel carries one."""
    return sorted((REPO / "assets").glob("*/MODEL_CARD.md"))


def base_of(page: Path) -> Path:
    """Where a page's bare file names are: a model card's own directory, else ``benchmarks/results/``."""
    return page.parent if page.name == "MODEL_CARD.md" else RESULTS


def lookup(data: object, path: str) -> object:
    """`data` at a dotted key path; a key that itself holds dots is matched whole (longest first); ``*`` reads every
    item of a list, every value of a mapping."""
    parts = path.split(".")
    while parts:
        if parts[0] == "*" and (isinstance(data, list) or isinstance(data, dict) and "*" not in data):
            found = []
            for item in data.values() if isinstance(data, dict) else data:
                try:
                    found.append(lookup(item, ".".join(parts[1:])) if parts[1:] else item)
                except KeyError:
                    continue
            if not found:
                raise KeyError(f"no record has {'.'.join(parts[1:])!r} (at {path!r})")
            return found
        for n in range(len(parts), 0, -1):
            key = ".".join(parts[:n])
            if isinstance(data, dict) and key in data:
                data, parts = data[key], parts[n:]
                break
            if isinstance(data, list) and n == 1 and key.lstrip("-").isdigit():
                data, parts = data[int(key)], parts[1:]
                break
        else:
            raise KeyError(f"no {'.'.join(parts)!r} in the file (at {path!r})")
    return data


def file_path(name: str, base: Path | None = None) -> Path:
    """A marker's file: a bare name in `base` (default ``benchmarks/results/``), else a path from the repository
    root."""
    return (RESULTS if base is None else base) / name if "/" not in name else REPO / name


def load(name: str, base: Path | None = None) -> object:
    """A results file's data; a ``.jsonl`` file (a run's log) is the list of its records."""
    text = file_path(name, base).read_text(encoding="utf-8")
    if name.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


REDUCERS = {"max": max, "min": min, "median": statistics.median}


def render(value: float | list[float], spec: str) -> str:
    """`value` formatted by `spec`: a format spec, optionally first reduced (``max``, ``median``: a list to one
    number) and scaled (``x100 .1f``, ``/1000 .2f``)."""
    for part in spec.split()[:-1]:
        if part in REDUCERS:
            value = REDUCERS[part](value)
        else:
            value = value * float(part[1:]) if part.startswith("x") else value / float(part[1:])
    return format(value, spec.split()[-1])


def expected(marker: str, base: Path | None = None) -> str:
    """What a marker's figure must read: FILE PATH [REDUCER] [SCALE] SPEC."""
    file, path, *spec = shlex.split(marker)
    value = lookup(load(file, base), path)
    numbers = value if isinstance(value, list) and spec and spec[0] in REDUCERS else [value]
    if not numbers or any(not isinstance(v, (int, float)) or isinstance(v, bool) for v in numbers):
        raise ValueError(f"{file} {path} is {value!r}, not a number")
    return render(value, " ".join(spec) or "g")


def machine_text(name: str, base: Path | None = None) -> str:
    """The machine a results file was measured on, in words; for files older than the record, what they recorded
    and the date the file was committed."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_common import describe_machine

    record = load(name, base).get("machine")
    if isinstance(record, dict):
        return describe_machine(record)
    path = file_path(name, base)
    try:
        git = ["git", "-C", str(REPO)]
        shallow = subprocess.run([*git, "rev-parse", "--is-shallow-repository"], capture_output=True, text=True,
                                 check=True).stdout.strip() == "true"
        date = SHALLOW if shallow else subprocess.run([*git, "log", "-1", "--format=%cs", "--", str(path)],
                                                      capture_output=True, text=True, check=True).stdout.strip()
        date = date or "not committed"
    except (OSError, subprocess.CalledProcessError):
        date = "unknown"
    return f"{record or 'machine not recorded'}, file of {date}"


def undated(text: str) -> str:
    """A machine text whose commit date git could not give (no git, a shallow clone): its date is not checked."""
    return text.endswith((", file of unknown", ", file of not committed")) or text.endswith(SHALLOW)


def check_machines(text: str, page: str, base: Path | None = None) -> list[Problem]:
    problems = []
    for match in MACHINE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        try:
            want = machine_text(match.group(1), base)
        except (OSError, ValueError) as err:
            problems.append(Problem(page, line, match.group(0), f"cannot read the file: {err}"))
            continue
        recorded = want.rsplit(", file of ", 1)[0]
        if match.group(2) != want and not (undated(want) and match.group(2).startswith(recorded + ", file of ")):
            problems.append(Problem(page, line, match.group(2), f"the results file gives {want!r}"))
    return problems


def fix(text: str, base: Path | None = None) -> str:
    """`text` with every marked figure and machine rewritten from its results file."""
    def figure(match: re.Match) -> str:
        try:
            return expected(match.group(2), base) + match.group(0)[len(match.group(1)):]
        except (OSError, KeyError, ValueError, IndexError):
            return match.group(0)  # left for the check to report

    def machine(match: re.Match) -> str:
        try:
            return f"<!-- machine {match.group(1)} -->{machine_text(match.group(1), base)}<!-- /machine -->"
        except (OSError, ValueError):
            return match.group(0)

    return MACHINE.sub(machine, MARKER.sub(figure, text))


def check_markers(text: str, page: str, base: Path | None = None) -> list[Problem]:
    text = without_code(text)
    problems = check_machines(text, page, base)
    for match in MARKER.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        try:
            want = expected(match.group(2), base)
        except (OSError, KeyError, ValueError, IndexError) as err:
            problems.append(Problem(page, line, match.group(0), f"cannot read the figure: {err}"))
            continue
        if match.group(1) != want:
            problems.append(Problem(page, line, match.group(0),
                                    f"the page says {match.group(1)}, the results file gives {want}"))
    return problems


def unmarked(text: str, page: str) -> list[Problem]:
    """Measurement-like figures with no marker, outside code and NOT_MEASURED."""
    allowed = NOT_MEASURED.get(page, ())
    problems = []
    for n, line in enumerate(blank_ignored(text).splitlines(), 1):
        for match in MEASURED.finditer(line):
            if not any(phrase in line and match.group(0) in phrase for phrase in allowed):
                problems.append(Problem(page, n, match.group(0), "looks measured but has no <!-- fig ... --> "
                                        "marker (or add it to NOT_MEASURED if it is a setting or a limit)"))
    return problems


def blank(match: re.Match) -> str:
    return re.sub(r"[^\n]", " ", match.group(0))


def without_code(text: str) -> str:
    """`text` with fenced and inline code blanked (offsets and line count kept): examples there are not figures."""
    return re.sub(r"`[^`\n]*`", blank, re.sub(r"```.*?```", blank, text, flags=re.S))


def blank_ignored(text: str) -> str:
    """`text` without code, links' targets and marked figures (line count kept)."""
    text = MACHINE.sub(blank, MARKER.sub(blank, without_code(text)))
    return re.sub(r"\]\([^)\n]*\)", blank, text)


def problems() -> list[Problem]:
    found = []
    for path in pages():
        text, page = path.read_text(encoding="utf-8"), str(path.relative_to(REPO))
        found += check_markers(text, page, base_of(path)) + unmarked(text, page)
    return found


def main() -> int:
    if "--fix" in sys.argv:
        for path in pages():
            text = path.read_text(encoding="utf-8")
            if fix(text, base_of(path)) != text:
                path.write_text(fix(text, base_of(path)), encoding="utf-8")
                print(f"rewrote the figures of {path.relative_to(REPO)}")
    found = problems()
    for problem in found:
        print(problem)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
