"""Streamlit AppTest tests of every page: translate, change kind / layer / head / view, bad inputs, no model."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pytest
from support.app import (  # noqa: E402
    INJECTION,
    TINY_CONFIG,
    TINY_MODEL,
    charts,
    long_sentence,
    markdown,
    messages,
    ok,
    start,
    switch_to,
    titles,
)

from app import figure_files, texts, widgets  # noqa: E402
from viz_model.modeldir.coverage import TRAINING_STATS  # noqa: E402


# --- no model ----------------------------------------------------------------------------------------------------
def test_no_model_page_says_what_to_run(tmp_path, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path / "empty"))
    at = ok(start())
    assert at.title[0].value == "No model found"
    assert str(tmp_path / "empty") in at.error[0].value
    assert "viz-model train" in at.code[0].value and "streamlit run app" in at.code[0].value
    at.button[0].click().run()
    ok(at)


def test_a_broken_model_directory_is_a_message_not_a_traceback(tmp_path, monkeypatch, assets):
    shutil.copytree(assets / TINY_MODEL, tmp_path / TINY_MODEL)
    (tmp_path / TINY_MODEL / "model.safetensors").write_bytes(b"not weights")
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    at = ok(start())
    text = messages(at) + "\n".join(e.value for e in at.sidebar.error)
    assert "cannot be loaded" in text and "model.safetensors" in text


# --- translate & explore -----------------------------------------------------------------------------------------
def test_home_translates_the_default_sentence_and_draws_the_heatmap(tiny):
    at = ok(start())
    assert at.title[0].value == "Translate & explore"
    assert at.text_area(key="sentence_input").value == texts.EXAMPLES[0]
    assert any(m.value == "Translation" for m in at.caption)
    assert titles(at) == ["Encoder self-attention: layer 1, head 1"]
    heat = charts(at)[0]
    assert heat["data"][0]["type"] == "heatmap"
    assert heat["layout"]["xaxis"]["ticktext"][-1] == "&lt;/s&gt;"
    assert "greedy" in "\n".join(c.value for c in at.caption)
    badge = "\n".join(m.value for m in at.sidebar.markdown)
    assert "CPU" in badge or "GPU" in badge
    assert at.sidebar.selectbox(key="w_model").value == TINY_MODEL
    assert at.query_params["sentence"] == texts.EXAMPLES[0] and at.query_params["view"] == "heatmap"


def test_typing_a_sentence_and_pressing_translate(tiny):
    at = start()
    at.text_area(key="sentence_input").input("Two dogs play in the snow.")
    next(b for b in at.button if b.label == "Translate").click().run()
    ok(at)
    ticks = charts(at)[0]["layout"]["yaxis"]["ticktext"]
    assert ticks[:3] == ["▁Two", "▁dogs", "▁play"]
    assert at.query_params["sentence"] == "Two dogs play in the snow."


def test_the_decoding_steps_table_is_drawn_once_opened(tiny, app_trace):
    """Folded, the table is not sent (the browser builds no data grid on a page's first view); opened, it lists
    every step: what the decoder read, what it chose and with what probability."""
    at = ok(start(sentence=app_trace.source_text))
    assert "Decoding steps" in " ".join(e.label for e in at.expander) and not at.dataframe
    at.session_state["steps_table"] = True  # what opening it in the browser sets (it reruns the page)
    table = ok(at.run()).dataframe[0].value
    assert table["chose"].tolist() == [s.token for s in app_trace.steps]
    assert table["read"].tolist() == [s.input_token for s in app_trace.steps]
    assert table["probability"].tolist() == pytest.approx([round(s.probability, 4) for s in app_trace.steps])


def test_picking_an_example(tiny):
    at = start()
    at.selectbox(key="example").set_value(texts.EXAMPLES[2]).run()
    ok(at)
    assert at.text_area(key="sentence_input").value == texts.EXAMPLES[2]
    assert at.query_params["sentence"] == texts.EXAMPLES[2]


def test_kind_layer_and_head_counts_come_from_the_model(tiny):
    at = ok(start())
    layers = at.selectbox(key="w_layer")
    assert layers.options == [f"Layer {i} of {TINY_CONFIG['encoder_layers']}"
                              for i in range(1, TINY_CONFIG["encoder_layers"] + 1)]
    heads = at.selectbox(key="w_head").options
    assert heads[:TINY_CONFIG["heads"]] == [f"Head {i} of {TINY_CONFIG['heads']}"
                                            for i in range(1, TINY_CONFIG["heads"] + 1)]
    assert heads[-2:] == ["Mean over heads", "Max over heads"]
    at.selectbox(key="w_kind").set_value("decoder").run()
    assert len(at.selectbox(key="w_layer").options) == TINY_CONFIG["decoder_layers"]
    at.selectbox(key="w_layer").set_value(3).run()
    at.selectbox(key="w_head").set_value(4).run()
    ok(at)
    assert titles(at) == ["Decoder self-attention (masked): layer 3, head 4"]
    assert (at.query_params["kind"], at.query_params["layer"], at.query_params["head"]) == ("decoder", "3", "4")
    # back to a kind with fewer layers: the layer is clamped, with a note
    at.selectbox(key="w_kind").set_value("encoder").run()
    ok(at)
    assert titles(at) == ["Encoder self-attention: layer 2, head 4"]
    assert "Layer 3 does not exist here" in messages(at)


def test_aggregates_and_word_level(tiny):
    at = start(kind="cross", head="mean")
    ok(at)
    assert titles(at) == ["Cross-attention (decoder → encoder): layer 1, mean over heads"]
    at.selectbox(key="w_head").set_value("max").run()
    at.selectbox(key="w_level").set_value("word").run()
    ok(at)
    assert titles(at) == ["Cross-attention (decoder → encoder): layer 1, max over heads, words"]


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_every_view_of_every_kind(tiny, kind):
    at = ok(start(kind=kind))
    at.segmented_control(key="w_view").set_value("model").run()
    layers = TINY_CONFIG["encoder_layers"] if kind == "encoder" else TINY_CONFIG["decoder_layers"]
    assert f"all {layers} layers × {TINY_CONFIG['heads']} heads" in titles(ok(at))[0]
    at.radio(key="w_mv_aggregate").set_value("mean").run()
    assert f"all {layers} layers × mean over heads" in titles(ok(at))[0]
    at.segmented_control(key="w_view").set_value("head").run()
    at.multiselect(key="w_hv_heads").set_value([0, 2]).run()
    assert "heads 1, 3" in titles(ok(at))[0]
    at.slider(key="w_hv_min").set_value(0.3).run()
    ok(at)
    at.multiselect(key="w_hv_heads").set_value([]).run()
    assert "Pick at least one head" in messages(ok(at))
    at.segmented_control(key="w_view").set_value("focus").run()
    ok(at)
    options = at.selectbox(key="w_focus_token").options
    assert len(charts(at)) == 1 and "token" in titles(at)[0]
    if kind == "cross":  # target and source tokens can both be focused
        assert any(o.startswith("target") for o in options) and any(o.startswith("source") for o in options)
        at.selectbox(key="w_focus_token").set_value(f"k{0}").run()
        assert len(charts(ok(at))[0]["data"]) == 1
    assert at.query_params["view"] == "focus"


def test_state_survives_a_view_change_and_a_page_switch(tiny):
    at = start(kind="cross", layer="2", head="3")
    at.segmented_control(key="w_view").set_value("model").run()
    switch_to(at, "masks").run()
    switch_to(at, "explore").run()
    at.segmented_control(key="w_view").set_value("heatmap").run()
    assert titles(ok(at)) == ["Cross-attention (decoder → encoder): layer 2, head 3"]


def test_the_url_reproduces_a_view(tiny):
    at = ok(start(sentence="A woman walks on the beach.", view="head", kind="decoder", layer="2", head="2"))
    assert at.text_area(key="sentence_input").value == "A woman walks on the beach."
    assert at.segmented_control(key="w_view").value == "head"
    assert "Decoder self-attention (masked): layer 2" in titles(at)[0]
    link = at.code[0].value
    assert link.startswith("?") and "sentence=A+woman+walks" in link and "view=head" in link


def test_forced_target(tiny):
    at = ok(start(sentence="Two dogs play.", target="Zwei hunde spielen."))
    assert any(m.value == "Forced target (teacher forcing)" for m in at.caption)
    assert texts.md_escape("Zwei hunde spielen.") in markdown(at)
    assert at.query_params["target"] == "Zwei hunde spielen."


def test_decoding_settings(tiny):
    at = ok(start())
    at.sidebar.radio(key="w_decoding").set_value("beam").run()
    at.sidebar.slider(key="w_beam").set_value(2).run()
    at.sidebar.slider(key="w_alpha").set_value(1.0).run()
    ok(at)
    assert "beam 2, α 1" in "\n".join(c.value for c in at.caption)
    assert at.query_params["beam"] == "2" and at.query_params["alpha"] == "1"


def test_model_picker_lists_every_model_directory(tiny, tmp_path, monkeypatch):
    shutil.copytree(tiny / TINY_MODEL, tmp_path / TINY_MODEL)
    shutil.copytree(tiny / TINY_MODEL, tmp_path / "another")
    (tmp_path / "not-a-model").mkdir()
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    at = ok(start(model="another"))
    picker = at.sidebar.selectbox(key="w_model")
    # each option is the directory's name; the caption under the picker repeats it in full with its language pair
    assert sorted(picker.options) == ["another", TINY_MODEL] and picker.value == "another"
    assert "another · en → de" in [c.value for c in at.sidebar.caption]
    picker.set_value(TINY_MODEL).run()
    ok(at)
    assert at.query_params["model"] == TINY_MODEL


def test_exports_are_offered(tiny):
    at = ok(start())
    labels = [b.proto.label for b in at.get("download_button")]
    for label in ("Trace as JSON", "Trace as NPZ (NumPy)", "Interactive HTML", "This map as CSV"):
        assert label in labels
    available, why = figure_files.images_available()
    if not available:  # the reason this machine cannot render images is said where the buttons would be
        assert why in "\n".join(c.value for c in at.caption)
        return
    next(b for b in at.button if b.label == "Render PNG and SVG").click().run()
    labels = [b.proto.label for b in ok(at).get("download_button")]
    assert "PNG image" in labels and "SVG image" in labels


# --- what the model knows ---------------------------------------------------------------------------------------
def test_the_page_says_what_the_model_was_trained_on(tiny):
    at = ok(start())
    notice = next(i.value for i in at.info if "This model was trained on" in i.value)
    assert "image captions (multi30k, 415 sentence pairs)" in notice
    assert "such as everyday sentences, are beyond its reach" in notice
    labels = [at.selectbox(key="example").format_func(e) for e in texts.EXAMPLES]
    assert labels[0] == f"{texts.EXAMPLES[0]} · image captions"
    assert labels[-1] == f"{texts.EXAMPLES[-1]} · everyday sentences (outside this model's training)"
    assert set(texts.EXAMPLE_DOMAINS) == {"image captions", "everyday sentences"}


def test_a_model_without_training_statistics_says_where_to_look(tiny, assets):
    stats = assets / TINY_MODEL / TRAINING_STATS
    saved = stats.read_bytes()
    stats.unlink()
    try:
        at = ok(start())
    finally:
        stats.write_bytes(saved)
    assert any("no training statistics" in c.value for c in at.caption)
    assert at.selectbox(key="example").format_func(texts.EXAMPLES[-1]).endswith("· everyday sentences")


def test_input_beyond_the_models_reach_is_flagged(tiny):
    at = ok(start(sentence="Two dogs ☃ play ☃."))
    assert "beyond what the model learned" in messages(at) and "never seen \\(☃\\)" in messages(at)
    assert "beyond what the model learned" not in messages(ok(start(sentence="Two dogs play in the snow.")))


def test_unsure_output_words_are_highlighted(tiny):
    at = ok(start(sentence="Two dogs play in the snow."))
    shown = markdown(at)
    legend = "\n".join(c.value for c in at.caption)
    assert ("Word by word, how sure the model was" in legend) == (":red-background[" in shown
                                                                 or ":orange-background[" in shown)
    assert "Word by word" in legend or "at least 50%" in legend


def test_confidence_markdown_marks_words_by_their_least_likely_piece():
    steps = [SimpleNamespace(probability=p) for p in (0.9, 0.6, 0.1, 0.3, 0.99)]
    trace = SimpleNamespace(output_tokens=["▁Zwei", "▁Hund", "e", "▁<b>", "</s>"], steps=steps)
    words = texts.output_words(trace)
    assert [w.text for w in words] == ["Zwei", "Hunde", "<b>"]  # </s> is not a word of the translation
    assert texts.confidence_markdown(words) == "Zwei :red-background[Hunde] :orange-background[\\<b\\>]"


# --- bad inputs --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("   ", "empty"),
    ("bell \x07 character", "control characters"),
    ("x" * 2500, "limit is 2000"),
])
def test_bad_sentences_get_a_message(tiny, text, expected):
    at = ok(start(sentence=text))
    assert expected in messages(at)
    assert charts(at) == []


def test_a_sentence_above_the_models_maximum(tiny):
    at = ok(start(sentence=long_sentence(60)))
    assert f"at most {TINY_CONFIG['max_positions']} tokens" in messages(at)
    assert charts(at) == []
    at.sidebar.checkbox(key="w_truncate").check().run()
    ok(at)
    assert len(charts(at)[0]["layout"]["xaxis"]["ticktext"]) == TINY_CONFIG["max_positions"]


def test_a_long_sentence_within_the_maximum_keeps_every_label(tiny):
    at = ok(start(sentence=long_sentence(35)))
    chart = charts(at)[0]
    assert len(chart["layout"]["yaxis"]["ticktext"]) == len(chart["layout"]["yaxis"]["tickvals"]) > 35


def test_bad_target_text(tiny):
    at = ok(start(sentence="Two dogs.", target="\x00"))
    assert "control characters" in messages(at)


@pytest.mark.parametrize("params, expected", [
    ({"layer": "abc"}, "layer=abc"),
    ({"kind": "sideways"}, "kind=sideways"),
    ({"head": "0"}, "head=0"),
    ({"view": "3d"}, "view=3d"),
    ({"model": "nope"}, "model=nope"),
    ({"beam": "99"}, "beam=99"),
    ({"alpha": "nan"}, "alpha=nan"),
])
def test_bad_url_parameters_are_reported_and_ignored(tiny, params, expected):
    at = ok(start(**params))
    assert expected in messages(at).replace("\\", "")
    assert titles(at) == ["Encoder self-attention: layer 1, head 1"]


def test_out_of_range_layer_and_head_in_the_url(tiny):
    at = ok(start(layer="9", head="99"))
    text = messages(at)
    assert "Layer 9 does not exist here" in text and "Head 99 does not exist here" in text
    assert titles(at) == ["Encoder self-attention: layer 2, head 1"]


def test_injection_is_shown_as_text(tiny):
    at = ok(start(sentence=INJECTION, target=INJECTION))
    assert texts.md_escape(INJECTION) in markdown(at)  # the forced "translation", escaped
    for chart in charts(at):
        text = json.dumps(chart)
        assert "<img" not in text and "<script" not in text
    ticks = charts(at)[0]["layout"]["xaxis"]["ticktext"]
    assert "&lt;" in ticks and "&gt;" in ticks
    for markdown_element in at.markdown:
        assert not markdown_element.proto.allow_html


# --- masks page --------------------------------------------------------------------------------------------------
def test_masks_page(tiny):
    at = start(sentence="Two dogs play.")
    switch_to(at, "masks").run()
    ok(at)
    assert at.title[0].value == "Masks"
    names = titles(at)
    assert names[0].startswith("Padding mask of the keys (source)")
    assert names[1].startswith("Causal mask of the decoder")
    assert names[3] == "Encoder self-attention, layer 1, head 1, sentence #1 of the batch"
    steps = charts(at)[3]
    assert [a["text"] for a in steps["layout"]["annotations"][:4]][3] == "4. softmax (weights)"
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["Max difference from the model's own weights"]) < 1e-5
    assert float(metrics["Weight on masked cells"]) == 0.0
    assert metrics["Row sums"] == "1.000000"
    for kind in ("decoder", "cross"):
        at.selectbox(key="w_m_kind").set_value(kind).run()
        at.selectbox(key="w_m_layer").set_value(TINY_CONFIG["decoder_layers"]).run()
        at.selectbox(key="w_m_head").set_value(2).run()
        at.radio(key="w_m_row").set_value(1).run()
        ok(at)
        assert float({m.label: m.value for m in at.metric}["Max difference from the model's own weights"]) < 1e-5
        assert f"layer {TINY_CONFIG['decoder_layers']}, head 2, sentence #2" in titles(at)[3]
    assert "(causal AND padding)" not in titles(at)[2]


def test_masks_page_bad_second_sentence(tiny):
    at = start()
    switch_to(at, "masks").run()
    at.text_input(key="w_m_other").input(" ").run()
    ok(at)
    assert "second sentence cannot be used" in messages(at)


# --- positional encoding page ------------------------------------------------------------------------------------
def test_positional_page(tiny):
    at = start(sentence="Two dogs play.")
    switch_to(at, "positional").run()
    ok(at)
    assert at.title[0].value == "Positional encoding"
    names = titles(at)
    sentence = next(n for n in names if n.startswith("Positional encodings of the"))
    assert f"d_model = {TINY_CONFIG['d_model']}" in sentence and "source positions" in sentence
    assert any(n.startswith("Sinusoids") for n in names) and any(n.startswith("Token 1:") for n in names)
    at.radio(key="w_pe_side").set_value("target").run()
    at.multiselect(key="w_pe_dims").set_value([2, 3]).run()
    at.selectbox(key="w_pe_token").set_value(0).run()
    ok(at)
    assert any(n.startswith("Positional encodings of the") and "target positions" in n for n in titles(at))
    sinusoids = next(c for c in charts(at) if c["layout"]["title"]["text"].startswith("Sinusoids"))
    assert [t["name"] for t in sinusoids["data"] if t.get("showlegend") is not False] == [
        "dim 2 (sin)", "dim 3 (cos)"]
    at.multiselect(key="w_pe_dims").set_value([]).run()
    assert "Pick at least one dimension" in messages(ok(at))


def test_an_unexpected_failure_is_a_message_not_a_traceback(tiny, monkeypatch):
    from viz_model.plot import map_figures

    def broken(amap):
        raise KeyError("simulated bug")

    monkeypatch.setattr(map_figures, "map_heatmap", broken)
    at = start()
    assert not at.exception
    assert any(e.value.startswith(widgets.UNEXPECTED) and "simulated bug" in e.value for e in at.error)
    assert at.query_params["view"] == "heatmap"  # the frame (sidebar, URL) still works
