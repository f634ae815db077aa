"""The submitted sentence's trace for a page: the request checked, translated through the session's cache, or the
reason there is none shown in its place."""

from __future__ import annotations

import streamlit as st
import torch

from app.sessions import Session
from app.shared_settings import SHARED
from app.widgets import sentence_form
from viz_model.search.requests import TooLong
from viz_model.trace import AttentionTrace


def current_trace(session: Session) -> AttentionTrace | None:
    """The trace of the submitted sentence, or None after showing why there is none."""
    text = SHARED.sentence.get("")
    target = SHARED.target.get() or None
    try:
        # the library's checks, before the cached trace (whose messages need the user's words)
        session.model.request(text, target, session.truncate, ("the sentence", "the target text"))
    except TooLong as err:
        if err.side == "source":
            st.error(f"This sentence is {err.tokens} tokens long; the model reads at most {err.limit} tokens. "
                     "Shorten it, or tick “Cut sentences longer than the model's maximum” in the sidebar.")
        else:
            st.error(f"The target text is longer than the model's maximum of {err.limit} tokens; shorten it.")
        return None
    except ValueError as err:
        message = str(err)
        message = message[0].upper() + message[1:] + "."
        if "empty" in message:
            st.info(message)
        else:
            st.error(message)
        return None
    try:
        with st.spinner("Translating…"):
            return session.trace(text, target)
    except ValueError as err:
        st.error(f"This sentence cannot be translated: {err}")
    except torch.cuda.OutOfMemoryError:
        out_of_memory()
    except RuntimeError as err:
        st.error(f"The model failed on this sentence: {err}")
    return None


def sentence_and_trace(session: Session) -> AttentionTrace | None:
    """A collapsed "Change the sentence" form, then the current sentence's trace (None after an error message)."""
    with st.expander("Change the sentence", expanded=False):
        sentence_form(session)
    return current_trace(session)


def trace_or_stop(session: Session) -> AttentionTrace:
    """`sentence_and_trace`, and the page stops where there is no trace (the reason is already shown)."""
    trace = sentence_and_trace(session)
    if trace is None:
        st.stop()
    return trace


def out_of_memory() -> None:
    """After a CUDA out-of-memory error: free the GPU's cached blocks and say so; the next request runs normally."""
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    st.error("The GPU ran out of memory on this request. Its memory has been freed: try again, or use a shorter "
             "sentence or a smaller beam.")
