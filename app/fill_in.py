"""Fill in the blank, the explorer's form with an encoder open: the sentence with the model's mask token (or a word
clicked to mask it), an optional second sentence (a pair, with token types), the cached `EncoderModel.trace` and the
top-k predictions at each mask token."""

from __future__ import annotations

import re

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
import torch

from app.page_settings import EXPLORE, MAX_PAIR_CHARS
from app.sessions import Session
from app.shared_settings import FORM, SHARED
from app.state import page_link
from app.texts import EXAMPLES, MASKED_EXAMPLES, count, md_escape
from app.widgets import show_text
from viz_model.kinds.encoder import EncoderModel
from viz_model.trace import AttentionTrace

MAX_MASKS_SHOWN = 8  # the masks whose predictions the page lists
MASKED_DEFAULT = "_fill_in_default"  # set once the untouched default sentence has been given a mask
PAIR_COLOR = "#2ca02c"  # the line between sentence A and sentence B on every map
WORD = re.compile(r"\w+")
MASKED_LM_FOLDER = "a …ForMaskedLM folder (such as BertForMaskedLM)"  # what a maps-only encoder's fill-in needs


def no_head_line(model: EncoderModel) -> str:
    """The one line in place of the fill-in where `model` has no masked-language-model head (a classifier folder)."""
    return md_escape(f"{model.name or 'This model'} has no masked-language-model head: it gives its attention maps "
                     f"only; fill-in predictions need {MASKED_LM_FOLDER}.")


def has_head_or_say(model: EncoderModel, what: str) -> bool:
    """Whether `model` has its masked-language-model head; else False after one line that `what` needs it."""
    if not model.has_head:
        st.info(md_escape(f"{what} needs the masked-language-model head's predictions, and "
                          f"{model.name or 'this model'} has none: it gives its attention maps only (open "
                          f"{MASKED_LM_FOLDER} for this)."))
    return model.has_head


def mask_code(mask: str) -> str:
    """The mask token as Markdown shows it literally (a code span: ``<mask>`` is no HTML tag there)."""
    return f"`{mask}`"


def _submit() -> None:
    SHARED.sentence.set(FORM.sentence_box.get(""))
    EXPLORE.pair.set(EXPLORE.pair_box.get("").strip())


def _pick_example(mask: str) -> None:
    example = FORM.example.get()
    if example:
        FORM.sentence_box.set(example.format(mask=mask))
        EXPLORE.pair_box.set("")
        _submit()
    FORM.example.set(None)


def word_spans(text: str, mask: str) -> list[tuple[int, int]]:
    """Where each word of `text` (letters and digits) is, the mask token's own letters left out."""
    return [m.span() for m in WORD.finditer(text.replace(mask, " " * len(mask)))]


def masked(text: str, word: int, mask: str) -> str:
    """`text` with its `word`-th word (0-based, of `word_spans`) replaced by `mask`; `text` where it has fewer."""
    spans = word_spans(text, mask)
    if not 0 <= word < len(spans):
        return text
    start, end = spans[word]
    return text[:start] + mask + text[end:]


def _mask_word(mask: str) -> None:
    word = EXPLORE.masked_word.get()
    if word is not None:
        SHARED.sentence.set(masked(SHARED.sentence.get(""), word, mask))
        FORM.sentence_box.set(SHARED.sentence.get())
    EXPLORE.masked_word.set(None)


def masked_default(mask: str) -> None:
    """The first time an encoder is open in a session, the explorer's default sentence (the first example: no mask
    in it) becomes its fill-in-the-blank example; any other sentence stays as it is."""
    if st.session_state.get(MASKED_DEFAULT):
        return
    st.session_state[MASKED_DEFAULT] = True
    if SHARED.sentence.get("") == EXAMPLES[0]:
        SHARED.sentence.set(MASKED_EXAMPLES[0].format(mask=mask))
        FORM.sentence_box.set(SHARED.sentence.get())


def text_form(session: Session) -> None:
    """Examples, the sentence box, the optional second sentence, the Fill in button and the words to click to mask
    one."""
    page_link(EXPLORE)  # the second sentence in the link on every page that draws the form
    mask = session.model.mask_token
    masked_default(mask)
    FORM.sentence_box.init(SHARED.sentence.get(""))
    EXPLORE.pair_box.init(EXPLORE.pair.get(""))
    st.selectbox("Examples", MASKED_EXAMPLES, index=None, key=FORM.example.key, on_change=_pick_example,
                 args=(mask,), format_func=lambda example: example.format(mask=mask),
                 placeholder="Pick an example sentence…")
    with st.form("fill_in_form", border=False):
        st.text_area(f"Sentence (write {mask_code(mask)} where the model should fill in a word)",
                     key=FORM.sentence_box.key, height=80, placeholder=f"Type a sentence with {mask} in it")
        with st.expander("A second sentence (a pair, read with token types)", expanded=bool(EXPLORE.pair.get())):
            st.text_input("Sentence B (optional)", key=EXPLORE.pair_box.key, max_chars=MAX_PAIR_CHARS,
                          help="The model reads both sentences in one sequence, the second marked by its token type "
                               "(as for next-sentence prediction); the head view can draw A's attention to B.")
        st.form_submit_button("Fill in", type="primary", on_click=_submit, icon=":material/edit_note:")
    text = SHARED.sentence.get("")
    words = [text[start:end] for start, end in word_spans(text, mask)]
    if words:
        st.pills("Or click a word to mask it", list(range(len(words))), format_func=lambda i: words[i],
                 key=EXPLORE.masked_word.key, on_change=_mask_word, args=(mask,))


