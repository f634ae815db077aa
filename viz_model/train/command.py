"""The train command: a run from a TOML config and overrides, or the resumption of one."""

from __future__ import annotations

import argparse
import sys

from ..config import ConfigError, TrainConfig
from .loop import train


def train_command(args: argparse.Namespace) -> int:
    """Train as `args` (of `viz_model.command_line.add_train_arguments`) say; the model's folder goes to stderr."""
    if args.resume:  # key=value alone: changes to the saved config (more epochs, ...); with --config: a check
        given = TrainConfig.from_toml(args.config, args.overrides) if args.config else None
        out = train(given, args.resume, resume=True, changes=None if args.config else args.overrides)
    else:
        if not args.config or not args.run_dir:
            raise ConfigError("train needs --config FILE and --run-dir DIR (or --resume RUN_DIR)")
        out = train(TrainConfig.from_toml(args.config, args.overrides), args.run_dir)
    print(f"model written to {out}", file=sys.stderr)
    return 0
