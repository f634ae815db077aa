"""RoPE in a loaded language model: its frequencies (which ones a llama3, linear, yarn or dynamic scaling
stretched), the decay of q·k with distance measured in its real heads, and how much of each head's q·k each
frequency band can carry (high frequencies: position; low ones: meaning, after Barbero et al. 2024, "Round and
Round We Go")."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..config import ModelConfig
from ..kinds.language_model import LanguageModel
from ..nn.rotary import rope_frequencies
from .position_parts import LessonError

KEPT, STRETCHED, SMOOTHED = "kept", "stretched", "between (smoothed)"
GROWN = "stretched by the grown base"  # dynamic NTK: every pair but the first, the slower the more
ILLUSTRATED = ("linear", "llama3", "yarn", "dynamic")  # the scalings drawn beside a model's own frequencies
SCALING_NAMES = {"linear": "linear", "llama3": "llama3", "yarn": "YaRN", "dynamic": "dynamic NTK"}
BANDS = ("high", "low")  # a wavelength within the trained length: position; longer: barely turns, so meaning


def check_rope(config: ModelConfig) -> None:
    """Nothing where the model rotates its queries and keys; else one line saying what it does instead."""
    if config.positional != "rope":
        raise LessonError(f"this model's positions are {config.positional}, not RoPE: it has no frequencies to show")


def trained_length(config: ModelConfig) -> int:
    """The length the frequencies were trained at before any stretching: llama3's and yarn's
    original_max_position_embeddings, dynamic's max_position_embeddings (past which its base grows), a linear
    scaling's max_position_embeddings / factor, else max_position_embeddings."""
    if config.rope_scaling in ("llama3", "yarn", "dynamic"):
        return config.rope_original_max_positions
    if config.rope_scaling == "linear":
        return max(1, round(config.max_positions / config.rope_factor))
    return config.max_positions


def shown_length(config: ModelConfig) -> int:
    """The length a dynamic scaling's frequencies are shown at: twice its trained length (its frequencies grow
    with the length a pass reaches; every other scaling's are the same at any length)."""
    return 2 * trained_length(config)


def model_frequencies(config: ModelConfig, length: int | None = None) -> np.ndarray:
    """The ``theta_i`` (float64 of the float32 the model rotates by) of the loaded model's RoPE, scaled as its
    config says (one per pair of the dimensions it turns: fewer than the head's under partial rotary); a dynamic
    scaling's for a pass of `length` tokens (None: `shown_length`)."""
    from ..nn.rope_scaling import config_frequencies

    check_rope(config)
    return config_frequencies(config, shown_length(config) if length is None else length).double().numpy()


def attention_factor(config: ModelConfig) -> float:
    """What the model's RoPE multiplies cos and sin by: YaRN's attention factor, else 1."""
    from ..nn.rope_scaling import config_attention_factor

    return config_attention_factor(config)


def frequency_table(config: ModelConfig) -> pd.DataFrame:
    """One row per frequency pair i (fast to slow): the unscaled ``base^(-2i/d_head)``, the model's own (a dynamic
    scaling's at `shown_length`), both wavelengths, the stretch (unscaled / model's), whether the scaling kept,
    stretched or smoothed it (dynamic: stretched by the grown base), and its band (wavelength within the trained
    length: high, else low)."""
    own = model_frequencies(config)
    plain = rope_frequencies(config.rope_dims or config.d_head, config.rope_base).double().numpy()
    stretch = plain / own
    changed = GROWN if config.rope_scaling == "dynamic" else SMOOTHED
    status = np.where(np.isclose(stretch, 1.0, rtol=1e-6), KEPT,
                      np.where(np.isclose(stretch, config.rope_factor, rtol=1e-6) & (changed != GROWN), STRETCHED,
                               changed))
    wavelength = 2 * math.pi / own
    return pd.DataFrame({"pair": np.arange(len(own)), "unscaled theta": plain, "theta": own,
                         "unscaled wavelength": 2 * math.pi / plain, "wavelength": wavelength, "stretch": stretch,
                         "scaling": status, "band": band_of(wavelength, trained_length(config))})


def rotation_note(config: ModelConfig) -> str:
    """How many of each head's dimensions turn: all, or under partial rotary (GPT-NeoX, Phi) their share, the rest
    carrying no position."""
    check_rope(config)
    turned = config.rope_dims or config.d_head
    if turned == config.d_head:
        return f"all {config.d_head} dimensions per head rotate"
    return (f"{turned} of {config.d_head} dimensions per head rotate ({turned / config.d_head:.0%}); the rest carry "
            "no position")


