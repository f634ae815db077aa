"""Unit tests of the teaching pages' computations (viz_model/lessons/: hand_attention, pe_tables, training_recipe, ...)
and figure builders (viz_model/plot/: by_hand_figures, pe_lab_figures, ...): no Streamlit, no browser."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
import torch
from support.app import INJECTION, TINY_MODEL, arr, build_tiny_assets  # noqa: E402

import viz_model  # noqa: E402
from viz_model.config import ModelConfig, TrainConfig  # noqa: E402
from viz_model.config.recipe import cooldown_factor, learning_rate  # noqa: E402
from viz_model.lessons import hand_attention, layer_memory, lesson_inputs, pe_tables, training_recipe, typed_matrices  # noqa: E402
from viz_model.modeldir.training_facts import facts_from_run  # noqa: E402
from viz_model.nn.shapes import architecture  # noqa: E402
from viz_model.plot import by_hand_figures, decoding_figures, pe_lab_figures, positional_trace_figures, training_figures  # noqa: E402
from viz_model.search.decoding import BeamCandidate, BeamStep, BeamTree, Hypothesis  # noqa: E402

EX = (hand_attention.EXAMPLE_X, hand_attention.EXAMPLE_WQ, hand_attention.EXAMPLE_WK, hand_attention.EXAMPLE_WV)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    root = build_tiny_assets(tmp_path_factory.mktemp("units-assets"))
    return viz_model.load(root / TINY_MODEL, device="cpu")




def spec(fig: go.Figure) -> dict:
    return json.loads(fig.to_json())


# --- typed matrices ----------------------------------------------------------------------------------------------
def test_parse_matrix_reads_text_cells():
    frame = pd.DataFrame([["1", " 2.5 ", "−3"], [4, 5.0, "1e3"]])
    np.testing.assert_array_equal(typed_matrices.parse_matrix(frame, "M"), [[1, 2.5, -3], [4, 5, 1000]])
    back = typed_matrices.parse_matrix(typed_matrices.matrix_frame(hand_attention.EXAMPLE_WV, "v"), "W_v")
    np.testing.assert_array_equal(back, hand_attention.EXAMPLE_WV)


@pytest.mark.parametrize("cells, message", [
    ([["1", "x"]], "M, row 1, column 2 is 'x', not a number"),
    ([["1", None]], "row 1, column 2 is empty"),
    ([["1", "  "]], "row 1, column 2 is empty"),
    ([["1", float("nan")]], "row 1, column 2 is empty"),
    ([["inf", "1"]], "only finite numbers"),
    ([["1", "20000"]], "keep values within ±10,000"),
    ([[True, 1]], "not a number"),
    ([["1"] * 9], "at most 8 × 8"),
])
def test_parse_matrix_rejects_bad_cells(cells, message):
    with pytest.raises(lesson_inputs.InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        typed_matrices.parse_matrix(pd.DataFrame(cells), "M")


def test_parse_matrix_rejects_empty_tables():
    with pytest.raises(lesson_inputs.InputError, match="M is empty"):
        typed_matrices.parse_matrix(pd.DataFrame(columns=["a", "b"]), "M")
    with pytest.raises(lesson_inputs.InputError, match="M is empty"):
        typed_matrices.parse_matrix([], "M")


def test_resized_keeps_what_fits():
    np.testing.assert_array_equal(typed_matrices.resized(np.ones((2, 2)), 3, 1), [[1], [1], [0]])


@pytest.mark.parametrize("shapes, message", [
    (((3, 4), (3, 3), (4, 3), (4, 3)), "W_q has 3 rows but X has 4 columns"),
    (((3, 4), (4, 3), (4, 2), (4, 3)), "d_k equal"),
    (((3, 4), (4, 3), (4, 3), (5, 3)), "W_v has 5 rows"),
])
def test_check_shapes(shapes, message):
    with pytest.raises(lesson_inputs.InputError, match=message):
        hand_attention.check_shapes(*(np.zeros(s) for s in shapes))


# --- attention by hand -------------------------------------------------------------------------------------------
def test_the_worked_example_equals_the_notes():
    plain = hand_attention.attention_by_hand(*EX)
    notes = hand_attention.NOTES
    np.testing.assert_array_equal(plain.q, notes["queries"])
    np.testing.assert_array_equal(plain.k, notes["keys"])
    np.testing.assert_array_equal(plain.v, notes["values"])
    np.testing.assert_array_equal(plain.scores[0], notes["scores_q1"])
    np.testing.assert_allclose(plain.weights[0], notes["softmax_q1"], atol=1e-4)
    np.testing.assert_allclose(plain.output[0], notes["output1_exact"], atol=5e-3)
    np.testing.assert_array_equal(hand_attention.round_like_notes(plain.weights[0]), notes["softmax_q1_rounded"])
    np.testing.assert_array_equal(hand_attention.round_like_notes(plain.weights[0]) @ plain.v, notes["output1_rounded"])
    np.testing.assert_allclose(plain.weighted.sum(axis=1), plain.output, atol=1e-12)
    assert hand_attention.is_example(*EX) and not hand_attention.is_example(EX[0] * 2, *EX[1:])


def test_scaled_and_causal_example():
    scaled = hand_attention.attention_by_hand(*EX, scale=True)
    np.testing.assert_allclose(scaled.scores, hand_attention.attention_by_hand(*EX).scores / math.sqrt(3))
    expected = torch.softmax(torch.tensor(scaled.scores), dim=-1).numpy()
    np.testing.assert_allclose(scaled.weights, expected, atol=1e-6)
    causal = hand_attention.attention_by_hand(*EX, causal=True)
    assert np.all(np.triu(causal.weights, 1) == 0) and causal.mask is not None and not causal.mask[0, 1]
    np.testing.assert_allclose(causal.output[0], hand_attention.NOTES["values"][0])
    np.testing.assert_allclose(causal.weights.sum(axis=1), 1.0, atol=1e-6)


def test_multi_head_steps_reproduce_the_module():
    for heads in (1, 2, 4):
        steps = hand_attention.multi_head_by_hand(hand_attention.EXAMPLE_X, heads, seed=3, causal=heads == 2)
        assert steps.q.shape == (heads, 3, 4 // heads) and steps.weights.shape == (heads, 3, 3)
        assert steps.difference < 1e-12
        np.testing.assert_allclose(steps.concat, np.concatenate(list(steps.head_outputs), axis=1))
        np.testing.assert_allclose(steps.output, steps.concat @ steps.w_o, atol=1e-12)
    a, b = (hand_attention.multi_head_by_hand(hand_attention.EXAMPLE_X, 2, seed=s) for s in (0, 1))
    assert not np.allclose(a.output, b.output)
    with pytest.raises(lesson_inputs.InputError, match="not divisible by 3 heads; pick one of 1, 2, 4"):
        hand_attention.multi_head_by_hand(hand_attention.EXAMPLE_X, 3)


def test_saturation_without_scaling_grows_with_d_k():
    data = hand_attention.saturation([1, 64, 1024], keys=10, samples=300, seed=0)
    plain, scaled = data[~data["scaled"]], data[data["scaled"]]
    assert list(plain["entropy"]) == sorted(plain["entropy"], reverse=True)
    assert plain["max_weight"].iloc[-1] > 0.9 > scaled["max_weight"].iloc[-1]
    assert scaled["entropy"].max() - scaled["entropy"].min() < 0.3
    np.testing.assert_allclose(scaled["score_std"], 1.0, atol=0.1)
    pd.testing.assert_frame_equal(data, hand_attention.saturation([1, 64, 1024], keys=10, samples=300, seed=0))
    with pytest.raises(lesson_inputs.InputError, match="at least one d_k"):
        hand_attention.saturation([], 10, 300, 0)
    with pytest.raises(lesson_inputs.InputError, match="number of keys"):
        hand_attention.saturation([4], 1, 300, 0)


# --- positional encodings ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 5, 37, -4])
def test_shift_check_error_is_below_1e_5(k):
    check = pe_tables.shift_check(k, 200, 64)
    assert check.error64.max() < 1e-5 and check.error32.max() < 1e-5
    assert check.error64.max() < check.error32.max()
    assert check.positions[0] == max(0, -k) and check.positions[-1] == 199
    with pytest.raises(lesson_inputs.InputError, match="no position"):
        pe_tables.shift_check(-300, 200, 64)


def test_similarity_depends_on_the_distance_only():
    table = pe_tables.pe_table(60, 32)
    profile = pe_tables.similarity_profile(pe_tables.dot_similarity(table))
    assert (profile["max"] - profile["min"]).max() < 1e-5
    assert profile["mean"].iloc[0] == pytest.approx(16)
    assert profile["mean"].iloc[1] > profile["mean"].iloc[10]
    assert list(profile["pairs"][:2]) == [60, 59]
    assert pe_tables.pe_table(4, 8, double=True).dtype == np.float64


def test_training_max_length(tmp_path):
    assert pe_tables.training_max_length(tmp_path, None) == (None, "")
    facts = facts_from_run(TrainConfig(model=ModelConfig(vocab_size=64), max_len=100), [])
    assert pe_tables.training_max_length(None, facts) == (100, "training_facts.json (max_len: the longest training "
                                                          "pair kept)")
    (tmp_path / "training_log.jsonl").write_text('{"event": "start", "max_len": 64}\n')
    assert pe_tables.training_max_length(tmp_path, facts) == (64, "training_log.jsonl (max_len)")


def test_positional_kinds(tmp_path):
    for name, kind in (("a", "sinusoidal"), ("b", "learned")):
        (tmp_path / name).mkdir()
        ModelConfig(vocab_size=16, d_model=8, heads=2, positional=kind).save(tmp_path / name / "config.json")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{")
    kinds = pe_tables.positional_kinds(tmp_path, ["a", "b", "broken", "missing"])
    assert kinds == {"a": "sinusoidal", "b": "learned"}


def test_positional_kinds_lists_translation_models_only(tmp_path):
    """A language model's or an encoder's learned table (GPT-2's, BERT's) is no translator's to set beside the
    sinusoids: their directories are left out, as their networks have no source-side encodings to draw."""
    for name, kind, layers in (("seq2seq", "seq2seq", (2, 2)), ("gpt", "decoder", (0, 2)), ("bert", "encoder", (2, 0))):
        (tmp_path / name).mkdir()
        ModelConfig(vocab_size=16, d_model=8, heads=2, positional="learned", kind=kind, encoder_layers=layers[0],
                    decoder_layers=layers[1]).save(tmp_path / name / "config.json")
    assert pe_tables.positional_kinds(tmp_path, ["seq2seq", "gpt", "bert"]) == {"seq2seq": "learned"}


def test_shuffle_words():
    text = "one two three four five"
    out = pe_tables.shuffle_words(text, 7)
    assert out != text and sorted(out.split()) == sorted(text.split()) and out == pe_tables.shuffle_words(text, 7)
    assert pe_tables.shuffle_words("a b", 0) == "b a"
    for bad in ("single", "same same"):
        with pytest.raises(lesson_inputs.InputError, match="two different words"):
            pe_tables.shuffle_words(bad, 0)
    with pytest.raises(lesson_inputs.InputError, match="seed"):
        pe_tables.shuffle_words(text, -1)


# --- the training recipe -----------------------------------------------------------------------------------------
def test_recipe_summary_reads_the_training_facts():
    """The page's one-line recipe comes from the facts (data), whatever the card says."""
    cfg = TrainConfig(model=ModelConfig(vocab_size=64, d_model=32), warmup_steps=500, lr_peak=7e-4,
                      label_smoothing=0.1)
    events = [{"event": "val", "epoch": 1, "step": 120, "val_loss": 3.0}, {"event": "val", "epoch": 2, "step": 240,
                                                                          "val_loss": 2.5}]
    assert training_recipe.recipe_summary(facts_from_run(cfg, events)) == (
        "500 warm-up steps, peak lr 0.0007, label smoothing 0.1; trained for 2 epochs (240 steps, 120 per epoch)")
    cfg = TrainConfig(model=ModelConfig(vocab_size=64, d_model=32), warmup_steps=4000, lr_scale=2.0, epochs=24,
                      cooldown_epochs=3)
    events = [{"event": "val", "epoch": 24, "step": 16_728, "val_loss": 1.5}]
    summary = training_recipe.recipe_summary(facts_from_run(cfg, events))
    assert summary.startswith("4,000 warm-up steps, lr scale 2, cooldown over the last 3 of 24 epochs")
    assert summary.endswith("trained for 24 epochs (16,728 steps, 697 per epoch)")


