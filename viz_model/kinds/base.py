"""`ModelKind`: what every kind of model (translator, language model, next the encoder-only kind) gives the layers
above it; `PerKind`: a table of one analysis's functions by kind, so that shared code never asks which kind it holds."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
import torch

from ..config import ModelConfig
from ..nn.lens_reading import LogitLens
from ..nn.model import HeadMask
from ..trace import AttentionTrace


class ModelKind(ABC):
    """One loaded model of any kind: its attention, tokens, `trace`, and the hooks analyses need.

    :cvar kind: a short name of the kind ("translator", "language_model")
    :cvar attention_kinds: the kinds of attention it has, of "encoder", "decoder" and "cross"
    :cvar description: the kind in words, as messages name it (e.g. "a language model (decoder-only)")
    """

    kind: ClassVar[str]
    attention_kinds: ClassVar[tuple[str, ...]]
    description: ClassVar[str]
    name: str
    device: torch.device
    tokenizer: Any
    network: torch.nn.Module

    @property
    def config(self) -> ModelConfig:
        """The network's `ModelConfig`."""
        return self.network.config  # type: ignore[return-value]

    def num_layers(self, attention_kind: str) -> int:
        """How many layers of `attention_kind` (one of `attention_kinds`) it has; a ValueError for another kind."""
        if attention_kind not in self.attention_kinds:
            raise ValueError(f"{self.description} has no {attention_kind} attention; its kinds are "
                             f"{', '.join(self.attention_kinds)}")
        return self.config.encoder_layers if attention_kind == "encoder" else self.config.decoder_layers

    @property
    def num_heads(self) -> int:
        """Query heads per attention layer."""
        return self.config.heads

    def pieces(self, ids: Sequence[int]) -> list[str]:
        """The tokenizer's piece of each id."""
        return self.tokenizer.pieces(list(ids))

    @abstractmethod
    def encode(self, text: Any) -> list[int]:
        """The ids of `text` as the model reads it (a translator's source, a language model's prompt)."""

    @abstractmethod
    def trace(self, text: Any, /, *, top_k: int = 5, head_mask: HeadMask | None = None,
              forced_ids: Sequence[int] | None = None, maps: str = "auto") -> AttentionTrace:
        """Every attention map of the model reading `text` and its output (`forced_ids`: this output, a forced pass);
        `head_mask` switches heads off."""

    @abstractmethod
    def sequence_log_probs(self, inputs: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]],
                           head_mask: HeadMask | None = None) -> np.ndarray:
        """``log P(output | input)`` of each (input ids, output ids) pair, teacher-forced, in input order."""

    @abstractmethod
    def embeddings(self, ids: Sequence[int]) -> torch.Tensor:
        """``(1, len, d_model)`` the token embeddings of the ids it reads (what gradients are taken against)."""

    def logit_lens(self, text: Any, /, top_k: int = 5, *, track: Sequence[int] = ()) -> LogitLens:
        """The logit lens of the stream that writes the model's output (`LogitLens`); a kind without one says so in
        one line."""
        raise ValueError(f"the logit lens does not apply to {self.description}: it reads the residual stream of a "
                         "model that writes text token by token")


Function = TypeVar("Function", bound=Callable[..., Any])


class PerKind(Generic[Function]):
    """One analysis's function for each kind of model, registered by the kind's name: `of` a model is its kind's
    (the caller calls it, so the call goes down the layers); a kind without one is refused in one line."""

    def __init__(self, analysis: str) -> None:
        self.analysis = analysis
        self.functions: dict[str, Function] = {}

    def register(self, kind: str) -> Callable[[Function], Function]:
        """A decorator: its function serves models of `kind`."""
        def add(function: Function) -> Function:
            self.functions[kind] = function
            return function
        return add

    def of(self, model: ModelKind) -> Function:
        """The function of `model`'s kind; a ValueError naming the analysis where its kind has none."""
        function = self.functions.get(model.kind)
        if function is None:
            raise ValueError(f"{self.analysis} does not apply to {model.description}")
        return function
