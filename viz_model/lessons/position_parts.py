"""What the Positional encoding page computes for each scheme (plain functions, no Streamlit): where position
enters, the positional part of a score as a function of the query and key positions, RoPE's angles and the decay
of q·k with distance, ALiBi's slopes, T5's buckets and learned values, and one head's scores split into what
content and position contribute, with numbers that add up to the scores the other pages show."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..config import ModelConfig
from ..config.checks import check_int
from ..config.model import POSITIONAL_KINDS
from ..nn.alibi import alibi_bias, alibi_slopes
from ..nn.model import Transformer
from ..nn.positional import sinusoidal_table
from ..nn.relative_bias import relative_position_bucket
from ..nn.rotary import rope_frequencies

WHERE_POSITION_ENTERS = {
    "sinusoidal": "added to each token's embedding at the input: fixed sinusoids",
    "learned": "added to each token's embedding at the input: one trained vector per position",
    "rope": "in every self-attention layer: queries and keys are rotated by an angle proportional to their position",
    "alibi": "in every self-attention layer: each head subtracts slope × distance from its scores",
    "relative": "in every self-attention layer: a learned number per head and distance bucket is added to the scores",
}
SIDES = {"encoder": "source", "decoder": "target"}


class LessonError(ValueError):
    """A setting of a positional lesson is out of its bounds or does not apply to the model; the message says which."""


def check_scheme(scheme: str) -> str:
    """`scheme` itself when it is a positional scheme, else one line naming the known ones."""
    if scheme not in POSITIONAL_KINDS:
        raise LessonError(f"unknown positional scheme {scheme!r}; known: {', '.join(POSITIONAL_KINDS)}")
    return scheme


def _check_length(length: int, low: int = 1, high: int = 4096) -> int:
    return check_int("length", length, low, high, error=LessonError,
                     message=f"the number of positions must be an integer in [{low}, {high}], got {length!r}")


# --- each scheme at its defaults ---------------------------------------------------------------------------------
def default_offset_part(scheme: str, length: int, heads: int = 8, d_model: int = 512) -> np.ndarray:
    """``(heads, length, length)``: the positional part of the score between query p and key j for each scheme at its
    defaults, before any training: PE(p)·PE(j)/√d_model of the sinusoids or of a freshly drawn learned table (no
    projection), RoPE's score of one all-ones query and key per head width, ALiBi's penalty, and T5's bucket index
    (its values are learned)."""
    check_scheme(scheme)
    _check_length(length)
    positions = torch.arange(length)[None]
    defaults = ModelConfig()
    if scheme == "learned":  # before training a learned table is random: no structure at all
        table = torch.randn(length, d_model, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        part = (table @ table.T / math.sqrt(d_model) / d_model).numpy()  # rows drawn N(0, 1/d_model)
        return np.broadcast_to(part, (heads, length, length)).copy()
    if scheme == "sinusoidal":
        table = sinusoidal_table(length, d_model, dtype=torch.float64).numpy()
        part = table @ table.T / math.sqrt(d_model)
        return np.broadcast_to(part, (heads, length, length)).copy()
    if scheme == "rope":
        decay = rope_decay(d_model // heads, defaults.rope_base, length)
        offsets = np.abs(np.arange(length)[:, None] - np.arange(length)[None, :])
        return np.broadcast_to(decay[offsets], (heads, length, length)).copy()
    if scheme == "alibi":
        return alibi_bias(positions, positions, alibi_slopes(heads, defaults.alibi_max_bias))[0].numpy()
    buckets = relative_position_bucket(positions[0][None, :] - positions[0][:, None], True, defaults.relative_buckets,
                                       defaults.relative_max_distance)
    return np.broadcast_to(buckets.numpy(), (heads, length, length)).astype(float)


def rope_angles_table(positions: int, d_head: int, base: float = 10000.0) -> np.ndarray:
    """``(positions, d_head/2)``: the angle (radians, modulo 2π) each frequency pair of a head is turned by at each
    position: ``p · base^(-2i/d_head)``."""
    _check_length(positions)
    return np.mod(np.arange(positions)[:, None] * rope_frequencies(d_head, base).double().numpy()[None, :],
                  2 * math.pi)


def rope_wavelengths(d_head: int, base: float = 10000.0) -> np.ndarray:
    """The positions each pair takes to turn once, ``2π · base^(2i/d_head)``."""
    return 2 * math.pi / rope_frequencies(d_head, base).double().numpy()


def rope_decay(d_head: int, base: float, length: int) -> np.ndarray:
    """q·k at distances 0 .. length-1 for an all-ones query and key (RoFormer's long-term decay), scaled by 1/√d_head
    as the scores are: ``(2/√d) · Σ_i cos(distance · θ_i)``."""
    _check_length(length)
    angles = np.arange(length)[:, None] * rope_frequencies(d_head, base).double().numpy()[None, :]
    return 2 * np.cos(angles).sum(axis=1) / math.sqrt(d_head)


def relative_buckets_by_offset(config: ModelConfig, max_offset: int) -> dict[str, np.ndarray]:
    """T5's bucket of every offset key − query in −max_offset .. max_offset, for the encoder (both directions) and
    the decoder (earlier keys only)."""
    _check_length(max_offset)
    offsets = torch.arange(-max_offset, max_offset + 1)
    return {"offset": offsets.numpy(),
            **{stack: relative_position_bucket(offsets, stack == "encoder", config.relative_buckets,
                                               config.relative_max_distance).numpy()
               for stack in ("encoder", "decoder")}}


def relative_values(network: Transformer, stack: str) -> np.ndarray:
    """The learned ``(buckets, heads)`` values of a relative-bias model's encoder or decoder."""
    table = network.encoder_position_bias if stack == "encoder" else network.decoder_position_bias
    if table is None:
        raise LessonError(f"this model's positions are {network.config.positional}: it has no relative bias table")
    return table.embedding.weight.detach().float().cpu().numpy()


def model_offset_part(network: Transformer, stack: str, length: int) -> np.ndarray:
    """``(heads, length, length)``: what the loaded model adds to its `stack`'s self-attention scores between query p
    and key j, whatever the tokens (ALiBi's penalty, T5's learned bias); RoPE and the input schemes have none that is
    independent of the tokens (see `split_scores`)."""
    _check_length(length, high=network.config.max_positions)
    scheme = network.score_scheme(SIDES[_stack(stack)])
    if scheme is None or not scheme.adds_bias:
        raise LessonError(f"{network.config.positional} positions add no token-independent part to the scores; "
                          "split a sentence's scores instead")
    positions = torch.arange(length, device=network.src_embedding.weight.device)[None]
    with torch.no_grad():
        bias = scheme.score_position(positions, positions, False).bias
    return bias[0].float().cpu().numpy()


def _stack(stack: str) -> str:
    if stack not in SIDES:
        raise LessonError(f"stack must be encoder or decoder, got {stack!r}")
    return stack


# --- why did this head look there --------------------------------------------------------------------------------
@dataclass
class ScoreSplit:
    """One head's scores ``(query, key)`` in one layer split into parts that add up to `score` (what the softmax sees
    before masking, as the other pages' records hold).

    :ivar score: the head's scores, as the model's record has them
    :ivar parts: name -> ``(query, key)`` part; their sum is `score`
    :ivar note: how the split was made, in one line
    """

    score: np.ndarray
    parts: dict[str, np.ndarray]
    note: str

    @property
    def residual(self) -> float:
        """The largest difference between the parts' sum and the score (float rounding only)."""
        return float(np.abs(sum(self.parts.values()) - self.score).max())


def split_scores(network: Transformer, source_ids: list[int], target_ids: list[int], stack: str, layer: int,
                 head: int) -> ScoreSplit:
    """The scores of `head` in `layer` (0-based) of the `stack`'s self-attention on one sentence pair (target ids: the
    decoder's input), split into what content and position contribute.

    Additive input schemes (first layer of a post-norm model only, where the input is exactly token + position):
    content·content, content·position, position·content, position·position (biases counted with content). ALiBi and
    the relative bias (any layer): content (q·k) and the bias. RoPE (any layer): the scores without the rotation
    and what the rotation adds."""
    _stack(stack)
    cfg = network.config
    layers = cfg.encoder_layers if stack == "encoder" else cfg.decoder_layers
    check_int("layer", layer, 0, layers - 1, error=LessonError,
              message=f"layer must be in [0, {layers - 1}], got {layer!r}")
    check_int("head", head, 0, cfg.heads - 1, error=LessonError,
              message=f"head must be in [0, {cfg.heads - 1}], got {head!r}")
    device = network.src_embedding.weight.device
    src, tgt = torch.tensor([source_ids], device=device), torch.tensor([target_ids], device=device)
    with torch.no_grad():
        out = network(src, tgt, need_weights=True)
        record = (out.encoder_records if stack == "encoder" else out.decoder_records)[layer]
        score = record.scores[0, head].float().cpu().numpy()
        if record.position_bias is not None:
            part = record.position_bias.expand_as(record.scores)[0, head].float().cpu().numpy()
            name = "rotation" if cfg.positional == "rope" else "position bias"
            note = ("RoPE: the scores of the unrotated queries and keys, and what rotating them adds"
                    if cfg.positional == "rope" else f"{cfg.positional}: q·k of the tokens' vectors, plus the bias")
            return ScoreSplit(score, {"content": score - part, name: part}, note)
        if layer != 0 or cfg.norm != "post" or cfg.embedding_norm:
            raise LessonError("with positions added to the input, content and position can be told apart only in "
                              "the first layer of a post-norm model without a norm on its embeddings (later layers, "
                              "pre-norm and BART's embedding norm mix them)")
        parts = _input_split(network, src if stack == "encoder" else tgt, SIDES[stack], stack, head)
    return ScoreSplit(score, parts, "first layer: the input is token + position, so q and k split into two parts each")


def _input_split(network: Transformer, ids: torch.Tensor, side: str, stack: str, head: int) -> dict[str, np.ndarray]:
    """The four products of (token, position) queries and keys of one head of the first layer."""
    attention = network.attention_block(stack, 0)[0]
    tokens = network.token_embeddings(ids, side)[0]
    positions = network.positional_encodings(ids.shape[1], side)
    rows = slice(head * attention.d_head, (head + 1) * attention.d_head)

    def project(linear: torch.nn.Module, x: torch.Tensor, bias: bool) -> torch.Tensor:
        out = x @ linear.weight[rows].T
        return out + linear.bias[rows] if bias and linear.bias is not None else out

    q = {"content": project(attention.w_q, tokens, True), "position": project(attention.w_q, positions, False)}
    k = {"content": project(attention.w_k, tokens, True), "position": project(attention.w_k, positions, False)}
    scale = math.sqrt(attention.d_head) if attention.scale else 1.0
    return {f"{a}·{b}": (q[a] @ k[b].T / scale).float().cpu().numpy() for a in q for b in k}
