"""Attention by hand: the notes' worked example step by step (editable), the 1/sqrt(d_k) scaling and why, the causal
mask on it, and multi-head attention opened up. Every number comes from `viz_model.nn.attention`."""

import numpy as np
import streamlit as st

from app import sessions, state, widgets
from app.page_settings import BY_HAND as own
from viz_model.lessons import hand_attention, lesson_inputs, typed_matrices
from viz_model.plot import by_hand_figures

session = sessions.require_session()
config = session.model.config
MATRICES = {"X": ("X: one row per input x1, x2, …", "d"), "W_q": ("W_q: one row per column of X", "q"),
            "W_k": ("W_k: one row per column of X", "k"), "W_v": ("W_v: one row per column of X", "v")}
EXAMPLE = {"X": hand_attention.EXAMPLE_X, "W_q": hand_attention.EXAMPLE_WQ, "W_k": hand_attention.EXAMPLE_WK,
           "W_v": hand_attention.EXAMPLE_WV}

st.title("Attention by hand")
st.caption("Three inputs, three weight matrices, and the formula of the paper, one step at a time. The numbers are "
           "computed by the same attention function the translation model runs (viz_model.nn.attention).")
st.latex(r"\mathrm{Attention}(Q,K,V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)V,"
         r"\qquad Q = XW_q,\; K = XW_k,\; V = XW_v")
st.caption(f"In the loaded model: d_model = {config.d_model}, {config.heads} heads of d_k = {config.d_head}. Here: "
           "the worked example of the source notes, with d_model = 4 and d_k = d_v = 3.")


# --- the editable example ----------------------------------------------------------------------------------------
def _set_bases(values: dict[str, np.ndarray]) -> None:
    own.base.set({k: np.array(v, dtype=np.float64) for k, v in values.items()})
    for name in MATRICES:
        own.editor(name).pop()  # the editors start again from the new tables


def _reset() -> None:
    _set_bases(EXAMPLE)
    for width in (own.d_in, own.d_k, own.d_v):
        width.set(width.default)  # the worked example's


def _resize() -> None:
    """New widths: keep what fits of the current matrices, zero-fill the rest."""
    current = own.current.get() or own.base.get()
    d_in, d_k, d_v = int(own.d_in.get()), int(own.d_k.get()), int(own.d_v.get())
    x = current["X"]
    _set_bases({"X": typed_matrices.resized(x, x.shape[0], d_in),
                "W_q": typed_matrices.resized(current["W_q"], d_in, d_k),
                "W_k": typed_matrices.resized(current["W_k"], d_in, d_k),
                "W_v": typed_matrices.resized(current["W_v"], d_in, d_v)})


if own.base.get() is None:
    _reset()

st.subheader("1. The inputs and the weights")
st.caption("Edit any cell; add or delete rows with the table's controls. Widths change with the numbers below.")
with st.container(horizontal=True, vertical_alignment="bottom"):
    st.number_input("Width of X (d_model)", 1, typed_matrices.MAX_COLS, key=own.d_in.key, on_change=_resize)
    st.number_input("d_k (columns of W_q, W_k)", 1, typed_matrices.MAX_COLS, key=own.d_k.key, on_change=_resize)
    st.number_input("d_v (columns of W_v)", 1, typed_matrices.MAX_COLS, key=own.d_v.key, on_change=_resize)
    st.button("Reset to the worked example", on_click=_reset, icon=":material/restart_alt:")

parsed: dict[str, np.ndarray] = {}
problems: list[str] = []
columns = st.columns([4, 3, 3, 3])
for column, (name, (label, col_prefix)) in zip(columns, MATRICES.items()):
    with column:
        base = typed_matrices.matrix_frame(own.base.get()[name], col_prefix)
        edited = st.data_editor(base, key=own.editor(name).key, num_rows="dynamic", width="stretch", hide_index=True)
        st.caption(label)
        try:
            parsed[name] = typed_matrices.parse_matrix(edited, name)
        except lesson_inputs.InputError as err:
            problems.append(str(err))
if not problems:
    try:
        hand_attention.check_shapes(parsed["X"], parsed["W_q"], parsed["W_k"], parsed["W_v"])
    except lesson_inputs.InputError as err:
        problems.append(str(err))
for problem in problems:
    widgets.input_problem(lesson_inputs.InputError(problem))
valid = not problems
if valid:
    own.current.set(parsed)
    x, wq, wk, wv = parsed["X"], parsed["W_q"], parsed["W_k"], parsed["W_v"]
    example = hand_attention.is_example(x, wq, wk, wv)
    n = x.shape[0]
    inputs = [f"x{i + 1}" for i in range(n)]
    plain = hand_attention.attention_by_hand(x, wq, wk, wv, scale=False)
    scaled = hand_attention.attention_by_hand(x, wq, wk, wv, scale=True)
else:
    st.info("Fix the tables above to see the steps; the section on scaling below does not need them.")

