"""An encoder's attention sinks: each head's share on [SEP] and on [CLS] (Clark et al., 2019; Kovaleva et al.,
2019: [SEP] as a "no-op"), and the switch that hides [SEP] from every query and shows how the fill-mask predictions
move.

A share is the weight the queries put on those keys, averaged over every query (an encoder's query sees every key);
[SEP], [CLS] and the rest of the keys share each row's weight, so the three add up to 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..kinds.encoder import EncoderModel, MaskPrediction, check_top_k
from ..trace import AttentionTrace
from .encoder_head_roles import KeySets, model_key_sets, set_share
from .sinks import NextToken, compared


@dataclass(frozen=True)
class SpecialShares:
    """Each head's share on the special tokens of one text.

    :ivar tokens: the text's tokens
    :ivar sets: where [CLS] and [SEP] are
    :ivar cls: ``(layers, heads)`` the mean weight on [CLS]
    :ivar sep: ``(layers, heads)`` the mean weight on every [SEP]
    """

    tokens: list[str]
    sets: KeySets
    cls: np.ndarray
    sep: np.ndarray

    @property
    def rest(self) -> np.ndarray:
        """``(layers, heads)`` the weight on every other token."""
        return 1.0 - self.cls - self.sep


def special_shares(maps: Sequence[np.ndarray], sets: KeySets, tokens: Sequence[str]) -> SpecialShares:
    """`SpecialShares` of `maps` (per layer ``(heads, n, n)``) with the text's `sets`."""
    if not len(maps):
        raise ValueError("no attention maps: a model with at least one layer is needed")
    return SpecialShares(list(tokens), sets, np.array([set_share(w, sets.cls) for w in maps]),
                         np.array([set_share(w, sets.sep) for w in maps]))


def trace_special_shares(model: EncoderModel, trace: AttentionTrace) -> SpecialShares:
    """`special_shares` of an encoder's trace (its encoder maps over its source tokens)."""
    return special_shares(trace.encoder_attentions, model_key_sets(model, trace.source_ids), trace.source_tokens)


def hidden_keys_mask(length: int, keys: Sequence[int]) -> torch.Tensor:
    """``(length, length)`` True = may attend: each key of `keys` hidden from every query but itself (no query is
    left with nothing to see)."""
    mask = torch.ones(length, length, dtype=torch.bool)
    for key in keys:
        if isinstance(key, bool) or not isinstance(key, int) or not 0 <= key < length:
            raise ValueError(f"a hidden key must be a position from 0 to {length - 1}, got {key!r}")
        mask[:, key] = False
        mask[key, key] = True
    return mask


@dataclass(frozen=True)
class MaskSwitch:
    """One mask token's predictions with every key seen and with the keys hidden.

    :ivar intact: the intact model's prediction
    :ivar switched: the prediction with the keys hidden
    :ivar kl: KL(intact || switched) of the two distributions over the vocabulary, in nats
    :ivar top_intact: the intact top tokens (`NextToken.first`: intact, `second`: switched)
    :ivar top_switched: the switched top tokens (`first`: switched, `second`: intact)
    """

    intact: MaskPrediction
    switched: MaskPrediction
    kl: float
    top_intact: list[NextToken]
    top_switched: list[NextToken]

    @property
    def changed(self) -> bool:
        """Whether the most probable token changed."""
        return self.intact.ids[0] != self.switched.ids[0]


@dataclass(frozen=True)
class SepSwitch:
    """What hiding [SEP] changes in a text's fill-mask predictions.

    :ivar tokens: the text's tokens
    :ivar hidden: the positions hidden ([SEP] and any later special token)
    :ivar masks: per mask token, in order, its `MaskSwitch`
    """

    tokens: list[str]
    hidden: list[int]
    masks: list[MaskSwitch]


@torch.inference_mode()
def hide_sep(model: EncoderModel, text: str, top_k: int = 5, text_pair: str | None = None) -> SepSwitch:
    """The fill-mask predictions of `text` (and `text_pair`) with every key seen and with every [SEP] hidden from
    every query but itself (each layer's mask gains those columns; the weights are not edited); one line where the
    text has no mask token or no [SEP]."""
    top_k = check_top_k(top_k)
    encoded = model.encoded(text, text_pair)
    positions = model.mask_positions(encoded.ids)
    if not positions:
        raise ValueError(f"the text has no mask token: write {model.mask_token} where the model should fill in a word")
    hidden = model_key_sets(model, encoded.ids).sep
    if not hidden:
        raise ValueError("this model's tokenizer puts no [SEP] (no special token after the first) in the text: "
                         "there is nothing to hide")
    mask = hidden_keys_mask(len(encoded.ids), hidden).to(model.device)
    before = model.forced_pass(encoded.ids, encoded.type_ids).logits[0]
    after = model.forced_pass(encoded.ids, encoded.type_ids, key_mask=mask).logits[0]
    switches = []
    for intact, switched in zip(model.predictions(before, positions, top_k),
                                model.predictions(after, positions, top_k)):
        p, q = (torch.log_softmax(logits[intact.position].float(), dim=-1) for logits in (before, after))
        switches.append(MaskSwitch(intact, switched, *compared(model.tokenizer.token_text, p, q, top_k)))
    return SepSwitch(model.tokenizer.pieces(encoded.ids), hidden, switches)
