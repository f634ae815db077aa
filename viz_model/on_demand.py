"""Attention maps computed when read: `recipe_maps` remakes a layer's softmax from its `ScoreRecipe`, and
`OnDemandMaps` is a trace's list of layers whose item is that layer's ``(heads, n, m)`` array, made on reading.

A trace over a long prompt keeps recipes (layers x n x d) in place of maps (layers x heads x n²); prompts of up to
`FULL_MAPS_MAX_TOKENS` tokens would keep full maps, where a benchmark found reading them cheaper than remaking them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np
import torch
from torch import Tensor

from .nn.attention import attention_scores, softmax_over_keys
from .nn.learned_sinks import sink_softmax
from .nn.model import Seq2SeqOutput, Transformer
from .nn.score_recipe import ScoreRecipe, laid_out

FULL_MAPS_MAX_TOKENS = 0
"""Traces of up to this many tokens keep every map (``maps="auto"`` of `LanguageModel.trace` and
`TranslationModel.trace`); longer ones keep recipes. What `benchmarks/bench_maps_threshold.py`'s rule gives on its
quiet run (``tests/library/test_maps_threshold.py``): keeping every map was nowhere faster by more than a tenth, so
"auto" keeps recipes at every length."""
MAP_MODES = ("auto", "full", "on_demand")  # how a trace keeps its maps
WHOLE_MAP_TOKENS = 256
"""Maps of up to this many query rows and keys are read whole: drawn cell by cell, every analysis run on them. Longer
ones are read a head or a few rows at a time (`AttentionTrace.head_map`): drawn as blocks, windows and summaries, the
analyses that need every map whole left out (`reading`)."""
READINGS = ("whole", "rows")  # how a page reads a kind's maps: whole, or a head's rows at a time


def reading(queries: int, keys: int) -> str:
    """How maps of `queries` x `keys` are read (one of `READINGS`): "whole" up to `WHOLE_MAP_TOKENS` a side, else
    "rows"."""
    return "whole" if max(queries, keys) <= WHOLE_MAP_TOKENS else "rows"


def check_maps(maps: object) -> str:
    """`maps` if it is one of `MAP_MODES`; else ValueError in one line."""
    if not isinstance(maps, str) or maps not in MAP_MODES:
        raise ValueError(f"maps must be one of {', '.join(MAP_MODES)}, got {maps!r}")
    return maps


def keeps_full_maps(maps: str, n_tokens: int) -> bool:
    """Whether a trace of `n_tokens` tokens (its longest side) with `maps` (one of `MAP_MODES`) keeps every map:
    "full", or "auto" up to `FULL_MAPS_MAX_TOKENS` tokens."""
    return maps == "full" or (maps == "auto" and n_tokens <= FULL_MAPS_MAX_TOKENS)


@torch.inference_mode()
def recipe_maps(recipe: ScoreRecipe, heads: Sequence[int] | None = None, rows: slice | None = None) -> Tensor:
    """``(len(heads), rows, m)`` float32: the softmax the layer computed for those heads (all: None) and query rows
    (all: None), as its explicit path computes it (`attention_scores`, the bias, masked keys at -inf, then
    `softmax_over_keys`; with learned sinks `sink_softmax`)."""
    index = torch.arange(recipe.heads) if heads is None else torch.as_tensor(list(heads), dtype=torch.long)
    owners = index if recipe.kv_heads is None else torch.as_tensor(recipe.kv_heads, dtype=torch.long)[index]
    queries = recipe.queries if rows is None else recipe.queries[:, rows]
    scores = attention_scores(queries[index], recipe.keys[owners], recipe.scale, recipe.softcap)
    bias = recipe.bias(index, rows)
    if bias is not None:
        scores = scores + bias.to(scores.dtype)
    visible = recipe.visible(rows)
    masked = scores if visible is None else scores.masked_fill_(~visible, float("-inf"))  # its own tensor: in place
    if recipe.sinks is None:
        return softmax_over_keys(masked, visible).float()
    return sink_softmax(masked, recipe.sinks[index]).float()


class OnDemandMaps(Sequence[np.ndarray]):
    """A list of layers' maps read from recipes: ``maps[layer]`` is ``(heads, n, m)`` float32, made head by head
    when read (nothing kept); `head` gives one head's ``(n, m)`` alone.

    :ivar recipes: per layer, its `ScoreRecipe`
    """

    def __init__(self, recipes: Sequence[ScoreRecipe]) -> None:
        self.recipes = list(recipes)

    def __len__(self) -> int:
        return len(self.recipes)

    @overload
    def __getitem__(self, layer: int) -> np.ndarray: ...

    @overload
    def __getitem__(self, layer: slice) -> list[np.ndarray]: ...

    def __getitem__(self, layer: int | slice) -> np.ndarray | list[np.ndarray]:
        if isinstance(layer, slice):
            return [self[i] for i in range(len(self))[layer]]
        recipe = self.recipes[layer]
        maps = np.empty(recipe.shape, dtype=np.float32)
        for h in range(recipe.heads):  # one head's scores at a time: a layer's maps plus one head's transient
            maps[h] = recipe_maps(recipe, [h]).numpy()[0]
        return maps

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self[i] for i in range(len(self)))

    def head(self, layer: int, head: int, rows: slice | None = None) -> np.ndarray:
        """``(rows, m)`` float32: one head's map (all its query rows: None)."""
        return recipe_maps(self.recipes[layer], [head], rows).numpy()[0]

    def shape(self, layer: int) -> tuple[int, int, int]:
        """``(heads, n, m)`` of a layer's maps, without making them."""
        return self.recipes[layer].shape

    @property
    def nbytes(self) -> int:
        """Bytes of the recipes' tensors."""
        return sum(recipe.nbytes for recipe in self.recipes)

    def __repr__(self) -> str:
        return f"OnDemandMaps({len(self)} layers, {self.nbytes} bytes of recipes)"


