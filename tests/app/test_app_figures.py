"""Unit tests of the explorer's figure builders and pure helpers (no Streamlit, no browser)."""

from __future__ import annotations

import json
import math

import numpy as np
import plotly.graph_objects as go
import pytest
from support.app import INJECTION, TINY_CONFIG, arr  # noqa: E402

import viz_model  # noqa: E402
from app import figure_files, state, texts  # noqa: E402
from viz_model.analysis.layer_scores import layer_scores  # noqa: E402
from viz_model.plot import figure_style, map_figures, masking_figures, positional_trace_figures  # noqa: E402


@pytest.fixture(scope="module")
def model(app_model):
    return app_model


@pytest.fixture(scope="module")
def trace(app_trace):
    return app_trace


@pytest.fixture(scope="module")
def injected(model):
    return model.trace(INJECTION, beam=1, target=INJECTION)


def spec(fig: go.Figure) -> dict:
    """The JSON Streamlit sends to the browser."""
    return json.loads(fig.to_json())




def raw_html_free(fig: go.Figure) -> bool:
    text = fig.to_json()
    return "<img" not in text and "<script" not in text


# --- labels and maps ---------------------------------------------------------------------------------------------
def test_escape_turns_markup_into_text():
    assert figure_style.escape(INJECTION) == ("&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;alert(2)"
                                              "&lt;/script&gt;")
    assert figure_style.escape("a & b") == "a &amp; b"


@pytest.mark.parametrize("kind", map_figures.KINDS)
def test_attention_map_axes_follow_the_trace(trace, kind):
    queries, keys = trace.axes(kind)
    for layer in range(trace.num_layers[kind]):
        amap = map_figures.attention_map(trace, kind, layer, 0)
        assert amap.weights.shape == (len(queries), len(keys))
        assert amap.query_labels == list(queries) and amap.key_labels == list(keys)
        np.testing.assert_allclose(amap.weights.sum(axis=1), 1.0, atol=1e-5)
    notes = map_figures.attention_map(trace, kind, 0, 0).query_notes
    if kind == "encoder":
        assert set(notes) == {""}
    else:  # decoder rows are the decoder inputs; each predicted the next output token
        assert notes == [f"predicts {t}" for t in trace.output_tokens]


def test_layer_counts_come_from_the_trace(trace):
    assert trace.num_layers == {"encoder": TINY_CONFIG["encoder_layers"],
                                "decoder": TINY_CONFIG["decoder_layers"], "cross": TINY_CONFIG["decoder_layers"]}
    map_figures.attention_map(trace, "decoder", 2, 0)  # the decoder has a third layer ...
    with pytest.raises(ValueError, match="2 encoder layers"):
        map_figures.attention_map(trace, "encoder", 2, 0)  # ... the encoder has not


@pytest.mark.parametrize("bad, match", [(("sideways", 0, 0), "attention kind"), (("encoder", -1, 0), "out of range"),
                                        (("encoder", 0, 99), "4 heads"), (("encoder", 0, "median"), "head must be"),
                                        (("encoder", 0, True), "out of range")])
def test_bad_choices_raise_clear_errors(trace, bad, match):
    with pytest.raises(ValueError, match=match):
        map_figures.attention_map(trace, *bad)


def test_mean_and_max_over_heads(trace):
    stack = trace.encoder_attentions[1]
    np.testing.assert_allclose(map_figures.attention_map(trace, "encoder", 1, "mean").weights, stack.mean(0),
                               rtol=1e-6)
    np.testing.assert_allclose(map_figures.attention_map(trace, "encoder", 1, "max").weights, stack.max(0), rtol=1e-6)


def test_word_level_merges_pieces(model):
    trace = model.trace("Zwei Hunde spielen im Schnee.", beam=1)  # unseen words split into several pieces
    groups = map_figures.word_groups(trace.source_words)
    assert len(groups) < len(trace.source_tokens)
    amap = map_figures.attention_map(trace, "encoder", 0, 0, level="word")
    assert amap.weights.shape == (len(groups), len(groups))
    np.testing.assert_allclose(amap.weights.sum(axis=1), 1.0, atol=1e-5)  # "to a word" sums its pieces
    assert "".join(amap.query_labels) == "".join(trace.source_tokens)
    cross = map_figures.attention_map(trace, "cross", 0, "mean", level="word")
    assert cross.weights.shape == (len(map_figures.word_groups(trace.target_words)), len(groups))


def test_merge_words_is_sum_over_keys_and_mean_over_queries():
    w = np.array([[0.5, 0.25, 0.25], [0.1, 0.6, 0.3], [0.2, 0.2, 0.6]])
    merged = map_figures.merge_words(w, [[0, 1], [2]], [[0], [1, 2]])
    np.testing.assert_allclose(merged, [[(0.5 + 0.1) / 2, (0.5 + 0.9) / 2], [0.2, 0.8]])