# --- step by step ------------------------------------------------------------------------------------------------
if valid:
    st.subheader("2. Step by step (no scaling, as in the notes)")
    a, b, c = st.columns(3)
    for column, values, label, prefix in ((a, plain.q, "Queries Q = X W_q", "q"), (b, plain.k, "Keys K = X W_k", "k"),
                                          (c, plain.v, "Values V = X W_v", "v")):
        with column:
            st.markdown(f"**{label}**")
            widgets.matrix_table(typed_matrices.labelled(values, inputs, f"{prefix}·"), digits=2)
    options = list(range(n))
    state.clamp_choice(own.query, options, 0, "Query")
    state.bound(st.selectbox, "Follow the query of input", own.query, options,
                 format_func=lambda i: f"x{i + 1} (query q{i + 1})")
    i = int(own.query.get())
    a, b = st.columns(2)
    with a:
        st.markdown(f"**Scores Q Kᵀ** (row {i + 1}: q{i + 1} · k_j)")
        widgets.matrix_table(typed_matrices.labelled(plain.scores, [f"q{r + 1}" for r in range(n)],
                                                     [f"k{j + 1}" for j in range(n)]), digits=4)
    with b:
        st.markdown("**Softmax of each row** (the attention weights)")
        widgets.matrix_table(typed_matrices.labelled(plain.weights, [f"q{r + 1}" for r in range(n)],
                                                     [f"k{j + 1}" for j in range(n)]), digits=4)
    a, b = st.columns(2)
    with a:
        st.markdown(f"**Weighted values for q{i + 1}**: weight × v_j, then summed")
        weighted = plain.weighted[i]
        rows = typed_matrices.labelled(np.vstack([weighted, weighted.sum(axis=0)]),
                                       [f"{plain.weights[i, j]:.4f} × v{j + 1}" for j in range(n)] + ["sum = output"],
                                       "out·")
        widgets.matrix_table(rows, digits=4)
    with b:
        st.markdown("**Output** (one row per input)")
        widgets.matrix_table(typed_matrices.labelled(plain.output, [f"out{r + 1}" for r in range(n)], "out·"), digits=4)

    if example:
        st.markdown("**The source notes' numbers next to the exact ones** (query 1)")
        notes = hand_attention.NOTES
        table = [
            {"quantity": "scores q1·k", "notes": str(notes["scores_q1"]), "notes, rounded": "",
             "exact (this page)": ", ".join(f"{v:.4f}" for v in plain.scores[0])},
            {"quantity": "softmax", "notes": str(notes["softmax_q1"]),
             "notes, rounded": str(notes["softmax_q1_rounded"]),
             "exact (this page)": ", ".join(f"{v:.4f}" for v in plain.weights[0])},
            {"quantity": "output 1", "notes": str(notes["output1_exact"]),
             "notes, rounded": str(notes["output1_rounded"]),
             "exact (this page)": ", ".join(f"{v:.4f}" for v in plain.output[0])},
            {"quantity": "output 1 from the rounded weights", "notes": "",
             "notes, rounded": str(notes["output1_rounded"]),
             "exact (this page)": ", ".join(f"{v:.4f}"
                                            for v in hand_attention.round_like_notes(plain.weights[0]) @ plain.v)},
        ]
        st.dataframe(table, hide_index=True, width="stretch")
        st.caption("The notes round the softmax to [0, 0.5, 0.5] to compute by hand; that gives [2.0, 7.0, 1.5] "
                   "instead of the exact [1.94, 6.68, 1.60].")
    else:
        st.caption("You changed the example: the source notes' numbers apply to the original only "
                   "(“Reset to the worked example” brings it back).")

# --- the scaled version ------------------------------------------------------------------------------------------
if valid:
    st.subheader(f"3. The same with the paper's scaling: ÷ √d_k = ÷ √{plain.d_k}")
    a, b, c = st.columns(3)
    with a:
        st.markdown(f"**Scores Q Kᵀ / √{plain.d_k}**")
        widgets.matrix_table(typed_matrices.labelled(scaled.scores, "q", "k"), digits=4)
    with b:
        st.markdown("**Softmax (scaled)**")
        widgets.matrix_table(typed_matrices.labelled(scaled.weights, "q", "k"), digits=4)
    with c:
        st.markdown("**Output (scaled)**")
        widgets.matrix_table(typed_matrices.labelled(scaled.output, "out", "out·"), digits=4)
    left, right = st.columns(2)
    with left:
        fig = by_hand_figures.weights_figure(plain.weights, inputs, "Weights without scaling")
        widgets.chart(fig, "weights-unscaled", key="abh_plain_chart")
    with right:
        fig = by_hand_figures.weights_figure(scaled.weights, inputs, f"Weights with ÷ √{plain.d_k}")
        widgets.chart(fig, "weights-scaled", key="abh_scaled_chart")
    st.caption("Dividing by √d_k flattens the softmax: the weights move away from 0 and 1.")

st.subheader("4. Why scale: softmax saturation against d_k")
st.caption("Dot products of random vectors with unit-variance entries have variance d_k: they grow with the width, "
           "and the softmax of large scores is nearly one-hot (tiny gradients). Divided by √d_k they keep variance 1.")
