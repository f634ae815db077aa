"""Issue 37: the corpus commands under torchrun (`viz_model.data.shard`): two (or more) local processes on gloo write
the
same file, byte for byte, as one process; more ranks than sentences still work; a failed rank fails the run with its
error and leaves no output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from support.cli import run
from support.data import make_pairs, write_corpus, write_lines

from viz_model.data import shard

REPO = Path(__file__).resolve().parents[2]
PAIRS = make_pairs(11, seed=37) + [("A dog.", "Ein Hund."), ("Hello", "Hallo")]  # short ones: padding in batches
FAIL_ON_RANK_1 = r'''
import os, runpy, sys
import viz_model.analysis.head_stats as head_stats
original = head_stats.map_statistics

def failing(*args, **kwargs):
    if os.environ["RANK"] == "1":
        raise RuntimeError("a statistic failed on rank 1")
    return original(*args, **kwargs)

head_stats.map_statistics = failing
sys.argv = ["viz_model", *sys.argv[1:]]
runpy.run_module("viz_model", run_name="__main__")
'''


@pytest.fixture
def one_thread():
    """The single-process run on one thread, as each torchrun process runs (OMP_NUM_THREADS=1): a product split
    over another number of threads can round differently in the last bit."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("shard"), PAIRS, source="src.en")


def torchrun(ranks: int, *args, script: Path | None = None) -> subprocess.CompletedProcess:
    """`viz-model ARGS` (or `script ARGS`) under ``torchrun --standalone --nproc_per_node RANKS``."""
    target = [str(script)] if script else ["-m", "viz_model"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                           str(ranks), *target, *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=300)


def test_without_a_launch_every_item_is_this_processs():
    assert shard.active() is None and shard.writes()
    assert shard.share("abc") == [(0, "a"), (1, "b"), (2, "c")]
    assert shard.gather({1: "b", 0: "a"}, 2) == ["a", "b"]
    with pytest.raises(RuntimeError, match="1 of 2 items are missing"):
        shard.gather({0: "a"}, 2)
    with shard.sharing(shard.Distributed(1, 3)):  # what rank 1 of 3 takes
        assert shard.share(list(range(8))) == [(1, 1), (4, 4), (7, 7)] and not shard.writes()
    assert shard.active() is None


COMMANDS = {
    # small batches: several for the processes to share
    "analyze": lambda src, ref: ["analyze", "--src", src, "--beam", "2", "--batch-tokens", "60"],
    "analyze-forced": lambda src, ref: ["analyze", "--src", src, "--tgt", ref, "--batch-tokens", "60"],
    "importance": lambda src, ref: ["importance", "--src", src, "--tgt", ref, "--bleu", "--batch-tokens", "60"],
    "attribute": lambda src, ref: ["attribute", "--src", src, "--methods", "value_weighted", "alti",
                                   "saliency", "--draws", "2", "--workers", "1"],
}


# Several commands in one torchrun launch (starting the processes costs more than the commands' work): each process
# runs `viz-model COMMAND ...` for one command after another, in the process group the first one joined (the last
# leaves it: a group destroyed and made again in one process can meet stale keys in torchrun's store), and writes
# what each command prints to stdout to NAME.rankR.out in the launch's folder.
COMMANDS_IN_TURN = r'''
import contextlib, json, os, sys
from pathlib import Path
import torch.distributed as dist
from viz_model.cli.main import main

leave = dist.destroy_process_group
dist.destroy_process_group = lambda *args, **kwargs: None
folder, commands = Path(sys.argv[1]), json.loads(sys.argv[2])
for number, (name, argv) in enumerate(commands, 1):
    if number == len(commands):
        dist.destroy_process_group = leave
    with open(folder / f"{name}.rank{os.environ['RANK']}.out", "w") as out, contextlib.redirect_stdout(out):
        code = main(argv)
    if code:
        sys.exit(code)
'''


@dataclass
class Launch:
    """A torchrun launch of `COMMANDS_IN_TURN`: its folder (outputs, what each rank printed) and its result."""

    folder: Path
    ranks: int
    result: subprocess.CompletedProcess

    def printed(self, name: str) -> list[str]:
        """What each rank printed to stdout while running command `name`, in rank order."""
        return [(self.folder / f"{name}.rank{rank}.out").read_text() for rank in range(self.ranks)]


def launch(folder: Path, ranks: int, commands: dict[str, list]) -> Launch:
    script = folder / "commands_in_turn.py"
    script.write_text(COMMANDS_IN_TURN)
    named = [[name, [str(a) for a in argv]] for name, argv in commands.items()]
    result = torchrun(ranks, folder, json.dumps(named), script=script)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == ""  # every rank's prints are in its files
    return Launch(folder, ranks, result)