def test_schedule_with_a_cooldown_is_the_trainers():
    """The rate of every step of a run of 5 epochs x 7 steps with a 2-epoch cooldown, as the training loop computes
    it (`learning_rate(step + 1) * cooldown_factor(epoch, batch_index, ...)`), and zero only after the last step."""
    cfg = training_recipe.schedule_config(64, 4, lr_peak=1e-3, epochs=5, cooldown_epochs=2)
    trainer = [learning_rate(e * 7 + b + 1, cfg) * cooldown_factor(e, b, 7, cfg) for e in range(5) for b in range(7)]
    ours = training_recipe.schedule(cfg, range(1, 36), epoch_steps=7)
    np.testing.assert_allclose(ours, trainer)
    assert ours[21] == pytest.approx(learning_rate(22, cfg)) and ours[-1] == pytest.approx(learning_rate(35, cfg) / 14)
    assert np.all(np.diff(ours[21:]) < 0)
    plain = training_recipe.schedule_config(64, 4, lr_peak=1e-3)
    np.testing.assert_array_equal(training_recipe.schedule(plain, [1, 10, 35], 7),
                                  [learning_rate(s, plain) for s in (1, 10, 35)])
    with pytest.raises(lesson_inputs.InputError, match=r"cooldown_epochs \(3\) exceeds epochs \(2\)"):
        training_recipe.schedule_config(64, 4, epochs=2, cooldown_epochs=3)
    with pytest.raises(lesson_inputs.InputError, match="steps per epoch"):
        training_recipe.schedule(cfg, [1], epoch_steps=0)


