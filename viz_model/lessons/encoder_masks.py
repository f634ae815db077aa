"""What the Masks page shows of an encoder-only model: a batch of texts padded to one length and read in one pass
with the padding mask (`padded_batch`), and the band of keys each windowed layer lets a query see (`layer_bands`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..kinds.encoder import EncoderModel
from ..nn.encoder_lm import band_mask


@dataclass
class PaddedBatch:
    """A batch of texts as an encoder reads them together: padded on the right with the pad token.

    :ivar tokens: per text, its pieces and then the pad's
    :ivar real: ``(batch, len)`` True = a real token, False = a pad (its key masked)
    :ivar weights: per layer, ``(batch, heads, len, len)`` the weights of the padded pass
    """

    tokens: list[list[str]]
    real: np.ndarray
    weights: list[np.ndarray]

    def pad_weight(self) -> float:
        """The largest weight any query of any layer and head puts on a pad key (0 where the mask works)."""
        hidden = ~self.real[:, None, None, :]
        return max(float(np.abs(np.where(hidden, layer, 0.0)).max()) for layer in self.weights)

    def difference(self, row: int, alone: Sequence[np.ndarray]) -> float:
        """The largest difference between text `row`'s real tokens' weights in the batch and its maps read alone
        (`alone`: per layer ``(heads, n, n)``): padding with its mask changes nothing."""
        n = int(self.real[row].sum())
        return max(float(np.abs(layer[row, :, :n, :n] - own).max()) for layer, own in zip(self.weights, alone))


@torch.inference_mode()
def padded_batch(model: EncoderModel, texts: Sequence[str], pairs: Sequence[str | None] | None = None
                 ) -> PaddedBatch:
    """`texts` (each with its second sentence of `pairs`, None: none; each as `EncoderModel.encoded` checks it) padded
    on the right to the longest and read in one pass with the padding mask and their token types; every layer's
    weights."""
    encoded = [model.encoded(text, pair) for text, pair in zip(texts, pairs or [None] * len(texts))]
    length = max(len(e.ids) for e in encoded)
    pad = model.config.pad_id
    ids = torch.full((len(encoded), length), pad, dtype=torch.long)
    types = torch.zeros_like(ids)
    real = torch.zeros_like(ids, dtype=torch.bool)
    for row, e in enumerate(encoded):
        ids[row, :len(e.ids)] = torch.tensor(e.ids)
        types[row, :len(e.ids)] = torch.tensor(e.type_ids)
        real[row, :len(e.ids)] = True
    device = model.device
    out = model.network(ids.to(device), types.to(device), need_weights=True, mask=real.to(device)[:, None, None, :])
    return PaddedBatch([model.pieces(row) for row in ids.tolist()], real.numpy(),
                       [weights.float().cpu().numpy() for weights in out.attentions])


def layer_bands(model: EncoderModel, length: int) -> list[np.ndarray | None]:
    """Per layer, ``(length, length)`` the keys a query may see in a windowed layer (within the window's radius on
    either side, ModernBERT's local layers), None in a layer that sees every key."""
    cfg = model.config
    if cfg.window_radius is None:
        return [None] * cfg.encoder_layers
    band = band_mask(length, cfg.window_radius, torch.device("cpu"))[0, 0].numpy()
    return [band if i in cfg.windowed_layers else None for i in range(cfg.encoder_layers)]
