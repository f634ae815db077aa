"""One interface for a trace's maps of one kind (`viz_model.layer_maps`): maps held whole (`WholeMaps`) read one head
and a layer's shape as maps made on demand (`OnDemandMaps`) do, and a trace holds either as `LayerMaps`, so that
`head_map` and `map_shape` never ask which it holds."""

from __future__ import annotations

import numpy as np

from viz_model.layer_maps import LayerMaps, WholeMaps, layer_maps
from viz_model.on_demand import OnDemandMaps


def test_whole_maps_read_a_head_and_a_shape():
    rng = np.random.default_rng(0)
    maps = [rng.random((2, 4, 5), dtype=np.float32) for _ in range(3)]
    held = layer_maps(maps)
    assert isinstance(held, WholeMaps) and isinstance(held, LayerMaps) and len(held) == 3
    assert held.shape(1) == (2, 4, 5)
    np.testing.assert_array_equal(held.head(2, 1), maps[2][1])
    np.testing.assert_array_equal(held.head(0, 0, slice(1, 3)), maps[0][0, 1:3])
    assert layer_maps(held) is held and layer_maps([]) == []


def test_maps_made_on_demand_are_layer_maps_as_they_are():
    maps = OnDemandMaps([])
    assert isinstance(maps, LayerMaps) and layer_maps(maps) is maps