def test_schedule_is_the_trainers_learning_rate():
    cfg = training_recipe.schedule_config(512, 4000)
    steps = training_recipe.schedule_steps(100_000, marks=[4000])
    assert 4000 in steps and steps[0] == 1 and steps[-1] == 100_000
    reference = TrainConfig(model=ModelConfig(d_model=512), warmup_steps=4000)
    np.testing.assert_array_equal(training_recipe.schedule(cfg, steps),
                                  [learning_rate(int(s), reference) for s in steps])
    assert training_recipe.schedule(cfg, [4000])[0] == pytest.approx(512 ** -0.5 * 4000 ** -0.5)
    peak = training_recipe.schedule(training_recipe.schedule_config(256, 500, lr_peak=7e-4), [500])[0]
    assert peak == pytest.approx(7e-4)
    with pytest.raises(lesson_inputs.InputError, match="warm-up steps"):
        training_recipe.schedule_config(512, 0)
    with pytest.raises(lesson_inputs.InputError, match="number of steps"):
        training_recipe.schedule_steps(5)


@pytest.mark.parametrize("eps, vocab, target", [(0.1, 10, 3), (0.0, 5, 1), (0.5, 1000, 999)])
def test_smoothed_target_is_read_off_the_loss(eps, vocab, target):
    q = training_recipe.smoothed_target(eps, vocab, target)
    expected = np.full(vocab, eps / vocab)
    expected[target] += 1 - eps
    np.testing.assert_allclose(q, expected, atol=1e-6)
    assert q.sum() == pytest.approx(1.0, abs=1e-5)


