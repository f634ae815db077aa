"""The logit lens page's sections, for any model that writes text: the grid of each row's top token, the chosen
cell, one token's probability and rank through the rows, and the attention of the block that changed the cell most."""

from __future__ import annotations

from functools import partial

import numpy as np
import streamlit as st

from app import sessions, state, widgets
from app.page_settings import LOGIT_LENS as own
from viz_model.nn.lens_reading import LogitLens
from viz_model.plot.lens_figures import lens_grid_figure, token_curve_figure
from viz_model.plot.row_strip_figures import strip_figure
from viz_model.trace import AttentionTrace

TOP_K = 5
GRID_POSITIONS = 48  # the grid draws a long text's last ones

WHAT = ("Each row reads the residual stream, the running sum every block adds to, as if the model stopped there: "
        "through its final norm and unembedding (with its logit soft cap where it has one). Row 0 reads the "
        "embeddings (with what the model adds before its first block); the last row is the model's own output. Each "
        "cell names the most likely next token at that point, coloured by its probability. Early rows are not "
        "calibrated: the final norm and unembedding were trained for the last row alone (the tuned lens, which "
        "learns a map per row, is not built here).")


@st.cache_data(show_spinner=False, max_entries=8)
def language_model_lens(ref: sessions.ModelRef, prompt: str | list[dict[str, str]], track: tuple[int, ...]
                        ) -> LogitLens:
    """The language model's lens of `prompt` (text or chat messages), `track`'s tokens followed; cached."""
    return sessions.load_model(ref).logit_lens(prompt, TOP_K, track=list(track))


@st.cache_data(show_spinner=False, max_entries=8)
def translator_lens(ref: sessions.ModelRef, text: str, output_ids: tuple[int, ...], track: tuple[int, ...]
                    ) -> LogitLens:
    """The translator's decoder lens of `text` and its output `output_ids` (the trace's), `track` followed; cached."""
    return sessions.searching_model(ref).logit_lens(text, TOP_K, track=list(track), forced_ids=list(output_ids))


def heading() -> None:
    st.title("Logit lens")
    st.caption("What the model would say after each block: its residual stream read through its own unembedding, "
               "position by position.")


def measured(compute) -> LogitLens:
    """`compute(track)` (a cached lens): the lens, then again with the chosen token followed; the page stops where
    it cannot be read (said here)."""
    try:
        with st.spinner("Reading the residual stream…"):
            lens = compute(())
            token = chosen_token(lens, chosen_cell(lens)[1])
            return compute((token,))
    except ValueError as err:
        widgets.input_problem(err, "The lens cannot be read: ")
        st.stop()


def shown_start(lens: LogitLens) -> int:
    """The first position the grid draws (a long text: its last `GRID_POSITIONS`)."""
    return max(0, len(lens.ids) - GRID_POSITIONS)


def chosen_cell(lens: LogitLens) -> tuple[int, int]:
    """The (row, position) chosen, kept among the drawn cells (by default the last row at the last position)."""
    rows, positions = lens.num_rows, len(lens.ids)
    row, position = own.row.get(), own.position.get()
    if row is None or not 0 <= row < rows:
        own.row.set(rows - 1)
    if position is None or not shown_start(lens) <= position < positions:
        own.position.set(positions - 1)
    return own.row.get(), own.position.get()


def candidates(lens: LogitLens, position: int) -> dict[int, str]:
    """The tokens one can follow at `position` and their pieces: every row's top candidates there, the last row's
    first."""
    seen: dict[int, str] = {}
    for row in reversed(range(lens.num_rows)):
        for token, piece in zip(lens.top_ids[row, position].tolist(), lens.top_tokens[row][position]):
            seen.setdefault(int(token), piece)
    return seen


def chosen_token(lens: LogitLens, position: int) -> int:
    """The token followed, kept among `position`'s candidates (by default the model's own prediction there)."""
    options = list(candidates(lens, position))
    if own.token.get() not in options:
        own.token.set(options[0])
    return own.token.get()