def translator_recipes(network: Transformer, src: Tensor, tgt: Tensor, out: Seq2SeqOutput,
                       positions: bool = True) -> dict[str, list[ScoreRecipe]]:
    """Per kind, the recipes of a translator's pass `out` over `src` and `tgt` (``need_weights="recipe"``, batch of
    one) with the masks and position biases `Transformer.encode` and `decode` use (``positions=False``: no bias)."""
    pad = network.config.pad_id
    source_keys = src[0] != pad
    target_keys = tgt[0] != pad
    if network.config.bos_id == pad:  # Marian starts from the pad id: position 0 is no padding
        target_keys[0] = True
    source_scheme = network.score_scheme("source") if positions else None
    target_scheme = network.score_scheme("target") if positions else None
    return {"encoder": [laid_out(r, key_mask=source_keys, scheme=source_scheme) for r in out.encoder_records],
            "decoder": [laid_out(r, causal=True, key_mask=target_keys, scheme=target_scheme)
                        for r in out.decoder_records],
            "cross": [laid_out(r, key_mask=source_keys) for r in out.cross_records]}


DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16, "float16": torch.float16}
FLOAT_TENSORS = ("queries", "keys", "alibi_slopes", "bias_table", "sinks")


def recipe_arrays(recipe: ScoreRecipe) -> dict[str, np.ndarray]:
    """A recipe's tensors as numpy arrays (queries and keys in float32: bf16 and fp16 widen exactly)."""
    return {name: (t.float() if name in FLOAT_TENSORS else t).numpy() for name, t in recipe.tensors().items()}


def recipe_from_arrays(settings: dict, arrays: dict[str, np.ndarray]) -> ScoreRecipe:
    """The recipe `settings` (`ScoreRecipe.settings`) and `recipe_arrays` describe, checked; ValueError names the
    first field at fault."""
    dtype = DTYPES.get(settings.get("dtype"))
    if dtype is None:
        raise ValueError(f"recipe dtype {settings.get('dtype')!r} is not one of {', '.join(DTYPES)}")
    tensors = {}
    for name, array in arrays.items():
        tensor = torch.from_numpy(np.array(array))
        if name in ("queries", "keys"):
            tensors[name] = tensor.to(dtype)
        elif name == "key_mask":
            tensors[name] = tensor.bool()
        else:
            tensors[name] = tensor.float() if name in FLOAT_TENSORS else tensor.long()
    scale = settings["scale"]
    if not isinstance(scale, (bool, int, float)) or (not isinstance(scale, bool) and scale <= 0):
        raise ValueError(f"recipe scale must be true, false or a positive number, got {scale!r}")
    recipe = ScoreRecipe(kv_heads=settings["kv_heads"], scale=scale, softcap=settings["softcap"],
                         causal=bool(settings["causal"]), window=settings["window"], radius=settings.get("radius"),
                         **tensors)
    recipe.check()
    return recipe


def recipes_digest(recipes: dict[str, list[ScoreRecipe]]) -> str:
    """SHA-256 over every recipe's settings and tensor bytes: what a saved trace checks its recipes against."""
    digest = hashlib.sha256()
    for kind in sorted(recipes):
        for recipe in recipes[kind]:
            digest.update(json.dumps([kind, recipe.settings()], sort_keys=True).encode())
            for name, array in sorted(recipe_arrays(recipe).items()):
                digest.update(name.encode() + str(array.dtype).encode() + str(array.shape).encode())
                digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()