def test_smoothed_target_rejects_bad_values():
    with pytest.raises(lesson_inputs.InputError, match="<pad>"):
        training_recipe.smoothed_target(0.1, 10, 0)
    with pytest.raises(lesson_inputs.InputError, match="target token must be from 0 to 9"):
        training_recipe.smoothed_target(0.1, 10, 10)
    with pytest.raises(lesson_inputs.InputError, match="label smoothing"):
        training_recipe.smoothed_target(1.5, 10, 1)


def test_architecture_stages(model):
    trace = model.trace("Two dogs play.", beam=1)
    cfg = model.config
    s, t = len(trace.source_tokens), len(trace.target_tokens)
    stages = architecture(cfg, s, t)
    assert len(stages) == 3 + 5 * cfg.encoder_layers + 2 + 7 * cfg.decoder_layers + 2
    shapes = {(st.part, st.stage): st.shape for st in stages}
    assert shapes[("encoder layer 1", "self-attention weights softmax(QKᵀ/√d_k)")] == (
        1, *trace.encoder_attentions[0].shape)
    assert shapes[(f"decoder layer {cfg.decoder_layers}", "cross-attention weights")] == (
        1, *trace.cross_attentions[-1].shape)
    assert shapes[("encoder", "embedding × √d_model")] == (1, *trace.source_embeddings.shape)
    assert stages[-1].shape == (1, t, cfg.vocab_size)
    pre = architecture(ModelConfig(vocab_size=16, d_model=8, heads=2, norm="pre", encoder_layers=1,
                                            decoder_layers=1), 3, 2)
    assert sum("final LayerNorm" in st.stage for st in pre) == 2