def test_map_dataframe_has_unique_labels(trace):
    amap = map_figures.attention_map(trace, "cross", 0, 0)
    frame = map_figures.map_dataframe(amap)
    assert frame.shape == amap.weights.shape
    assert frame.index.is_unique and frame.columns.is_unique
    assert frame.index[0] == f"0:{trace.target_tokens[0]}"
    assert "0:" in frame.to_csv().splitlines()[0]


# --- head heatmap ------------------------------------------------------------------------------------------------
def test_head_heatmap_has_tokens_on_both_axes_and_exact_hover(trace):
    fig = map_figures.head_heatmap(trace, "cross", 1, 2)
    data = spec(fig)
    heat = data["data"][0]
    assert heat["type"] == "heatmap"
    layout = data["layout"]
    assert layout["yaxis"]["ticktext"] == [figure_style.escape(t) for t in trace.target_tokens]
    assert layout["xaxis"]["ticktext"] == [figure_style.escape(t) for t in trace.source_tokens]
    assert "queries" in layout["yaxis"]["title"]["text"] and "keys" in layout["xaxis"]["title"]["text"]
    assert "weight %{z:.6f}" in heat["hovertemplate"]
    assert heat["colorbar"]["title"]["text"] == "weight"
    np.testing.assert_allclose(arr(heat["z"]), trace.cross_attentions[1][2], rtol=1e-6)
    assert layout["title"]["text"] == "Cross-attention (decoder → encoder): layer 2, head 3"


def test_repeated_tokens_keep_their_own_rows(model):
    trace = model.trace("the dog and the dog and the dog.", beam=1)
    fig = map_figures.head_heatmap(trace, "encoder", 0, 0)
    assert len(spec(fig)["layout"]["yaxis"]["tickvals"]) == len(trace.source_tokens)


def test_injected_text_is_escaped_everywhere(injected):
    assert "<" in "".join(injected.source_tokens)
    for fig in (map_figures.head_heatmap(injected, "cross", 0, 0), map_figures.model_view(injected, "encoder"),
                map_figures.head_view(injected, "encoder", 0, [0, 1]),
                map_figures.token_focus(injected, "decoder", "query", 2),
                positional_trace_figures.positional_heatmap(injected.source_positional, injected.source_tokens),
                map_figures.head_heatmap(injected, "encoder", 0, "mean", level="word")):
        assert raw_html_free(fig)
    ticks = spec(map_figures.head_heatmap(injected, "encoder", 0, 0))["layout"]["xaxis"]["ticktext"]
    assert "&lt;" in ticks


def test_long_sentences_get_taller_readable_maps(model):
    from support.app import long_sentence

    trace = model.trace(long_sentence(30), beam=1)
    short = model.trace("Two dogs.", beam=1)
    tall = map_figures.head_heatmap(trace, "encoder", 0, 0).layout.height
    assert tall > map_figures.head_heatmap(short, "encoder", 0, 0).layout.height
    assert len(map_figures.head_heatmap(trace, "encoder", 0, 0).layout.xaxis.tickvals) == len(trace.source_tokens)


# --- model view --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", map_figures.KINDS)
def test_model_view_tiles_every_layer_and_head(trace, kind):
    fig = map_figures.model_view(trace, kind, selected=(1, 2))
    data = spec(fig)
    heat, picks = data["data"]
    layers, heads = trace.num_layers[kind], trace.num_heads
    q, k = trace.attentions(kind)[0].shape[1:]
    z = arr(heat["z"])
    assert z.shape == (layers * (q + 1) - 1, heads * (k + 1) - 1)
    np.testing.assert_allclose(z[:q, :k], trace.attentions(kind)[0][0], rtol=1e-6)
    assert len(picks["customdata"]) == layers * heads
    assert picks["customdata"][heads + 3] == [1, 3]
    assert data["layout"]["hoverdistance"] == -1 and "select" in data["layout"]["clickmode"]
    assert len(data["layout"]["shapes"]) == 1  # the selected map is outlined
    assert data["layout"]["yaxis"]["ticktext"] == [f"L{i + 1}" for i in range(layers)]


def test_model_view_aggregates_one_map_per_layer(trace):
    data = spec(map_figures.model_view(trace, "decoder", "max"))
    assert [c[1] for c in data["data"][1]["customdata"]] == ["max"] * trace.num_layers["decoder"]
    with pytest.raises(ValueError, match="aggregate"):
        map_figures.model_view(trace, "decoder", "sum")


