"""One compiled copy of each app script for every AppTest run of this process (imported by `support.app`).

AppTest makes a new `ScriptCache` for each run, so every run compiled the app's entry script and its page script
anew, Streamlit's magic included (an AST pass): a server compiles them once. Here every run shares one cache, and a
script is compiled again when its file changes (its modification time or size), as a server's file watcher would
clear it.
"""

from __future__ import annotations

import os
from typing import Any

from streamlit.runtime.scriptrunner.script_cache import ScriptCache
from streamlit.testing.v1 import app_test, local_script_runner


class StampedScriptCache(ScriptCache):
    """A `ScriptCache` that compiles a script again once its file has changed."""

    def __init__(self) -> None:
        super().__init__()
        self._stamps: dict[str, tuple[int, int]] = {}

    def get_bytecode(self, script_path: str) -> Any:
        path = os.path.abspath(script_path)
        found = os.stat(path)
        stamp = (found.st_mtime_ns, found.st_size)
        with self._lock:
            if self._stamps.get(path) != stamp:
                self._cache.pop(path, None)
                self._stamps[path] = stamp
        return super().get_bytecode(path)


SHARED = StampedScriptCache()


def shared() -> StampedScriptCache:
    """What AppTest and its script runner get where they ask for a new `ScriptCache`."""
    return SHARED


app_test.ScriptCache = shared  # type: ignore[assignment, misc]
local_script_runner.ScriptCache = shared  # type: ignore[assignment, misc]
