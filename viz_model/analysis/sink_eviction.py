"""Sink eviction, StreamingLLM's Table 1 on the loaded model (Xiao et al. 2023, "Efficient Streaming Language Models
with Attention Sinks"): the perplexity of a long text when each query sees only a window of W keys, the first n
tokens kept (the sinks) and the most recent W - n (itself included), against the full context.

Two rules place the kept keys. "cache" is StreamingLLM's: token by token, the evicted cache re-indexed, every key at
its place in the cache (sinks 0 .. n - 1, then the recent keys, the new token last), as their ``pos_shift`` attention
rotates keys kept unrotated; here the kept keys are turned from where they were rotated to that place, which is the
same rotation (ALiBi's bias reads the same places; a table of positions added to the input cannot be moved, so a
GPT-2 is refused this rule). "text" keeps each token at its position in the text: then an evicted cache equals one
masked pass (`eviction_mask`, True = may attend), since a kept token's keys and values were computed under the same
mask.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..kinds.language_model import INPUT_POSITIONS, LanguageModel
from ..nn.devices import one_thread
from ..nn.kv_window import appended_last, kept_keys
from .token_loss import token_losses

KEPT = (0, 1, 2, 4, 8)  # StreamingLLM's Table 1 keeps 0 or 4; these show the curve between
RULES = ("cache", "text")
PAPER = {"model": "Llama-2-13B", "text": "PG19 (concatenated books, 65K tokens)", "window": 1024,
         "perplexity": {0: 5158.07, 4: 5.40}}  # StreamingLLM's Table 1: 0 + 1024 and 4 + 1020
Progress = Callable[[int, int], None]  # (steps done, steps in all)


@dataclass
class Eviction:
    """Each prediction's loss (nats) under the full context and under each kept count's window.

    :ivar window: the keys each query sees (kept tokens and recent ones, itself included)
    :ivar rule: where the kept keys sit: "cache" (StreamingLLM's) or "text"
    :ivar full: ``(tokens - 1,)`` the loss of token t + 1 read at position t, every earlier token visible
    :ivar kept: kept count -> ``(tokens - 1,)`` its losses
    """

    window: int
    rule: str
    full: np.ndarray
    kept: dict[int, np.ndarray]

    def perplexities(self) -> dict[str, float]:
        """exp(mean loss) of the full context ("full") and of each kept count (its number as text)."""
        rows = {"full": self.full, **{str(n): losses for n, losses in self.kept.items()}}
        return {name: float(np.exp(losses.mean())) for name, losses in rows.items()}


def check_eviction(tokens: int, window: int, kept: Sequence[int], rule: str = "cache") -> None:
    """One line where the window cannot hold the kept tokens and one more, or the text is not longer than it."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 2:
        raise ValueError(f"the window must be a whole number of tokens from 2, got {window!r}")
    if not kept or any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in kept):
        raise ValueError(f"the kept counts must be whole numbers from 0, got {list(kept)!r}")
    if window < max(kept) + 1:
        raise ValueError(f"a window of {window} tokens cannot keep {max(kept)} initial tokens and the newest one: "
                         f"make it at least {max(kept) + 1}")
    if tokens <= window + 1:
        raise ValueError(f"the text gives {tokens} tokens, too short for a window of {window}: every prediction "
                         f"would see the whole text; give more than {window + 1} tokens or a smaller window")
    if rule not in RULES:
        raise ValueError(f"the rule must be one of {', '.join(RULES)}, got {rule!r}")


def eviction_mask(length: int, window: int, kept: int) -> torch.Tensor:
    """``(length, length)`` True where query i may attend key j: ``j <= i`` and j among the first `kept` tokens or
    the last ``window - kept`` up to i."""
    query = torch.arange(length)[:, None]
    key = torch.arange(length)[None, :]
    return (key <= query) & ((key < kept) | (key > query - (window - kept)))


def full_losses(model: LanguageModel, ids: Sequence[int], mask: torch.Tensor | None = None) -> np.ndarray:
    """The losses of one teacher-forced pass over `ids` (`mask`: keys hidden beyond the causal mask)."""
    with torch.inference_mode():
        logits = model.forced_pass(ids, key_mask=mask).logits[0, :-1]
    return token_losses(logits, ids[1:])


def streamed_losses(model: LanguageModel, ids: Sequence[int], window: int, kept: Sequence[int],
                    progress: Progress | None = None) -> dict[int, np.ndarray]:
    """Each kept count's losses by StreamingLLM's cache rule, the counts one batch: the first ``window - 1`` tokens
    in one pass (nothing evicted yet), then a token a pass (`LanguageModel.pass_after`, the cache re-indexed
    ``0 .. window - 2``), after which each row's cache drops its oldest recent key: the one after its n sinks."""
    batch, length = len(kept), len(ids)
    with torch.inference_mode():
        first = model.forced_pass(ids[:window - 1])
    losses = np.empty((batch, length - 1))
    losses[:, :window - 1] = token_losses(first.logits[0], ids[1:window])
    cache = kept_keys(first.cache, torch.arange(window - 1).expand(batch, -1))
    places = torch.arange(window - 1).expand(batch, -1)
    dropped = torch.stack([torch.cat([torch.arange(n), torch.arange(n + 1, window)]) for n in kept])
    with one_thread():  # a token a pass: a second core only adds its overhead
        for t in range(window - 1, length - 1):
            out = model.pass_after(torch.tensor([[ids[t]]] * batch), cache, places)
            losses[:, t] = token_losses(out.logits[:, -1], [ids[t + 1]] * batch)
            cache = kept_keys(appended_last(cache, out.cache), dropped)
            if progress is not None:
                progress(t - window + 2, length - window)
    return {n: losses[i] for i, n in enumerate(kept)}


def sink_eviction(model: LanguageModel, ids: Sequence[int], window: int, kept: Sequence[int] = KEPT,
                  rule: str = "cache", progress: Progress | None = None) -> Eviction:
    """`Eviction` of the text `ids` for a `window` of keys and each count in `kept`; `progress` (steps done, steps
    in all) after each pass of the cache rule."""
    ids = list(ids)
    check_eviction(len(ids), window, kept, rule)
    if rule == "cache" and model.config.positional in INPUT_POSITIONS:
        raise ValueError(f"this model adds a {model.config.positional} table of positions to its input, where a "
                         "cached token's position cannot be moved: StreamingLLM's cache rule needs RoPE or ALiBi; "
                         "use the text rule")
    full = full_losses(model, ids)
    if rule == "text":
        losses = {n: full_losses(model, ids, eviction_mask(len(ids), window, n)) for n in kept}
    else:
        losses = streamed_losses(model, ids, window, tuple(kept), progress)
    return Eviction(window, rule, full, losses)
