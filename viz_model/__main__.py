"""``python -m viz_model`` = the ``viz-model`` command."""

from .cli import main

raise SystemExit(main())
