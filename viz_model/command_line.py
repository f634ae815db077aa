"""What the ``viz-model`` command and ``python -m viz_model.train`` share: the train command's arguments and how
a user error is reported (one line ``viz-model: error: ...`` on stderr, status 2)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from .config import ConfigError
from .data.textfiles import DataError
from .modeldir.checkpoint import CheckpointError
from .tokenization.tokenizer import TokenizerError
from .trace import TraceError

USER_ERRORS = (ValueError, CheckpointError, ConfigError, TokenizerError, TraceError, DataError, FileNotFoundError,
               IsADirectoryError, NotADirectoryError, PermissionError)
TRAIN_HELP = "train a model (or continue one with --resume)"


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``viz-model train`` (and of ``python -m viz_model.train``)."""
    p.add_argument("--config", default=None, help="TOML training config, e.g. configs/multi30k-en-de.toml")
    p.add_argument("--run-dir", default=None, help="where checkpoints, logs and the final model go")
    p.add_argument("--resume", default=None, metavar="RUN_DIR", help="continue the run in RUN_DIR")
    p.add_argument("overrides", nargs="*", help="config overrides key=value, e.g. epochs=5 model.d_model=128 "
                                                "corpora.tatoeba.weight=0.5; with --resume alone, changes of how "
                                                "long, how the run goes on and how it ends (epochs, cooldown_epochs, "
                                                "max_steps, threads, device, bf16, compile, eval_*)")


def train_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m viz_model.train``: ``viz-model train``'s arguments, under its name."""
    parser = argparse.ArgumentParser(prog="viz-model train")
    add_train_arguments(parser)
    return parser


def report_errors(command: Callable[[], int]) -> int:
    """Run `command` and return its status; a user error is one line on stderr (2), an interrupt 130, a closed
    pipe 0."""
    try:
        return command()
    except USER_ERRORS as err:
        print(f"viz-model: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("viz-model: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `viz-model trace ... --out - | head`
        sys.stderr.close()
        return 0