def pick_cell(chart_key: str) -> None:
    """A click on the grid chooses its cell."""
    point = state.selected_point(st.session_state.get(chart_key))
    if point is not None and len(point) == 2:
        own.row.set(int(point[0]))
        own.position.set(int(point[1]))
        own.redraws.set(own.redraws.get() + 1)


def grid(lens: LogitLens, what: str) -> None:
    """The rows x positions grid (`what`: the text it reads), a click or the pickers below choosing a cell."""
    start = shown_start(lens)
    row, position = chosen_cell(lens)
    fig = lens_grid_figure(lens.window(start, len(lens.ids)), f"Top next token after each block {what}",
                           (row, position), first=start)
    if start:
        st.caption(f"The grid draws the last {GRID_POSITIONS} of {len(lens.ids)} positions.")
    chart_key = f"ll_grid_{own.redraws.get()}"
    widgets.chart(fig, "logit-lens", key=chart_key, on_select=partial(pick_cell, chart_key))
    st.caption(WHAT)


def cell_pickers(lens: LogitLens) -> tuple[int, int]:
    """The chosen cell's row and position (a click on the grid sets them too)."""
    left, right = st.columns(2)
    with left:
        state.bound(st.selectbox, "Row", own.row, list(range(lens.num_rows)), format_func=lens.row_label)
    with right:
        state.bound(st.selectbox, "Position", own.position, list(range(shown_start(lens), len(lens.ids))),
                    format_func=lambda p: f"{p}: {lens.tokens[p]}")
    return own.row.get(), own.position.get()


def token_section(lens: LogitLens, position: int) -> None:
    """One token's probability and rank at `position` through the rows."""
    st.subheader("One token through the rows")
    pieces = candidates(lens, position)
    state.bound(st.selectbox, "Token", own.token, list(pieces), format_func=lambda t: f"{pieces[t]} (id {t})",
                help="Any token among the candidates at this position in some row; by default the model's own "
                     "prediction.")
    token = own.token.get()
    probabilities, ranks = lens.token_curve(token, position)
    labels = [lens.row_label(r) for r in range(lens.num_rows)]
    widgets.chart(token_curve_figure(probabilities, ranks, labels, f"{pieces[token]} after position {position} "
                                     f"({lens.tokens[position]}), row by row"), "logit-lens-token")


def deciding_maps(lens: LogitLens, trace: AttentionTrace, row: int, position: int,
                  kinds: tuple[str, ...]) -> None:
    """The attention rows at `position` of every head of the block that changed the chosen cell's top token most
    (`kinds`: the attention of that block to draw: "decoder", and "cross" for a translator)."""
    block = lens.deciding_block(row, position)
    top = lens.top_tokens[row][position][0]
    st.subheader(f"Block {block}: where {top!r} changed most")
    curve = lens.top_curves[row, position]
    st.caption(f"The probability of {top!r} at position {position} goes from {curve[block - 1]:.3f} before block "
               f"{block} to {curve[block]:.3f} after it, the largest change of any block. Its heads' attention from "
               "this position:")
    for kind in kinds:
        heads = trace.map_shape(kind, block - 1)[0]
        keys = trace.axes(kind)[1]
        keys = keys[:position + 1] if kind == "decoder" else keys
        rows = np.stack([trace.head_map(kind, block - 1, h, slice(position, position + 1))[0, :len(keys)]
                         for h in range(heads)])
        title = f"Block {block} {'self-' if kind == 'decoder' else 'cross-'}attention from position {position}"
        widgets.chart(strip_figure(rows, keys, [f"head {h + 1}" for h in range(heads)], title),
                      f"logit-lens-{kind}-maps")


def every_part(lens: LogitLens, trace: AttentionTrace, what: str, kinds: tuple[str, ...]) -> None:
    """The grid, the cell's pickers, the token's curve and the deciding block's attention."""
    grid(lens, what)
    row, position = cell_pickers(lens)
    token_section(lens, position)
    deciding_maps(lens, trace, row, position, kinds)
