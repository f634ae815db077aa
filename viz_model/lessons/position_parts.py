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
from ..nn.arrays import to_numpy
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
    return to_numpy(table.embedding.weight)


def model_offset_part(network: Transformer, stack: str, length: int) -> np.ndarray:
    """``(heads, length, length)``: what the loaded model adds to its `stack`'s self-attention scores between query p
    and key j, whatever the tokens (ALiBi's penalty, T5's learned bias); RoPE and the input schemes have none that is
    independent of the tokens (see `model_position_part`)."""
    _check_length(length, high=network.config.max_positions)
    scheme = network.score_scheme(SIDES[_stack(stack)])
    if scheme is None or not scheme.adds_bias:
        raise LessonError(f"{network.config.positional} positions add no token-independent part to the scores; "
                          "split a sentence's scores instead")
    positions = torch.arange(length, device=network.src_embedding.weight.device)[None]
    with torch.no_grad():
        bias = scheme.score_position(positions, positions, False).bias
    return to_numpy(bias[0])


@dataclass
class ModelPositionPart:
    """The loaded model's own positional part of one stack's first-layer scores, or what can be given of it.

    :ivar part: ``(heads, len, len)`` per head, or ``(1, len, len)`` where the part is not a head's
    :ivar what: what the heatmaps show, a few words
    :ivar note: one line: how it was computed, or why the part itself cannot be given and what is shown instead
    :ivar exact: False where the four-way split cannot be given and `part` is what can be shown instead
    """

    part: np.ndarray
    what: str
    note: str
    exact: bool = True


def model_position_part(network: Transformer, stack: str, length: int, source_ids: list[int] | None = None,
                        target_ids: list[int] | None = None) -> ModelPositionPart:
    """What position adds to the first layer of the `stack`'s self-attention scores, per head, for positions
    0 .. length-1: ALiBi's penalty and T5's bias (the same for any tokens); the position·position part
    ``(P W_Q)(P W_K)ᵀ/√d_k`` of the sinusoids or a learned table (post-norm, no norm on the embeddings); RoPE's
    rotation part ``q·R(j−p)k − q·k`` on a sentence (the ids, needed for RoPE only; `length` is then the
    sentence's). Pre-norm or normed embeddings: the model's own table's ``PE(p)·PE(j)/√d_model``, `exact` False."""
    _stack(stack)
    cfg, side = network.config, SIDES[stack]
    scheme = network.score_scheme(side)
    if scheme is not None and scheme.adds_bias:
        return ModelPositionPart(model_offset_part(network, stack, length), f"its {cfg.positional} bias on the scores",
                                 "Added to every layer's scores, the same for any tokens.")
    if scheme is not None:
        if source_ids is None or target_ids is None:
            raise LessonError("RoPE's part of the scores depends on the tokens: give a sentence's source and "
                              "target ids")
        device = network.src_embedding.weight.device
        with torch.no_grad():
            out = network(torch.tensor([source_ids], device=device), torch.tensor([target_ids], device=device),
                          need_weights=True)
            record = (out.encoder_records if stack == "encoder" else out.decoder_records)[0]
            q, k, scale = _unpositioned_queries_keys(network, record.residual, stack, 0)
        return ModelPositionPart(rotation_part(q, k, scheme.base, scale),
                                 "the rotation's part of layer 1's scores on this sentence", "q·R(j−p)k − q·k: what "
                                 "rotating this sentence's queries and keys adds to layer 1's scores (it depends on "
                                 "the tokens).")
    _check_length(length, high=cfg.max_positions)
    with torch.no_grad():
        positions = network.positional_encodings(length, side).double()
        if cfg.norm != "post" or cfg.embedding_norm:
            why = ("it is pre-norm: layer 1 reads LayerNorm(token + position)" if cfg.norm != "post" else
                   "its embeddings are normed after the positions are added (BART's layernorm_embedding)")
            return ModelPositionPart((positions @ positions.T / math.sqrt(cfg.d_model))[None].cpu().numpy(),
                                     "its own position vectors, PE(p)·PE(j)/√d_model",
                                     f"No head's position·position part can be given: {why}, which mixes token and "
                                     "position; shown: its own position vectors' PE(p)·PE(j)/√d_model, before any "
                                     "norm or projection.", exact=False)
        attention = network.attention_block(stack, 0)[0]
        q = attention.split_heads(positions[None] @ attention.w_q.weight.double().T)[0]
        k = attention.split_heads(positions[None] @ attention.w_k.weight.double().T)[0]
        scale = math.sqrt(attention.d_head) if attention.scale else 1.0
    return ModelPositionPart((q @ k.transpose(-1, -2) / scale).cpu().numpy(),
                             "the position·position part of layer 1's scores",
                             "(P W_Q)(P W_K)ᵀ/√d_k: what position alone adds to layer 1's scores, whatever the tokens "
                             "(the two cross terms depend on them).")


def _stack(stack: str) -> str:
    if stack not in SIDES:
        raise LessonError(f"stack must be encoder or decoder, got {stack!r}")
    return stack


# --- why did this head look there --------------------------------------------------------------------------------
@dataclass
class ScoreSplit:
    """One head's scores ``(query, key)`` in one layer split into parts computed apart from them (`score`: what the
    softmax saw before masking, as the model's own record holds it); `adds_up` checks that the parts sum to it.

    :ivar score: the head's scores, as the model's record has them
    :ivar parts: name -> ``(query, key)`` part, each computed from the layer's input and weights, not from `score`
    :ivar note: how the split was made, in one line
    :ivar tolerance: the largest difference between the parts' sum and `score` that rounding explains, relative to
        the largest score (at least 1)
    """

    score: np.ndarray
    parts: dict[str, np.ndarray]
    note: str
    tolerance: float = 1e-4

    @property
    def residual(self) -> float:
        """The largest difference between the parts' sum and the score."""
        return float(np.abs(sum(self.parts.values()) - self.score).max())

    @property
    def adds_up(self) -> bool:
        """Whether the parts sum to the model's scores up to float rounding."""
        return self.residual <= self.tolerance * max(1.0, float(np.abs(self.score).max()))


