"""What a newcomer sees agrees with itself (issue 27, the medium items): the masks page always shows padding, a long
paste is refused with the limit named, the pages agree on the training length, "measure on this machine" warms up
and stays within its memory bound, and rows labelled by the token they predict say so."""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from support.app import APP, TINY_MODEL, arr, switch_to  # noqa: E402

import viz_model  # noqa: E402
from app import texts, widgets  # noqa: E402
from viz_model.data.typed_text import MAX_INPUT_CHARS  # noqa: E402
from viz_model.lessons import layer_memory, lesson_inputs, pe_tables
from viz_model.plot import analysis_figures, figure_style, map_figures  # noqa: E402

GRANDMOTHER = "My grandmother bakes bread every Sunday morning."


def start(**params: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=180)
    at.query_params.update({"beam": "1", **params})
    return ok(at.run())


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.message for e in at.exception]
    assert not [e.value for e in at.error if e.value.startswith(widgets.UNEXPECTED)]
    return at


def chart(at: AppTest, prefix: str) -> dict:
    found = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    found = [c for c in found if c["layout"].get("title", {}).get("text", "").startswith(prefix)]
    assert found, prefix
    return found[0]


def messages(at: AppTest) -> str:
    return "\n".join(str(e.value) for e in [*at.error, *at.warning, *at.info]).replace("\\", "")


# --- 3. the masks page always pads one of its two sentences ---------------------------------------------------------
@pytest.mark.parametrize("sentence", [*texts.EXAMPLES[:6], GRANDMOTHER, "Two dogs play."])
def test_masks_page_companion_always_has_another_token_count(tiny, sentence):
    at = start(sentence=sentence)
    ok(switch_to(at, "masks").run())
    z = arr(chart(at, "Padding mask of the keys")["data"][0]["z"])
    assert (z == 0).any(), f"no padding with {sentence!r} and {at.session_state['m_other']!r}"


def test_masks_page_pads_a_sentence_as_long_in_tokens_as_the_old_word_count_companion(tiny, app_model):
    """The companion used to be the first example of another word count: a sentence of as many tokens got none."""
    def tokens(text: str) -> int:
        return len(app_model.encode(text, truncate=True))

    def old_companion(text: str) -> str:
        return next(e for e in texts.EXAMPLES if len(e.split()) != len(text.split()))

    candidates = (f"Two {' '.join(['dogs'] * n)}." for n in range(1, 30))
    sentence = next(s for s in candidates if tokens(s) == tokens(old_companion(s)))
    at = start(sentence=sentence)
    ok(switch_to(at, "masks").run())
    assert (arr(chart(at, "Padding mask of the keys")["data"][0]["z"]) == 0).any()


def test_masks_page_says_when_a_typed_companion_pads_nothing(tiny):
    at = start(sentence="Two dogs play.")
    ok(switch_to(at, "masks").run())
    at.text_input(key="w_m_other").input("Two dogs play.").run()
    assert "nothing is padded" in messages(ok(at))


# --- 4. a long paste is refused with the limit, not dropped -------------------------------------------------------
def test_a_paste_over_the_limit_is_named_not_dropped(tiny):
    at = start(sentence="Two dogs play.")
    box = at.text_area(key="sentence_input")
    assert not box.proto.max_chars  # a box limit drops a long paste in the browser without a word
    box.input("a" * (MAX_INPUT_CHARS + 1128))
    next(b for b in at.button if b.label == "Translate").click().run()
    text = messages(ok(at))
    assert f"{MAX_INPUT_CHARS + 1128} characters; the limit is {MAX_INPUT_CHARS}" in text
    assert "empty" not in text


# --- 5. the pages agree on the longest training sentence -----------------------------------------------------------
def test_positional_page_and_input_warnings_agree_on_the_training_length(tiny):
    model = viz_model.load(tiny / TINY_MODEL, device="cpu")
    longest = model.training_stats.max_source_tokens
    assert pe_tables.training_max_length(model.directory, model.card, model.training_stats)[0] == longest
    at = start(sentence="Two dogs play.")
    ok(switch_to(at, "positional").run())
    shown = "\n".join(c.value for c in at.caption)
    assert f"The longest training sequence had {longest} tokens" in shown
    assert "does not record the longest training sentence" not in messages(at)
    assessment = model.assess(" ".join(["dogs"] * (longest + 5)))
    assert f"the longest training sentence had {longest}" in " ".join(assessment.warnings)


