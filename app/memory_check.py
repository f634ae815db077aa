"""Before a language model traces a prompt: what the model and the trace will take (the library's
`viz_model.analysis.memory_estimate`), shown in one line, and the run refused, naming both figures, where the trace
would not fit in the memory available now."""

from __future__ import annotations

import importlib
from types import ModuleType

import streamlit as st
import torch

from viz_model import LanguageModel

DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def estimator() -> ModuleType | None:
    """The library's memory estimate, None in a library without it (the check is then left out)."""
    try:
        return importlib.import_module("viz_model.analysis.memory_estimate")
    except ModuleNotFoundError:
        return None


def trace_fits(model: LanguageModel, n_tokens: int) -> bool:
    """Whether an `n_tokens`-token trace of `model` (already open: its weights are held) fits the memory available
    now; says what both take in a caption, or refuses in one line naming the estimate and what is available."""
    library = estimator()
    if library is None:
        return True
    dtype = DTYPE_NAMES.get(next(model.network.parameters()).dtype, "fp32")
    estimate = library.estimate(model.config, n_tokens, "auto", dtype, device=model.device)
    available = library.available_bytes(model.device)
    if estimate.trace_bytes > available:
        st.error(f"This prompt is not run: its {n_tokens:,}-token trace would need about "
                 f"{library.gb(estimate.trace_bytes)} beside the model's {library.gb(estimate.weights)}, and "
                 f"{library.gb(available)} is available on {model.device.type.upper()} now. Shorten the prompt or "
                 "the continuation.")
        return False
    st.caption(f"Memory: the model {library.gb(estimate.weights)}, this {n_tokens:,}-token trace about "
               f"{library.gb(estimate.trace_bytes)} ({library.gb(available)} available now).")
    return True
