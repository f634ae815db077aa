"""The processes of `TranslationModel.worker_pool`: each loads the model once, and its tasks read it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

_LOADED: dict[str, Any] = {}  # in a worker process: the model it loaded


def start_worker(load: Callable[..., Any], directory: str, threads: int) -> None:
    """What a process of `TranslationModel.worker_pool` runs first: `load` (`viz_model.load`) the model in
    `directory` on the CPU, with `threads` intra-op threads."""
    torch.set_num_threads(threads)
    _LOADED["model"] = load(directory, device="cpu")


def worker_model() -> Any:
    """In a process of `TranslationModel.worker_pool`, the `TranslationModel` it loaded."""
    return _LOADED["model"]
