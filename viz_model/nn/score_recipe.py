"""`ScoreRecipe`: what one attention layer's scores need, kept in place of its maps (layers x n x d, not heads x n²);
`viz_model.on_demand.recipe_maps` remakes the softmax the layer computed from it, for any heads and query rows.

A recipe holds the queries and keys after every norm and rotation (keys per key/value head, and which one each query
head reads), the scale and soft cap, the mask in compact form (causal, a sliding window, one flag per key) and the
position bias in compact form (ALiBi's slopes; T5's bucket table and the bucket of each offset). Rotary position is
in the queries and keys already; sinusoidal and learned positions are in the input, so in them too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from .alibi import ALiBi
from .relative_bias import RelativePositionBias, relative_position_bucket

TENSOR_FIELDS = ("queries", "keys", "query_positions", "key_positions", "key_mask", "alibi_slopes", "bias_table",
                 "offset_buckets", "sinks")


@dataclass
class ScoreRecipe:
    """One attention layer's scores, compact; every tensor on the CPU, batch of one.

    :ivar queries: ``(heads, n, d_head)`` after norms and rotation, in the dtype the layer computed in
    :ivar keys: ``(kv_heads, m, d_head)`` the same, one per key/value head
    :ivar kv_heads: per query head, the key/value head it reads; None where every query head has its own
    :ivar scale: the layer's `scale` (True: divide by sqrt(d_head); False: none; a number: by its square root)
    :ivar softcap: the scores' cap (Gemma 2), else None
    :ivar query_positions: ``(n,)`` int64 the queries' positions
    :ivar key_positions: ``(m,)`` int64 the keys' positions
    :ivar causal: a query sees keys at its own position or before only
    :ivar window: a query sees its last `window` positions only (sliding window), else None
    :ivar radius: a query sees the keys at most `radius` positions away on either side (ModernBERT's local layers),
        else None
    :ivar key_mask: ``(m,)`` bool, True = may be attended (padding, an extra key mask), else None: every key
    :ivar alibi_slopes: ``(heads,)`` float32 ALiBi slopes, else None
    :ivar bias_table: ``(buckets, heads)`` T5's relative bias table, else None
    :ivar offset_buckets: ``(2 * max_distance + 1,)`` int64 the bucket of each offset ``key - query`` from
        -max_distance to max_distance (beyond: the end's), with `bias_table`
    :ivar sinks: ``(heads,)`` float32 each head's learned sink logit (gpt-oss), else None
    """

    queries: Tensor
    keys: Tensor
    kv_heads: list[int] | None
    scale: bool | float
    softcap: float | None
    query_positions: Tensor
    key_positions: Tensor
    causal: bool = False
    window: int | None = None
    key_mask: Tensor | None = None
    alibi_slopes: Tensor | None = None
    bias_table: Tensor | None = None
    offset_buckets: Tensor | None = None
    radius: int | None = None
    sinks: Tensor | None = None

    @property
    def heads(self) -> int:
        return int(self.queries.shape[0])

    @property
    def shape(self) -> tuple[int, int, int]:
        """The layer's maps' shape ``(heads, n, m)``, without computing them."""
        return self.heads, int(self.queries.shape[1]), int(self.keys.shape[1])

    @property
    def nbytes(self) -> int:
        """Bytes of the tensors kept."""
        return sum(t.numel() * t.element_size() for t in self.tensors().values())

    def tensors(self) -> dict[str, Tensor]:
        """The recipe's tensors by field name (those that are set)."""
        return {name: getattr(self, name) for name in TENSOR_FIELDS if getattr(self, name) is not None}

    def settings(self) -> dict[str, object]:
        """The recipe's non-tensor fields and its tensors' dtype (what a saved trace's header holds)."""
        radius = {} if self.radius is None else {"radius": self.radius}  # older traces' settings read as before
        return {"kv_heads": self.kv_heads, "scale": self.scale, "softcap": self.softcap, "causal": self.causal,
                "window": self.window, **radius, "dtype": str(self.queries.dtype).removeprefix("torch.")}

    def check(self) -> None:
        """Raise ValueError naming the first field whose shape or value disagrees with the others."""
        heads, n, m = self.shape
        d = self.queries.shape[-1] if self.queries.dim() == 3 else -1
        kv = self.keys.shape[0] if self.keys.dim() == 3 else 0
        expected = {"queries": (heads, n, d), "keys": (kv, m, d), "query_positions": (n,), "key_positions": (m,),
                    "key_mask": (m,), "alibi_slopes": (heads,), "sinks": (heads,)}
        for name, tensor in self.tensors().items():
            if name in expected and tuple(tensor.shape) != expected[name]:
                raise ValueError(f"recipe {name} has shape {tuple(tensor.shape)}, expected {expected[name]}")
        if self.queries.dim() != 3 or self.keys.dim() != 3:
            raise ValueError(f"recipe queries {tuple(self.queries.shape)} and keys {tuple(self.keys.shape)} must be "
                             "(heads, len, d_head)")
        owners = list(range(heads)) if self.kv_heads is None else self.kv_heads
        if len(owners) != heads or any(not isinstance(h, int) or not 0 <= h < kv for h in owners):
            raise ValueError(f"recipe kv_heads {self.kv_heads} do not map {heads} query heads to {kv} key/value heads")
        if (self.bias_table is None) != (self.offset_buckets is None):
            raise ValueError("recipe has a relative bias table without its offset buckets, or the reverse")
        if self.bias_table is not None and (self.bias_table.dim() != 2 or self.bias_table.shape[1] != heads
                                            or self.offset_buckets.dim() != 1 or self.offset_buckets.numel() % 2 == 0
                                            or int(self.offset_buckets.min()) < 0
                                            or int(self.offset_buckets.max()) >= self.bias_table.shape[0]):
            raise ValueError(f"recipe relative bias table {tuple(self.bias_table.shape)} and offset buckets "
                             f"{tuple(self.offset_buckets.shape)} disagree")
        for name in ("window", "radius"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"recipe {name} must be a positive integer or None, got {value!r}")

    def visible(self, rows: slice | Tensor | None = None) -> Tensor | None:
        """``(rows, m)`` bool, True = may attend; None where every key is visible to every query."""
        if not self.causal and self.window is None and self.radius is None and self.key_mask is None:
            return None
        q = self.query_positions if rows is None else self.query_positions[rows]
        k = self.key_positions
        visible = torch.ones(len(q), len(k), dtype=torch.bool)
        if self.causal:
            visible &= k[None, :] <= q[:, None]
        if self.window is not None:
            visible &= k[None, :] > q[:, None] - self.window
        if self.radius is not None:
            visible &= (k[None, :] - q[:, None]).abs() <= self.radius
        if self.key_mask is not None:
            visible &= self.key_mask[None, :]
        return visible

    def bias(self, heads: Tensor, rows: slice | Tensor | None = None) -> Tensor | None:
        """``(len(heads), rows, m)`` float32 position bias of those heads (ALiBi or relative), else None."""
        q = self.query_positions if rows is None else self.query_positions[rows]
        if self.alibi_slopes is not None:
            distance = (q[:, None] - self.key_positions[None, :]).abs().float()
            return -self.alibi_slopes[heads][:, None, None] * distance[None]
        if self.bias_table is not None:
            reach = (self.offset_buckets.numel() - 1) // 2
            offsets = (self.key_positions[None, :] - q[:, None]).clamp(-reach, reach)
            return self.bias_table[:, heads][self.offset_buckets[offsets + reach]].permute(2, 0, 1)
        return None


def query_recipe(queries: Tensor, keys: Tensor, kv_heads: list[int] | None, scale: bool | float,
                 softcap: float | None, sinks: Tensor | None = None) -> ScoreRecipe:
    """The recipe of one attention call's queries ``(1, heads, n, d)`` and keys ``(1, kv_heads, m, d)`` (what the
    layer itself knows, with its learned `sinks`), positions 0.. and no mask or bias yet: the stack sets those
    (`laid_out`)."""
    if queries.shape[0] != 1:
        raise ValueError(f"a score recipe records a batch of one, got a batch of {queries.shape[0]}")
    n, m = queries.shape[2], keys.shape[2]
    return ScoreRecipe(queries[0].detach().cpu(), keys[0].detach().cpu(), kv_heads, scale, softcap,
                       torch.arange(m - n, m), torch.arange(m),
                       sinks=None if sinks is None else sinks.detach().float().cpu())


def laid_out(recipe: ScoreRecipe, *, causal: bool = False, window: int | None = None, key_mask: Tensor | None = None,
             scheme: object = None, radius: int | None = None) -> ScoreRecipe:
    """`recipe` with its mask and position bias: causal, a `window`, a ``(m,)`` or ``(1, .., m)`` `key_mask`, a
    `radius` on either side, and the bias of `scheme` (`ALiBi` or `RelativePositionBias`; any other scheme adds none to
    the scores)."""
    slopes = table = buckets = None
    if isinstance(scheme, ALiBi):
        slopes = scheme.slopes.float().cpu()
    elif isinstance(scheme, RelativePositionBias):
        table = scheme.embedding.weight.detach().cpu()
        reach = torch.arange(-scheme.max_distance, scheme.max_distance + 1)
        buckets = relative_position_bucket(reach, scheme.bidirectional, scheme.num_buckets, scheme.max_distance)
    if key_mask is not None:
        key_mask = key_mask.reshape(-1, key_mask.shape[-1])[0].detach().cpu().bool()
    return dataclasses.replace(recipe, causal=causal, window=window, key_mask=key_mask, alibi_slopes=slopes,
                               bias_table=table, offset_buckets=buckets, radius=radius)


def merged(recipes: Sequence[ScoreRecipe]) -> ScoreRecipe:
    """One recipe of a layer's cached calls (a prompt, then a token at a time): every call's queries one under the
    other, the last call's keys (every key so far)."""
    if len(recipes) == 1:
        return recipes[0]
    last = recipes[-1]
    return dataclasses.replace(last, queries=torch.cat([r.queries for r in recipes], dim=1),
                               query_positions=torch.cat([r.query_positions for r in recipes]))


def queries_only(recipe: ScoreRecipe) -> ScoreRecipe:
    """`recipe` without its keys (none: a later cached call of the same layer holds every key), for `merged`."""
    return dataclasses.replace(recipe, keys=recipe.keys.new_empty((recipe.keys.shape[0], 0, recipe.keys.shape[2])),
                               key_positions=recipe.key_positions.new_empty(0), key_mask=None)


def first_rows(recipe: ScoreRecipe, rows: int, keys: int) -> ScoreRecipe:
    """`recipe` cut to its first `rows` queries and `keys` keys (a verified call's rejected tokens dropped)."""
    return dataclasses.replace(recipe, queries=recipe.queries[:, :rows], query_positions=recipe.query_positions[:rows],
                               keys=recipe.keys[:, :keys], key_positions=recipe.key_positions[:keys],
                               key_mask=None if recipe.key_mask is None else recipe.key_mask[:keys])
