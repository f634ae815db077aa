"""Attention sinks: how much of each head's attention lands on the first token (and on any other token that draws a
large share), and the switch that hides those tokens to show what the model does without them.

A key's share in one head is the mean weight ``a[i, k]`` over the queries ``i > k`` that can see it (inside the
layer's sliding window); the query's own row ``i = k`` is left out, so the first token's share is the mean of
``a[i, 0]`` over ``i >= 1`` (query 0 can only see itself). A token other than the first is *heavy* in a head when its
share exceeds `HEAVY_SHARE`, the threshold ε = 0.3 of Gu et al., "When Attention Sink Emerges in Language Models"
(ICLR 2025), whose mean also counts the row ``i = k`` (the first token's is always 1). Layers and heads are 0-based.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..config.checks import check_int
from ..kinds.language_model import LanguageModel, check_count
from ..trace import AttentionTrace
from .map_summary import row_blocks

HEAVY_SHARE = 0.3  # Gu et al.'s ε: a key drawing more than this share of a head's attention is a sink there
TOP_TOKENS = 10  # the next-token candidates listed before and after the switch


def seen_counts(n: int, window: int | None) -> np.ndarray:
    """``(n,)`` how many queries ``i > k`` see each key k: ``n - 1 - k``, at most ``window - 1`` in a sliding layer."""
    later = np.arange(n - 1, -1, -1)
    return later if window is None else np.minimum(later, window - 1)


def head_key_shares(blocks: Iterable[tuple[int, np.ndarray]], n: int, window: int | None = None) -> np.ndarray:
    """``(n,)`` one head's `key_shares` from its map read in blocks of query rows (first row, ``(rows, n)`` weights),
    so that no more than one block is held at once; NaN where no query sees a key."""
    totals = np.zeros(n, dtype=np.float64)
    key = np.arange(n)[None, :]
    for start, block in blocks:
        query = np.arange(start, start + len(block))[:, None]
        seen = (query > key) & (True if window is None else query - key < window)
        totals += np.where(seen, block, 0).sum(axis=0, dtype=np.float64)  # float64 sums of the weights
    counts = seen_counts(n, window)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, totals / counts, np.nan)


def check_windows(windows: Sequence[int | None] | None, layers: int) -> list[int | None]:
    """One window (or None) per layer; one line where their count differs."""
    windows = list(windows) if windows is not None else [None] * layers
    if len(windows) != layers:
        raise ValueError(f"{len(windows)} windows for {layers} layers: give one per layer (None: no window)")
    return windows


def key_shares(maps: Sequence[np.ndarray], windows: Sequence[int | None] | None = None) -> np.ndarray:
    """``(layers, heads, n)``: for each key k, the mean weight ``a[i, k]`` over the queries ``i > k`` that can see it
    (``i - k < window`` in a sliding layer); NaN where no query can. `maps`: per layer ``(heads, n, n)``."""
    if not maps:
        raise ValueError("no attention maps: a model with at least one layer is needed")
    n = maps[0].shape[-1]
    windows = check_windows(windows, len(maps))
    rows = []
    for layer, (weights, window) in enumerate(zip(maps, windows)):
        if weights.ndim != 3 or weights.shape[1:] != (n, n):
            raise ValueError(f"layer {layer}'s map must be (heads, {n}, {n}), got {tuple(weights.shape)}")
        rows.append([head_key_shares([(0, head)], n, window) for head in weights])
    return np.array(rows, dtype=np.float64)


def trace_key_shares(trace: AttentionTrace) -> np.ndarray:
    """`key_shares` of a trace's causal self-attention, each head's map read alone a block of query rows at a time
    (`map_summary.row_blocks`): maps made on demand are never held a layer at once."""
    layers = len(trace.decoder_attentions)
    if not layers:
        raise ValueError("no attention maps: a model with at least one layer is needed")
    windows = check_windows(trace.settings.get("windows"), layers)
    heads, n, _ = trace.map_shape("decoder", 0)
    return np.array([[head_key_shares(row_blocks(trace, "decoder", layer, head), n, windows[layer])
                      for head in range(heads)] for layer in range(layers)], dtype=np.float64)


def check_shares_input(tokens: Sequence[str], threshold: float) -> None:
    """One line where the threshold is not in (0, 1) or there are fewer than two tokens."""
    if not 0 < threshold < 1:
        raise ValueError(f"threshold must be a share between 0 and 1, got {threshold!r}")
    if len(tokens) < 2:
        raise ValueError("the first token's share needs at least two tokens: query 0 can only see itself")


def sink_shares(maps: Sequence[np.ndarray], tokens: Sequence[str], windows: Sequence[int | None] | None = None,
                threshold: float = HEAVY_SHARE) -> SinkShares:
    """Every head's share on the first token and the other heavy tokens of `maps` (per layer ``(heads, n, n)``,
    causal) over `tokens`; one line where there are fewer than two tokens or the threshold is not in (0, 1)."""
    check_shares_input(tokens, threshold)
    return shares_of(key_shares(maps, windows), tokens, threshold)


def shares_of(shares: np.ndarray, tokens: Sequence[str], threshold: float = HEAVY_SHARE) -> SinkShares:
    """`SinkShares` of `shares` (``(layers, heads, n)``, `key_shares`) over `tokens`: the heavy tokens listed."""
    if shares.shape[-1] != len(tokens):
        raise ValueError(f"{len(tokens)} tokens for maps over {shares.shape[-1]} positions")
    heads = shares.shape[0] * shares.shape[1]
    columns = np.nan_to_num(shares, nan=0.0).reshape(heads, -1)
    counts = (columns > threshold).sum(axis=0)
    heavy = []
    for k in np.flatnonzero(counts[1:]) + 1:  # the tokens after the first that are heavy in some head
        layer, head = np.unravel_index(int(columns[:, k].argmax()), shares.shape[:2])
        heavy.append(HeavyToken(int(k), tokens[k], int(counts[k]), int(counts[k]) / heads, float(columns[:, k].max()),
                                int(layer), int(head)))
    heavy.sort(key=lambda t: (-t.heads, -t.top_share, t.position))
    return SinkShares(list(tokens), shares, threshold, heavy)


def trace_sink_shares(trace: AttentionTrace, threshold: float = HEAVY_SHARE) -> SinkShares:
    """`sink_shares` of a trace's causal self-attention: a language model's maps over the prompt and continuation
    (each layer's window applied), or a translator's decoder self-attention over its output."""
    check_shares_input(trace.target_tokens, threshold)
    return shares_of(trace_key_shares(trace), trace.target_tokens, threshold)


def sink_mask(length: int, keys: Sequence[int] = (0,)) -> torch.Tensor:
    """``(length, length)`` True = may attend: each key of `keys` hidden from every query after it (a query keeps
    itself, so none is left with nothing to see); one line for a key outside ``0..length-1``."""
    length = check_count(length, "length", 1, 1 << 20)
    mask = torch.ones(length, length, dtype=torch.bool)
    for key in keys:
        key = check_int("key", key, 0, length - 1, error=ValueError,
                        message=f"a hidden key must be a position from 0 to {length - 1}, got {key!r}")
        mask[key + 1:, key] = False
    return mask


@torch.inference_mode()
def remove_sink(model: LanguageModel, prompt: str, max_new_tokens: int = 20, keys: Sequence[int] = (0,),
                top_k: int = TOP_TOKENS) -> SinkSwitch:
    """The next-token distribution after `prompt` and its greedy continuation, with every head seeing all the keys
    and with `keys` (by default the first token) hidden from every later query (`sink_mask`)."""
    top_k = check_count(top_k, "top_k", 1, 50)
    ids = model.encode(prompt, max_new_tokens)
    if len(ids) < 2:
        raise ValueError("the prompt is one token: it has nothing to attend to but itself, so there is no sink to "
                         "remove; type a longer prompt")
    outside = [k for k in keys if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < len(ids)]
    if outside:
        raise ValueError(f"a hidden key must be a prompt position from 0 to {len(ids) - 1}, got {outside[0]!r}")
    mask = sink_mask(len(ids) + max_new_tokens, keys).to(model.device)
    before = torch.log_softmax(model.forced_pass(ids).logits[0, -1].float(), dim=-1)
    after = torch.log_softmax(model.forced_pass(ids, key_mask=mask[:len(ids), :len(ids)]).logits[0, -1].float(),
                              dim=-1)
    kl, top_intact, top_switched = compared(model.tokenizer.piece, before, after, top_k)
    intact = model.continue_ids(ids, max_new_tokens)
    switched = model.continue_with_key_mask(ids, max_new_tokens, mask)
    return SinkSwitch(model.tokenizer.pieces(ids), sorted(set(keys)), kl,
                      float(0.5 * (before.exp() - after.exp()).abs().sum()), top_intact, top_switched,
                      model.tokenizer.decode(intact), model.tokenizer.decode(switched), intact, switched)


def top_tokens(name: Callable[[int], str], first: torch.Tensor, second: torch.Tensor, top_k: int) -> list[NextToken]:
    """The `top_k` tokens of the probabilities `first` ``(vocab,)`` (each written by `name`), with their
    probability in `second`."""
    chosen = first.topk(min(top_k, first.shape[-1])).indices.tolist()
    return [NextToken(name(i), i, float(first[i]), float(second[i])) for i in chosen]


def compared(name: Callable[[int], str], before: torch.Tensor, after: torch.Tensor, top_k: int
             ) -> tuple[float, list[NextToken], list[NextToken]]:
    """Two log-probability vectors ``(vocab,)`` of one prediction, intact and switched: KL(intact || switched) in
    nats, and each one's top tokens with their probability in the other."""
    p, q = before.exp(), after.exp()
    return float((p * (before - after)).sum()), top_tokens(name, p, q, top_k), top_tokens(name, q, p, top_k)


@dataclass(frozen=True)
class HeavyToken:
    """A token other than the first that draws more than the threshold's share in some heads.

    :ivar position: its 0-based position
    :ivar token: its text
    :ivar heads: in how many heads (all layers) its share exceeds the threshold
    :ivar head_share: that count over every head of the model (Gu et al.'s Sink_k^ε)
    :ivar top_share: its largest share in any head
    :ivar top_layer: the layer of that head
    :ivar top_head: that head
    """

    position: int
    token: str
    heads: int
    head_share: float
    top_share: float
    top_layer: int
    top_head: int


@dataclass(frozen=True)
class SinkShares:
    """Each head's attention share on every key of one text.

    :ivar tokens: the text's tokens
    :ivar shares: ``(layers, heads, n)`` each key's share (see `key_shares`; NaN where no later query sees it)
    :ivar threshold: the share above which a token is heavy in a head
    :ivar heavy: the tokens other than the first that are heavy in some head, most heads first
    """

    tokens: list[str]
    shares: np.ndarray
    threshold: float
    heavy: list[HeavyToken]

    @property
    def first_token(self) -> np.ndarray:
        """``(layers, heads)`` the mean weight on the first token over the queries after it."""
        return self.shares[:, :, 0]

    @property
    def sink_rate(self) -> float:
        """The share of heads whose first-token share exceeds the threshold (Gu et al.'s Sink_1^ε)."""
        return float((np.nan_to_num(self.first_token) > self.threshold).mean())

    def head(self, layer: int, head: int) -> np.ndarray:
        """``(n,)`` one head's share on each key; one line for a layer or head outside the model (0-based)."""
        layers, heads = self.shares.shape[:2]
        layer = check_int("layer", layer, 0, layers - 1, error=ValueError,
                          message=f"layer must be an integer from 0 to {layers - 1}, got {layer!r}")
        head = check_int("head", head, 0, heads - 1, error=ValueError,
                         message=f"head must be an integer from 0 to {heads - 1}, got {head!r}")
        return self.shares[layer, head]


@dataclass(frozen=True)
class NextToken:
    """A next-token candidate: its display label (the tokenizer's `piece`), id and probability with and without the
    switch (`first`: the side the list is ordered by)."""

    token: str
    id: int
    first: float
    second: float


@dataclass(frozen=True)
class SinkSwitch:
    """What hiding the sink changes after a prompt.

    :ivar tokens: the prompt's tokens (display labels, as a trace's)
    :ivar hidden: the 0-based positions hidden from every later query
    :ivar kl: KL(intact || switched) of the next-token distributions, in nats
    :ivar total_variation: half the L1 distance between them
    :ivar top_intact: the intact model's top tokens (`NextToken.first`: intact, `second`: switched)
    :ivar top_switched: the switched model's top tokens (`first`: switched, `second`: intact)
    :ivar continuation: the intact greedy continuation
    :ivar continuation_switched: the greedy continuation with the keys hidden
    :ivar ids: the intact continuation's ids
    :ivar ids_switched: the switched continuation's ids
    """

    tokens: list[str]
    hidden: list[int]
    kl: float
    total_variation: float
    top_intact: list[NextToken]
    top_switched: list[NextToken]
    continuation: str
    continuation_switched: str
    ids: list[int]
    ids_switched: list[int]
