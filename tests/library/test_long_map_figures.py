"""A long prompt's drawings read their maps one head at a time and show the trace's own numbers (CPU, fp32): the
downsampled map's blocks, a window's weights, the summarised model view, the token focus and the head view's window,
each against the same prompt traced with every map kept; a trace makes no (n x vocabulary) probabilities; a
4,096-token prose prompt passes the prompt checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support.long_lm import long_language_model, long_text

from viz_model.analysis.map_summary import block_edges, block_mean_grid
from viz_model.kinds import language_model
from viz_model.plot import long_map_figures, map_figures

ATOL = 1e-6


@pytest.fixture(scope="module")
def lm():
    return long_language_model()


@pytest.fixture(scope="module")
def traces(lm):
    """The same ~630-token prompt and 3 new tokens traced with maps on demand and with every map kept."""
    prompt = long_text(620)
    return lm.trace(prompt, 3, maps="on_demand"), lm.trace(prompt, 3, maps="full")


def test_the_fixture_is_long_and_on_demand(traces):
    lazy, full = traces
    assert lazy.reading("decoder") == "rows"
    assert type(lazy.decoder_attentions).__name__ == "OnDemandMaps" and isinstance(full.decoder_attentions, list)


def test_the_downsampled_map_draws_each_blocks_max_and_mean(traces):
    lazy, full = traces
    fig = long_map_figures.downsampled_map(lazy, "decoder", 1, 2, cells=64)
    n = len(full.target_tokens)
    edges = block_edges(n, 64)
    whole = full.decoder_attentions[1][2]
    blocks = [[whole[a:b, c:d] for c, d in zip(edges, edges[1:])] for a, b in zip(edges, edges[1:])]
    heat = fig.data[0]
    assert np.abs(np.array(heat.z) - np.array([[b.max() for b in row] for row in blocks])).max() <= ATOL
    assert np.abs(np.array(heat.customdata) - np.array([[b.mean() for b in row] for row in blocks])).max() <= ATOL
    assert list(heat.x) == list(edges - 0.5)  # token positions on the axes
    assert heat.zmax == pytest.approx(np.quantile(heat.z, 0.99)) and heat.zmax < np.max(heat.z)
    assert "drawn as blocks of up to" in fig.layout.title.text


def test_a_window_shows_the_exact_weights_of_its_rows_and_keys(traces):
    lazy, full = traces
    fig = long_map_figures.map_window(lazy, "decoder", 0, 3, 300, 250, size=40)
    assert np.abs(np.array(fig.data[0].z) - full.decoder_attentions[0][3, 300:340, 250:290]).max() <= ATOL
    assert list(fig.data[0].x) == list(range(250, 290)) and list(fig.data[0].y) == list(range(300, 340))
    assert "exact weights of queries 300–339 x keys 250–289" in fig.layout.title.text
    with pytest.raises(ValueError, match="first_row must be an integer from 0 to"):
        long_map_figures.map_window(lazy, "decoder", 0, 3, 10_000, 0)


def test_the_summary_model_view_says_what_it_draws_and_frames_the_selection(traces):
    lazy, full = traces
    fig = long_map_figures.summary_model_view(lazy, "decoder")
    assert fig.layout.title.text.endswith("all 2 layers × 4 heads · block means of 20 x 20 tokens, 1 query row in 2")
    layers, heads = 2, 4
    assert [c for c in fig.data[1].customdata] == [[layer, head] for layer in range(layers) for head in range(heads)]
    long_map_figures.select_map(fig, lazy, "decoder", None, (1, 2))
    assert len(fig.layout.shapes) == 1
    sampled = block_mean_grid(lazy, "decoder", 32, 2)
    brute = np.zeros_like(sampled.cells)
    rows, keys = sampled.row_edges, sampled.key_edges
    for layer in range(layers):
        maps = full.decoder_attentions[layer]
        for i, (a, b) in enumerate(zip(rows, rows[1:])):
            picked = [r for r in range(a, b) if r % 2 == 0]
            for j, (c, d) in enumerate(zip(keys, keys[1:])):
                brute[layer, :, i, j] = maps[:, picked, c:d].mean(axis=(1, 2))
    assert np.abs(sampled.cells - brute).max() <= ATOL
    exact = block_mean_grid(lazy, "decoder", 32)
    assert exact.method == "block mean" and sampled.method == "block mean of one query row in 2"


def test_the_token_focus_reads_rows_and_columns_as_the_full_maps_hold_them(traces):
    lazy, full = traces
    index = 420
    for head in (1, "mean", "max"):
        reduce = [map_figures.reduce_heads(m, head) for m in full.decoder_attentions]
        rows = map_figures.token_lines(lazy, "decoder", index, head, "row")
        assert np.abs(rows - np.stack([m[index] for m in reduce])).max() <= ATOL
        columns = map_figures.token_lines(lazy, "decoder", index, head, "column")
        assert np.abs(columns - np.stack([m[:, index] for m in reduce])).max() <= ATOL
        windowed = map_figures.token_lines(lazy, "decoder", index, head, "column", slice(index, index + 64))
        assert np.abs(windowed - columns[:, index:index + 64]).max() <= ATOL
    fig = map_figures.token_focus(lazy, "decoder", "query", index, "mean", column_rows=64)
    assert list(fig.data[1].x) == list(range(index, index + 64))
    assert "(queries 420–483)" in fig.layout.annotations[1].text
    assert fig.layout.xaxis.title.text == "position"  # 600 keys: positions on the axis, tokens on hover


def test_the_head_view_window_reads_its_rows_and_names_positions(traces):
    lazy, full = traces
    window = slice(200, 248)
    fig = map_figures.head_view(lazy, "decoder", 1, [0, 3], window=window, focus=("query", 210))
    markers = [t for t in fig.data if t.name == "query tokens"][0]
    assert markers.customdata[0] == ("query", 200) or list(markers.customdata[0]) == ["query", 200]
    assert "only the lines of query 210" in fig.layout.title.text and "positions 200 to 247" in fig.layout.title.text
    hover = markers.hovertext[10]
    mean = full.decoder_attentions[1][[0, 3], 210, 200:248].mean(axis=0)
    best = int(np.argmax(mean))
    assert f"({200 + best}): {mean[best]:.4f}" in hover
    outside = map_figures.head_view(lazy, "decoder", 1, [0], window=window, focus=("query", 5))
    assert "only the lines" not in outside.layout.title.text  # a focus outside the window: every line of it


def test_short_traces_draw_as_before(lm):
    trace = lm.trace("a man in a red shirt", 2)
    assert trace.reading("decoder") == "whole"
    fig = map_figures.head_view(trace, "decoder", 0, [1])
    markers = [t for t in fig.data if t.name == "query tokens"][0]
    assert [list(c) for c in markers.customdata] == [["query", i] for i in range(len(trace.target_tokens))]
    focus = map_figures.token_focus(trace, "decoder", "query", 2, 1)
    assert np.abs(np.array(focus.data[0].z) - np.stack([m[1, 2] for m in trace.decoder_attentions])).max() == 0


def test_the_trace_makes_no_probabilities_of_every_row():
    """A bf16 model on the CPU: no allocation of the trace is as large as an (n x vocabulary) float32 tensor (the
    forward's own bf16 logits are half that); before, the probabilities were widened whole."""
    from torch.profiler import ProfilerActivity, profile

    lm = long_language_model()
    lm.network.to(torch.bfloat16)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        trace = lm.trace(long_text(300), 3)
    whole = len(trace.target_tokens) * lm.config.vocab_size * 4
    largest = max(event.cpu_memory_usage for event in prof.events())
    assert 0 < largest < whole, (largest, whole)


def test_the_steps_hold_the_probabilities_of_one_softmax_over_the_pass(lm):
    trace = lm.trace(long_text(200), 2)
    with torch.inference_mode():
        whole = torch.softmax(lm.network(torch.tensor([trace.target_ids])).logits[0], dim=-1)
    assert len(trace.steps) > 2 * language_model.ROWS_AT_ONCE
    for step in trace.steps:
        assert step.probability == pytest.approx(float(whole[step.position, step.token_id]), abs=1e-6)
        assert step.top_ids == whole[step.position].topk(5).indices.tolist()


def test_a_4096_token_prose_prompt_passes_the_prompt_checks(lm):
    prompt = long_text(4800, seed=1)
    assert len(prompt) > 20_000
    assert len(lm.encode(prompt)) >= 4096
    with pytest.raises(ValueError, match=f"the limit is {language_model.MAX_PROMPT_CHARS}"):
        language_model.check_prompt("a" * (language_model.MAX_PROMPT_CHARS + 1))
