"""The ``viz-model`` command: its subcommands (`main`) and starting the explorer (`launch`)."""
