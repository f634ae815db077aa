"""A loaded language model's loss at each position of a long text, past its trained length where it has one:
a learned table (GPT-2) refuses at its last row; RoPE and ALiBi models run on, with a warning past the length their
config records (BLOOM's records none)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..hf.bloom import LONGEST as ALIBI_UNRECORDED
from ..kinds.language_model import INPUT_POSITIONS, LanguageModel
from .position_parts import LessonError
from .position_text import LONG_TEXT

MAX_TOKENS = 4096  # one forward pass on a laptop CPU


def text_ids(model: LanguageModel, text: str = LONG_TEXT) -> list[int]:
    """The ids of `text` (the page's long text by default) as the model's tokenizer gives them for a prompt."""
    return model.tokenizer.encode(text)


def recorded_length(model: LanguageModel) -> int | None:
    """The length the model's config says it was trained at (max_position_embeddings), None where it records none
    (BLOOM: ALiBi has no table and its config no limit)."""
    config = model.config
    if config.positional == "alibi" and config.max_positions == ALIBI_UNRECORDED:
        return None
    return config.max_positions


def check_tokens(model: LanguageModel, tokens: int) -> str | None:
    """One line refusing `tokens` positions where a learned table ends before them; else the warning past the
    recorded length (None within it)."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 2 <= tokens <= MAX_TOKENS:
        raise LessonError(f"the number of tokens must be an integer from 2 to {MAX_TOKENS}, got {tokens!r}")
    limit = recorded_length(model)
    if limit is not None and tokens > limit and model.config.positional in INPUT_POSITIONS:
        raise LessonError(f"{tokens} positions asked; this model has {limit} (max_position_embeddings): its "
                          f"{model.config.positional} table has no row past position {limit - 1}")
    if limit is not None and tokens > limit:
        return f"{tokens} positions are past the {limit} this model was trained on; its attention there is untested"
    return None


@dataclass
class PositionLoss:
    """The loss (negative log-probability, nats) of each token of a text given every token before it.

    :ivar losses: ``(tokens - 1,)``: entry t is the loss of token t + 1, predicted at position t
    :ivar trained: the length the config records, None where it records none
    :ivar warning: the line past that length, None within it
    """

    losses: np.ndarray
    trained: int | None
    warning: str | None

    def smoothed(self, window: int) -> np.ndarray:
        """The losses averaged over the `window` positions ending at each (fewer at the start)."""
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise LessonError(f"the window must be a positive integer, got {window!r}")
        sums = np.cumsum(np.concatenate([[0.0], self.losses]))
        ends = np.arange(1, len(self.losses) + 1)
        starts = np.maximum(0, ends - window)
        return (sums[ends] - sums[starts]) / (ends - starts)

    def inside_beyond(self) -> tuple[float, float | None]:
        """The mean loss of the predictions made within the recorded length and beyond it (None: none beyond)."""
        if self.trained is None or self.trained >= len(self.losses):
            return float(self.losses.mean()), None
        return float(self.losses[:self.trained].mean()), float(self.losses[self.trained:].mean())


def loss_by_position(model: LanguageModel, ids: Sequence[int], tokens: int) -> PositionLoss:
    """`PositionLoss` of the first `tokens` of `ids`, one teacher-forced pass in full precision."""
    warning = check_tokens(model, tokens)
    if len(ids) < tokens:
        raise LessonError(f"the text gives {len(ids)} tokens with this model's tokenizer; asked for {tokens}")
    chosen = list(ids[:tokens])
    with torch.no_grad():
        logits = model.forced_pass(chosen).logits[0, :-1].double()
    targets = torch.tensor(chosen[1:], device=logits.device)
    losses = -torch.log_softmax(logits, -1)[torch.arange(len(targets), device=logits.device), targets]
    return PositionLoss(losses.cpu().numpy(), recorded_length(model), warning)
