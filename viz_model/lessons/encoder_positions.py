"""An encoder-only model's positions in its own scheme (the Positional encoding page): the learned table (BERT's rows
from 0, RoBERTa's from the pad id + 1 on) and the rows a text reads, ModernBERT's two RoPE bases, and
DeBERTa's log buckets with its three terms of a real head, which add up to the scores the model computed."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..kinds.encoder import EncoderModel
from ..nn.arrays import to_numpy
from ..nn.disentangled import log_bucket_position
from ..nn.rotary import rope_frequencies
from .position_parts import LessonError


def learned_rows(model: EncoderModel) -> np.ndarray:
    """``(rows, width)`` float64: the table of positions the model adds to each token's embedding."""
    table = model.network.positions
    if table is None:
        raise LessonError(f"this model's positions are {model.config.positional}: it adds no table of positions to "
                          "its input")
    return to_numpy(table.weight).astype(np.float64)


def rows_read(model: EncoderModel, ids: list[int]) -> list[int]:
    """The row of the table each of `ids` reads: 0, 1, 2, ... (BERT), or from the pad id + 1 on (RoBERTa)."""
    return model.network.position_ids(torch.tensor([ids])).tolist()[0]


def rope_wavelengths(model: EncoderModel) -> dict[str, np.ndarray]:
    """Each frequency pair's wavelength ``2π / θ_i`` (positions for one turn) in the layers that see every key
    ("global", the config's rope base) and, where the model has them, in its local layers ("local", their own
    base)."""
    config = model.config
    if config.positional != "rope":
        raise LessonError(f"this model's positions are {config.positional}, not RoPE: it has no bases to show")
    bases = {"global": config.rope_base}
    if config.windowed_layers:
        bases["local"] = config.windowed_rope_base or config.rope_base
    return {name: 2 * math.pi / rope_frequencies(config.d_head, base).double().numpy() for name, base in bases.items()}


def buckets(model: EncoderModel, distance: int) -> tuple[np.ndarray, np.ndarray]:
    """The relative positions i − j from −`distance` to `distance` and DeBERTa's bucket of each (kept as they are
    up to half the buckets, log-spaced beyond; the offsets themselves where the model has no buckets)."""
    config = model.config
    if config.positional != "disentangled":
        raise LessonError(f"this model's positions are {config.positional}, not DeBERTa's relative ones")
    offsets = torch.arange(-distance, distance + 1)
    found = (log_bucket_position(offsets, config.position_buckets, config.max_relative_positions)
             if config.position_buckets > 0 else offsets)
    return offsets.numpy(), found.numpy()


@dataclass
class DisentangledSplit:
    """One DeBERTa head's scores on a text split into its three terms, each already divided by the scale.

    :ivar scores: ``(n, n)`` the scores the model's softmax read (its record)
    :ivar terms: "c2c" (content to content, q·k), "c2p" (content to position, q·Kr[δ]), "p2c" (position to
        content, k·Qr[δ]) -> ``(n, n)``; zeros for a term the model does not compute
    :ivar relative: ``(n, n)`` the bucketed relative position δ(i, j) each pair reads
    :ivar weights: ``(n, n)`` the head's attention weights (the softmax of `scores`)
    """

    scores: np.ndarray
    terms: dict[str, np.ndarray]
    relative: np.ndarray
    weights: np.ndarray

    @property
    def residual(self) -> float:
        """The largest difference between the three terms' sum and the scores."""
        return float(np.abs(sum(self.terms.values()) - self.scores).max())


@torch.inference_mode()
def disentangled_split(model: EncoderModel, text: str, text_pair: str | None, layer: int, head: int
                       ) -> DisentangledSplit:
    """Head `head` of layer `layer` (0-based) of a DeBERTa model on `text` (and `text_pair`), its scores split into
    the three terms its forward computed."""
    if model.config.positional != "disentangled":
        raise LessonError(f"this model's positions are {model.config.positional}, not DeBERTa's disentangled ones")
    encoded = model.encoded(text, text_pair)
    out = model.forced_pass(encoded.ids, encoded.type_ids, need_weights=True)
    record = out.records[layer]
    terms = {"c2c": record.content, "c2p": record.content_to_position, "p2c": record.position_to_content}
    relative = model.network.relative(len(encoded.ids)).relative
    return DisentangledSplit(to_numpy(record.scores[0, head]).astype(np.float64),
                             {name: to_numpy(term[0, head]).astype(np.float64) for name, term in terms.items()},
                             to_numpy(relative), to_numpy(record.weights[0, head]).astype(np.float64))