own.keys.init()
own.samples.init()
own.seed.init()
a, b, c = st.columns(3)
with a:
    state.bound(st.slider, "Keys per query", own.keys, 2, 64)
with b:
    state.bound(st.select_slider, "Random queries per d_k", own.samples, [200, 500, 1000, 2000])
with c:
    state.bound(st.number_input, "Seed", own.seed, min_value=0, max_value=2**31 - 1, step=1)
try:
    curve = sessions.compute_saturation((1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), int(own.keys.get()),
                                        int(own.samples.get()), int(own.seed.get()))
except lesson_inputs.InputError as err:
    widgets.input_problem(err)
else:
    fig = by_hand_figures.saturation_figure(curve, int(own.keys.get()))
    widgets.chart(fig, "softmax-saturation", key="abh_sat_chart")
    widgets.exports(fig, "softmax-saturation", "abh_sat", csv=lambda: curve)

# --- causal masking ----------------------------------------------------------------------------------------------
if valid:
    st.subheader("5. Masking: the decoder's causal mask on the example")
    st.caption("In the decoder, input i may only look at inputs 1..i: the scores above the diagonal become −∞ before "
               "the softmax, so their weights are exactly 0 and output 1 is v1 itself.")
    own.mask_scaled.init()
    state.bound(st.toggle, "With the ÷ √d_k scaling", own.mask_scaled)
    masked = hand_attention.attention_by_hand(x, wq, wk, wv, scale=bool(own.mask_scaled.get()), causal=True)
    left, right = st.columns(2)
    with left:
        fig = by_hand_figures.weights_figure(masked.weights, inputs, "Causally masked weights", mask=masked.mask)
        widgets.chart(fig, "weights-causal", key="abh_causal_chart")
    with right:
        st.markdown("**Output with the causal mask**")
        widgets.matrix_table(typed_matrices.labelled(masked.output, "out", "out·"), digits=4)
        st.markdown("**Mask** (1 = may attend)")
        st.dataframe(typed_matrices.labelled(masked.mask.astype(float), "q", "k").astype(int), width="content")

# --- multi-head --------------------------------------------------------------------------------------------------
if valid:
    st.subheader("6. Multi-head attention: split, attend, concatenate, project")
    d_in = x.shape[1]
    divisors = [h for h in range(1, d_in + 1) if d_in % h == 0]
    st.caption(f"The library's MultiHeadAttention with d_model = {d_in} (the width of X), random weights from the seed "
               "and zero biases: project X to Q, K, V of width d_model, split each into h heads of d_model/h "
               "columns, attend in every head at once, concatenate the heads, multiply by W_O. "
               f"The loaded model does this with {config.heads} heads of {config.d_head}.")
    own.heads.init(divisors[min(1, len(divisors) - 1)])
    own.head_seed.init()
    a, b, c = st.columns(3)
    with a:
        state.clamp_choice(own.heads, divisors, divisors[min(1, len(divisors) - 1)], "Heads")
        state.bound(st.selectbox, "Heads h", own.heads, divisors,
                     help="d_model must be divisible by h: the choices are the divisors of the width of X.")
    with b:
        state.bound(st.number_input, "Weight seed", own.head_seed, min_value=0, max_value=2**31 - 1, step=1)
    with c:
        own.head_causal.init()
        state.bound(st.toggle, "Causal mask", own.head_causal)
    try:
        steps = hand_attention.multi_head_by_hand(x, int(own.heads.get()), int(own.head_seed.get()),
                                                  bool(own.head_causal.get()))
    except lesson_inputs.InputError as err:
        widgets.input_problem(err)
    else:
        head_columns = st.columns(min(steps.heads, 4))
        for h in range(steps.heads):
            with head_columns[h % len(head_columns)]:
                st.markdown(f"**Head {h + 1}**: Q, K, V columns {h * steps.d_head + 1}–{(h + 1) * steps.d_head}")
                widgets.matrix_table(typed_matrices.labelled(np.hstack([steps.q[h], steps.k[h], steps.v[h]]), inputs,
                                                             [f"q{j + 1}" for j in range(steps.d_head)]
                                                             + [f"k{j + 1}" for j in range(steps.d_head)]
                                                             + [f"v{j + 1}" for j in range(steps.d_head)]), digits=3)
        fig = by_hand_figures.heads_figure(steps.weights, inputs, f"Attention weights of the {steps.heads} heads "
                                           f"(d_k = {steps.d_head} each, scaled)")
        widgets.chart(fig, "multi-head-weights", key="abh_heads_chart")
        a, b = st.columns(2)
        with a:
            st.markdown("**Heads concatenated** (each head's output side by side)")
            widgets.matrix_table(typed_matrices.labelled(steps.concat, inputs, "c"), digits=4)
        with b:
            st.markdown("**× W_O = output**")
            widgets.matrix_table(typed_matrices.labelled(steps.output, inputs, "o"), digits=4)
        st.metric("Difference from MultiHeadAttention.forward on the same input", f"{steps.difference:.1e}",
                  help="The steps above, taken one by one, against the module's own forward pass.")
