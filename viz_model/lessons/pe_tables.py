"""The Positional page's numbers: the model's sinusoids (`viz_model.nn.positional`) as tables, their similarity and
shift check, the longest training sequence, each model's kind of positions, shuffled words.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..config import ConfigError, ModelConfig
from ..modeldir.checkpoint import CONFIG, TRAINING_LOG, CheckpointError, model_file
from ..modeldir.coverage import TRAINING_STATS, TrainingStats
from ..modeldir.training_facts import TRAINING_FACTS, TrainingFacts
from ..nn.positional import ShiftCheck, shift_matrix, sinusoidal_table, wavelengths
from .lesson_inputs import InputError, whole_number
from .training_recipe import training_events


# --- positional encodings ----------------------------------------------------------------------------------------
def pe_table(length: int, d_model: int, double: bool = False, layout: str = "interleaved",
             frequencies: str = "paper", first: int = 0) -> np.ndarray:
    """The model's sinusoids (`sinusoidal_table`, in the model's layout and frequencies, positions counted from
    row `first` as the model's ``position_offset`` says), float32 as the model adds them, or float64."""
    return sinusoidal_table(length + first, d_model, dtype=torch.float64 if double else torch.float32, layout=layout,
                            frequencies=frequencies)[first:].numpy()


def pair_wavelengths(d_model: int, frequencies: str = "paper") -> np.ndarray:
    return wavelengths(d_model, frequencies=frequencies).numpy()


def dot_similarity(table: np.ndarray) -> np.ndarray:
    """PE(p) · PE(q) for every pair of positions."""
    table = np.asarray(table, dtype=np.float64)
    return table @ table.T


def similarity_profile(similarity: np.ndarray) -> pd.DataFrame:
    """PE(p)·PE(q) against the distance |p − q|: mean, min and max over the pairs at each distance.

    For sinusoids min = max: the dot product depends on the distance only, sum_i cos(ω_i (p − q)).
    """
    n = similarity.shape[0]
    rows = []
    for offset in range(n):
        values = np.diagonal(similarity, offset)
        rows.append({"distance": offset, "mean": float(values.mean()), "min": float(values.min()),
                     "max": float(values.max()), "pairs": len(values)})
    return pd.DataFrame(rows)


def shift_check(k: int, length: int, d_model: int) -> ShiftCheck:
    """The shift-linearity of the sinusoids, checked numerically with `shift_matrix` and `sinusoidal_table`."""
    k = whole_number("the offset k", k, -100_000, 100_000)
    length = whole_number("the number of positions", length, 1, 100_000)
    matrix = shift_matrix(k, d_model)
    start = max(0, -k)
    if start >= length:
        raise InputError(f"no position p in 0..{length - 1} has p + k ≥ 0 for k = {k}; draw more positions or "
                         "pick a smaller |k|")
    p = torch.arange(start, length)
    errors = []
    for dtype in (torch.float32, torch.float64):
        table = sinusoidal_table(length + max(k, 0), d_model, dtype=dtype).double()
        errors.append((table[p] @ matrix.T - table[p + k]).abs().max(dim=1).values.numpy())
    return ShiftCheck(k, matrix.numpy(), p.numpy(), errors[0], errors[1])


def training_max_length(directory: Path | None, facts: TrainingFacts | None, stats: TrainingStats | None = None
                        ) -> tuple[int | None, str]:
    """The longest training sequence (tokens), if the model directory records it: (length, where it was found).

    The training statistics come first: the explorer's input warnings read the same number, so pages agree."""
    if stats is not None:
        return stats.max_source_tokens, f"{TRAINING_STATS} (longest training source, pieces + </s>)"
    if directory is not None:
        try:
            events = training_events(directory)
        except InputError:  # the training page says why; here the length is simply not known from the log
            events = []
        for event in events:
            for key in ("max_len", "longest_train", "max_train_length"):
                value = event.get(key)
                if isinstance(value, int) and value > 0:
                    return value, f"{TRAINING_LOG} ({key})"
    if facts is not None:
        return facts.max_len, f"{TRAINING_FACTS} (max_len: the longest training pair kept)"
    return None, ""


def positional_kinds(root: Path, names: Sequence[str]) -> dict[str, str]:
    """Model name -> "sinusoidal" / "learned" of each translation model (encoder-decoder) among `names`, from its
    directory's config.json (weights are not loaded; a language model or an encoder is left out)."""
    kinds = {}
    for name in names:
        try:
            config = ModelConfig.load(model_file(root / name, CONFIG))
        except (ConfigError, CheckpointError, OSError):
            continue
        if config.kind == "seq2seq":
            kinds[name] = config.positional
    return kinds


def shuffle_words(text: str, seed: int) -> str:
    """The sentence with its words (whitespace-separated) in another order, the same for the same seed."""
    seed = whole_number("the seed", seed, 0, 2**31 - 1)
    words = text.split()
    if len(set(words)) < 2:
        raise InputError("shuffling needs at least two different words in the sentence")
    rng = random.Random(seed)
    order = list(range(len(words)))
    while True:
        rng.shuffle(order)
        shuffled = [words[i] for i in order]
        if shuffled != words:
            return " ".join(shuffled)
