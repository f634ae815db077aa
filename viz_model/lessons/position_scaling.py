"""RoPE past its trained length with each scaling switched on: the loaded model's loss at each position of the long
text as loaded, and with linear, dynamic NTK, YaRN and llama3 scaling applied at one factor to its own frequencies
(its base, its head width, its trained length), each in a copy (`LanguageModel.rescaled`): the loaded model is never
changed."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..kinds.language_model import LanguageModel
from .position_length import PositionLoss, loss_by_position
from .position_parts import LessonError
from .position_rope import trained_length

SCALINGS = ("linear", "dynamic", "yarn", "llama3")  # what viz_model.nn.rope_scaling implements beside "default"
AS_LOADED = "as loaded"
MAX_FACTOR = 64.0


def check_scalings(model: LanguageModel, factor: float, scalings: Sequence[str]) -> None:
    """One line where the model has no rotary positions, the factor is not from 1 to `MAX_FACTOR`, or a scaling is
    not one of `SCALINGS`."""
    if model.config.positional != "rope":
        raise LessonError(f"this model has {model.config.positional} positions, not rotary ones: the scalings "
                          "stretch RoPE's frequencies, so they need a RoPE model (Llama, Qwen, Mistral, ...)")
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1 <= factor <= MAX_FACTOR:
        raise LessonError(f"the factor must be a number from 1 to {MAX_FACTOR:g}, got {factor!r}")
    unknown = [s for s in scalings if s not in SCALINGS]
    if unknown:
        raise LessonError(f"unknown scaling {unknown[0]!r}: choose among {', '.join(SCALINGS)}")


def scaled_copy(model: LanguageModel, scaling: str, factor: float) -> LanguageModel:
    """`model` with `scaling` at `factor` on its own frequencies, from its trained length (the copy alone)."""
    return model.rescaled(rope_scaling=scaling, rope_factor=float(factor),
                          rope_original_max_positions=trained_length(model.config))


def losses_by_scaling(model: LanguageModel, ids: Sequence[int], tokens: int, factor: float,
                      scalings: Sequence[str] = SCALINGS,
                      progress: Callable[[int, int], None] | None = None) -> dict[str, PositionLoss]:
    """`AS_LOADED` and each of `scalings` -> the `PositionLoss` of the first `tokens` of `ids`, one pass each;
    `progress` (passes done, passes in all) after each."""
    check_scalings(model, factor, scalings)
    runs = {AS_LOADED: model, **{s: scaled_copy(model, s, factor) for s in scalings}}
    losses = {}
    for done, (name, run) in enumerate(runs.items(), 1):
        losses[name] = loss_by_position(run, ids, tokens)
        if progress is not None:
            progress(done, len(runs))
    return losses