def illustrated_config(config: ModelConfig, scaling: str, factor: float) -> ModelConfig:
    """`config` with `scaling` at `factor` on its own RoPE (base, rotating dimensions), from its trained length, the
    other settings of that scaling at transformers' defaults: what the scaling would do to this model (an
    illustration: the model was not trained with it)."""
    check_rope(config)
    if scaling not in ILLUSTRATED:
        raise LessonError(f"unknown scaling {scaling!r}: choose among {', '.join(ILLUSTRATED)}")
    defaults = {f.name: f.default for f in dataclasses.fields(ModelConfig) if f.name.startswith("rope_")
                and f.name not in ("rope_base", "rope_dims")}
    return dataclasses.replace(config, **{**defaults, "rope_scaling": scaling, "rope_factor": float(factor),
                                          "rope_original_max_positions": trained_length(config)})


def illustrated_length(config: ModelConfig) -> int:
    """The length an illustrated dynamic scaling is shown at: the one its factor aims at (factor × trained)."""
    return max(trained_length(config), round(config.rope_factor * trained_length(config)))


def own_label(config: ModelConfig) -> str:
    """The legend's name of the loaded model's own wavelengths."""
    if config.rope_scaling == "default":
        return "this model (no scaling)"
    return f"this model: {SCALING_NAMES[config.rope_scaling]} ×{config.rope_factor:g}"


def scaling_comparison(config: ModelConfig, scalings: Sequence[str], factor: float) -> pd.DataFrame:
    """One row per rotating pair (fast to slow): its wavelength unscaled, in the loaded model (its own scaling; a
    dynamic one at `shown_length`), and under each of `scalings` but the model's own at `factor` (illustrations,
    from its trained length; a dynamic one at `illustrated_length`). Column names are the legend's."""
    plain = rope_frequencies(config.rope_dims or config.d_head, config.rope_base).double().numpy()
    columns = {"pair": np.arange(len(plain)), "no scaling": 2 * math.pi / plain}
    if config.rope_scaling != "default":
        columns[own_label(config)] = 2 * math.pi / model_frequencies(config)
    for scaling in (s for s in ILLUSTRATED if s in scalings and s != config.rope_scaling):
        shown = illustrated_config(config, scaling, factor)
        columns[f"{SCALING_NAMES[scaling]} ×{factor:g} (illustration)"] = \
            2 * math.pi / model_frequencies(shown, illustrated_length(shown))
    return pd.DataFrame(columns)


def without_scaling(model: LanguageModel) -> LanguageModel:
    """`model` with the scaling its config names switched off (plain RoPE at its base), in a copy
    (`LanguageModel.rescaled`: the weights shared, the loaded model and its network untouched)."""
    check_rope(model.config)
    return model.rescaled(rope_scaling="default", rope_factor=1.0)


def band_of(wavelengths: np.ndarray, length: int) -> np.ndarray:
    """"high" for a pair that turns at least once within `length` positions, else "low"."""
    return np.where(np.asarray(wavelengths) <= length, BANDS[0], BANDS[1])


def rotation_decay(q: torch.Tensor, k: torch.Tensor, frequencies: np.ndarray, distances: int,
                   scale: float = 1.0) -> np.ndarray:
    """``(heads, distances)``: the mean over every query and key of ``q_p · R(Δθ) k_j / scale`` at each distance Δ
    (= the mean query against the mean key, turned Δ apart; unrotated ``(heads, len, d_head)`` queries and keys,
    Llama's pairing: dimension i with i + d_head/2). The rotation alone, the tokens averaged out."""
    q_mean, k_mean = q.double().mean(-2), k.double().mean(-2)  # (heads, d_head)
    half = q.shape[-1] // 2
    q1, q2, k1, k2 = q_mean[:, :half], q_mean[:, half:], k_mean[:, :half], k_mean[:, half:]
    in_phase = (q1 * k1 + q2 * k2).cpu().numpy()  # per pair: the cos term
    quadrature = (q1 * k2 - q2 * k1).cpu().numpy()  # per pair: the sin term (Δ = p − j: the query after the key)
    angles = np.arange(distances)[:, None] * np.asarray(frequencies)[None, :]  # (distances, pairs)
    return (in_phase @ np.cos(angles).T + quadrature @ np.sin(angles).T) / scale


def measured_decay(scores: np.ndarray, distances: int) -> np.ndarray:
    """``(heads, distances)``: the mean score ``(heads, len, len)`` of query p on key p − Δ over every p ≥ Δ (what
    the model computed on the text: rotation and tokens together); NaN where no pair is that far apart."""
    heads, length, _ = scores.shape
    out = np.full((heads, distances), np.nan)
    for distance in range(min(distances, length)):
        out[:, distance] = np.diagonal(scores, offset=-distance, axis1=1, axis2=2).mean(-1)
    return out


