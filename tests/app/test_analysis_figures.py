"""Unit tests of the Analyze pages' figure builders (app/analysis_figures.py) and pure helpers
(app/analyze_pages.py)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from support.app import INJECTION, arr  # noqa: E402

from app import analyze_pages  # noqa: E402
from viz_model.analysis import head_stats, lm_head_roles, rollout, word_alignment  # noqa: E402
from viz_model.analysis.ablation import TokenEdit, all_heads, layer_counts  # noqa: E402
from viz_model.analysis.corpus_attention import analyze_corpus  # noqa: E402
from viz_model.plot import analysis_figures, figure_style, map_figures  # noqa: E402


@pytest.fixture(scope="module")
def model(app_model):
    return app_model


@pytest.fixture(scope="module")
def trace(app_trace):
    return app_trace


@pytest.fixture(scope="module")
def heads_table(model):
    return analyze_corpus(model, ["Two dogs play in the snow.", "A man runs."]).heads


def spec(fig: go.Figure) -> dict:
    return json.loads(fig.to_json())


def no_markup(fig: go.Figure) -> bool:
    text = fig.to_json()
    return "<img" not in text and "<script" not in text


# --- tables -> grids ---------------------------------------------------------------------------------------------
def test_table_grid_places_each_head_and_leaves_the_rest_blank(model):
    counts, heads = layer_counts(model.config), model.config.heads
    table = pd.DataFrame([{"kind": "cross", "layer": counts["cross"] - 1, "head": heads - 1, "v": 0.25},
                          {"kind": "encoder", "layer": 0, "head": 0, "v": 1.5},
                          {"kind": "encoder", "layer": counts["encoder"], "head": 0, "v": 9.0}])  # out of range
    grids = analysis_figures.table_grid(table, "v", counts, heads)
    assert {k: g.shape for k, g in grids.items()} == {k: (n, heads) for k, n in counts.items()}
    assert grids["cross"][-1, -1] == 0.25 and grids["encoder"][0, 0] == 1.5
    assert np.isnan(grids["decoder"]).all() and np.isfinite(grids["encoder"]).sum() == 1


def test_head_grid_one_heatmap_per_kind_with_clickable_cells(model, heads_table):
    counts, heads = layer_counts(model.config), model.config.heads
    values = analysis_figures.table_grid(heads_table, "entropy", counts, heads)
    chosen = [("decoder", counts["decoder"] - 1, heads - 1)]
    fig = spec(analysis_figures.head_grid(values, "entropy of <b>every</b> head", "entropy", selected=chosen))
    maps = [t for t in fig["data"] if t["type"] == "heatmap"]
    assert [m["name"] for m in maps] == list(map_figures.KINDS)
    for m in maps:
        np.testing.assert_allclose(arr(m["z"]), values[m["name"]])
    cells = [t for t in fig["data"] if t.get("name", "").endswith(" heads")]
    assert sum(len(t["customdata"]) for t in cells) == len(all_heads(model.config))
    assert ["decoder", counts["decoder"] - 1, heads - 1] in cells[1]["customdata"]
    ring = next(t for t in fig["data"] if t.get("name") == "decoder selected")
    assert list(arr(ring["x"])) == [heads] and list(arr(ring["y"])) == [counts["decoder"]]
    assert fig["layout"]["title"]["text"] == "entropy of &lt;b&gt;every&lt;/b&gt; head"
    assert fig["layout"]["clickmode"] == "event+select"


def test_head_grid_centres_a_diverging_scale_and_refuses_unknown_kinds():
    fig = spec(analysis_figures.head_grid({"encoder": np.array([[-1.0, 3.0]])}, "t", "rise", "RdBu_r", zmid=0.0))
    assert (fig["layout"]["coloraxis"]["cmin"], fig["layout"]["coloraxis"]["cmax"]) == (-3.0, 3.0)
    blank = spec(analysis_figures.head_grid({"cross": np.full((2, 2), np.nan)}, "t",
                                            "v"))  # nothing defined: still a figure
    assert "not defined here" in blank["data"][1]["hovertext"][0]
    with pytest.raises(ValueError, match="head grid"):
        analysis_figures.head_grid({"attention": np.zeros((1, 1))}, "t", "v")


def test_role_grid_numbers_every_head_and_names_the_role_in_the_legend_and_hover(model, heads_table):
    """Cells hold a role number that fits them (a name was cut: "diagona", issue 38); the colour bar and the hover
    name the role."""
    counts, heads = layer_counts(model.config), model.config.heads
    table = heads_table.copy()
    table.loc[0, "role"] = INJECTION
    fig = analysis_figures.role_grid(table, counts, heads, "roles")
    data = spec(fig)
    roles = list(dict.fromkeys(table["role"]))
    texts = [t for m in data["data"] if m["type"] == "heatmap" for row in m["text"] for t in row]
    assert len(texts) == len(table) and all(1 <= len(t) <= 2 for t in texts)
    assert sorted(set(texts), key=int) == [str(i + 1) for i in range(len(roles))]
    ticks = data["layout"]["coloraxis"]["colorbar"]["ticktext"]
    assert ticks[roles.index(INJECTION)] == f"{roles.index(INJECTION) + 1} {figure_style.escape(INJECTION)}"
    hovers = [h for m in data["data"] if m["type"] == "scatter" for h in m.get("hovertext") or []]
    assert any(f"role {roles.index(INJECTION) + 1}: {figure_style.escape(INJECTION)}" in h for h in hovers)
    assert no_markup(fig)


# --- token maps --------------------------------------------------------------------------------------------------
def test_token_map_figure_draws_rollout_like_the_explorer(trace):
    result = rollout.attention_rollout(trace.encoder_attentions)[-1]
    queries, keys = trace.axes("encoder")
    fig = spec(analysis_figures.token_map_figure(result, queries, keys, "encoder", 0, "Rollout <x>"))
    np.testing.assert_allclose(arr(fig["data"][0]["z"]), result, atol=1e-6)
    assert fig["layout"]["title"]["text"] == "Rollout &lt;x&gt;"
    assert fig["layout"]["xaxis"]["ticktext"][-1] == "&lt;/s&gt;"
    assert fig["layout"]["xaxis"]["tickangle"] == -60  # drawn in narrow columns: slanted labels never overlap


def test_difference_figure_subtracts_and_merges_labels(trace):
    first = map_figures.attention_map(trace, "encoder", 0, 0)
    second = map_figures.attention_map(trace, "encoder", trace.num_layers["encoder"] - 1, "mean")
    second.key_labels = [*second.key_labels[:-1], "<other>"]
    fig = spec(analysis_figures.difference_figure(first, second, "difference"))
    np.testing.assert_allclose(arr(fig["data"][0]["z"]), first.weights - second.weights, atol=1e-6)
    assert fig["layout"]["xaxis"]["ticktext"][-1] == "&lt;/s&gt; / &lt;other&gt;"
    assert fig["data"][0]["zmid"] == 0.0 and "difference" in fig["data"][0]["hovertemplate"]
    assert analysis_figures.merged_labels(["a", "b"], ["a", "c"]) == ["a", "b / c"]
    shorter = map_figures.AttentionMap(first.weights[:-1, :-1], first.query_labels[:-1], first.key_labels[:-1],
                                       first.query_notes[:-1], "encoder", 0, 0, "piece")
    with pytest.raises(ValueError, match="same number of tokens"):
        analysis_figures.difference_figure(first, shorter, "t")


# --- alignment ---------------------------------------------------------------------------------------------------
def test_alignment_figure_draws_one_line_per_link_and_the_gold_links(trace):
    words = word_alignment.layer_word_attention(trace, trace.num_layers["cross"] - 1)
    weights = words.weights.mean(axis=0)
    links = word_alignment.alignment_links(weights)
    gold = {(0, 0), (1, 1)}
    fig = spec(analysis_figures.alignment_figure(weights, words.source_words, words.target_words, links, "links", gold))
    assert sum(t.get("name") == "link" for t in fig["data"]) == len(links)
    assert sum(t.get("name") == "gold" for t in fig["data"]) == len(gold)
    source = next(t for t in fig["data"] if t.get("name") == "source words")
    assert source["text"] == [figure_style.escape(w) for w in words.source_words]
    with pytest.raises(ValueError, match="does not fit"):
        analysis_figures.alignment_figure(weights[:, :-1], words.source_words, words.target_words, links, "t")


def test_alignment_figure_escapes_words():
    fig = analysis_figures.alignment_figure(np.array([[1.0]]), [INJECTION], ["<b>"], {(0, 0)}, INJECTION)
    assert no_markup(fig) and "&lt;b&gt;" in fig.to_json()


def test_word_map_figure_marks_links_and_gold(trace):
    words = word_alignment.layer_word_attention(trace, 0)
    links = word_alignment.alignment_links(words.weights[0])
    fig = spec(analysis_figures.word_map_figure(words.weights[0], words.source_words, words.target_words, 0, 0, links,
                                                {(0, 0)}))
    assert fig["layout"]["title"]["text"] == "Cross-attention (decoder → encoder): layer 1, head 1, words"
    marked = next(t for t in fig["data"] if t.get("name") == "alignment link")
    assert sorted(zip(arr(marked["x"]), arr(marked["y"]))) == sorted(links)
    assert next(t for t in fig["data"] if t.get("name") == "gold link")["x"] is not None


def test_aer_grid_shows_every_cross_head(trace):
    words = word_alignment.layer_word_attention(trace, 0)
    gold = word_alignment.Alignment(frozenset({(0, 0)}))
    assert len(words.source_words) and len(words.target_words)
    table = word_alignment.attention_aer([trace], [gold])
    fig = spec(analysis_figures.aer_grid(table, trace.num_layers["cross"], trace.num_heads, "AER"))
    heat = fig["data"][0]
    expected = table[table["head"].notna()].sort_values(["layer", "head"])["aer"].to_numpy()
    np.testing.assert_allclose(arr(heat["z"]).ravel(), expected)
    assert heat["name"] == "cross"
    shown = analyze_pages.display_aer(table)
    assert shown["layer"].min() == 1 and "mean" in set(shown["head"])
    assert set(shown["head"]) - {"mean"} == {str(h) for h in range(1, trace.num_heads + 1)}


# --- pure helpers of the pages -----------------------------------------------------------------------------------
def test_parse_sentences():
    assert analyze_pages.parse_sentences(" a \n\n b\n") == ["a", "b"]
    with pytest.raises(ValueError, match="40,001 characters: at most 40,000"):
        # one line, but too much text for the server
        analyze_pages.parse_sentences("a" * (analyze_pages.MAX_LIVE_CHARS + 1))
    with pytest.raises(ValueError, match="at least one sentence"):
        analyze_pages.parse_sentences("\n  \n")
    with pytest.raises(ValueError, match="3 sentences: at most 2 .* remove 1 lines"):
        analyze_pages.parse_sentences("a\nb\nc", limit=2)


@pytest.mark.parametrize("text, match", [
    ("0-0 1_2", "bad alignment link '1_2'"),
    ("0-0 a-b", "bad alignment link 'a-b'"),
    ("   ", "no links given"),
    ("0-0 5-1 1-9", r"link 1-9 5-1 is out of range: this sentence has 3 source words \(0 to 2\) and 2 target"),
    ("0-0 " * 2000, "characters long"),
])
def test_parse_gold_errors(text, match):
    with pytest.raises(ValueError, match=match):
        analyze_pages.parse_gold(text, 3, 2)


def test_parse_gold_sure_and_possible():
    gold = analyze_pages.parse_gold("0-0 1?1 2-1-P", 3, 2)
    assert gold.sure == {(0, 0)} and gold.possible == {(0, 0), (1, 1), (2, 1)}


@pytest.mark.parametrize("text, expected", [
    ("Two dogs play in the snow.", "Two dogs play in the rain."),
    ("A man sleeps.", "A woman sleeps."),
    ("Hello world!", "Hello cat!"),
    ("Cat", "Dog"),
    ("...", "... cat"),
])
def test_one_word_changed(text, expected):
    assert analyze_pages.one_word_changed(text) == expected


def test_diff_markdown_marks_edits_as_escaped_text():
    diff = [TokenEdit("equal", ["▁Zwei"], ["▁Zwei"]), TokenEdit("replace", ["▁Hunde"], ["<b>"]),
            TokenEdit("delete", ["*"], []), TokenEdit("insert", [], ["▁]x"])]
    text = analyze_pages.diff_markdown(diff)
    assert text == ("▁Zwei :red-background[~~▁Hunde~~] :green-background[\\<b\\>] :red-background[~~\\*~~] "
                    ":green-background[▁\\]x]")
    table = analyze_pages.diff_table(diff)
    assert list(table["change"]) == ["replace", "delete", "insert"] and table.iloc[0]["heads switched off"] == "<b>"
    assert analyze_pages.diff_markdown([]) == "*(no tokens)*"


def test_head_label_counts_from_one():
    assert analyze_pages.head_label(("cross", 0, 3)) == "Cross-attention · layer 1 · head 4"


def test_a_share_is_coloured_on_the_fixed_scale_and_a_stretched_scale_says_so():
    """An induction grid running from 0.01 to 0.04 is not a bright yellow head on a scale of its own."""
    faint = {"decoder": np.array([[0.01, 0.04], [0.02, 0.03]])}
    share = spec(analysis_figures.head_grid(faint, "t", "induction", unit=True))
    assert (share["layout"]["coloraxis"]["cmin"], share["layout"]["coloraxis"]["cmax"]) == (0.0, 1.0)
    assert share["layout"]["coloraxis"]["colorbar"]["title"]["text"] == "induction"
    stretched = spec(analysis_figures.head_grid(faint, "t", "entropy"))
    assert (stretched["layout"]["coloraxis"]["cmin"], stretched["layout"]["coloraxis"]["cmax"]) == (0.01, 0.04)
    assert "stretched" in stretched["layout"]["coloraxis"]["colorbar"]["title"]["text"]
    assert set(lm_head_roles.SHARE_SCORES) < set(lm_head_roles.ROLE_SCORES)
    assert set(head_stats.SHARE_STATISTICS) < set(head_stats.STATISTICS)
