"""Complete & explore, the explorer's form with a language model open: the prompt (or a chat turn through the model's
template), its continuation (a cached `LanguageModel.trace`), the decoding steps split at the prompt's end, and the
grouped query heads' labels."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import plotly.graph_objects as go
import streamlit as st
import torch
from jinja2 import TemplateError

from app.page_settings import EXPLORE, MAX_LM_NEW_TOKENS
from app.sessions import Session, load_model, planned_trace, require_session, trace_cache
from app.shared_settings import FORM, SHARED
from app.state import bound, head_label, page_link
from app.texts import count
from app.widgets import folded, memory_report, show_text
from viz_model.analysis.memory_estimate import MemoryFitError, TracePlan, plan_trace
from viz_model.plot import head_groups
from viz_model.trace import AttentionTrace

BOUNDARY_COLOR = "#d62728"  # the line between the prompt and the continuation on every map


def _submit() -> None:
    SHARED.sentence.set(FORM.sentence_box.get(""))


def prompt_form() -> None:
    """The prompt box, the continuation's length (in the link), the Complete button and the chat toggle (greyed out
    for a model without a chat template)."""
    page_link(EXPLORE)  # their values in the link on every page that draws them
    FORM.sentence_box.init(SHARED.sentence.get(""))
    EXPLORE.new_tokens.init()
    with st.form("prompt_form", border=False):
        st.text_area("Prompt", key=FORM.sentence_box.key, height=80, placeholder="Type text for the model to continue")
        st.form_submit_button("Complete", type="primary", on_click=_submit, icon=":material/edit_note:")
    bound(st.slider, "New tokens", EXPLORE.new_tokens, 1, MAX_LM_NEW_TOKENS,
          help="How many tokens the model adds to the prompt (greedy: its most likely token each time).")
    EXPLORE.chat.init()
    EXPLORE.system.init()
    templated = require_session().model.tokenizer.rules.get("chat_template") is not None
    bound(st.toggle, "Chat: the prompt as a user's message, through the model's chat template", EXPLORE.chat,
          disabled=not templated and not EXPLORE.chat.get(),
          help="The model's own template wraps the message in its role tokens and opens the assistant's turn; the "
               "maps show the template's tokens too." if templated else
               "This model has no chat template (a base model): it continues the prompt as it is.")
    if EXPLORE.chat.get():
        bound(st.text_input, "System message (optional)", EXPLORE.system, max_chars=500,
              help="Sent before the user's message as the system's turn (some templates refuse one).")


def chat_messages(prompt: str) -> list[dict[str, str]]:
    """The chat turn the form asks for: the optional system message, then the prompt as the user's."""
    system = EXPLORE.system.get("").strip()
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]


def chat_completion(session: Session, messages: list[dict[str, str]], max_new_tokens: int,
                    plan: Callable[[], TracePlan] | None = None) -> AttentionTrace:
    """A language model's trace of `messages` through its chat template and the reply, from the shared cache
    (`plan`: see `sessions.planned_trace`)."""
    key = (session.ref.stored, "chat", tuple((m["role"], m["content"]) for m in messages), max_new_tokens,
           session.top_k)
    return planned_trace(key, lambda maps: load_model(session.ref).trace(messages, max_new_tokens, session.top_k,
                                                                         maps=maps), plan)


def asked_turn(prompt: str) -> str | list[dict[str, str]]:
    """What Complete & explore asks the model with `prompt`: the chat turn (through the template) where chat is on,
    else the text."""
    return chat_messages(prompt) if EXPLORE.chat.get() else prompt


def current_completion(session: Session) -> AttentionTrace | None:
    """The trace of the submitted prompt and its continuation, or None after one line saying why there is none."""
    page_link(EXPLORE)  # the continuation's length and the chat turn come from the link on every page
    prompt = SHARED.sentence.get("")
    if not prompt.strip():
        st.info("Type a prompt for the model to continue.")
        return None
    return completed(session, asked_turn(prompt), int(EXPLORE.new_tokens.get()))


def form_and_completion(session: Session) -> AttentionTrace:
    """The prompt form, then the submitted prompt's trace; the page stops where there is none (the reason shown)."""
    prompt_form()
    trace = current_completion(session)
    if trace is None:
        st.stop()
    return trace