# --- head view ---------------------------------------------------------------------------------------------------
def _lines(fig: go.Figure) -> list[tuple[float, float]]:
    pairs = []
    for t in spec(fig)["data"]:
        xs = arr(t["x"]) if t.get("mode") == "lines" else np.array([np.nan])
        if len(xs) and not np.isnan(xs[0]):
            ys = arr(t["y"])
            pairs += [(int(ys[i]), int(ys[i + 1])) for i in range(0, len(ys), 3)]
    return pairs


def test_head_view_draws_every_line_above_the_threshold(trace):
    fig = map_figures.head_view(trace, "cross", 0, [0, 3])
    weights = trace.cross_attentions[0]
    assert len(_lines(fig)) == int((weights[[0, 3]] >= 0).sum())
    names = {t["name"] for t in spec(fig)["data"] if t.get("showlegend") is not False and t.get("mode") == "lines"}
    assert names == {"head 1", "head 4"}
    fewer = map_figures.head_view(trace, "cross", 0, [0, 3], min_weight=0.2)
    assert len(_lines(fewer)) == int((weights[[0, 3]] >= 0.2).sum())


def test_head_view_focus_keeps_one_tokens_lines(trace):
    fig = map_figures.head_view(trace, "encoder", 1, [1], focus=("query", 2))
    assert {q for q, _ in _lines(fig)} == {2}
    fig = map_figures.head_view(trace, "encoder", 1, [1], focus=("key", 0))
    assert {k for _, k in _lines(fig)} == {0}
    tokens = [t for t in spec(fig)["data"] if t["name"] in ("query tokens", "key tokens")]
    assert tokens[1]["customdata"][0] == ["key", 0]
    assert "attended by" in tokens[1]["hovertext"][0]
    with pytest.raises(ValueError, match="at least one head"):
        map_figures.head_view(trace, "encoder", 1, [])


# --- token focus -------------------------------------------------------------------------------------------------
def test_token_focus_rows_and_columns(trace):
    fig = map_figures.token_focus(trace, "encoder", "query", 1, head=0)
    heat = [t for t in spec(fig)["data"] if t["type"] == "heatmap"]
    assert len(heat) == 2
    expected_row = np.stack([w[0][1] for w in trace.encoder_attentions])
    expected_col = np.stack([w[0][:, 1] for w in trace.encoder_attentions])
    np.testing.assert_allclose(arr(heat[0]["z"]), expected_row, rtol=1e-6)
    np.testing.assert_allclose(arr(heat[1]["z"]), expected_col, rtol=1e-6)
    assert len(spec(map_figures.token_focus(trace, "cross", "query", 0))["data"]) == 1
    assert len(spec(map_figures.token_focus(trace, "cross", "key", 0))["data"]) == 1
    with pytest.raises(ValueError, match="out of range"):
        map_figures.token_focus(trace, "cross", "key", len(trace.source_tokens))


# --- masks -------------------------------------------------------------------------------------------------------
def test_score_steps_show_minus_infinity_where_masked(model, trace):
    other = model.trace("A man.", beam=1)
    scores = layer_scores(model.network, [trace.source_ids, other.source_ids], "decoder", 1,
                          [trace.target_ids, other.target_ids])
    labels = model.tokenizer.pieces(scores.query_ids[1])
    fig = masking_figures.score_steps_figure(scores, 1, 0, labels, labels)
    panels = spec(fig)["data"]
    assert len(panels) == 4
    masked = arr(panels[2]["z"])
    assert np.isnan(masked[~scores.mask[1]]).all() and np.isfinite(masked[scores.mask[1]]).all()
    assert panels[2]["text"][0][1] == "−∞"
    np.testing.assert_allclose(arr(panels[3]["z"]), scores.weights[1, 0], rtol=1e-6)
    with pytest.raises(ValueError, match="batch row"):
        masking_figures.score_steps_figure(scores, 2, 0, labels, labels)


def test_mask_figures(trace):
    mask = np.tril(np.ones((4, 4), dtype=bool))
    fig = masking_figures.mask_matrix_figure(mask, list("abcd"), list("abcd"), "causal")
    assert spec(fig)["data"][0]["text"][0] == ["", "−∞", "−∞", "−∞"]
    pad = masking_figures.padding_mask_figure([["a", "b"], ["c", "<pad>"]], np.array([[1, 1], [1, 0]], dtype=bool),
                                              "pad")
    assert spec(pad)["data"][0]["customdata"][1][1] == "&lt;pad&gt;"
    assert [a["text"] for a in spec(pad)["layout"]["annotations"]] == ["a", "b", "c", "&lt;pad&gt;"]


