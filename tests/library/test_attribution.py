"""Attributions beyond raw attention: value-weighted attention, ALTI+, gradients, faithfulness, and their record."""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest
import torch

import viz_model
from viz_model.attribution import METHODS, Attribution, AttributionError, attribute, attribute_ids
from viz_model.attribution.contributions import (
    alti_block,
    alti_plus,
    encoder_rollout,
    token_vectors,
    value_weighted,
)
from viz_model.attribution.faithfulness import RANDOM, deletion_scores, summarise
from viz_model.attribution.gradients import (
    DEFAULT_STEPS,
    DEFAULT_TOLERANCE,
    MAX_STEPS,
    completeness_note,
    gradient_attributions,
    output_scores,
)
from viz_model.config import ModelConfig
from viz_model.nn.model import Transformer
from viz_model.tokenization.tokenizer import BOS_ID, EOS_ID, PAD_ID

SOURCE = [5, 9, 14, 22, 31, EOS_ID]
OUTPUT = [40, 41, 47, 52, EOS_ID]


@pytest.fixture(autouse=True)
def no_grad_by_default():
    """Tests compute by hand without autograd; the gradient methods turn it back on themselves."""
    with torch.no_grad():
        yield


@pytest.fixture(scope="module")
def double_net(trained_net) -> Transformer:
    """The briefly trained tiny network in float64 (finite differences need the precision)."""
    return copy.deepcopy(trained_net).double().eval()


def forward(net: Transformer, source=SOURCE, output=OUTPUT):
    with torch.no_grad():
        return net(torch.tensor([source]), torch.tensor([[BOS_ID, *output[:-1]]]), need_weights=True)


# --- value-weighted attention ---------------------------------------------------------------------------------------
def test_value_weighted_equals_a_manual_computation(double_net):
    """alpha_hij * ||(x_j W_V + b_V)_h W_O^h||, from the layer's own projections, for every kind and layer."""
    out = forward(double_net)
    cfg = double_net.config
    d_head = cfg.d_model // cfg.heads
    for kind in ("encoder", "decoder", "cross"):
        for layer, record in enumerate(out.records(kind)):
            attention, connection = double_net.attention_block(kind, layer)
            if kind == "cross":
                out_keys = double_net.encode(torch.tensor([SOURCE])).hidden
            else:
                out_keys = connection.enter(record.residual)
            values = out_keys @ attention.w_v.weight.T + attention.w_v.bias  # (1, k, d_model)
            expected = torch.empty_like(record.weights)
            for h in range(cfg.heads):
                head_slice = slice(h * d_head, (h + 1) * d_head)
                transformed = values[..., head_slice] @ attention.w_o.weight[:, head_slice].T  # (1, k, d_model)
                expected[:, h] = record.weights[:, h] * transformed.norm(dim=-1)[:, None, :]
            torch.testing.assert_close(value_weighted(double_net, record, kind, layer), expected)


# --- ALTI ----------------------------------------------------------------------------------------------------------
def one_layer_two_tokens() -> Transformer:
    torch.manual_seed(3)
    cfg = ModelConfig(vocab_size=16, encoder_layers=1, decoder_layers=1, d_model=4, heads=1, d_ff=8, dropout=0.0,
                      max_positions=8)
    return Transformer(cfg).double().eval()


