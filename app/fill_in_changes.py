"""What a change to an encoder (heads switched off, [SEP] hidden) does to its fill-mask predictions: each mask's top
tokens before and after, side by side (the Ablation and Attention sinks pages)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app.fill_in import MAX_MASKS_SHOWN, has_head_or_say, mask_code, predictions, reading_or_stop
from app.sessions import Session
from app.texts import md_escape
from viz_model.trace import AttentionTrace

COLUMNS = ["mask", "rank", "token", "probability", "token after", "probability after"]


def side_by_side(before: list[dict], after: list[dict]) -> pd.DataFrame:
    """Per mask (1-based, the first `MAX_MASKS_SHOWN`) and rank, the top token and its probability before and after
    (`MaskPrediction`s as dicts, in mask order)."""
    rows = [{"mask": m + 1, "rank": r + 1, "token": token, "probability": p, "token after": other,
             "probability after": q}
            for m, (first, second) in enumerate(list(zip(before, after))[:MAX_MASKS_SHOWN])
            for r, (token, p, other, q) in enumerate(zip(first["tokens"], first["probabilities"], second["tokens"],
                                                        second["probabilities"]))]
    return pd.DataFrame(rows, columns=COLUMNS)


def changes_table(before: list[dict], after: list[dict], what: str) -> None:
    """The side-by-side table (`what`: the change, as the columns' note names it) and whether any first choice
    moved."""
    st.dataframe(side_by_side(before, after), hide_index=True, width="stretch",
                 column_config={name: st.column_config.NumberColumn(format="%.4f")
                                for name in ("probability", "probability after")})
    moved = [m + 1 for m, (a, b) in enumerate(zip(before, after)) if a["ids"][0] != b["ids"][0]]
    st.caption(md_escape(f"Each mask's top tokens as the intact model ranks them (left) and {what} (right)."))
    if moved:
        st.warning(f"The first choice changed at mask {', '.join(map(str, moved))}.")
    else:
        st.success("Every mask's first choice stayed the same.")


def no_mask_line(session: Session, why: str = "") -> None:
    """The one line a page that needs a mask token says where the text has none (`why`: what the mask is for)."""
    st.info(f"The text has no mask token: write {mask_code(session.model.mask_token)} where the model should fill in "
            f"a word{why}, or click a word to mask it (Change the sentence above).")


def masked_reading_or_stop(session: Session, page: str) -> AttentionTrace:
    """The current text's trace where it has a mask token; else one line and the page (`page`, as its sentence
    names it) stops (as where the model has no masked-language-model head). With a pair, a line that the page reads
    sentence A alone."""
    if not has_head_or_say(session.model, page):
        st.stop()
    trace = reading_or_stop(session)
    if not predictions(trace):
        no_mask_line(session)
        st.stop()
    if trace.settings.get("text_pair") is not None:
        st.caption(f"{page} reads sentence A alone (the second sentence is left out).")
    return trace
