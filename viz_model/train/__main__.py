"""``python -m viz_model.train`` (e.g. under torchrun) = ``viz-model train``."""

import sys

from ..cli import main

raise SystemExit(main(["train", *sys.argv[1:]]))