def test_alti_by_hand_on_one_layer_and_two_tokens():
    """The paper's definition spelled out with numpy on a post-LN encoder layer over two tokens."""
    net = one_layer_two_tokens()
    out = forward(net, [7, EOS_ID], [9, EOS_ID])
    record = out.encoder_records[0]
    attention, connection = net.attention_block("encoder", 0)
    x = record.residual[0].numpy()  # (2, 4) the layer's input (post-LN: also the attention's input)
    alpha = record.weights[0, 0].numpy()  # (2, 2), one head
    w_v, b_v = attention.w_v.weight.detach().numpy(), attention.w_v.bias.detach().numpy()
    w_o, b_o = attention.w_o.weight.detach().numpy(), attention.w_o.bias.detach().numpy()
    gamma, eps = connection.norm.weight.detach().numpy(), connection.norm.eps
    f = (x @ w_v.T + b_v) @ w_o.T  # f(x_j)
    expected = np.zeros((2, 2))
    for i in range(2):
        parts = [alpha[i, j] * f[j] + (x[i] if i == j else 0.0) for j in range(2)]
        summed = parts[0] + parts[1] + b_o
        std = np.sqrt(summed.var() + eps)
        y = (summed - summed.mean()) / std * gamma + connection.norm.bias.detach().numpy()
        np.testing.assert_allclose(y, record.output[0, i].numpy(), atol=1e-10)  # the record's output is that y
        for j in range(2):
            t = (parts[j] - parts[j].mean()) / std * gamma
            expected[i, j] = max(0.0, np.abs(y).sum() - np.abs(y - t).sum())
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(alti_block(net, record, "encoder", 0)[0].numpy(), expected, atol=1e-10)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_alti_plus_rows_are_distributions(tiny_config, norm):
    torch.manual_seed(0)
    net = Transformer(ModelConfig(**{**tiny_config.to_dict(), "norm": norm, "dropout": 0.0})).eval()
    out = forward(net)
    for kind in ("encoder", "decoder", "cross"):
        for layer, record in enumerate(out.records(kind)):
            block = alti_block(net, record, kind, layer)
            assert (block >= 0).all()
            torch.testing.assert_close(block.sum(-1), torch.ones(block.shape[:2]))
    encoder = encoder_rollout(net, out)
    torch.testing.assert_close(encoder.sum(-1), torch.ones(1, len(SOURCE)))
    mix = alti_plus(net, out)[0]
    assert mix.shape == (len(OUTPUT), len(SOURCE) + len(OUTPUT)) and (mix >= 0).all()
    source, prefix = mix[:, :len(SOURCE)].sum(-1), mix[:, len(SOURCE):].sum(-1)
    torch.testing.assert_close(source + prefix, torch.ones(len(OUTPUT)))
    assert (mix[:, len(SOURCE):].triu(1) == 0).all()  # no position draws from a later prefix token
    assert ((source > 0) & (prefix > 0)).all()


def test_a_record_of_one_decoding_step_is_refused(trained_net):
    with torch.no_grad():
        encoded = trained_net.encode(torch.tensor([SOURCE]), need_weights=True)
        step = trained_net.decode(torch.tensor([[BOS_ID, 40]]), encoded, need_weights=True)
        cache = step.cache
        one = trained_net.decode(torch.tensor([[41]]), encoded, need_weights=True, cache=cache, offset=2)
    with pytest.raises(ValueError, match="decompose a full pass, not one decoding step"):
        alti_block(trained_net, one.self_records[0], "decoder", 0)


