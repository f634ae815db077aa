"""A language model's key/value cache cut and moved, as StreamingLLM keeps one: some keys dropped along the key axis,
the rest placed at new positions (RoPE's keys turned by the difference, ALiBi's bias read from the new ones)."""

from __future__ import annotations

import torch
from torch import Tensor

from .attention import KVCache
from .causal_lm import CausalLM
from .rotary import Rotary, rope_angles, rotate


def kept_keys(cache: list[KVCache], index: Tensor) -> list[KVCache]:
    """Each layer's keys, values and positions at `index` ``(batch, keys)`` along the key axis (a row of its own for
    each row of the batch), in that order."""
    rows, index = len(index), index.to(cache[0].key.device)

    def taken(part: Tensor) -> Tensor:
        part = part.expand(rows, -1, -1, -1)
        return part.gather(2, index[:, None, :, None].expand(-1, part.shape[1], -1, part.shape[3]))

    return [KVCache(taken(kv.key), taken(kv.value),
                    None if kv.positions is None else kv.positions.expand(rows, -1).gather(1, index)) for kv in cache]


def layer_rotary(network: CausalLM, layer: int) -> Rotary | None:
    """The RoPE that turns `layer`'s keys: the sliding layers' own where the network has one, else the stack's
    (None: no rotation, e.g. ALiBi or a table of positions)."""
    scheme = network.local_scheme if network.local_scheme is not None and network.window(layer) is not None \
        else network.scheme
    return scheme if isinstance(scheme, Rotary) else None


def moved_keys(network: CausalLM, cache: list[KVCache], positions: Tensor) -> list[KVCache]:
    """`cache` (keys as `network` rotated them, at their recorded positions) with every key at `positions`
    ``(batch, keys)``: a RoPE key turned by the difference (rotations compose: the same as turning the unrotated key
    there once), the positions replaced (what ALiBi's bias and the next pass's positions read). Dynamic NTK's keys
    are turned by the frequencies of the pass's length: exact while the cache stays within its original length, where
    they do not change."""
    if any(kv.positions is None for kv in cache):  # a table of positions: nothing in the cache to move
        return cache
    moved = []
    for layer, kv in enumerate(cache):
        turn, key = layer_rotary(network, layer), kv.key
        if turn is not None:
            frequencies = turn.frequencies_for(positions)
            cos, sin = rope_angles(positions - kv.positions, turn.d_head, turn.base, frequencies)
            key = rotate(key, cos, sin)
        moved.append(KVCache(key, kv.value, positions))
    return moved


def appended_last(kept: list[KVCache], cache: list[KVCache]) -> list[KVCache]:
    """`kept` with the last key and value of each layer of `cache` (a pass's new token) after its own."""
    return [KVCache(torch.cat([k.key, c.key[:, :, -1:]], 2), torch.cat([k.value, c.value[:, :, -1:]], 2),
                    None if c.positions is None else torch.cat([k.positions, c.positions[:, -1:]], 1))
            for k, c in zip(kept, cache)]
