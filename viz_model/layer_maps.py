"""What a trace's maps of one kind are read through, whether held whole or made on demand: `LayerMaps` (a layer's
maps by index, one head's map, a layer's shape), and `WholeMaps`, a list of layers' maps held whole that reads as
`viz_model.on_demand.OnDemandMaps` does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class LayerMaps(Protocol):
    """Layers' maps: ``maps[layer]`` ``(heads, n, m)`` float32, `head` one head's ``(n, m)`` (`rows`: those query
    rows alone), `shape` a layer's ``(heads, n, m)`` without making its maps."""

    def __len__(self) -> int: ...

    def __getitem__(self, layer: int) -> np.ndarray: ...

    def head(self, layer: int, head: int, rows: slice | None = None) -> np.ndarray: ...

    def shape(self, layer: int) -> tuple[int, int, int]: ...


class WholeMaps(list):
    """A list of layers' maps held whole, ``(heads, n, m)`` each, read as `LayerMaps`."""

    def head(self, layer: int, head: int, rows: slice | None = None) -> np.ndarray:
        """``(rows, m)``: one head's map (all its query rows: None)."""
        return self[layer][head] if rows is None else self[layer][head, rows]

    def shape(self, layer: int) -> tuple[int, int, int]:
        """``(heads, n, m)`` of a layer's maps."""
        return tuple(self[layer].shape)


def layer_maps(maps: Sequence[np.ndarray] | LayerMaps) -> LayerMaps:
    """`maps` as `LayerMaps`: maps made on demand as they are, a list of whole maps as `WholeMaps`."""
    return maps if isinstance(maps, LayerMaps) else WholeMaps(maps)
