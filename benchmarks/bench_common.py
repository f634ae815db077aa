"""Helpers shared by the benchmark scripts: load measurement, a cached tokenizer, reference dimensions."""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

from viz_model.config.data_root import data_root

REPO = Path(__file__).resolve().parent.parent
REFERENCE_DIMS = {"vocab_size": 8000, "encoder_layers": 3, "decoder_layers": 3, "d_model": 256, "heads": 8,
                  "d_ff": 1024}


ISA_FLAGS = (("avx2", "AVX2"), ("avx512f", "AVX-512"), ("avx512_vnni", "AVX512-VNNI"), ("avx512_bf16", "AVX512-BF16"),
             ("amx_bf16", "AMX-BF16"))


def data_label(path: str | Path) -> str:
    """How a results file names a data file or folder: relative to the data root (``multi30k/val.en.gz``), never
    a path of the machine that measured; a path outside the root by its name."""
    path = Path(path).resolve()
    root = data_root().resolve()
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name


def repo_label(path: str | Path) -> str:
    """How a results file names a model or assets folder: relative to the repository (``assets/mixed-en-de``); a
    folder elsewhere by its name, never a path of the machine that measured."""
    path = Path(path).resolve()
    return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.name


def machine() -> dict:
    """What a result was measured on: CPU model, cores, vector ISA, UTC date, torch and Python versions, load, and the
    GPU torch sees, if any."""
    name, flags = "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and name == "unknown":
                name = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        name = platform.processor() or "unknown"
    gpu = None
    try:
        import torch
        torch_version = torch.__version__
        if torch.cuda.is_available():
            gpu = torch.cuda.get_device_name(0)
    except ImportError:
        torch_version = None
    return {"cpu": name, "cores": os.cpu_count(), "isa": [label for flag, label in ISA_FLAGS if flag in flags],
            "date": datetime.datetime.now(datetime.UTC).date().isoformat(), "torch": torch_version,
            "python": platform.python_version(), "load_average": load_average()} | ({"gpu": gpu} if gpu else {})


def describe_machine(record: dict | str) -> str:
    """A `machine` record in words: "2-core AMD EPYC (AVX-512, AVX512-BF16), 2026-11-26"."""
    if isinstance(record, str):  # results written before the record existed
        return record
    isa = [x for x in record.get("isa", []) if x not in ("AVX2", "AVX512-VNNI")] or record.get("isa", [])
    host = f"{record['cores']}-core {record['cpu']}" + (f" ({', '.join(isa)})" if isa else "")
    return (f"{record['gpu']} beside a {host}" if record.get("gpu") else host) + f", {record['date']}"


def load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


class CpuMonitor:
    """CPU used by *other* processes while we measure (system-wide busy time from /proc/stat minus our own)."""

    def __init__(self, children: bool = False) -> None:
        self.children = children  # count finished child processes (a script's own subprocesses) as our own
        self.start = self._sample()

    def _sample(self) -> tuple[float, float, float] | None:
        try:
            fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        except (OSError, ValueError, IndexError):
            return None
        busy = sum(fields[:8]) - fields[3] - fields[4]  # user nice system [idle iowait] irq softirq steal
        used = [resource.getrusage(resource.RUSAGE_SELF)]
        if self.children:
            used.append(resource.getrusage(resource.RUSAGE_CHILDREN))
        own = sum(u.ru_utime + u.ru_stime for u in used)
        return busy / os.sysconf("SC_CLK_TCK"), own, time.perf_counter()

    def other_cores(self) -> float | None:
        """Average number of cores kept busy by other processes since construction."""
        end = self._sample()
        if self.start is None or end is None or end[2] <= self.start[2]:
            return None
        other = (end[0] - self.start[0]) - (end[1] - self.start[1])
        return round(max(other, 0.0) / (end[2] - self.start[2]), 2)


def cached_tokenizer(data_dir: Path, vocab_size: int = 8000, hint: str = "Pass --data-dir DIR") -> Path:
    """An 8k joint BPE trained on the training split of `data_dir` (once; cached in .data/bench/)."""
    from viz_model.data.textfiles import find_split, read_parallel
    from viz_model.tokenization.tokenizer import train_tokenizer

    try:
        files = [find_split(data_dir, "train", lang) for lang in ("en", "de")]
    except ValueError as err:
        raise SystemExit(f"bench: cannot train a tokenizer: {err}. {hint}") from None
    key = hashlib.sha1(repr([(str(f.resolve()), f.stat().st_size) for f in files] + [vocab_size]).encode())
    path = REPO / ".data" / "bench" / f"bpe{vocab_size}-{key.hexdigest()[:10]}.model"
    if not path.is_file():
        print(f"training a {vocab_size} BPE tokenizer on {data_dir}/train (cached as {path}) ...", file=sys.stderr)
        src, tgt = read_parallel(data_dir, "train", "en", "de")
        train_tokenizer(src + tgt, path, vocab_size, "bpe")
    return path


def resident_kb(field: str) -> int:
    """This process's `field` of ``/proc/self/status`` (VmRSS, VmHWM, RssAnon, ...), in kB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise OSError(f"/proc/self/status has no {field}")


def add_output_args(parser: argparse.ArgumentParser, name: str, quick: str) -> None:
    """A benchmark's --quick (`quick`: what the smoke test runs), --json and --out (default: `name` in
    benchmarks/results, none with --quick)."""
    parser.add_argument("--quick", action="store_true", help=f"smoke test: {quick}")
    parser.add_argument("--json", action="store_true", help="the results as JSON on stdout")
    parser.add_argument("--out", type=Path, default=None, help=f"results file (default: benchmarks/results/{name}; "
                        "none with --quick)")


def finish_results(args: argparse.Namespace, found: dict, name: str, monitor: CpuMonitor, start: float) -> None:
    """`found` closed with the cores other processes kept busy, the load average and the wall time since `start`,
    and written to --out (default: `name` in benchmarks/results; none with --quick)."""
    found["other_cores_busy"] = monitor.other_cores()
    found["load_average_after"] = load_average()
    found["wall_s"] = round(time.perf_counter() - start, 1)
    if args.out is not None or not args.quick:
        write_results(args.out or REPO / "benchmarks" / "results" / name, found)


def emit(text: str, result: dict, as_json: bool) -> None:
    """Print the table, or with `as_json` the JSON result (with the `machine` record) on stdout, the table on stderr."""
    result.setdefault("machine", machine())
    if as_json:
        print(text, file=sys.stderr)
        print(json.dumps(result, indent=2))
    else:
        print(text)


def write_results(path: Path, result: dict) -> None:
    """Write `result` as a results file, with the `machine` record (see `machine`) unless it already has one."""
    result.setdefault("machine", machine())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


def publish(path: Path, result: dict, write: bool) -> None:
    """Print `result` as JSON on stdout; a full run (`write`) also writes it as the results file `path`."""
    print(json.dumps(result, indent=2))
    if write:
        write_results(path, result)
        print(f"wrote {path}", file=sys.stderr)


def report_results(model_dir: Path, found: dict, write: bool = True) -> None:
    """Print `found` as JSON and merge it into the model's results.json (other keys kept, written atomically)."""
    from viz_model.modeldir.checkpoint import atomic_write_bytes

    print(json.dumps(found, indent=2))
    if write:
        path = model_dir / "results.json"
        results = json.loads(path.read_text()) if path.is_file() else {}
        results.update(found)
        atomic_write_bytes(path, (json.dumps(results, indent=2) + "\n").encode())