def completed(session: Session, prompt: str | list[dict[str, str]], new_tokens: int) -> AttentionTrace | None:
    """The cached trace of `prompt` (text, or chat messages) and its continuation, or None after one line saying why
    there is none (the library's warnings said once each; a trace the memory would not hold refused before it runs)."""
    try:
        with warnings.catch_warnings(record=True) as caught:  # the library's checks, before the cached trace
            warnings.simplefilter("always")
            n_tokens = len(session.model.encode(prompt, new_tokens)) + new_tokens

            def plan() -> TracePlan:  # on a cache miss only: a cached trace is served whatever memory is free now
                return plan_trace(session.model, n_tokens, new_tokens)  # the library's estimate decides its maps
            with st.spinner("Completing…"):
                trace = (session.completion(prompt, new_tokens, plan) if isinstance(prompt, str)
                         else chat_completion(session, prompt, new_tokens, plan))
    except MemoryFitError as err:
        memory_report(str(err), refused=True)
        return None
    except TemplateError as err:  # the template's own refusal (such as "system role not supported")
        st.error(f"The model's chat template fails on this message: {err}. Turn chat off or change the message.")
        return None
    except ValueError as err:
        st.error(f"This prompt cannot be completed: {err}.")
        return None
    except torch.cuda.OutOfMemoryError:
        raise  # the frame frees the GPU and says so
    except RuntimeError as err:
        st.error(f"The model failed on this prompt: {err}")
        return None
    for warning in {str(w.message): w for w in caught}.values():  # the check's and the trace's: once
        st.warning(f"{str(warning.message)[0].upper()}{str(warning.message)[1:]}.")
    memory_report(trace_cache().note(trace))
    return trace


def prompt_length(trace: AttentionTrace) -> int:
    """How many of the trace's tokens are the prompt's (the rest: the continuation)."""
    return int(trace.settings.get("prompt_length", len(trace.target_tokens)))


def completion_panel(trace: AttentionTrace) -> None:
    """The prompt, its continuation and how it was made."""
    with st.container(border=True):
        show_text("Continuation", trace.translation)
        n, p = len(trace.target_tokens), prompt_length(trace)
        timing = trace.timings.get("total_ms")
        if EXPLORE.chat.get():
            st.caption("Chat: the prompt went in as a user's message through the model's chat template; the maps "
                       "show every token the template wrote (its role markers included).")
        st.caption(f"greedy · {count(p, 'prompt token')} + {count(n - p, 'new token')} (the red line on every map "
                   f"marks where the prompt ends) · log-probability of the continuation {trace.log_probability:.3f} · "
                   f"{trace.device}" + (f" · {timing:.0f} ms" if timing is not None else ""))


def completion_steps(trace: AttentionTrace) -> None:
    """Each position: the token it reads, the next token (the prompt's own, then the model's choice) and the top
    candidates."""
    p = prompt_length(trace)
    with folded("Decoding steps: at each position the next token and the model's top candidates",
                "completion_steps") as is_open:
        if not is_open:
            return
        rows = [{"position": s.position, "part": "prompt" if i < p - 1 else "continuation", "read": s.input_token,
                 "next": s.token, "probability": round(s.probability, 4),
                 "candidates": ", ".join(f"{t} {q:.3f}" for t, q in zip(s.top_tokens, s.top_probabilities))}
                for i, s in enumerate(trace.steps)]
        st.caption("In the prompt the next token is the text's own (its probability says how well the model "
                   "expected it); from the prompt's last token on, it is the model's choice.")
        st.dataframe(rows, hide_index=True, width="stretch",
                     column_config={"candidates": st.column_config.TextColumn(width="large")})


def kv_group(trace: AttentionTrace, head: int) -> int | None:
    """The 0-based key/value head that query head `head` (0-based) reads (the trace's record), None without grouped
    heads."""
    groups = head_groups.kv_heads(trace)
    return None if groups is None else groups[head]


def grouped_head_label(trace: AttentionTrace, short: bool = False):
    """The head picker's labels: "Head 3 of 4 · key/value head 2" where query heads share key/value heads (`short`,
    for the head view's 0-based heads: "Head 3 · kv 2")."""
    def label(value: int | str) -> str:
        if short:
            group = kv_group(trace, int(value))
            return f"Head {int(value) + 1}" + ("" if group is None else f" · kv {group + 1}")
        text = head_label(value, trace.num_heads)
        group = kv_group(trace, value - 1) if isinstance(value, int) else None
        return text if group is None else f"{text} · key/value head {group + 1}"
    return label


def mark_boundary(fig: go.Figure, trace: AttentionTrace, keys: bool = True, queries: bool = True) -> go.Figure:
    """A line on a heatmap between the prompt's last token and the continuation's first (none without a
    continuation)."""
    p = prompt_length(trace)
    if p >= len(trace.target_tokens):
        return fig
    line = dict(color=BOUNDARY_COLOR, width=2, dash="dot")
    if keys:
        fig.add_vline(x=p - 0.5, line=line)
    if queries:
        fig.add_hline(y=p - 0.5, line=line)
    return fig
