"""``python -m viz_model`` = the ``viz-model`` command."""

from .cli.main import main

raise SystemExit(main())
