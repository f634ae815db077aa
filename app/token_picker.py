"""Picking a token of a long prompt: by search (type a word, pick among its occurrences) or on a strip of the tokens
around the current one, scrolled by a slider; never one select box of every token."""

from __future__ import annotations

import re

import streamlit as st

from app.setting_types import Setting

MAX_HITS = 500  # occurrences a search lists
STRIP_SIDE = 12  # tokens the strip shows either side of the current one
MARKERS = ("▁", "Ġ", "Ċ")  # SentencePiece's and byte-level BPE's space and newline markers


def token_text(token: str) -> str:
    """A token as it reads in the text (its space marker a space)."""
    return token.replace("▁", " ").replace("Ġ", " ").replace("Ċ", "\n")


def occurrences(tokens: list[str], query: str) -> list[int]:
    """The positions of the tokens where `query` (case-insensitive, spaces at its ends ignored) starts in the text
    the tokens spell, first to last; a word split into several tokens is found at its first."""
    query = query.strip().lower()
    if not query:
        return []
    starts, text = [], []
    for token in tokens:
        starts.append(sum(map(len, text)))
        text.append(token_text(token).lower())
    joined = "".join(text)
    hits = []
    for match in re.finditer(re.escape(query), joined):
        position = max(0, _token_at(starts, match.start()))
        if not hits or hits[-1] != position:
            hits.append(position)
    return hits


def _token_at(starts: list[int], char: int) -> int:
    """The token whose text holds character `char` (`starts`: each token's first character)."""
    low, high = 0, len(starts) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if starts[middle] <= char:
            low = middle
        else:
            high = middle - 1
    return low


def in_context(tokens: list[str], position: int, side: int = 4) -> str:
    """``"812: …a man [riding] a bike…"``: a token with its neighbours, for a list of occurrences."""
    before = "".join(token_text(t) for t in tokens[max(0, position - side):position])
    after = "".join(token_text(t) for t in tokens[position + 1:position + 1 + side])
    return f"{position}: …{before}[{token_text(tokens[position])}]{after}…".replace("\n", "⏎")


def _copy(widget_key: str, setting: Setting[str], prefix: str) -> None:
    value = st.session_state.get(widget_key)
    if value is not None:
        setting.set(f"{prefix}{int(value)}")


def token_picker(tokens: list[str], setting: Setting[str], prefix: str = "q", what: str = "token",
                 default: int | None = None) -> int:
    """The position `setting` holds (``"q812"``; past the tokens, as a shorter prompt's: `default`, else 1), picked by
    a search of the prompt or on the strip of tokens around it (a slider scrolls the strip); returns it."""
    n = len(tokens)
    raw = setting.get("")
    fallback = default if default is not None and 0 <= default < n else min(1, n - 1)
    current = int(raw[1:]) if raw[:1] == prefix and raw[1:].isdigit() and int(raw[1:]) < n else fallback
    setting.set(f"{prefix}{current}")
    search, hits_column = st.columns([2, 3])
    with search:
        query = st.text_input(f"Find a {what}", key=f"{setting.key}_search", max_chars=100,
                              placeholder="a word of the prompt", help="Every place the text holds these letters "
                              "(any case) is listed beside: pick one to open its token.")
    if query.strip():
        hits = occurrences(tokens, query)
        with hits_column:
            if not hits:
                st.caption(f"No {what} of the prompt spells “{query.strip()}”.")
            else:
                shown = hits[:MAX_HITS]
                key = f"{setting.key}_hit"
                if st.session_state.get(key) not in shown:
                    st.session_state[key] = current if current in shown else shown[0]
                st.selectbox(f"{len(hits)} occurrences" + (f" (the first {MAX_HITS})" if len(hits) > MAX_HITS else ""),
                             shown, key=key, format_func=lambda i: in_context(tokens, i),
                             on_change=_copy, args=(key, setting, prefix))
                current = int(setting.get()[1:])
    slider_key, strip_key = f"{setting.key}_scroll", f"{setting.key}_strip"
    st.session_state[slider_key] = current
    st.slider(f"Scroll the prompt ({n} {what}s)", 0, n - 1, key=slider_key, on_change=_copy,
              args=(slider_key, setting, prefix))
    low, high = max(0, current - STRIP_SIDE), min(n, current + STRIP_SIDE + 1)
    st.session_state[strip_key] = current
    st.pills(f"{what.capitalize()}s {low} to {high - 1}: click one", list(range(low, high)), key=strip_key,
             format_func=lambda i: f"{i} {token_text(tokens[i]).strip() or '␣'}", on_change=_copy,
             args=(strip_key, setting, prefix))
    return current
