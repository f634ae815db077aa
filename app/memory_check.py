"""Before a language model traces a prompt the trace cache does not hold: what the model and the trace will take (the
library's `viz_model.analysis.memory_estimate`), in one line, and the run refused, naming both figures, where the
trace would not fit in the memory available now (`app.sessions.TraceCache.get` runs it on a miss only)."""

from __future__ import annotations

from viz_model import LanguageModel
from viz_model.analysis.memory_estimate import MemoryFitError, available_bytes, check_fits, gb, model_estimate


def trace_memory(model: LanguageModel, n_tokens: int, new_tokens: int = 0) -> str:
    """The "Memory: ..." caption of an `n_tokens`-token trace of `model` (already open: its weights are held), the
    last `new_tokens` a continuation; `MemoryFitError` in one line naming the estimate, what is available and the
    model's size where it would not fit."""
    estimate = model_estimate(model, n_tokens, new_tokens=new_tokens)
    available = available_bytes(model.device)
    try:
        check_fits(estimate, available, opened=True)
    except MemoryFitError as err:
        raise MemoryFitError(f"{err}. The model takes {gb(estimate.weights)} ({estimate.weights_held})") from None
    return (f"Memory: the model {gb(estimate.weights)} ({estimate.weights_held}), this {n_tokens:,}-token trace "
            f"about {gb(estimate.trace_bytes)} ({gb(available)} available now).")