def command_args(command: str, model_dir: Path, corpus_files: tuple[Path, Path]) -> list:
    return [*COMMANDS[command](*corpus_files), "--model", model_dir, "--device", "cpu"]


def eval_args(src: Path, ref: Path, model_dir: Path, *more: str) -> list:
    return ["eval", "--src", src, "--ref", ref, "--model", model_dir, "--device", "cpu", *more]


FULL_PRECISION = ("--precision", "fp32", "--beam", "2")  # eval on the corpus: sentences searched in padded batches


@pytest.fixture(scope="module")
def few_files(tmp_path_factory) -> tuple[Path, Path]:
    """The first two pairs: fewer sentences than three processes."""
    folder = tmp_path_factory.mktemp("few")
    return (write_lines(folder / "two.en", [en for en, _ in PAIRS[:2]]),
            write_lines(folder / "two.de", [de for _, de in PAIRS[:2]]))


def few_analyze_args(few: Path, model_dir: Path) -> list:
    return ["analyze", "--src", few, "--model", model_dir, "--device", "cpu", "--batch-tokens", "20"]


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory, model_dir, corpus_files) -> Launch:
    """Two processes of one launch run each command of COMMANDS (writing ``COMMAND.csv``) and eval on the corpus."""
    folder = tmp_path_factory.mktemp("two-processes")
    commands = {command: [*command_args(command, model_dir, corpus_files), "--out", folder / f"{command}.csv"]
                for command in COMMANDS}
    return launch(folder, 2, {**commands, "eval": eval_args(*corpus_files, model_dir, *FULL_PRECISION)})


@pytest.fixture(scope="module")
def three_processes(tmp_path_factory, model_dir, few_files) -> Launch:
    """Three processes of one launch, on two sentences: eval, and analyze writing ``analyze.csv``."""
    folder = tmp_path_factory.mktemp("three-processes")
    return launch(folder, 3, {"eval": eval_args(*few_files, model_dir),
                              "analyze": [*few_analyze_args(few_files[0], model_dir), "--out", folder / "analyze.csv"]})


@pytest.mark.slow
@pytest.mark.parametrize("command", list(COMMANDS))
def test_two_processes_write_the_same_table_as_one(capsys, tmp_path, model_dir, corpus_files, command, one_thread,
                                                   two_processes):
    code, _, stderr = run(capsys, *command_args(command, model_dir, corpus_files), "--out", tmp_path / "one.csv")
    assert code == 0, stderr
    two = two_processes.folder / f"{command}.csv"
    assert two.read_bytes() == (tmp_path / "one.csv").read_bytes()
    assert two_processes.result.stderr.count(f"wrote {two}") == 1  # rank 0 writes and reports, once


@pytest.mark.slow
def test_eval_under_torchrun_scores_as_one_process_even_with_more_ranks_than_sentences(capsys, model_dir,
                                                                                     corpus_files, few_files,
                                                                                     one_thread, two_processes,
                                                                                     three_processes):
    code, single, stderr = run(capsys, *eval_args(*corpus_files, model_dir, *FULL_PRECISION))
    assert code == 0, stderr
    assert two_processes.printed("eval") == [single, ""]  # one line, from rank 0
    code, single, _ = run(capsys, *eval_args(*few_files, model_dir))
    assert three_processes.printed("eval") == [single, "", ""]


@pytest.mark.slow
def test_more_ranks_than_sentences_still_write_the_right_table(capsys, tmp_path, model_dir, few_files, one_thread,
                                                               three_processes):
    code, _, stderr = run(capsys, *few_analyze_args(few_files[0], model_dir), "--out", tmp_path / "one.csv")
    assert code == 0, stderr
    assert (three_processes.folder / "analyze.csv").read_bytes() == (tmp_path / "one.csv").read_bytes()


@pytest.mark.slow
def test_a_failed_rank_fails_the_run_with_its_error_and_leaves_no_output(tmp_path, model_dir, corpus_files):
    script = tmp_path / "fail_on_rank_1.py"
    script.write_text(FAIL_ON_RANK_1)
    out = tmp_path / "heads.csv"
    result = torchrun(2, "analyze", "--src", corpus_files[0], "--model", model_dir, "--device", "cpu", "--out", out,
                      "--batch-tokens", "60", script=script)
    assert result.returncode != 0
    assert "a statistic failed on rank 1" in result.stderr
    assert not out.exists() and not list(tmp_path.glob(".heads.csv*"))