# --- gradients -----------------------------------------------------------------------------------------------------
def scores_at(net: Transformer, e_src: torch.Tensor, e_tgt: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return output_scores(net, torch.tensor([SOURCE]), torch.tensor([[BOS_ID, *OUTPUT[:-1]]]),
                             torch.tensor([OUTPUT]), e_src, e_tgt)[0]


def test_saliency_and_input_x_gradient_equal_finite_differences(double_net):
    result = gradient_attributions(double_net, SOURCE, OUTPUT, ("saliency", "input_x_gradient"))
    e_src = double_net.token_embeddings(torch.tensor([SOURCE]), "source").detach()
    e_tgt = double_net.token_embeddings(torch.tensor([[BOS_ID, *OUTPUT[:-1]]]), "target").detach()
    h = 1e-5
    for token in (0, 3, len(SOURCE) - 1):
        # input x gradient = d/dt f(e + t e_j) at t = 0
        up, down = e_src.clone(), e_src.clone()
        up[0, token] *= 1 + h
        down[0, token] *= 1 - h
        derivative = (scores_at(double_net, up, e_tgt) - scores_at(double_net, down, e_tgt)) / (2 * h)
        np.testing.assert_allclose(result.scores["input_x_gradient"][:, token], derivative.numpy(), rtol=1e-5,
                                   atol=1e-8)
        # saliency = the norm of the gradient, every component by a central difference
        gradient = np.zeros((len(OUTPUT), e_src.shape[-1]))
        for d in range(e_src.shape[-1]):
            up, down = e_src.clone(), e_src.clone()
            up[0, token, d] += h
            down[0, token, d] -= h
            gradient[:, d] = ((scores_at(double_net, up, e_tgt) - scores_at(double_net, down, e_tgt)) / (2 * h)).numpy()
        np.testing.assert_allclose(result.scores["saliency"][:, token], np.linalg.norm(gradient, axis=1), rtol=1e-5)
    # a later prefix token cannot matter to an earlier output (the causal mask)
    prefix = result.scores["saliency"][:, len(SOURCE):]
    assert np.allclose(np.triu(prefix, 1), 0.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_fixed_integrated_gradients_are_complete_on_a_smooth_network(tiny_config, seed):
    """On a smooth network (GELU) 32-point Gauss-Legendre is exact to 1%; tolerance 0 uses exactly the steps."""
    torch.manual_seed(seed)
    net = Transformer(ModelConfig(**{**tiny_config.to_dict(), "activation": "gelu", "dropout": 0.0})).eval()
    result = gradient_attributions(net, SOURCE, OUTPUT, ("integrated_gradients",), 32, tolerance=0)
    assert result.steps == 32 and result.tolerance == 0
    assert np.all(np.abs(result.score_change) > 0.01)  # a real change to explain
    assert result.relative_gap.max() < 0.01, result.relative_gap
    np.testing.assert_allclose(result.scores["integrated_gradients"].sum(axis=1), result.score_change, rtol=0.01)


def test_fixed_integrated_gradients_of_a_relu_network_converge_slowly(trained_net):
    """ReLU makes the gradient jump along the path: with fixed points the gap shrinks with them, slowly."""
    gaps = [gradient_attributions(trained_net, SOURCE, OUTPUT, ("integrated_gradients",), steps,
                                  tolerance=0).relative_gap for steps in (4, 64, 256)]
    assert gaps[0].max() > gaps[1].max() > gaps[2].max()
    assert gaps[1].max() > DEFAULT_TOLERANCE  # why the default is adaptive


def test_adaptive_integrated_gradients_meet_the_tolerance_with_fewer_points(trained_net):
    """The default adds points where the path integral is worst until every gap is within 1%: fewer points than
    the cap, and a smaller gap than fixed Gauss-Legendre with as many points."""
    result = gradient_attributions(trained_net, SOURCE, OUTPUT, ("integrated_gradients",))
    assert result.tolerance == DEFAULT_TOLERANCE
    assert result.relative_gap.max() <= DEFAULT_TOLERANCE, result.relative_gap
    assert 17 <= result.steps < DEFAULT_STEPS
    fixed = gradient_attributions(trained_net, SOURCE, OUTPUT, ("integrated_gradients",), result.steps, tolerance=0)
    assert fixed.relative_gap.max() > result.relative_gap.max()
    # the same integral: close to a much finer adaptive one, token by token
    fine = gradient_attributions(trained_net, SOURCE, OUTPUT, ("integrated_gradients",), tolerance=0.0005)
    ig, reference = result.scores["integrated_gradients"], fine.scores["integrated_gradients"]
    assert np.abs(ig - reference).max() < 0.05 * np.abs(reference).max()
    # the score change is the network's own: the scores at the real and at the all-zero embeddings
    e_src = trained_net.token_embeddings(torch.tensor([SOURCE]), "source").detach()
    e_tgt = trained_net.token_embeddings(torch.tensor([[BOS_ID, *OUTPUT[:-1]]]), "target").detach()
    change = scores_at(trained_net, e_src, e_tgt) - scores_at(trained_net, 0 * e_src, 0 * e_tgt)
    np.testing.assert_allclose(result.score_change, change.numpy(), rtol=1e-4, atol=1e-5)


def test_adaptive_integrated_gradients_stop_at_the_cap_and_say_so(trained_net):
    result = gradient_attributions(trained_net, SOURCE, OUTPUT, ("integrated_gradients",), 20)
    assert result.steps == 20 and result.relative_gap.max() > DEFAULT_TOLERANCE
    note, met = completeness_note(result.steps, result.tolerance, result.relative_gap)
    assert not met and "all 20 points allowed" in note and f"up to {MAX_STEPS}" in note


@pytest.mark.parametrize("points, tolerance, gaps, met, said, unsaid", [
    (97, 0.01, [0.002, 0.009], True, "until every gap was within 1.0%", "Allow"),
    (MAX_STEPS, 0.01, [0.002, 0.03], False, "the most there are", "Allow more"),
    (64, 0.01, [0.002, 0.03], False, "Allow more points (up to 256)", "the most there are"),
    (32, 0.0, [0.5, 0.03], False, "The adaptive rule", "Allow more"),
    (32, 0.0, [0.001, 0.003], True, "(fixed)", "adaptive rule"),
])
def test_the_completeness_note_advises_only_what_a_setting_can_do(points, tolerance, gaps, met, said, unsaid):
    note, ok = completeness_note(points, tolerance, np.array(gaps))
    assert ok == met and said in note and unsaid not in note
    assert f"output token {int(np.argmax(gaps))}" in note


@pytest.mark.parametrize("steps, tolerance, match", [
    (32, -0.1, "from 0 .fixed steps. to 0.5"), (32, 0.6, "from 0"), (32, "1%", "from 0"), (32, True, "from 0"),
    (32, float("nan"), "from 0"), (1, 0.01, "at least 2 steps"),
])
def test_bad_tolerances_are_named(trained_net, steps, tolerance, match):
    with pytest.raises(ValueError, match=match):
        gradient_attributions(trained_net, SOURCE, OUTPUT, ("integrated_gradients",), steps, tolerance=tolerance)


def test_one_fixed_point_is_allowed(trained_net):
    result = gradient_attributions(trained_net, SOURCE, OUTPUT, ("integrated_gradients",), 1, tolerance=0)
    assert result.steps == 1 and np.isfinite(result.scores["integrated_gradients"]).all()


def test_contrastive_scores_explain_the_difference(double_net):
    plain = gradient_attributions(double_net, SOURCE, OUTPUT, ("input_x_gradient",))
    foil = gradient_attributions(double_net, SOURCE, OUTPUT, ("input_x_gradient",), foil=60)
    only_foil = gradient_attributions(double_net, SOURCE, [60] * (len(OUTPUT) - 1) + [EOS_ID], ("input_x_gradient",))
    # d(log p(y) - log p(foil)) = d log p(y) - d log p(foil): the foil's part is the scores of forcing the foil,
    # which changes the prefix too, so compare on the source columns of the first output (same prefix: <s>)
    np.testing.assert_allclose(foil.scores["input_x_gradient"][0, :len(SOURCE)],
                               plain.scores["input_x_gradient"][0, :len(SOURCE)]
                               - only_foil.scores["input_x_gradient"][0, :len(SOURCE)], rtol=1e-6, atol=1e-9)


# --- faithfulness on a model that provably reads one source position -----------------------------------------------
KEY = 2  # the source position the constructed model reads


def one_position_reader() -> Transformer:
    """Encoder and decoder sub-layers switched off except cross-attention, whose query points at a position
    feature only source position KEY has: the output depends on the source only through the token at KEY (the
    other positions get weights of about e^-50)."""
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=24, encoder_layers=1, decoder_layers=1, d_model=8, heads=1, d_ff=8, dropout=0.0,
                      max_positions=12, positional="learned", share_embeddings=True)
    net = Transformer(cfg).double().eval()
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        for norm in (m for m in net.modules() if isinstance(m, torch.nn.LayerNorm)):
            norm.weight.fill_(1.0)
        net.src_embedding.weight[1:, :4] = torch.randn(cfg.vocab_size - 1, 4, dtype=torch.float64)
        net.src_positions.embedding.weight[:, 5] = 1.0
        net.src_positions.embedding.weight[KEY, 4] = 1.0
        net.tgt_positions.embedding.weight[:, 6] = 1.0
        cross = net.attention_block("cross", 0)[0]
        cross.w_q.bias[4] = 60.0
        for linear in (cross.w_k, cross.w_v):
            linear.weight.copy_(torch.eye(8))
        cross.w_o.weight.copy_(3 * torch.eye(8))  # what it reads outweighs the decoder's own stream
    return net


def test_every_faithful_method_ranks_the_read_position_first():
    """Attention, rollout, value-weighted, ALTI+, saliency and integrated gradients put KEY first for every output,
    and deleting what they rank first costs what deleting KEY costs. Input x gradient is a first-order, local
    estimate: where the output is saturated its sign can flip (exactly what integrated gradients corrects), and the
    deletion check exposes it."""
    net = one_position_reader()
    source = [5, 9, 14, 11, 7, EOS_ID]
    output = [14, 14, 14]  # each output is the token at KEY
    result = attribute_ids(net, source, output, METHODS)
    faithful = [m for m in result.methods if m != "input_x_gradient"]
    for method in faithful:
        first = result.source_scores(method).argmax(axis=1)
        assert (first == KEY).all(), f"{method} ranks positions {first} first"
    deletions = deletion_scores(net, source, output, {m: result.source_scores(m) for m in result.methods})
    summary = summarise(deletions).set_index("method")
    random_one = deletions[(deletions["method"] == RANDOM) & (deletions["k"] == 1)]
    for method in faithful:  # the deletion curve: removing the first-ranked token alone already costs it all
        assert summary.loc[method, "comprehensiveness"] > 0.5 and summary.loc[method, "beats_random"] >= 0.5
        one = deletions[(deletions["method"] == method) & (deletions["k"] == 1)]
        assert (one["comprehensiveness"] > 0.5).all() and (one["sufficiency"].abs() < 1e-3).all()
        assert (random_one["comprehensiveness"].to_numpy() < one["comprehensiveness"].to_numpy()).all()
    assert (result.source_scores("input_x_gradient")[1:, KEY] < 0).all()
    assert summary.loc["input_x_gradient", "comprehensiveness"] < summary.loc["integrated_gradients",
                                                                              "comprehensiveness"] / 2

def test_deletions_equal_a_forward_pass_of_the_masked_source(double_net):
    """The deletion check leaves removed tokens out of the encoder's input and runs the decoder only as far as it
    needs; every drop must equal the one a full forward pass of the pad-masked source gives."""
    scores = np.random.default_rng(1).random((len(OUTPUT), len(SOURCE)))
    deletions = deletion_scores(double_net, SOURCE, OUTPUT, {"some": scores}, ks=(1, 2), draws=2)

    def log_probs(source: list[int]) -> np.ndarray:  # the fused attention, as the check runs (need_weights off)
        logits = double_net(torch.tensor([source]), torch.tensor([[BOS_ID, *OUTPUT[:-1]]])).logits[0].log_softmax(-1)
        return logits[torch.arange(len(OUTPUT)), torch.tensor(OUTPUT)].numpy()

    full = log_probs(SOURCE)
    order = np.argsort(-scores, axis=1, kind="stable")
    for k in (1, 2):
        rows = deletions[(deletions["method"] == "some") & (deletions["k"] == k)].set_index("output")
        for i in range(len(OUTPUT)):
            top = set(order[i, :k].tolist())
            removed = [PAD_ID if p in top else t for p, t in enumerate(SOURCE)]
            kept = [t if p in top else PAD_ID for p, t in enumerate(SOURCE)]
            assert rows.loc[i, "comprehensiveness"] == pytest.approx(full[i] - log_probs(removed)[i], abs=1e-9)
            assert rows.loc[i, "sufficiency"] == pytest.approx(full[i] - log_probs(kept)[i], abs=1e-9)



# --- the record and the model-level call ---------------------------------------------------------------------------
def test_attribution_round_trips_through_a_file(tiny_model, tmp_path):
    result = attribute(tiny_model, "A man is running.", methods=list(METHODS), steps=4)
    again = Attribution.load(result.save(tmp_path / "a.npz"))
    assert again.methods == result.methods and again.output_tokens == result.output_tokens
    for method in result.methods:
        np.testing.assert_array_equal(again.source_scores(method), result.source_scores(method))
    for kind, maps in result.value_weighted.items():
        for a, b in zip(maps, again.value_weighted[kind]):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(again.completeness_gap, result.completeness_gap)
    np.testing.assert_array_equal(again.source_share(), result.source_share())
    for kind, maps in result.alti_layers.items():
        for a, b in zip(maps, again.alti_layers[kind]):
            np.testing.assert_array_equal(a, b)
    assert again.to_npz() == result.to_npz()
    assert (again.steps, again.tolerance) == (4, DEFAULT_TOLERANCE)
    # a file written before adaptive integrated gradients: fixed Gauss-Legendre, tolerance 0
    with np.load(tmp_path / "a.npz") as data:
        arrays = {name: data[name] for name in data.files}
    header = json.loads(str(arrays.pop("header")))
    del header["tolerance"]
    np.savez(tmp_path / "old.npz", header=np.array(json.dumps(header)), **arrays)
    assert Attribution.load(tmp_path / "old.npz").tolerance == 0.0
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(AttributionError, match="bad.npz: not an attribution file"):
        Attribution.load(tmp_path / "bad.npz")


def test_forced_target_and_source_shares(tiny_model):
    result = attribute(tiny_model, "A man is running.", target="Ein Mann läuft.", methods=["alti"])
    assert "".join(result.output_tokens).replace("▁", " ").strip().startswith("Ein Mann")
    share = result.source_share()
    np.testing.assert_allclose(share + result.prefix_scores("alti").sum(axis=1), 1.0, rtol=1e-6)  # float32 sums
    with pytest.raises(ValueError, match="scores no prefix tokens"):
        result.prefix_scores("attention_mean")
    with pytest.raises(ValueError, match="without ALTI"):
        attribute(tiny_model, "A man.", methods=["attention"]).source_share()


@pytest.mark.parametrize("call, match", [
    (lambda m: attribute(m, ""), "empty"),
    (lambda m: attribute(m, "word " * 400), "this model reads at most"),
    (lambda m: attribute(m, "A man.", methods=["attention", "shap"]), "unknown attribution method 'shap'"),
    (lambda m: attribute(m, "A man.", methods=[]), "non-empty list"),
    (lambda m: attribute(m, "A man.", methods=["integrated_gradients"], steps=0), "from 1 to 256"),
    (lambda m: attribute(m, "A man.", methods=["integrated_gradients"], steps=10_000), "from 1 to 256"),
    (lambda m: attribute(m, "A man.", foil="Fahrradständer"), "must be one piece"),
    (lambda m: attribute(m, "A man.", target=" "), "empty"),
])
def test_bad_input_is_named(tiny_model, call, match):
    with pytest.raises(ValueError, match=match):
        call(tiny_model)


def test_training_mode_is_refused(tiny_config):
    net = Transformer(tiny_config).train()
    with pytest.raises(ValueError, match="eval mode"):
        attribute_ids(net, SOURCE, OUTPUT, ["alti"])


def test_the_shipped_model_explains_its_translation():
    """On the shipped model: ALTI+ shares are distributions and the source share falls towards </s>."""
    model = viz_model.load(device="cpu")
    result = attribute(model, "Two dogs are playing in the snow.", methods=["alti", "value_weighted"])
    share = result.source_share()
    assert ((share > 0) & (share < 1)).all()
    assert share[:3].mean() > share[-1]


# --- viz-model attribute ------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_cli_writes_faithfulness_per_sentence_method_and_k(capsys, model_dir, tiny_model, tmp_path):
    from support.cli import run

    src = tmp_path / "src.en"
    src.write_text("A man is running.\nTwo dogs are playing in the snow.\nA woman is sitting on the beach.\n")
    out = tmp_path / "faith.csv"
    code, stdout, stderr = run(capsys, "attribute", "--model", model_dir, "--src", src, "--out", out, "--methods",
                               "attention", "alti", "--k", "1", "2", "--limit", "2")
    assert code == 0, stderr
    table = pd.read_csv(out)
    layers = tiny_model.config.decoder_layers
    expected = {"attention_mean", *(f"attention_layer{i + 1}" for i in range(layers)), "alti", "random"}
    assert set(table["method"]) == expected and set(table["sentence"]) == {1, 2} and set(table["k"]) == {1, 2}
    assert len(table) == len(expected) * 2 * 2 and table[["comprehensiveness", "sufficiency"]].notna().all().all()
    assert "beats_random" in stdout and "2 sentences (translated, beam 1)" in stderr
    # forced on given translations: those are the outputs
    tgt = tmp_path / "tgt.de"
    tgt.write_text("Ein Mann läuft.\nZwei Hunde spielen im Schnee.\nEine Frau sitzt am Strand.\n")
    code, _, stderr = run(capsys, "attribute", "--model", model_dir, "--src", src, "--tgt", tgt, "--out",
                          tmp_path / "forced.parquet", "--methods", "value_weighted")
    assert code == 0 and "forced on" in stderr
    forced = pd.read_parquet(tmp_path / "forced.parquet")
    words = [len(tiny_model.tokenizer.encode_target(t)) + 1 for t in tgt.read_text().splitlines()]
    assert forced.groupby("sentence")["outputs"].first().tolist() == words


def test_cli_reports_integrated_gradients_completeness_per_token(capsys, model_dir, tiny_model, tmp_path):
    from support.cli import run

    src = tmp_path / "src.en"
    src.write_text("A man is running.\nTwo dogs are playing in the snow.\n")
    gaps = tmp_path / "gaps.csv"
    code, _, stderr = run(capsys, "attribute", "--model", model_dir, "--src", src, "--out", tmp_path / "f.csv",
                          "--methods", "integrated_gradients", "--k", "1", "--draws", "1", "--steps", "24",
                          "--gaps-out", gaps, "--beam", "1", "--device", "cpu")  # on tiny_model's device
    assert code == 0, stderr
    table = pd.read_csv(gaps)
    expected = [attribute(tiny_model, text, beam=1, methods=["integrated_gradients"], steps=24)
                for text in src.read_text().splitlines()]
    assert table.groupby("sentence")["output"].count().tolist() == [len(e.output_ids) for e in expected]
    np.testing.assert_allclose(table["relative_gap"], np.concatenate([e.relative_gap for e in expected]),
                               rtol=1e-4, atol=1e-6)
    assert table["points"].max() <= 24
    assert "integrated gradients:" in stderr and "output tokens have a completeness gap within 1.0%" in stderr


@pytest.mark.slow
def test_corpus_rows_are_the_same_with_worker_processes(model_dir):
    from viz_model.attribution.corpus_scores import corpus_faithfulness

    model = viz_model.load(model_dir, device="cpu")
    sources = ["A man is running.", "Two dogs are playing in the snow.", "A woman sits.", "The dog runs."]
    alone = corpus_faithfulness(model, sources, methods=["value_weighted", "alti"], beam=1)
    pooled = corpus_faithfulness(model, sources, methods=["value_weighted", "alti"], beam=1, workers=2)
    # one thread each: rounding may differ
    pd.testing.assert_frame_equal(alone.faithfulness, pooled.faithfulness, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="workers must be from 1 to 16"):
        corpus_faithfulness(model, sources, workers=0)
    bare = viz_model.TranslationModel(model.network, model.tokenizer)
    with pytest.raises(ValueError, match="this model has none"):
        corpus_faithfulness(bare, sources, workers=2)


@pytest.mark.parametrize("extra, fragment", [
    (["--methods", "lime"], "unknown attribution method 'lime'"),
    (["--k", "0"], "--k values must be at least 1"),
    (["--draws", "0"], "--draws must be from 1 to 64"),
    (["--steps", "0"], "from 1 to 256"),
    (["--tolerance", "2"], "tolerance must be a number from 0"),
    (["--steps", "1", "--methods", "integrated_gradients"], "at least 2 steps"),
    (["--gaps-out", "g.csv"], "add integrated_gradients to --methods"),
    (["--gaps-out", "g.txt", "--methods", "integrated_gradients"], ".csv"),
    (["--limit", "0"], "--limit must be at least 1"),
])
def test_cli_errors_are_named(capsys, model_dir, tmp_path, extra, fragment):
    from support.cli import assert_user_error

    src = tmp_path / "src.en"
    src.write_text("A man is running.\n")
    assert_user_error(capsys, ["attribute", "--model", model_dir, "--src", src, "--out", tmp_path / "o.csv", *extra],
                      fragment)


# --- alignment: which method aligns best ---------------------------------------------------------------------------
def test_aer_of_every_method_and_layer(tiny_model):
    from viz_model.analysis.word_alignment import Alignment, alignment_links, format_pharaoh, word_attention
    from viz_model.attribution.method_aer import attribution_aer, method_maps

    result = attribute(tiny_model, "A man is running.", target="Ein Mann läuft.", methods=list(METHODS), steps=4)
    maps = method_maps(result)
    layers = tiny_model.config.decoder_layers
    assert {k for k in maps if k[1] is not None} == {(m, i) for m in ("attention", "value_weighted", "alti")
                                                    for i in range(layers)}
    assert {k[0] for k in maps if k[1] is None} == {"attention_mean", "rollout", "alti", "saliency", "input_x_gradient",
                                                    "integrated_gradients"}
    # a gold alignment equal to ALTI+'s own links: AER 0 for it; the reversed links: AER 1 unless they coincide
    words = word_attention(maps[("alti", None)], result.source_tokens, result.output_tokens)
    own = alignment_links(words.weights)
    table = attribution_aer([result], [Alignment(frozenset(own))])
    row = table[(table["method"] == "alti") & table["layer"].isna()].iloc[0]
    assert row["aer"] == 0.0 and row["precision"] == 1.0 and row["recall"] == 1.0
    assert table["aer"].iloc[0] == 0.0  # sorted best first
    assert len(table) == len(maps) and format_pharaoh(own)
    elsewhere = {(len(words.source_words) - 1 - i, j) for i, j in own}
    if elsewhere.isdisjoint(own):
        bad = attribution_aer([result], [Alignment(frozenset(elsewhere))])
        assert bad[(bad["method"] == "alti") & bad["layer"].isna()]["aer"].iloc[0] == 1.0
    with pytest.raises(ValueError, match="outside its"):
        attribution_aer([result], [Alignment(frozenset({(40, 0)}))])
    with pytest.raises(ValueError, match="1 sentences but 2 gold alignments"):
        attribution_aer([result], [Alignment(), Alignment()])


@pytest.mark.slow
def test_cli_aer_with_gold_alignments(capsys, model_dir, tmp_path):
    from support.cli import assert_user_error, run

    src, tgt, gold = tmp_path / "src.en", tmp_path / "tgt.de", tmp_path / "gold.txt"
    src.write_text("A man is running.\nTwo dogs are playing.\n")
    tgt.write_text("Ein Mann läuft.\nZwei Hunde spielen.\n")
    gold.write_text("0-0 1-1 3-2\n0-0 1-1 3-2\n")
    out, aer = tmp_path / "faith.csv", tmp_path / "aer.csv"
    code, stdout, stderr = run(capsys, "attribute", "--model", model_dir, "--src", src, "--tgt", tgt, "--gold", gold,
                               "--aer-out", aer, "--out", out, "--methods", "attention", "alti")
    assert code == 0, stderr
    table = pd.read_csv(aer)
    assert {"attention", "alti", "attention_mean"} <= set(table["method"]) and table["aer"].between(0, 1).all()
    assert "aer" in stdout
    assert_user_error(capsys, ["attribute", "--model", model_dir, "--src", src, "--tgt", tgt, "--gold", gold, "--out",
                               out], "--gold and --aer-out go together")
    assert_user_error(capsys, ["attribute", "--model", model_dir, "--src", src, "--gold", gold, "--aer-out", aer,
                               "--out", out], "--gold needs --tgt")


def test_the_parts_of_a_post_norm_rms_layer_without_biases_add_up_to_its_output(tiny_config):
    """T5's norm (no mean, no bias) after the residual, no bias on W_O: the token vectors sum to the sub-layer's
    output exactly, as they do for a LayerNorm up to its bias."""
    torch.manual_seed(0)
    changes = {"norm": "post", "normalization": "rms", "attention_bias": False, "ffn_bias": False, "dropout": 0.0}
    net = Transformer(ModelConfig(**{**tiny_config.to_dict(), **changes})).eval()
    out = forward(net)
    for kind in ("encoder", "decoder", "cross"):
        for layer, record in enumerate(out.records(kind)):
            parts = token_vectors(net, record, kind, layer)
            torch.testing.assert_close(parts.sum(dim=2), record.output, atol=1e-5, rtol=1e-5)
            block = alti_block(net, record, kind, layer)
            torch.testing.assert_close(block.sum(-1), torch.ones(block.shape[:2]))
