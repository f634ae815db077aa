"""The shape of the heads a caller names (to ablate, to patch): each item a tuple or list of the right length, else
one line; the caller checks each item's values by its own rule."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any


def head_items(heads: Iterable[Any], size: int, shape: str) -> Iterator[tuple | list]:
    """Each item of `heads`, a tuple or list of `size` entries; ``"SHAPE; got ITEM"`` for the first that is not."""
    for item in heads:
        if not isinstance(item, (tuple, list)) or len(item) != size:
            raise ValueError(f"{shape}; got {item!r}")
        yield item