def test_peak_tensor_memory_counts_live_tensors():
    tracker = layer_memory.PeakTensorMemory()
    with tracker:
        a = torch.zeros(256, 1024)  # 1 MiB
        b = a + 1  # another MiB while a is alive
        del a, b
        c = torch.zeros(128, 1024)
    assert tracker.peak == 2 * 2**20 and tracker.live == 2**19
    del c


def test_measure_layers_shows_the_quadratic_memory():
    data = layer_memory.measure_layers([16, 128], d_model=32, heads=4, kernel=3, repeats=1)
    assert list(data["layer"].unique()) == list(layer_memory.LAYER_NAMES) and (data["ms"] > 0).all()
    memory = data.pivot(index="n", columns="layer", values="peak_mib")
    ratio = memory.loc[128] / memory.loc[16]
    assert ratio[layer_memory.LAYER_NAMES[0]] > 20 > 10 > ratio[layer_memory.LAYER_NAMES[2]]  # n² vs n
    with pytest.raises(lesson_inputs.InputError, match="sequence length"):
        layer_memory.measure_layers([5000], 32, 4)
    with pytest.raises(lesson_inputs.InputError, match="kernel"):
        layer_memory.measure_layers([16], 32, 4, kernel=0)


def test_labelled():
    frame = typed_matrices.labelled(np.eye(2), "q", ["a", "b"])
    assert list(frame.index) == ["q1", "q2"] and list(frame.columns) == ["a", "b"]


# --- figures -----------------------------------------------------------------------------------------------------
def tiny_tree() -> BeamTree:
    """Two steps by hand: <s> -> {5 kept, 6 kept, 7 pruned}, then 5 -> 2 (finished, chosen), 6 -> 8 pruned."""
    step0 = BeamStep(0, [[]], [0.0], [BeamCandidate(0, 5, -0.5, -0.5, "kept", 0),
                                      BeamCandidate(0, 6, -1.0, -1.0, "kept", 1),
                                      BeamCandidate(0, 7, -3.0, -3.0, "pruned")])
    step1 = BeamStep(1, [[5], [6]], [-0.5, -1.0], [BeamCandidate(0, 2, -0.7, -0.65, "finished"),
                                                   BeamCandidate(1, 8, -2.0, -1.9, "pruned")], stopped=True)
    best = Hypothesis([5, 2], -0.7, -0.65)
    return BeamTree(2, 0.6, [step0, step1], [best], best, 10, [(0, 0), (1, 0)])


def test_beam_tree_figure():
    pieces = {5: INJECTION, 6: "b", 7: "c", 2: "</s>", 8: "d"}
    fig = spec(decoding_figures.beam_tree_figure(tiny_tree(), pieces.get))
    by_name = {t.get("name"): t for t in fig["data"] if t.get("name")}
    assert set(by_name) == {"kept in the beam", "pruned", "chosen translation"}
    assert len(by_name["chosen translation"]["x"]) == 2 and by_name["pruned"]["marker"]["color"] == "#c8c8c8"
    assert by_name["kept in the beam"]["text"] == ["b"]
    assert "&lt;img" in by_name["chosen translation"]["text"][0]
    assert "<img" not in json.dumps(fig)
    assert "score = log p / ((5 + |Y|) / 6)^α = -0.650" in by_name["chosen translation"]["hovertext"][1]
    chosen_edges = [t for t in fig["data"] if t["mode"] == "lines" and t["line"]["width"] == 3]
    assert len(chosen_edges) == 1
    assert by_name["pruned"]["text"] == ["d"]  # per hypothesis the best `beam` (2) continuations: c is 3rd
    more = spec(decoding_figures.beam_tree_figure(tiny_tree(), pieces.get, per_parent=3))
    assert next(t for t in more["data"] if t.get("name") == "pruned")["text"] == ["c", "d"]


