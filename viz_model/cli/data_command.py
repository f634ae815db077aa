"""``viz-model data list`` and ``viz-model data fetch NAME [NAME ...] [--to DIR]``: the corpora the training configs
read."""

from __future__ import annotations

import argparse
import os
import sys
import urllib.parse
from pathlib import Path

from ..config.data_root import DATA_ENV, data_root
from ..data.catalogue import DATA_SETS, data_set
from ..data.fetch import fetch, file_states


def add_data_arguments(sub) -> None:
    """The ``data`` subcommand and its two actions."""
    p = sub.add_parser("data", help="list or download the corpora the training configs read (Multi30K, Tatoeba, "
                                    "WMT14), checked against recorded SHA-256 checksums")
    actions = p.add_subparsers(dest="data_command", required=True)
    actions.add_parser("list", help="the data sets, their sources and licences, and which are in the data root")
    f = actions.add_parser("fetch", help="download data sets into the data root, check them and print their "
                                         "licences and citations")
    f.add_argument("names", nargs="+", choices=list(DATA_SETS), metavar="NAME",
                   help=f"the data sets: {', '.join(DATA_SETS)}")
    f.add_argument("--to", default=None, metavar="DIR",
                   help=f"the data root to put it under (default: ${DATA_ENV}, else {_default_label()})")
    f.add_argument("--mirror", default="", metavar="URL",
                   help="fetch from URL/FOLDER/FILE instead of the publishers (a mirror holding the same files)")


def _default_label() -> str:
    return "the user data folder, ~/.local/share/viz-model/data on Linux"


def _root_note(root: Path) -> str:
    origin = f"${DATA_ENV}" if os.environ.get(DATA_ENV) else f"the user data folder; set ${DATA_ENV} to use another"
    return f"data root: {root} ({origin})"


def cmd_data(args: argparse.Namespace) -> int:
    if args.data_command == "list":
        root = data_root()
        print(_root_note(root))
        for data in DATA_SETS.values():
            states = file_states(data, root / data.folder)
            ready = sum(state == "verified" for state in states.values())
            state = ("verified" if ready == len(states) else "not fetched" if ready == 0
                     else f"{ready} of {len(states)} files verified")
            print(f"\n{data.name} ({data.folder}/, {state}): {data.title}")
            urls = [d.url for d in data.downloads]
            print(f"  source: {urls[0] if len(urls) == 1 else urls[0].rsplit('/', 1)[0] + '/'}")
            print(f"  made: {data.made}")
            print(f"  licence: {data.licence}")
        return 0
    if args.mirror and urllib.parse.urlsplit(args.mirror).scheme not in ("http", "https"):
        raise ValueError(f"--mirror must be an http:// or https:// URL, got {args.mirror!r}")
    root = Path(args.to).expanduser().absolute() if args.to else data_root()  # said as the configs need it
    for name in dict.fromkeys(args.names):
        data = data_set(name)
        fetch(data, root, args.mirror, say=lambda line: print(line, file=sys.stderr))
        print(f"{data.name} is in {root / data.folder}")
        print(f"licence: {data.licence}")
        print(f"cite: {data.citation}")
    if root.resolve() != data_root().resolve():
        print(f"the training configs read it there with {DATA_ENV}={root}")
    return 0
