"""``python -m viz_model.train`` (e.g. under torchrun) = ``viz-model train``."""

import sys

from ..command_line import report_errors, train_parser
from .command import train_command

args = train_parser().parse_args(sys.argv[1:])
raise SystemExit(report_errors(lambda: train_command(args)))