def test_beam_tree_figure_of_a_real_search(model):
    tree = model.beam_tree("Two dogs play.", beam=3, alpha=0.6)
    fig = spec(decoding_figures.beam_tree_figure(tree, model.tokenizer.piece))
    chosen = next(t for t in fig["data"] if t.get("name") == "chosen translation")
    assert len(chosen["x"]) == len(tree.best.tokens)
    assert list(chosen["x"]) == list(range(len(tree.best.tokens)))


def test_decoding_figures():
    fig = spec(decoding_figures.topk_figure(["a", "<b>", "c"], [0.5, 0.3, 0.1], "<b>", 2))
    bar = fig["data"][0]
    assert bar["marker"]["color"][1] == decoding_figures.STATUS_COLORS["chosen"]
    assert "Step 3" in fig["layout"]["title"]["text"]
    assert "<b>" not in json.dumps(fig["layout"]["yaxis"]["ticktext"])
    rows = np.random.default_rng(0).random((4, 6))
    fig = spec(decoding_figures.cross_rows_figure(rows, list("abcdef"), 1, 0, "x"))
    np.testing.assert_allclose(arr(fig["data"][0]["z"]), rows)
    assert fig["layout"]["yaxis"]["ticktext"] == [f"head {h}" for h in range(1, 5)]
    z = arr(spec(decoding_figures.causal_growth_figure(list("abcd"), 1))["data"][0]["z"])
    assert np.isnan(z[2:]).all() and z[1, 1] == 2.0 and z[0, 1] == 0.0 and z[0, 0] == 1.0


@pytest.mark.parametrize("layout, frequencies, axis, pair_3, formula", [
    ("interleaved", "paper", "even = sin, odd = cos", [6, 7], "10000^(2i / d_model)"),
    ("halves", "paper", "first half sin, second half cos", [3, 11], "10000^(2i / d_model)"),
    ("halves", "fairseq", "first half sin, second half cos", [3, 11], "10000^(i / (d_model/2 − 1))"),
])
def test_positional_figures_label_the_models_own_layout(layout, frequencies, axis, pair_3, formula):
    """Every axis, hover and title of the PE figures follows the model's layout and frequencies (issue 38: a Marian
    model's heatmap drew halves under an 'even = sin, odd = cos' axis)."""
    table = pe_tables.pe_table(20, 16, layout=layout, frequencies=frequencies)
    matrix = spec(pe_lab_figures.pe_matrix_figure(table, "PE", layout=layout))
    assert axis in matrix["layout"]["xaxis"]["title"]["text"]
    kinds = matrix["data"][0]["customdata"][0]
    halves = layout == "halves"
    assert (kinds[3], kinds[8], kinds[11]) == (("sin", "cos", "cos") if halves else ("cos", "sin", "cos"))
    heat = spec(positional_trace_figures.positional_heatmap(table, [f"t{i}" for i in range(20)], layout=layout))
    assert axis in heat["layout"]["xaxis"]["title"]["text"]
    assert f"dimension 8 ({'cos' if halves else 'sin'})" in heat["data"][0]["customdata"][0][8]
    waves = spec(pe_lab_figures.wavelength_figure(pe_tables.pair_wavelengths(16, frequencies), layout=layout,
                                                  frequencies=frequencies))
    assert waves["data"][0]["customdata"][3] == pair_3 and formula in waves["layout"]["title"]["text"]
    assert [t["name"] for t in waves["data"][1:]] == ["2π (the shortest)", "10000·2π (the longest)"]  # a legend
    assert all(t.get("showlegend", True) for t in waves["data"])