def band_shares(q: torch.Tensor, k: torch.Tensor) -> np.ndarray:
    """``(heads, pairs)``: each pair's share of ``Σ_i mean|q_i| · mean|k_i|`` (the norm of the pair's 2-d part of the
    queries and of the keys, averaged over the tokens): how much of each head's q·k that pair can carry, the
    largest a pair's term can reach whatever the angle (rows sum to 1)."""
    half = q.shape[-1] // 2
    q, k = q.double(), k.double()
    q_norm = torch.sqrt(q[..., :half] ** 2 + q[..., half:] ** 2).mean(-2)
    k_norm = torch.sqrt(k[..., :half] ** 2 + k[..., half:] ** 2).mean(-2)
    reach = (q_norm * k_norm).cpu().numpy()
    total = reach.sum(-1, keepdims=True)
    return np.divide(reach, total, out=np.zeros_like(reach), where=total > 0)


def unrotated_queries_keys(model: LanguageModel, residual: torch.Tensor,
                           layer: int) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Every query head's queries and keys ``(heads, len, d_head)`` (float64) of one layer, from the stream
    `residual` ``(1, len, d_model)`` entering it, before any rotation (query/key norms applied: Qwen3; each query
    head with its key/value head's keys), and the scores' divisor."""
    attention, around = model.network.attention_block(layer)
    with torch.no_grad():
        q, kv = attention.project(around.enter(residual))
        q, key = attention.normed_queries_keys(q, kv.key)
        key = attention.query_heads(key)
    scale = attention.scale
    divisor = 1.0 if scale is False else math.sqrt(attention.d_head if scale is True else scale)
    return q[0].double(), key[0].double(), divisor


def layer_frequencies(model: LanguageModel, layer: int, frequencies: np.ndarray) -> np.ndarray:
    """The ``theta_i`` `layer` rotates by: `frequencies`, or a sliding layer's own (Gemma 3's local base)."""
    local = model.network.local_scheme
    if local is None or model.network.window(layer) is None:
        return frequencies
    own = rope_frequencies(local.d_head, local.base) if local.frequencies is None else local.frequencies
    return own.double().numpy()


def layer_attention_factor(model: LanguageModel, layer: int) -> float:
    """What `layer`'s RoPE multiplies cos and sin by: YaRN's attention factor, 1 in a sliding layer with its own
    unscaled base (Gemma 3's) and in every other scaling."""
    local = model.network.local_scheme
    if local is not None and model.network.window(layer) is not None:
        return local.attention_factor
    return attention_factor(model.config)


@dataclass
class RopeMeasures:
    """What the loaded model's RoPE does on a text, per layer and head.

    :ivar frequencies: the model's ``theta_i`` (pairs,)
    :ivar measured: ``(layers, heads, distances)`` the mean score at each distance on the text
    :ivar rotation: ``(layers, heads, distances)`` the mean query and key turned that far apart
    :ivar shares: ``(layers, heads, pairs)`` each pair's share of what the head's q·k can carry
    :ivar bands: per pair, "high" or "low"
    :ivar tokens: how many tokens of the text were read
    """

    frequencies: np.ndarray
    measured: np.ndarray
    rotation: np.ndarray
    shares: np.ndarray
    bands: np.ndarray
    tokens: int

    def band_share(self, band: str) -> np.ndarray:
        """``(layers, heads)``: the share of each head's q·k carried by the pairs of `band`."""
        if band not in BANDS:
            raise LessonError(f"band must be one of {', '.join(BANDS)}, got {band!r}")
        return self.shares[..., self.bands == band].sum(-1)


def rope_measures(model: LanguageModel, ids: Sequence[int], distances: int = 64) -> RopeMeasures:
    """`RopeMeasures` of `model` on `ids` (one forward pass with every layer's record)."""
    config = model.config
    check_rope(config)
    if len(ids) < 2:
        raise LessonError(f"the text gives {len(ids)} token; at least 2 are needed to measure distances")
    frequencies = model_frequencies(config, len(ids))
    with torch.no_grad():
        out = model.forced_pass(list(ids), need_weights=True)
    measured, rotation, shares = [], [], []
    for layer, record in enumerate(out.records):
        q, k, divisor = unrotated_queries_keys(model, record.residual, layer)
        turned = config.rope_dims or config.d_head  # partial rotary (GPT-NeoX, Phi): the pairs that turn
        q, k = q[..., :turned], k[..., :turned]
        measured.append(measured_decay(record.scores[0].double().cpu().numpy(), distances))
        magnitude = layer_attention_factor(model, layer) ** 2  # YaRN's: cos and sin of queries and keys scaled
        rotation.append(rotation_decay(q, k, layer_frequencies(model, layer, frequencies), distances,
                                       divisor / magnitude))
        shares.append(band_shares(q, k))
    bands = band_of(2 * math.pi / frequencies, trained_length(config))
    return RopeMeasures(frequencies, np.stack(measured), np.stack(rotation), np.stack(shares), bands, len(ids))
