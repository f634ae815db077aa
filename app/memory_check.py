"""Before a language model traces a prompt: what the model and the trace will take (the library's
`viz_model.analysis.memory_estimate`), shown in one line, and the run refused, naming both figures, where the trace
would not fit in the memory available now."""

from __future__ import annotations

import streamlit as st

from viz_model import LanguageModel
from viz_model.analysis.memory_estimate import MemoryFitError, available_bytes, check_fits, gb, model_estimate


def trace_fits(model: LanguageModel, n_tokens: int) -> bool:
    """Whether an `n_tokens`-token trace of `model` (already open: its weights are held) fits the memory available
    now; says what both take in a caption, or refuses in one line naming the estimate and what is available."""
    estimate = model_estimate(model, n_tokens)
    available = available_bytes(model.device)
    try:
        check_fits(estimate, available, opened=True)
    except MemoryFitError as err:
        st.error(f"This prompt is not run: {err}. The model takes {gb(estimate.weights)} ({estimate.weights_held}).")
        return False
    st.caption(f"Memory: the model {gb(estimate.weights)} ({estimate.weights_held}), this {n_tokens:,}-token trace "
               f"about {gb(estimate.trace_bytes)} ({gb(available)} available now).")
    return True
