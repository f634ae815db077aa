"""Positional encoding with an encoder open, in the model's own scheme: BERT's and RoBERTa's learned tables (RoBERTa's
rows offset by the pad id), ModernBERT's two RoPE bases, DeBERTa's log buckets and its three terms split on a real
head, adding up to the scores the model computed."""

import numpy as np
import pandas as pd
import streamlit as st

from app import fill_in, sessions, widgets
from app.texts import count
from app.views.positional import position_tabs
from viz_model.lessons import encoder_positions
from viz_model.lessons.position_parts import ScoreSplit
from viz_model.plot import position_figures, positional_trace_figures

BUCKET_DISTANCE = 64  # the relative positions the buckets figure spans, either side
TABS = {"learned": ["Its table of positions", "The rows your text reads"], "rope": ["Two RoPE bases"],
        "disentangled": ["Relative buckets", "Three terms of a head"]}

session = sessions.require_session()
model = session.model
config = model.config
st.title("Positional encoding")
st.caption(f"{session.name}, an encoder. {position_tabs.scheme_caption(config)}"
           if config.positional in position_tabs.SCHEME_NAMES else
           f"{session.name}, an encoder: DeBERTa's disentangled attention. Position is not added to the input; it "
           "enters every head's scores as two terms of their own beside the content one.")
trace = fill_in.reading_or_stop(session)
tokens = trace.source_tokens
labels = TABS[config.positional]
tabs = dict(zip(labels, st.tabs(labels, default=labels[0])))

if config.positional == "learned":
    with tabs["Its table of positions"]:
        position_tabs.table_views(encoder_positions.learned_rows(model))
    with tabs["The rows your text reads"]:
        rows = encoder_positions.rows_read(model, trace.source_ids)
        if config.pad_positions:
            st.caption(f"RoBERTa's positions are offset by the pad id ({config.pad_id}): its first token reads row "
                       f"{config.pad_id + 1}, and a pad reads row {config.pad_id}; rows 0 to {config.pad_id} are "
                       f"never read by a real token, so it reads at most {model.network.longest} tokens of its "
                       f"{config.max_positions} rows.")
        else:
            st.caption("Token t reads row t of the table, from row 0.")
        fig = positional_trace_figures.positional_heatmap(
            trace.source_positional, tokens, f"The rows your text reads: rows {rows[0]} to {rows[-1]}")
        widgets.chart(fig, "encoder-position-rows", key="pe_enc_rows_chart")
        widgets.exports(fig, "encoder-position-rows", "pe_enc_rows")
        st.dataframe(pd.DataFrame({"token": tokens, "row": rows}), width="content")

elif config.positional == "rope":
    with tabs["Two RoPE bases"]:
        wavelengths = encoder_positions.rope_wavelengths(model)
        local = [i + 1 for i in config.windowed_layers]
        st.caption(f"Each head of {config.d_head} dimensions turns {config.d_head // 2} pairs of its queries and "
                   f"keys by the position, RoPE's way. The layers that see every key turn with base "
                   f"{config.rope_base:g}" + ("" if not local else
                   f"; the local layers ({', '.join(map(str, local))}), which see only ±{config.window_radius} "
                   f"tokens, with base {config.windowed_rope_base or config.rope_base:g}") + ".")
        marks = {f"at most {model.network.longest} tokens": model.network.longest}
        if config.window_radius:
            marks[f"the local window, {2 * config.window_radius + 1} tokens"] = 2 * config.window_radius + 1
        fig = position_figures.rope_bases_figure(wavelengths, marks)
        widgets.chart(fig, "rope-bases", key="pe_enc_rope_chart")
        widgets.exports(fig, "rope-bases", "pe_enc_rope")
        st.caption("A pair whose wavelength is shorter than the span its layer sees tells positions apart; a longer "
                   "one barely turns there. A small local base keeps the local layers' pairs turning within their "
                   "window.")
        st.dataframe(pd.DataFrame({f"{name} wavelength": lengths for name, lengths in wavelengths.items()}),
                     width="stretch")

else:
    with tabs["Relative buckets"]:
        offsets, buckets = encoder_positions.buckets(model, BUCKET_DISTANCE)
        st.caption("DeBERTa reads the relative position δ = i − j of query i and key j"
                   + (f", kept as it is within ±{config.position_buckets // 2} and log-spaced beyond, up to "
                      f"{config.max_relative_positions}: {count(config.position_buckets, 'bucket')} either side"
                      if config.position_buckets else f", clamped to ±{config.max_relative_positions}")
                   + ". Each bucket has one row of a table of relative embeddings every layer shares.")
        fig = position_figures.relative_buckets_figure(
            {"offset": offsets, "DeBERTa": buckets}, "DeBERTa: the bucket of each relative position (query − key)",
            "relative position i − j")
        widgets.chart(fig, "deberta-buckets", key="pe_enc_buckets_chart")
        widgets.exports(fig, "deberta-buckets", "pe_enc_buckets")
    with tabs["Three terms of a head"]:
        layer, head = position_tabs.split_head_choice(config.encoder_layers, config.heads)
        split = session.disentangled_split(trace.source_text, trace.settings.get("text_pair"), layer, head)
        fig = position_figures.score_split_figure(
            ScoreSplit(split.scores, split.terms, "DeBERTa's three terms"), tokens, tokens,
            f"Layer {layer + 1}, head {head + 1}: score = c2c + c2p + p2c")
        widgets.chart(fig, "deberta-terms", key="pe_enc_terms_chart")
        widgets.exports(fig, "deberta-terms", "pe_enc_terms")
        widgets.matrix_table(pd.DataFrame([{"term": name, "mean": float(term.mean()),
                                            "mean |term|": float(np.abs(term).mean())}
                                           for name, term in split.terms.items()]).set_index("term"))
        traced = trace.encoder_attentions[layer][head]
        a, b = st.columns(2)
        a.metric("Max difference: c2c + c2p + p2c − the scores", f"{split.residual:.1e}",
                 help="Each term as the model's forward computed it (content to content q·k, content to position "
                      "q·Kr[δ], position to content k·Qr[δ], each divided by √(d_head × (1 + terms))), against the "
                      "scores its softmax read.")
        b.metric("Max difference: softmax of the scores − the traced map",
                 f"{np.abs(split.weights - traced).max():.1e}",
                 help="The weights of this head against the map Fill in the blank & explore draws.")
        missing = [name for name in ("c2p", "p2c") if name not in config.pos_att_type]
        if missing:
            st.caption(f"This model computes no {' or '.join(missing)} term: it is zeros here.")