# --- 6. measure on this machine --------------------------------------------------------------------------------------
def test_measurement_warms_every_layer_at_every_length_before_timing():
    """What a layer given to `measure_layers` sees: every length once before any timed pass, then `repeats` timed
    passes and one for memory, in the table under its own name."""
    seen: list[tuple[str, int]] = []

    def layer(name: str):
        return lambda x: seen.append((name, x.shape[1])) or x * 2

    table = layer_memory.measure_layers([32, 16], 16, 2, repeats=3, layers={"a": layer("a"), "b": layer("b")})
    assert sorted(seen[:4]) == [("a", 16), ("a", 32), ("b", 16), ("b", 32)]  # the warm-up
    assert seen[4:] == [(name, n) for n in (16, 32) for name in "ab" for _ in range(3 + 1)]
    assert table[["layer", "n"]].values.tolist() == [["a", 16], ["b", 16], ["a", 32], ["b", 32]]
    assert (table["peak_mib"] > 0).all()  # x * 2 makes a tensor, counted as the layer's memory
    assert list(layer_memory.compared_layers(16, 2, 3)) == list(layer_memory.LAYER_NAMES)  # what the page measures


def test_measurement_refuses_more_memory_than_the_server_allows():
    with pytest.raises(lesson_inputs.InputError, match="limit per request is 256 MB"):
        layer_memory.measure_layers([2048], 2048, 256)
    # the page's defaults fit
    assert layer_memory.measure_memory_bytes(1024, 512, 8, 3) < layer_memory.MAX_MEASURE_BYTES


# --- 7. rows labelled by the token they predict say so ---------------------------------------------------------------
def test_rows_labelled_by_the_predicted_token(app_trace):
    trace = app_trace
    amap = map_figures.attention_map(trace, "cross", 0, 0, rows="output")
    assert amap.query_labels == trace.output_tokens
    fig = map_figures.map_heatmap(amap)
    assert "predicted" in fig.layout.yaxis.title.text
    assert list(fig.layout.yaxis.ticktext) == [figure_style.escape(t) for t in trace.output_tokens]
    heatmap = map_figures.map_heatmap(map_figures.attention_map(trace, "cross", 0, 0))
    assert "decoder inputs" in heatmap.layout.yaxis.title.text
    with pytest.raises(ValueError, match="rows must be one of"):
        map_figures.attention_map(trace, "cross", 0, 0, rows="both")
    words = analysis_figures.word_map_figure(np.eye(2), ["a", "b"], ["x", "y"], 0, 0, [], rows="output")
    assert "predicted" in words.layout.yaxis.title.text


def test_explorer_offers_rows_by_predicted_token(tiny, app_model):
    at = start(sentence="Two dogs play.", kind="cross")
    at.radio(key="w_rows").set_value("output").run()
    heatmap = chart(ok(at), "Cross-attention")
    trace = app_model.trace("Two dogs play.", beam=1)
    assert heatmap["layout"]["yaxis"]["ticktext"] == [figure_style.escape(t) for t in trace.output_tokens]
    assert "predicted" in heatmap["layout"]["yaxis"]["title"]["text"]


# --- the low items ---------------------------------------------------------------------------------------------------
def test_counts_say_one_head_not_one_heads():
    assert texts.count(1, "head") == "1 head" and texts.count(4, "head") == "4 heads"
    assert texts.count(1, "head", "Each of the") == "The 1 head"
    assert texts.count(8, "head", "Each of the") == "Each of the 8 heads"


def test_wide_beam_tree_is_capped_and_its_legend_keeps_the_end_token(app_model):
    from viz_model.plot import decoding_figures

    tree = app_model.beam_tree(GRANDMOTHER, beam=16)
    fig = decoding_figures.beam_tree_figure(tree, app_model.tokenizer.piece)
    assert fig.layout.height <= 120 + 26 * decoding_figures.MAX_TREE_NODES
    per_step = [sum(1 for x in t.x if x == step) for t in fig.data if t.mode == "markers+text" for step in set(t.x)]
    assert max(per_step) <= decoding_figures.MAX_TREE_NODES
    assert "not drawn" in fig.layout.title.text
    assert any(t.name == "finished (&lt;/s&gt; or length limit)" for t in fig.data if t.name)


def test_top_k_bars_leave_room_for_their_labels():
    from viz_model.plot import decoding_figures

    fig = decoding_figures.topk_figure(["a", "b"], [0.97, 0.02], "a", 0)
    assert fig.layout.xaxis.range[1] >= 0.97 * 1.1  # the "0.970" printed outside the bar fits


def test_link_warnings_show_the_value_without_markdown_escapes(tiny):
    at = start(model="../etc", level="letters")
    text = "\n".join(w.value for w in at.warning)
    assert "`model=../etc` ignored" in text and "\\." not in text
    assert "`level=letters` ignored" in text


def test_the_shared_link_keeps_the_granularity(tiny):
    at = start(sentence="Two dogs play.", level="word")
    assert at.session_state["level"] == "word" and at.query_params["level"] == "word"
