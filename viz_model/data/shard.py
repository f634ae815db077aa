"""Corpus work shared by the processes of a ``torchrun`` launch: each rank computes its share, every rank gets all.

The unit of work is what a single process computes in one go: a batch formed exactly as one process forms it
(same sentences, same padding), or one sentence where work is per sentence. So every number is computed on the same
shapes as in a single-process run, and the merged results, put back in input order, are the same. The
processes talk through ``torch.distributed`` (gloo) only to gather results; rank 0 writes the output.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

import torch.distributed as dist

T = TypeVar("T")


@dataclass
class Distributed:
    """This process's place in a launch (the trainer's DDP and the corpus commands): `rank` of `world`."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()


def setup_distributed(device_kind: str) -> Distributed:
    """Join the process group when started by torchrun (RANK/WORLD_SIZE set), else a single process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Distributed()
    backend = "nccl" if device_kind == "cuda" else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend)
    return Distributed(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))

_ACTIVE: ContextVar[Distributed | None] = ContextVar("viz_model_ranks", default=None)


def active() -> Distributed | None:
    """The ranks work is shared among now (None: this process does all of it)."""
    return _ACTIVE.get()


def writes() -> bool:
    """Whether this process writes outputs and prints results (rank 0, or a process alone)."""
    ranks = active()
    return ranks is None or ranks.main


def join() -> Distributed | None:
    """This process's place in a torchrun launch of several processes (joining its process group, gloo: results
    are Python objects on the CPU), or None when it runs alone."""
    ranks = setup_distributed("cpu")
    return ranks if ranks.world > 1 else None


def leave() -> None:
    """Leave the process group once every rank is done (a process that exits while gloo's threads still run can be
    aborted by the C++ runtime: "terminate called without an active exception")."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


@contextlib.contextmanager
def sharing(ranks: Distributed | None) -> Iterator[None]:
    """Inside this block the corpus functions share their work among `ranks` (None: no sharing)."""
    token = _ACTIVE.set(ranks)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def share(items: Sequence[T]) -> list[tuple[int, T]]:
    """The ``(index, item)`` pairs of `items` this process works on: every `world`-th from its rank, or all."""
    ranks = active()
    if ranks is None:
        return list(enumerate(items))
    return [(i, items[i]) for i in range(ranks.rank, len(items), ranks.world)]


def gather_list(part: list[T]) -> list[T]:
    """Every rank's `part`, concatenated in rank order (just `part` when not shared)."""
    ranks = active()
    if ranks is None:
        return part
    parts: list[list[T] | None] = [None] * ranks.world
    dist.all_gather_object(parts, part)
    return [item for piece in parts for item in (piece or [])]


def gather(results: dict[int, Any], count: int) -> list[Any]:
    """The results of all `count` items in order, from this process's `results` (index -> result) and, when
    shared, every other rank's (all ranks get them all)."""
    merged = dict(gather_list(list(results.items())))
    missing = [i for i in range(count) if i not in merged]
    if missing:
        raise RuntimeError(f"the results of {len(missing)} of {count} items are missing (first: {missing[0]})")
    return [merged[i] for i in range(count)]