def current_reading(session: Session) -> AttentionTrace | None:
    """The trace of the submitted sentence (and second sentence), or None after one line saying why there is
    none."""
    page_link(EXPLORE)
    masked_default(session.model.mask_token)
    text, pair = SHARED.sentence.get(""), EXPLORE.pair.get("") or None
    if not text.strip():
        st.info(f"Type a sentence with {mask_code(session.model.mask_token)} in it for the model to fill in.")
        return None
    try:
        with st.spinner("Reading…"):
            return session.encoder_trace(text, pair)
    except ValueError as err:
        message = str(err)
        st.error(md_escape(f"This text cannot be read: {message}."))
    except torch.cuda.OutOfMemoryError:
        raise  # the frame frees the GPU and says so
    except RuntimeError as err:
        st.error(f"The model failed on this text: {err}")
    return None


def reading_or_stop(session: Session) -> AttentionTrace:
    """A collapsed "Change the sentence" form, then the current text's trace; the page stops where there is none
    (the reason is already shown)."""
    with st.expander("Change the sentence", expanded=False):
        text_form(session)
    trace = current_reading(session)
    if trace is None:
        st.stop()
    return trace


def predictions(trace: AttentionTrace) -> list[dict]:
    """Per mask token, in order, its top-k predictions as the trace holds them (`MaskPrediction` as a dict)."""
    return trace.settings.get("predictions", [])


def predictions_line(trace: AttentionTrace, top: int = 3) -> str:
    """The first `top` predictions at each mask the page lists, in one line of Markdown ("" without a mask): what
    the maps below the fill-in are read beside."""
    found = predictions(trace)[:MAX_MASKS_SHOWN]
    return " · ".join(f"token {p['position']} ({md_escape(trace.source_tokens[p['position']])}): " + ", ".join(
        f"{md_escape(t)} {q:.3f}" for t, q in zip(p["tokens"][:top], p["probabilities"][:top])) for p in found)


def predictions_frame(trace: AttentionTrace) -> pd.DataFrame:
    """The first `MAX_MASKS_SHOWN` masks' predictions, one row each: mask (1-based), position, rank, token,
    probability."""
    rows = [{"mask": m + 1, "position": found["position"], "rank": r + 1, "token": token, "probability": p}
            for m, found in enumerate(predictions(trace)[:MAX_MASKS_SHOWN])
            for r, (token, p) in enumerate(zip(found["tokens"], found["probabilities"]))]
    return pd.DataFrame(rows, columns=["mask", "position", "rank", "token", "probability"])


def _predictions_part(trace: AttentionTrace, mask: str) -> None:
    """The top-k at each mask the page lists, or how to add a mask."""
    found = predictions(trace)
    if not found:
        st.info(f"The text has no mask token: write {mask_code(mask)} where the model should fill in a word, or "
                "click a word to mask it. The maps below are drawn all the same.")
        return
    if len(found) > MAX_MASKS_SHOWN:
        st.warning(f"The text has {len(found)} mask tokens; this page lists the predictions at the first "
                   f"{MAX_MASKS_SHOWN} (the maps show every token).")
    st.dataframe(predictions_frame(trace), hide_index=True, width="stretch",
                 column_config={"probability": st.column_config.NumberColumn(format="%.4f")})


def fill_in_panel(trace: AttentionTrace, model: EncoderModel) -> None:
    """The text with every mask filled by its most probable token, and the top-k at each mask (or how to add one);
    where `model` has no masked-language-model head, the text as read and one line in their place."""
    with st.container(border=True):
        timing = trace.timings.get("total_ms")
        pair = trace.settings.get("text_pair") is not None
        tokens = f"{count(len(trace.source_tokens), 'token')}{' (a pair: A, then B)' if pair else ''}"
        device = f"{trace.device}" + (f" · {timing:.0f} ms" if timing else "")
        if not model.has_head:
            show_text("Read", trace.source_text)
            st.info(no_head_line(model))
            st.caption(f"{tokens} · {device}")
            return
        show_text("Filled in", trace.translation)
        _predictions_part(trace, model.mask_token)
        st.caption(f"{tokens} · {count(len(predictions(trace)), 'mask')} · log-probability of the filled-in tokens "
                   f"{trace.log_probability:.3f} · {device}")


def pair_start(session: Session, trace: AttentionTrace) -> int | None:
    """Where sentence B starts among the trace's tokens (after sentence A and its special tokens), None for one
    sentence."""
    if trace.settings.get("text_pair") is None:
        return None
    return len(session.model.encode(trace.source_text))


def mark_pair(fig: go.Figure, start: int | None) -> go.Figure:
    """A line on a heatmap between sentence A and sentence B (none for one sentence)."""
    if start is not None:
        line = dict(color=PAIR_COLOR, width=2, dash="dot")
        fig.add_vline(x=start - 0.5, line=line)
        fig.add_hline(y=start - 0.5, line=line)
    return fig
