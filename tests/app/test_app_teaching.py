"""AppTest tests of the teaching pages (Learn): positional encoding lab, attention by hand, decoding step by step,
the training recipe. Numbers on the pages are checked against the library computing them directly."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest
from support.app import (  # noqa: E402
    INJECTION,
    TINY_CONFIG,
    TINY_MODEL,
    arr,
    open_page,
)

import viz_model  # noqa: E402
from app import texts, widgets  # noqa: E402
from viz_model.config import ModelConfig, TrainConfig  # noqa: E402
from viz_model.config.recipe import cooldown_factor, learning_rate  # noqa: E402
from viz_model.lessons import hand_attention, layer_memory, pe_tables, typed_matrices
from viz_model.modeldir.checkpoint import save_model_dir  # noqa: E402
from viz_model.modeldir.coverage import TRAINING_STATS  # noqa: E402
from viz_model.modeldir.training_facts import facts_from_run  # noqa: E402
from viz_model.nn.model import Transformer  # noqa: E402
from viz_model.nn.positional import shift_matrix  # noqa: E402
from viz_model.nn.shapes import architecture  # noqa: E402
from viz_model.plot import figure_style  # noqa: E402
from viz_model.tokenization.tokenizer import Tokenizer  # noqa: E402

SENTENCE = "Two dogs play in the snow."




@pytest.fixture(scope="module")
def model(assets):
    return viz_model.load(assets / TINY_MODEL, device="cpu")


def on_page(page: str, **params: str) -> AppTest:
    """Page `page` of a session whose link holds the test sentence (greedy) and `params`."""
    return open_page(page, **{"beam": "1", "sentence": SENTENCE, **params})


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.message for e in at.exception]
    unexpected = [e.value for e in at.error if e.value.startswith(widgets.UNEXPECTED)]
    assert not unexpected, unexpected
    return at


def charts(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def titles(at: AppTest) -> list[str]:
    return [c["layout"].get("title", {}).get("text", "") for c in charts(at)]


def chart(at: AppTest, prefix: str) -> dict:
    found = [c for c in charts(at) if c["layout"].get("title", {}).get("text", "").startswith(prefix)]
    assert found, f"no chart titled {prefix!r} in {titles(at)}"
    return found[0]


def messages(at: AppTest) -> str:
    """Every message, Markdown escapes removed (messages quoting user input are escaped)."""
    return "\n".join(str(e.value) for e in [*at.error, *at.warning, *at.info]).replace("\\", "")


def captions(at: AppTest) -> str:
    return "\n".join(c.value for c in at.caption)


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}




def tables(at: AppTest) -> list:
    """The read-only tables (st.dataframe), as pandas frames with the exact values."""
    return [d.value for d in at.dataframe if d.editing_mode == "read_only"]


# --- positional encoding lab -------------------------------------------------------------------------------------
def test_positional_lab_draws_every_lesson(tiny):
    at = on_page("positional")
    d, max_positions = TINY_CONFIG["d_model"], TINY_CONFIG["max_positions"]
    tokens = len(viz_model.load(tiny / TINY_MODEL, device="cpu").encode(SENTENCE))
    drawn = max(16, -(-tokens // 8) * 8)  # the sentence's positions, rounded up to the slider's step of 8
    assert at.slider(key="w_pe_length").value == drawn
    for prefix in (f"PE matrix: {drawn} positions", "Sinusoids", "Wavelength of each sin/cos pair", "PE(p)·PE(q) for",
                   "PE(p)·PE(q) against the distance", "M_k for k = 3", "Numerical error of M_k",
                   "The chosen dimensions for positions", "Positional encodings of the", "Token 1:",
                   "Encoder self-attention, layer"):
        chart(at, prefix)
    wl = chart(at, "Wavelength")
    y = arr(wl["data"][0]["y"])
    assert len(y) == d // 2 and y[0] == pytest.approx(2 * math.pi)
    assert y[-1] == pytest.approx(2 * math.pi * 10000 ** ((d - 2) / d))
    assert wl["layout"]["yaxis"]["type"] == "log"
    values = metrics(at)
    assert float(values["Largest error, float64 table"]) < 1e-5
    assert float(values["Largest error, float32 table (what the model adds)"]) < 1e-5
    text = messages(at)
    longest = viz_model.load(tiny / TINY_MODEL, device="cpu").training_stats.max_source_tokens
    assert f"The longest training sequence had {longest} tokens (from training_stats.json" in captions(at)
    assert "does not record the longest training sentence" not in text  # the explorer's warnings read the same
    far = chart(at, "The chosen dimensions for positions")
    assert any(f"max_positions = {max_positions}" in a["text"] for a in far["layout"]["annotations"])
    assert "No learned-position model is shipped yet" in text
    assert f"d_model = {d}" in captions(at)


def test_shift_offset_and_zoom(tiny):
    at = on_page("positional")
    at.number_input(key="w_pe_k").set_value(7).run()
    at.slider(key="w_pe_zoom").set_value(8).run()
    ok(at)
    matrix = chart(at, "M_k for k = 7")
    np.testing.assert_allclose(arr(matrix["data"][0]["z"]), shift_matrix(7, TINY_CONFIG["d_model"])[:8, :8].numpy(),
                               atol=1e-12)
    error = chart(at, "Numerical error of M_k PE(p) = PE(p + 7)")
    assert arr(error["data"][1]["customdata"]).max() < 1e-5  # float64
    at.number_input(key="w_pe_k").set_value(-5).run()
    error = chart(ok(at), "Numerical error of M_k PE(p) = PE(p + -5)")
    assert arr(error["data"][0]["x"])[0] == 5  # p + k must be a position
    at.slider(key="w_pe_length").set_value(16).run()
    assert any(t.startswith("PE matrix: 16 positions") for t in titles(ok(at)))


def test_training_length_from_the_log_and_a_learned_model(tiny, tmp_path, monkeypatch):
    shutil.copytree(tiny / TINY_MODEL, tmp_path / TINY_MODEL)
    (tmp_path / TINY_MODEL / "training_log.jsonl").write_text(json.dumps({"event": "start", "max_len": 30}) + "\n")
    (tmp_path / TINY_MODEL / TRAINING_STATS).unlink()  # without training statistics the log is read
    tokenizer = Tokenizer.load(tiny / TINY_MODEL / "tokenizer.model")
    torch.manual_seed(1)
    learned = Transformer(ModelConfig(vocab_size=tokenizer.vocab_size, positional="learned", **TINY_CONFIG))
    save_model_dir(learned, tokenizer, tmp_path / "tiny-learned")
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    at = on_page("positional", model=TINY_MODEL)
    assert "longest training sequence had 30 tokens (from training_log.jsonl (max_len))" in captions(at)
    far = chart(at, "The chosen dimensions for positions")
    assert any("longest training sentence = 30" in a["text"] for a in far["layout"]["annotations"])
    assert "No learned-position model" not in messages(at)
    assert at.selectbox(key="w_pe_learned").value == "tiny-learned"
    side = next(c for c in charts(at) if any(a["text"].startswith("learned (tiny-learned)")
                                             for a in c["layout"].get("annotations", [])))
    rows = min(TINY_CONFIG["max_positions"], at.slider(key="w_pe_length").value)  # as many positions as drawn
    expected = learned.positional_encodings(rows).detach().numpy()
    np.testing.assert_allclose(arr(side["data"][0]["z"]), expected, atol=1e-6)


def test_experiment_without_positional_encodings(tiny, model):
    at = on_page("positional")
    assert at.radio(key="w_pe_exp").value == "no_pe"
    layers = TINY_CONFIG["encoder_layers"]
    assert at.selectbox(key="w_pe_exp_layer").options == [f"Layer {i} of {layers}" for i in range(1, layers + 1)]
    figure = chart(at, f"Encoder self-attention, layer {layers}, mean over the {TINY_CONFIG['heads']} heads")
    original, changed = (arr(t["z"]) for t in figure["data"])
    normal = model.trace(SENTENCE, beam=1)
    without = model.trace(SENTENCE, beam=1, positions=False)
    np.testing.assert_allclose(original, normal.encoder_attentions[-1].mean(axis=0), atol=1e-6)
    np.testing.assert_allclose(changed, without.encoder_attentions[-1].mean(axis=0), atol=1e-6)
    assert not np.allclose(original, changed, atol=1e-3)
    assert texts.md_escape(without.translation) in "\n".join(m.value for m in at.markdown)
    at.selectbox(key="w_pe_exp_kind").set_value("cross").run()
    at.selectbox(key="w_pe_exp_layer").set_value(1).run()
    figure = chart(ok(at), "Cross-attention, layer 1")
    np.testing.assert_allclose(arr(figure["data"][1]["z"]), without.cross_attentions[0].mean(axis=0), atol=1e-6)


def test_experiment_shuffled_words(tiny, model):
    at = on_page("positional")
    at.radio(key="w_pe_exp").set_value("shuffle").run()
    ok(at)
    shuffled = pe_tables.shuffle_words(SENTENCE, 1)
    assert shuffled != SENTENCE and sorted(shuffled.split()) == sorted(SENTENCE.split())
    text = "\n".join(m.value for m in at.markdown)
    assert texts.md_escape(shuffled) in text
    assert texts.md_escape(model.trace(shuffled, beam=1).translation) in text
    figure = chart(at, "Encoder self-attention")
    shuffled_tokens = model.trace(shuffled, beam=1).source_tokens
    assert figure["layout"]["xaxis2"]["ticktext"] == [figure_style.escape(t) for t in shuffled_tokens]
    at.number_input(key="w_pe_seed").set_value(2).run()
    assert texts.md_escape(pe_tables.shuffle_words(SENTENCE, 2)) in "\n".join(m.value for m in ok(at).markdown)
    at.radio(key="w_pe_exp").set_value("shuffle_no_pe").run()
    figure = chart(ok(at), "Encoder self-attention")
    assert [a["text"] for a in figure["layout"]["annotations"]][:2] == [
        "original", "shuffle the words and remove the encodings"]


def test_experiment_needs_two_words(tiny):
    at = on_page("positional", sentence="Hello")
    at.radio(key="w_pe_exp").set_value("shuffle").run()
    assert "needs at least two different words" in messages(ok(at))


@pytest.mark.parametrize("page", ["positional", "decoding", "training"])
def test_user_text_is_escaped(tiny, page):
    at = on_page(page, sentence=INJECTION)
    if page == "positional":
        at.radio(key="w_pe_exp").set_value("shuffle").run()
        ok(at)
    assert charts(at)
    for spec in charts(at):
        text = json.dumps(spec)
        assert "<img" not in text and "<script" not in text
    for element in at.markdown:
        assert not element.proto.allow_html


# --- attention by hand -------------------------------------------------------------------------------------------
def test_by_hand_numbers_equal_the_notes(tiny):
    at = on_page("by_hand")
    notes = hand_attention.NOTES
    q, k, v, scores, weights, weighted, output, compared = tables(at)[:8]
    np.testing.assert_array_equal(q.to_numpy(), notes["queries"])
    np.testing.assert_array_equal(k.to_numpy(), notes["keys"])
    np.testing.assert_array_equal(v.to_numpy(), notes["values"])
    np.testing.assert_array_equal(scores.to_numpy()[0], notes["scores_q1"])
    np.testing.assert_allclose(weights.to_numpy()[0], notes["softmax_q1"], atol=1e-4)
    np.testing.assert_allclose(output.to_numpy()[0], notes["output1_exact"], atol=5e-3)
    np.testing.assert_allclose(weighted.to_numpy()[-1], output.to_numpy()[0], atol=1e-12)  # the sum row
    np.testing.assert_allclose(weights.to_numpy().sum(axis=1), 1.0, atol=1e-6)
    rows = {r["quantity"]: r for r in compared.to_dict("records")}
    assert rows["softmax"]["notes, rounded"] == "[0.0, 0.5, 0.5]"
    assert rows["softmax"]["exact (this page)"] == "0.0634, 0.4683, 0.4683"
    assert rows["output 1"]["notes, rounded"] == "[2.0, 7.0, 1.5]"
    assert rows["output 1"]["exact (this page)"] == "1.9366, 6.6831, 1.5951"
    assert rows["output 1 from the rounded weights"]["exact (this page)"] == "2.0000, 7.0000, 1.5000"
    scaled_scores, scaled_weights = tables(at)[8:10]
    np.testing.assert_allclose(scaled_scores.to_numpy()[0], np.array(notes["scores_q1"]) / math.sqrt(3), atol=1e-12)
    assert scaled_weights.to_numpy()[0, 0] > weights.to_numpy()[0, 0]  # flatter
    assert any(t == "Weights with ÷ √3" for t in titles(at))


def test_by_hand_following_another_query(tiny):
    at = on_page("by_hand")
    at.selectbox(key="w_abh_query").set_value(2).run()
    weighted = tables(ok(at))[5]
    assert weighted.index[-1] == "sum = output" and len(weighted) == 4
    np.testing.assert_allclose(weighted.to_numpy()[-1], tables(at)[6].to_numpy()[2], atol=1e-12)


def edit(at: AppTest, name: str, **state) -> AppTest:
    at.session_state[f"abh_edit_{name}"] = {"edited_rows": {}, "added_rows": [], "deleted_rows": [], **state}
    return at.run()


def test_editing_a_cell_recomputes_with_the_library(tiny):
    at = on_page("by_hand")
    edit(at, "X", edited_rows={0: {"d1": "2", "d4": "-1.5"}})
    ok(at)
    x = hand_attention.EXAMPLE_X.copy()
    x[0, 0], x[0, 3] = 2, -1.5
    expected = hand_attention.attention_by_hand(x, hand_attention.EXAMPLE_WQ, hand_attention.EXAMPLE_WK,
                                                hand_attention.EXAMPLE_WV)
    q, _, _, scores, weights, _, output = tables(at)[:7]
    np.testing.assert_allclose(q.to_numpy(), x @ hand_attention.EXAMPLE_WQ)
    np.testing.assert_allclose(weights.to_numpy(), expected.weights, atol=1e-12)
    np.testing.assert_allclose(output.to_numpy(), expected.output, atol=1e-12)
    assert "You changed the example" in captions(at)
    assert not any(r.get("quantity") == "softmax" for t in tables(at) for r in t.to_dict("records"))


@pytest.mark.parametrize("name, state, expected", [
    ("X", {"edited_rows": {1: {"d2": "two"}}}, "X, row 2, column 2 is 'two', not a number"),
    ("W_k", {"edited_rows": {0: {"k1": ""}}}, "W_k, row 1, column 1 is empty"),
    ("W_v", {"edited_rows": {2: {"v3": "1e9"}}}, "keep values within ±10,000"),
    ("W_q", {"edited_rows": {0: {"q2": "nan"}}}, "only finite numbers"),
    ("W_q", {"deleted_rows": [3]}, "W_q has 3 rows but X has 4 columns"),
    ("X", {"deleted_rows": [0, 1, 2]}, "X is empty"),
    ("X", {"added_rows": [{"d1": "1"}]}, "X, row 4, column 2 is empty"),
])
def test_bad_matrix_input_gets_an_inline_message(tiny, name, state, expected):
    at = edit(on_page("by_hand"), name, **state)
    ok(at)
    assert expected in messages(at)
    assert "Fix the tables above" in messages(at)
    assert tables(at) == []  # no step is shown from a bad matrix
    chart(at, "Random unit-variance")  # the rest of the page still works


def test_a_cell_with_markup_is_quoted_as_text(tiny):
    at = edit(on_page("by_hand"), "W_q", edited_rows={0: {"q1": "**<b>x</b>**"}})
    raw = ok(at).error[0].value
    assert "is '**<b>x</b>**', not a number" in messages(at)
    assert "\\*\\*\\<b\\>" in raw  # escaped: shown literally, never bold or HTML


def test_reset_and_resize(tiny):
    at = edit(on_page("by_hand"), "X", edited_rows={0: {"d1": "oops"}})
    assert "not a number" in messages(ok(at))
    next(b for b in at.button if b.label == "Reset to the worked example").click().run()
    ok(at)
    assert "not a number" not in messages(at)
    np.testing.assert_array_equal(tables(at)[0].to_numpy(), hand_attention.NOTES["queries"])
    at.number_input(key="abh_d_in").set_value(2).run()
    at.number_input(key="abh_d_k").set_value(2).run()
    at.number_input(key="abh_d_v").set_value(5).run()
    ok(at)
    q, _, v = tables(at)[:3]
    np.testing.assert_array_equal(q.to_numpy(), hand_attention.EXAMPLE_X[:, :2] @ hand_attention.EXAMPLE_WQ[:2, :2])
    np.testing.assert_array_equal(v.to_numpy(),
                                  hand_attention.EXAMPLE_X[:, :2]
                                  @ typed_matrices.resized(hand_attention.EXAMPLE_WV[:2], 2, 5))
    assert [len(e.value.columns) for e in at.data_editor] == [2, 2, 2, 5]
    assert at.selectbox(key="w_abh_heads").options == ["1", "2"]


def test_scaling_causal_mask_and_multi_head(tiny):
    at = on_page("by_hand")
    causal = chart(at, "Causally masked weights")
    z = arr(causal["data"][0]["z"])
    assert np.all(np.triu(z, 1) == 0) and z[0, 0] == 1.0
    assert "0 (masked)" in causal["data"][0]["text"][0]
    masked_output = next(t for t in tables(at) if t.index[0] == "out1" and t.shape == (3, 3)
                         and np.allclose(t.to_numpy()[0], hand_attention.NOTES["values"][0]))
    assert masked_output is not None  # output 1 under the causal mask is v1
    at.toggle(key="w_abh_mask_scaled").set_value(False).run()
    ok(at)
    heads = chart(at, "Attention weights of the 2 heads")
    assert len(heads["data"]) == 2
    assert float(metrics(at)["Difference from MultiHeadAttention.forward on the same input"]) < 1e-12
    at.selectbox(key="w_abh_heads").set_value(4).run()
    at.number_input(key="w_abh_mh_seed").set_value(5).run()
    at.toggle(key="w_abh_mh_causal").set_value(True).run()
    ok(at)
    heads = chart(at, "Attention weights of the 4 heads (d_k = 1 each")
    assert all(np.all(np.triu(arr(t["z"]), 1) == 0) for t in heads["data"])
    assert float(metrics(at)["Difference from MultiHeadAttention.forward on the same input"]) < 1e-12


def test_saturation_plot_controls(tiny):
    at = on_page("by_hand")
    at.slider(key="w_abh_keys").set_value(20).run()
    at.select_slider(key="w_abh_samples").set_value(200).run()
    at.number_input(key="w_abh_seed").set_value(3).run()
    fig = chart(ok(at), "Random unit-variance queries and keys, 20 keys")
    unscaled, scaled = fig["data"][0], fig["data"][2]
    assert unscaled["name"].startswith("QKᵀ (not") and scaled["name"].startswith("QKᵀ / √d_k")
    expected = hand_attention.saturation((1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), 20, 200, 3)
    np.testing.assert_allclose(arr(unscaled["y"]), expected[~expected["scaled"]]["entropy"], atol=1e-9)
    assert arr(unscaled["y"])[-1] < 0.5 < arr(scaled["y"])[-1]  # unscaled saturates, scaled does not


# --- decoding step by step ---------------------------------------------------------------------------------------
def test_decoding_steps_follow_the_trace(tiny, model):
    at = on_page("decoding")
    trace = model.trace(SENTENCE, beam=1)
    steps = len(trace.steps)
    assert at.slider(key="w_dec_step").max == steps
    for t in (0, steps - 1):
        at.slider(key="w_dec_step").set_value(t + 1).run()
        ok(at)
        top = chart(at, f"Step {t + 1}: the top 5 next tokens")
        np.testing.assert_allclose(arr(top["data"][0]["x"]), trace.steps[t].top_probabilities, rtol=1e-5)
        layers = TINY_CONFIG["decoder_layers"]
        cross = chart(at, f"Cross-attention, layer {layers}, step {t + 1}")
        np.testing.assert_allclose(arr(cross["data"][0]["z"]), trace.cross_attentions[-1][:, t, :], atol=1e-6)
        assert len(cross["layout"]["yaxis"]["ticktext"]) == TINY_CONFIG["heads"]
        mask = arr(chart(at, f"Causal mask after step {t + 1}")["data"][0]["z"])
        assert np.isnan(mask[t + 1:]).all() and not np.isnan(mask[:t + 1]).any()
        assert np.all(mask[:t + 1][np.triu_indices(t + 1, 1)] == 0)
    assert at.selectbox(key="w_dec_layer").options == [f"Layer {i} of {layers}" for i in range(1, layers + 1)]
    at.selectbox(key="w_dec_layer").set_value(1).run()
    np.testing.assert_allclose(arr(chart(ok(at), "Cross-attention, layer 1")["data"][0]["z"]),
                               trace.cross_attentions[0][:, steps - 1, :], atol=1e-6)


def test_beam_tree_and_greedy_vs_beam(tiny, model):
    at = on_page("decoding")
    tree = chart(at, "Beam search tree (this project's rule): beam 4, α 0.6")
    chosen = next(t for t in tree["data"] if t.get("name") == "chosen translation")
    expected = model.beam_tree(SENTENCE, beam=4, alpha=0.6)
    assert len(arr(chosen["x"])) == len(expected.best.tokens)
    pruned = next(t for t in tree["data"] if t.get("name") == "pruned")
    assert pruned["marker"]["color"] == "#c8c8c8"
    text = "\n".join(m.value for m in at.markdown)
    assert texts.md_escape(model.translate(SENTENCE, beam=4, alpha=0.6)) in text
    assert texts.md_escape(model.translate(SENTENCE, beam=1)) in text
    finished = tables(at)[-1]
    assert finished["chosen"].sum() == 1 and finished.iloc[0]["chosen"]
    assert list(finished["score"]) == sorted(finished["score"], reverse=True)
    at.slider(key="w_dec_beam").set_value(2).run()
    at.slider(key="w_dec_alpha").set_value(1.0).run()
    at.slider(key="w_dec_per_parent").set_value(6).run()
    ok(at)
    chart(at, "Beam search tree (this project's rule): beam 2, α 1,")
    assert texts.md_escape(model.translate(SENTENCE, beam=2, alpha=1.0)) in "\n".join(m.value for m in at.markdown)


def test_decoding_page_bad_sentence(tiny):
    at = on_page("decoding", sentence=" ")
    assert "empty" in messages(at) and charts(at) == []


# --- the training recipe -----------------------------------------------------------------------------------------
def test_training_page_without_a_log(tiny):
    at = on_page("training")
    text = messages(at)
    assert "has no training_log.jsonl, so its actual schedule cannot be drawn" in text
    assert "no training log (training_log.jsonl)" in text
    lr = chart(at, "Learning rate")
    cfg = TrainConfig(model=ModelConfig(d_model=TINY_CONFIG["d_model"], heads=1, d_ff=1, vocab_size=8),
                      warmup_steps=4000)
    x, y = arr(lr["data"][0]["x"]), arr(lr["data"][0]["y"])
    np.testing.assert_allclose(y, [learning_rate(int(s), cfg) for s in x], rtol=1e-12)
    assert at.number_input(key="w_tr_d_model").value == TINY_CONFIG["d_model"]
    smoothing = chart(at, "Target distribution")
    np.testing.assert_allclose(arr(smoothing["data"][0]["y"]), [0.01] * 3 + [0.91] + [0.01] * 6, atol=1e-6)
    at.slider(key="w_tr_eps").set_value(0.3).run()
    at.number_input(key="w_tr_vocab").set_value(4).run()
    at.number_input(key="w_tr_target").set_value(2).run()
    np.testing.assert_allclose(arr(chart(ok(at), "Target distribution")["data"][0]["y"]),
                               [0.075, 0.075, 0.775, 0.075], atol=1e-6)
    at.number_input(key="w_tr_target").set_value(9).run()
    assert "target token must be from 0 to 3" in messages(ok(at))
    at.number_input(key="w_tr_d_model").set_value(512).run()
    at.number_input(key="w_tr_warmup").set_value(100).run()
    at.number_input(key="w_tr_steps").set_value(1000).run()
    y = arr(chart(ok(at), "Learning rate")["data"][0]["y"])
    assert y.max() == pytest.approx(512 ** -0.5 * 100 ** -0.5)
    at.number_input(key="w_tr_scale").set_value(2.0).run()
    assert arr(chart(ok(at), "Learning rate")["data"][0]["y"]).max() == pytest.approx(2 * y.max())
    at.radio(key="w_tr_mode").set_value("peak").run()
    at.number_input(key="w_tr_peak").set_value(0.001).run()
    lr = chart(ok(at), "Learning rate")["data"][0]
    assert arr(lr["y"]).max() == pytest.approx(0.001) and lr["name"] == "peak 0.001, warm-up 100"


def training_page_of(tiny: Path, tmp_path: Path, monkeypatch, events: list[dict], cfg: TrainConfig,
                     facts_events: list[dict] | None = None) -> AppTest:
    """The training page for a copy of the tiny model with this training log and the training facts of a run of
    `cfg` (from `facts_events`, default the log); its card's prose says nothing the page could read."""
    shutil.copytree(tiny / TINY_MODEL, tmp_path / TINY_MODEL)
    (tmp_path / TINY_MODEL / "training_log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    facts = facts_from_run(cfg, events if facts_events is None else facts_events)
    (tmp_path / TINY_MODEL / "training_facts.json").write_text(facts.to_json())
    (tmp_path / TINY_MODEL / "MODEL_CARD.md").write_text("# tiny\n\nA card reworded by someone: 9 warm-up steps.\n")
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    return on_page("training")


def test_training_page_with_the_models_log(tiny, tmp_path, monkeypatch):
    cfg = TrainConfig(model=ModelConfig(d_model=TINY_CONFIG["d_model"], heads=1, d_ff=1, vocab_size=8),
                      warmup_steps=50, lr_peak=7e-4, label_smoothing=0.2)
    events = [{"event": "start", "params": 1234, "train_pairs": 10, "device": "cpu", "threads": 2}]
    events += [{"event": "train", "step": s, "loss": 9 - s / 40, "nll": 8.5 - s / 40, "lr": learning_rate(s, cfg),
                "tokens_per_s": 1000.0 + s} for s in (20, 40, 60, 80)]
    events += [{"event": "val", "step": 40, "epoch": 1, "val_loss": 7.0, "val_bleu": 1.5},
               {"event": "val", "step": 80, "epoch": 2, "val_loss": 6.0, "val_bleu": 3.0}]
    at = training_page_of(tiny, tmp_path, monkeypatch, events, cfg)
    assert at.radio(key="w_tr_mode").value == "peak" and at.number_input(key="w_tr_warmup").value == 50
    assert float(metrics(at)["Largest gap between this curve and the 4 learning rates the model logged"]) == 0.0
    logged = next(t for t in chart(at, "Learning rate")["data"] if t.get("name") == "the model's logged lr")
    np.testing.assert_allclose(arr(logged["y"]), [e["lr"] for e in events if e["event"] == "train"])
    curves = chart(at, "Training curves from the run log (4 train, 2 validation events)")
    bleu = next(t for t in curves["data"] if t["name"] == "validation BLEU")
    np.testing.assert_allclose(arr(bleu["y"]), [1.5, 3.0])
    assert at.slider(key="w_tr_eps").value == pytest.approx(0.2)
    assert "1,234 parameters" in captions(at)
    at.number_input(key="w_tr_warmup").set_value(60).run()
    assert float(metrics(ok(at))["Largest gap between this curve and the 4 learning rates the model logged"]) > 0


def test_training_page_draws_the_cooldown_the_facts_name(tiny, tmp_path, monkeypatch):
    """A model trained with a cooldown: the page reads epochs, steps and cooldown from its training facts and its
    curve meets every logged rate, down to the last steps near zero; without the cooldown it would miss them."""
    cfg = TrainConfig(model=ModelConfig(d_model=TINY_CONFIG["d_model"], heads=1, d_ff=1, vocab_size=8),
                      warmup_steps=10, lr_peak=1e-3, epochs=4, cooldown_epochs=2)
    logged = [(e * 30 + b + 1, learning_rate(e * 30 + b + 1, cfg) * cooldown_factor(e, b, 30, cfg))
              for e in range(4) for b in range(30) if (e * 30 + b + 1) % 20 == 0]
    events = [{"event": "train", "step": s, "loss": 5.0, "nll": 4.0, "lr": lr, "tokens_per_s": 1.0} for s, lr in logged]
    at = training_page_of(tiny, tmp_path, monkeypatch, events, cfg,
                          events + [{"event": "val", "epoch": 4, "step": 120, "val_loss": 3.0}])
    assert (at.number_input(key="w_tr_cooldown").value, at.number_input(key="w_tr_epochs").value,
            at.number_input(key="w_tr_epoch_steps").value) == (2, 4, 30)
    gap = "Largest gap between this curve and the 6 learning rates the model logged"
    assert float(metrics(ok(at))[gap]) == 0.0
    curve = chart(at, "Learning rate: linear warm-up, then ∝ 1/√step, then a linear cooldown to zero")["data"][0]
    assert arr(curve["x"]).max() == 120 and arr(curve["y"])[-1] == pytest.approx(learning_rate(120, cfg) / 60)
    assert "The cooldown starts after step 60" in captions(at)
    at.number_input(key="w_tr_cooldown").set_value(0).run()
    assert float(metrics(ok(at))[gap]) > 1e-4
    at.number_input(key="w_tr_cooldown").set_value(5).run()
    assert "cooldown_epochs (5) exceeds epochs (4)" in messages(at).lower()


def test_architecture_shapes_for_the_sentence(tiny, model):
    at = on_page("training")
    trace = model.trace(SENTENCE, beam=1)
    s, t = len(trace.source_tokens), len(trace.target_tokens)
    h, d = TINY_CONFIG["heads"], TINY_CONFIG["d_model"]
    fig = chart(at, "The loaded model, with the tensor shapes")
    text = "\n".join(a["text"] for a in fig["layout"]["annotations"])
    assert f"weights (1, {h}, {s}, {s})" in text and f"weights (1, {h}, {t}, {s})" in text
    assert f"({1}, {t}, {model.config.vocab_size})" in text
    assert f"× {TINY_CONFIG['encoder_layers']}</b>" in text and f"× {TINY_CONFIG['decoder_layers']}</b>" in text
    stages = tables(at)[0]
    assert len(stages) == len(architecture(model.config, s, t))
    assert f"1 × {s} × {d}" in set(stages["shape"])
    assert trace.encoder_attentions[0].shape == (h, s, s)


def test_why_self_attention_measurement(tiny):
    at = on_page("training")
    assert tables(at)[1]["layer"].tolist()[:3] == ["self-attention", "recurrent", "convolutional"]
    at.multiselect(key="w_tr_lengths").set_value([8, 64]).run()
    at.number_input(key="w_tr_d").set_value(32).run()
    at.number_input(key="w_tr_heads").set_value(4).run()
    at.number_input(key="w_tr_kernel").set_value(5).run()
    at.button(key="tr_measure").click().run()
    ok(at)
    fig = chart(at, "One layer, measured on this machine")
    legend = [t["name"] for t in fig["data"] if t.get("showlegend")]
    assert legend == list(layer_memory.LAYER_NAMES)
    explicit = [t for t in fig["data"] if t["name"] == layer_memory.LAYER_NAMES[0]][1]  # memory panel
    memory = arr(explicit["y"])
    assert memory[1] / memory[0] > 16  # 8x the length: the n x n weights grow 64x
    at.number_input(key="w_tr_heads").set_value(3).run()
    at.button(key="tr_measure").click().run()
    assert "not divisible by 3 heads" in messages(ok(at))
    at.multiselect(key="w_tr_lengths").set_value([]).run()
    at.button(key="tr_measure").click().run()
    assert "pick at least one sequence length" in messages(ok(at)).lower()