def test_positional_figures():
    table = pe_tables.pe_table(50, 16)
    fig = spec(pe_lab_figures.pe_matrix_figure(table, "PE", {"max_positions = 40": 40}))
    np.testing.assert_allclose(arr(fig["data"][0]["z"]), table)
    assert fig["layout"]["shapes"][0]["y0"] == 40
    fig = spec(pe_lab_figures.wavelength_figure(pe_tables.pair_wavelengths(16)))
    assert fig["layout"]["yaxis"]["type"] == "log"
    with pytest.raises(ValueError, match="out of range"):
        pe_lab_figures.dimension_curves_figure(table, [16])
    fig = spec(pe_lab_figures.dimension_curves_figure(table, [0, 3], {"training": 20}))
    assert [t["name"] for t in fig["data"]] == ["dim 0 (sin)", "dim 3 (cos)"]
    similarity = pe_tables.dot_similarity(table)
    spec(pe_lab_figures.similarity_figure(similarity, "S", {"m": 10}))
    fig = spec(pe_lab_figures.profile_figure(pe_tables.similarity_profile(similarity), 16))
    assert fig["data"][1]["name"] == "mean over pairs"
    check = pe_tables.shift_check(3, 50, 16)
    fig = spec(pe_lab_figures.shift_matrix_figure(check.matrix, 3, 4))
    np.testing.assert_allclose(arr(fig["data"][0]["z"]), check.matrix[:4, :4])
    fig = spec(pe_lab_figures.shift_error_figure(check))
    assert fig["layout"]["yaxis"]["type"] == "log" and len(fig["data"]) == 2
    fig = spec(pe_lab_figures.side_by_side_figure([("learned <x>", table), ("sinusoidal", table)]))
    assert fig["layout"]["annotations"][0]["text"] == "learned &lt;x&gt;"
    fig = spec(pe_lab_figures.attention_pair_figure([("a", np.eye(2), ["<q>", "b"], ["c", "d"]),
                                                    ("b", np.eye(2), ["x", "y"], ["z", "w"])], "T <t>"))
    assert "<q>" not in json.dumps(fig) and fig["layout"]["title"]["text"] == "T &lt;t&gt;"


def test_attention_by_hand_figures():
    causal = hand_attention.attention_by_hand(*EX, causal=True)
    fig = spec(by_hand_figures.weights_figure(causal.weights, ["x1", "x2", "x3"], "W", mask=causal.mask))
    assert fig["data"][0]["text"][0][1] == "0 (masked)" and fig["data"][0]["text"][0][0] == "1.0000"
    data = hand_attention.saturation([1, 16], 8, 100, 0)
    fig = spec(by_hand_figures.saturation_figure(data, 8))
    assert len(fig["data"]) == 4 and fig["layout"]["xaxis"]["type"] == "log"
    steps = hand_attention.multi_head_by_hand(hand_attention.EXAMPLE_X, 4)
    assert len(spec(by_hand_figures.heads_figure(steps.weights, ["a", "b", "c"], "H"))["data"]) == 4


def test_training_figures():
    cfg = training_recipe.schedule_config(64, 10)
    steps = training_recipe.schedule_steps(100)
    logged = pd.DataFrame({"step": [20, 40], "lr": [1e-3, 2e-3]})
    fig = spec(training_figures.lr_figure(steps, training_recipe.schedule(cfg, steps), "x", logged, 10))
    assert fig["data"][1]["name"] == "the model's logged lr"
    fig = spec(training_figures.smoothing_figure(training_recipe.smoothed_target(0.1, 100, 7), 7, shown=10))
    assert len(fig["data"][0]["x"]) == 10 and "90 more tokens" in fig["layout"]["title"]["text"]
    events = [{"event": "train", "step": 20, "loss": 5.0, "nll": 4.0, "lr": 1e-4, "tokens_per_s": 100.0},
              {"event": "val", "step": 20, "val_loss": 4.5, "val_bleu": 2.0}, {"event": "start"}]
    names = [t["name"] for t in spec(training_figures.training_curves_figure(events))["data"]]
    assert names == ["train loss (label-smoothed)", "train NLL", "validation NLL", "validation BLEU", "tokens/s",
                     "learning rate"]
    assert spec(training_figures.training_curves_figure([]))["data"] == []
    stages = architecture(ModelConfig(vocab_size=16, d_model=8, heads=2, encoder_layers=2,
                                               decoder_layers=5), 4, 3)
    figure = spec(training_figures.architecture_figure(stages, 2, 5, "post"))
    text = " ".join(a["text"] for a in figure["layout"]["annotations"])
    assert "weights (1, 2, 4, 4)" in text and "weights (1, 2, 3, 4)" in text and "× 5</b>" in text
    data = pd.DataFrame([{"layer": name, "n": n, "ms": 1.0, "peak_mib": n / 10} for n in (8, 16)
                         for name in layer_memory.LAYER_NAMES])
    fig = spec(training_figures.complexity_figure(data))
    assert len(fig["data"]) == 8 and fig["layout"]["xaxis"]["type"] == "log"