def test_padding_mask_labels_are_upright_and_short():
    """Tokens in the padding mask are rotated and cut so that neighbouring cells never run together (issue 38)."""
    tokens = [["▁Two", "▁young", "▁extraordinarily", "</s>"], ["▁Dogs", "</s>", "<pad>", "<pad>"]]
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=bool)
    notes = spec(masking_figures.padding_mask_figure(tokens, mask, "pad"))["layout"]["annotations"]
    assert {a["textangle"] for a in notes} == {-90}
    assert max(len(a["text"]) for a in notes if "&" not in a["text"]) <= masking_figures.PAD_LABEL_CHARS
    assert "▁extraord…" in [a["text"] for a in notes]
    wide = [["x"] * (masking_figures.PAD_LABEL_MAX_POSITIONS + 1)]
    assert not spec(masking_figures.padding_mask_figure(wide, np.ones((1, len(wide[0])), bool), "pad"))["layout"].get(
        "annotations")


# --- positional encodings ----------------------------------------------------------------------------------------
def test_positional_figures(trace):
    pe = trace.source_positional
    z = arr(spec(positional_trace_figures.positional_heatmap(pe, trace.source_tokens))["data"][0]["z"])
    assert z[0, 1] == pytest.approx(1.0)
    from viz_model.nn.positional import sinusoidal_table

    table = sinusoidal_table(40, pe.shape[1]).numpy()
    fig = positional_trace_figures.sinusoid_figure(table, [0, 1, 5], marked=len(trace.source_tokens))
    assert [t["name"] for t in spec(fig)["data"] if t.get("showlegend") is not False] == [
        "dim 0 (sin)", "dim 1 (cos)", "dim 5 (cos)"]
    with pytest.raises(ValueError, match="out of range"):
        positional_trace_figures.sinusoid_figure(table, [pe.shape[1]])
    emb = positional_trace_figures.embedding_figure(trace.source_embeddings[1], pe[1], trace.source_tokens[1], 1)
    summed = arr(spec(emb)["data"][2]["y"])
    np.testing.assert_allclose(summed, trace.source_embeddings[1] + pe[1], rtol=1e-5)
    sim = arr(spec(positional_trace_figures.positional_similarity(pe, trace.source_tokens))["data"][0]["z"])
    np.testing.assert_allclose(np.diag(sim), 1.0, atol=1e-5)


# --- app helpers and exports -------------------------------------------------------------------------------------
def test_md_escape_leaves_no_markup():
    escaped = texts.md_escape(INJECTION + " *bold* [x](javascript:alert(3)) $x$ :smile:")
    for char in "<>*[]()$:":
        assert all(escaped[i - 1] == "\\" for i, c in enumerate(escaped) if c == char)


def test_selected_point_reads_plotly_selections():
    assert state.selected_point({"selection": {"points": [{"customdata": [1, 2]}]}}) == [1, 2]
    assert state.selected_point({"selection": {"points": []}}) is None
    assert state.selected_point(None) is None
    assert state.selected_point({"selection": {"points": [{"x": 1}]}}) is None


def test_figure_html_is_self_contained(trace):
    page = figure_files.figure_html(map_figures.head_heatmap(trace, "encoder", 0, 0))
    assert "<html>" in page[:100] and "Plotly.newPlot" in page
    assert '<script src="http' not in page and len(page) > 1_000_000  # plotly.js is inlined: works offline


@pytest.mark.slow
@pytest.mark.skipif(figure_files.find_browser() is None,
                    reason="no Chrome/Chromium for kaleido (apt-get install chromium)")
def test_png_and_svg_export(trace):
    images = figure_files.figure_images(map_figures.head_heatmap(trace, "encoder", 0, 0), width=500)
    assert images["png"].startswith(b"\x89PNG")
    assert b"<svg" in images["svg"][:500]


def test_image_export_explains_a_missing_browser(monkeypatch, trace):
    pytest.importorskip("kaleido")  # a dependency; without it the reason given is the missing package
    monkeypatch.setenv("BROWSER_PATH", "/nonexistent/chrome")
    ok, why = figure_files.images_available()
    assert not ok and "Chromium" in why
    with pytest.raises(figure_files.ExportError, match="Chromium"):
        figure_files.figure_images(map_figures.head_heatmap(trace, "encoder", 0, 0))
    with pytest.raises(figure_files.ExportError, match="format"):
        figure_files.figure_images(map_figures.head_heatmap(trace, "encoder", 0, 0), formats=("gif",))


def test_trace_exports_round_trip(trace):
    restored = viz_model.AttentionTrace.from_npz_bytes(trace.to_npz_bytes())
    assert restored.source_tokens == trace.source_tokens
    assert math.isclose(viz_model.AttentionTrace.from_json(trace.to_json()).log_probability,
                        trace.log_probability)