def split_scores(network: Transformer, source_ids: list[int], target_ids: list[int], stack: str, layer: int,
                 head: int) -> ScoreSplit:
    """The scores of `head` in `layer` (0-based) of the `stack`'s self-attention on one sentence pair (target ids: the
    decoder's input), split into what content and position contribute.

    Each part is computed from the layer's input and weights, not from the score, so `ScoreSplit.adds_up` checks
    the split against the forward. Additive input schemes (first layer of a post-norm model only, where the input is
    exactly token + position): content·content, content·position, position·content, position·position (biases
    counted with content). ALiBi and the relative bias (any layer): content (q·k of the queries and keys without
    position) and the bias of the scheme's own module. RoPE (any layer): content and ``q·R(j−p)k − q·k``."""
    _stack(stack)
    cfg = network.config
    layers = cfg.encoder_layers if stack == "encoder" else cfg.decoder_layers
    check_int("layer", layer, 0, layers - 1, error=LessonError,
              message=f"layer must be in [0, {layers - 1}], got {layer!r}")
    check_int("head", head, 0, cfg.heads - 1, error=LessonError,
              message=f"head must be in [0, {cfg.heads - 1}], got {head!r}")
    device = network.src_embedding.weight.device
    src, tgt = torch.tensor([source_ids], device=device), torch.tensor([target_ids], device=device)
    tolerance = 1e-4 if network.src_embedding.weight.dtype in (torch.float32, torch.float64) else 2e-2
    with torch.no_grad():
        out = network(src, tgt, need_weights=True)
        record = (out.encoder_records if stack == "encoder" else out.decoder_records)[layer]
        score = to_numpy(record.scores[0, head])
        scheme = network.score_scheme(SIDES[stack])
        if scheme is not None:
            q, k, scale = _unpositioned_queries_keys(network, record.residual, stack, layer)
            content = (q[head] @ k[head].T / scale).cpu().numpy()
            if scheme.adds_bias:
                name, note = "position bias", f"{cfg.positional}: q·k of the tokens' vectors, plus the scheme's bias"
                part = model_offset_part(network, stack, score.shape[0])[head]
            else:
                name, note = "rotation", "RoPE: q·k of the unrotated queries and keys, and q·R(j−p)k − q·k"
                part = rotation_part(q[head:head + 1], k[head:head + 1], scheme.base, scale)[0]
            return ScoreSplit(score, {"content": content, name: part}, note, tolerance)
        if layer != 0 or cfg.norm != "post" or cfg.embedding_norm:
            raise LessonError("with positions added to the input, content and position can be told apart only in "
                              "the first layer of a post-norm model without a norm on its embeddings (later layers, "
                              "pre-norm and BART's embedding norm mix them)")
        parts = _input_split(network, src if stack == "encoder" else tgt, SIDES[stack], stack, head)
    return ScoreSplit(score, parts, "first layer: the input is token + position, so q and k split into two parts each",
                      tolerance)


def _unpositioned_queries_keys(network: Transformer, entering: torch.Tensor, stack: str,
                               layer: int) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Every head's queries and keys ``(heads, len, d_head)`` (float64) of one self-attention layer, projected from
    the stream `entering` it ``(1, len, d_model)`` without any rotation, and the scores' divisor."""
    attention, residual = network.attention_block(stack, layer)
    h = residual.enter(entering)
    q = attention.split_heads(attention.w_q(h))[0].double()
    k = attention.split_heads(attention.w_k(h))[0].double()
    return q, k, math.sqrt(attention.d_head) if attention.scale else 1.0


def rotation_part(q: torch.Tensor, k: torch.Tensor, base: float, scale: float = 1.0,
                  frequencies: torch.Tensor | None = None, magnitude: float = 1.0) -> np.ndarray:
    """``(heads, len, len)``: ``(m q_p · R((j−p)θ) k_j − q_p · k_j) / scale`` for unrotated queries and keys ``(heads,
    len, d_head)``: what RoPE's rotation adds to the scores (Llama's pairing: dimension i turns with i + d_head/2);
    `frequencies`: the ``theta_i`` in place of `base`'s (a scaled RoPE's); `magnitude` m: YaRN's attention factor
    squared (cos and sin of both queries and keys scaled), else 1."""
    d_head, length = q.shape[-1], q.shape[-2]
    q, k = q.double(), k.double()
    positions = torch.arange(length, dtype=torch.float64, device=q.device)
    theta = rope_frequencies(d_head, base) if frequencies is None else torch.as_tensor(frequencies)
    frequencies = torch.cat([theta] * 2).to(q.device, torch.float64)
    quarter = torch.cat((-k[..., d_head // 2:], k[..., :d_head // 2]), -1)  # every pair of every key turned 90°
    rows = []
    for start in range(0, length, 32):  # 32 queries at a time: (heads, 32, len, d_head) at most
        angles = (positions[None, :] - positions[start:start + 32, None])[..., None] * frequencies  # (j − p)·θ_i
        turned = k[:, None] * angles.cos() + quarter[:, None] * angles.sin()  # key j turned by (j − p)·θ, per p
        rows.append((q[:, start:start + 32, None, :] * turned).sum(-1))
    return ((magnitude * torch.cat(rows, 1) - q @ k.transpose(-1, -2)) / scale).cpu().numpy()


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
    return {f"{a}·{b}": to_numpy(q[a] @ k[b].T / scale) for a in q for b in k}
