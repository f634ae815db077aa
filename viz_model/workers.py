"""The processes of `TranslationModel.worker_pool`: each loads the model once, and its tasks read it. They start as
spawned processes whose main module is this one, never the parent's script (an app's would run again in each)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from multiprocessing.context import SpawnContext, SpawnProcess
from typing import Any

import torch

_LOADED: dict[str, Any] = {}  # in a worker process: the model it loaded
_STARTING = threading.Lock()  # one start at a time stands this module in for the main module


class WorkerProcess(SpawnProcess):
    """A spawned process that prepares itself with this module as its main module: spawn would otherwise run the
    parent's ``__main__`` script again in it (``streamlit run``'s app script, a user's script)."""

    def start(self) -> None:
        with _STARTING:
            main = sys.modules["__main__"]
            sys.modules["__main__"] = sys.modules[__name__]  # what the child's preparation reads, while it is taken
            try:
                super().start()
            finally:
                if sys.modules["__main__"] is sys.modules[__name__]:  # unless another thread set its own meanwhile
                    sys.modules["__main__"] = main


class WorkerContext(SpawnContext):
    """The spawn start method with `WorkerProcess` processes (an ``mp_context`` for a process pool)."""

    Process = WorkerProcess


def start_worker(load: Callable[..., Any], directory: str, threads: int) -> None:
    """What a process of `TranslationModel.worker_pool` runs first: `load` (`TranslationModel.load`) the model in
    `directory` on the CPU, with `threads` intra-op threads."""
    torch.set_num_threads(threads)
    _LOADED["model"] = load(directory, device="cpu")


def worker_model() -> Any:
    """In a process of `TranslationModel.worker_pool`, the `TranslationModel` it loaded."""
    return _LOADED["model"]
