"""Streamlit AppTest of Masks, Decoding, Attention sinks, Ablation and the Logit lens on a long prompt (CPU, fp32): a
tiny imported Llama with room for 4,608 positions, a 706-token prompt and 2 new tokens (maps made on demand); each page
draws instead of refusing, a mask past 256 tokens as blocks and a window of exact cells (the titles say which), and
what it reads of the maps equals the trace that keeps every map."""

from __future__ import annotations

import numpy as np
import pytest
from support.app import arr, charts, ok, open_page, start, titles
from support.long_lm import long_lm_models, long_text

import viz_model
from viz_model.analysis.sinks import trace_sink_shares
from viz_model.on_demand import OnDemandMaps
from viz_model.plot.figure_style import escape

PROMPT = long_text(200)  # 706 tokens: past the 256 a page draws cell by cell
NEW_TOKENS = 2


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return long_lm_models(tmp_path_factory)


@pytest.fixture(autouse=True)
def on_the_models(models, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(models))


@pytest.fixture(autouse=True)
def reads(monkeypatch):
    """The heads read from maps made on demand (what each page asks `OnDemandMaps.head` for); every test fails where
    a page reads a whole layer of them."""
    seen = {"layers": [], "heads": []}
    layer_of, head_of = OnDemandMaps.__getitem__, OnDemandMaps.head
    monkeypatch.setattr(OnDemandMaps, "__getitem__", lambda self, layer: seen["layers"].append(layer) or
                        layer_of(self, layer))
    monkeypatch.setattr(OnDemandMaps, "head", lambda self, *args: seen["heads"].append(args) or head_of(self, *args))
    yield seen
    assert not seen["layers"], f"a page read whole layers {seen['layers']} of maps made on demand"


@pytest.fixture(scope="module")
def full(models):
    """The same prompt traced here with every map kept, and the model."""
    model = viz_model.load(models / "llama", device="cpu")
    trace = model.trace(PROMPT, NEW_TOKENS, maps="full")
    assert len(trace.target_tokens) > 256
    return model, trace


def long_page(page: str):
    at = ok(start(model="llama", sentence="a man", new_tokens=str(NEW_TOKENS)))
    at.session_state["sentence"] = PROMPT
    return open_page(page, ok(at.run()))


def no_refusal(at) -> None:
    assert not [i.value for i in at.info if "This page draws every cell of whole maps" in i.value]
    assert not at.error, [e.value for e in at.error]


def by_title(at, start: str) -> dict:
    found = [c for c in charts(at) if c["layout"]["title"]["text"].startswith(start)]
    assert found, titles(at)
    return found[0]


def test_masks_draw_blocks_and_a_window_of_exact_cells(full, reads):
    _, trace = full
    n, p = len(trace.target_tokens), trace.settings["prompt_length"]
    at = long_page("masks")
    no_refusal(at)
    blocks = by_title(at, "Layer 1's mask over the prompt and its continuation")
    assert f"{n} x {n} tokens drawn as blocks of up to" in blocks["layout"]["title"]["text"]
    shares = arr(blocks["data"][0]["z"])
    assert shares.shape == (256, 256) and np.allclose(np.triu(shares, 1), 0) and (np.diag(shares) > 0.5).all()
    window = [c for c in charts(at) if "every cell of queries" in c["layout"]["title"]["text"]][0]
    rows, keys = np.array(window["data"][0]["y"]), np.array(window["data"][0]["x"])
    assert rows[0] <= p <= rows[-1] and len(rows) == 48  # around the prompt's end
    assert (arr(window["data"][0]["z"]) == (keys[None, :] <= rows[:, None])).all()  # causal, cell by cell
    shown = {m.label: m.value for m in at.metric}
    label = f"Largest weight on a masked cell (every head, queries {rows[0]}–{rows[-1]})"
    assert shown[label] == "0.0e+00", shown
    assert "Padding mask of the keys" in "\n".join(titles(at))
    combined = [t for t in titles(at) if t.startswith("The mask layer 1 applies to prompt #2")]
    assert len(combined) == 2 and "drawn as blocks" in combined[0] and "every cell of queries" in combined[1]
    assert {args[0] for args in reads["heads"]} == {0}  # layer 1's heads, each read alone


def test_decoding_reads_each_heads_row_of_the_step(full, reads):
    model, trace = full
    p = trace.settings["prompt_length"]
    at = long_page("decoding")
    no_refusal(at)
    assert "Step 1 of 2" in "\n".join(m.value for m in at.markdown)
    at.slider(key="w_dec_step").set_value(2).run()
    ok(at)
    t = p  # step 2 is read at the prompt's last position + 1
    rows = arr(by_title(at, "Self-attention, layer 2, step 2")["data"][0]["z"])
    np.testing.assert_allclose(rows, trace.decoder_attentions[1][:, t, :t + 1], atol=1e-5)
    mask = by_title(at, "Causal mask after step")
    assert f"its last 48 rows and columns (positions {t - 47}–{t} of 0–{t})" in mask["layout"]["title"]["text"]
    assert list(mask["data"][0]["y"]) == list(range(t - 47, t + 1))
    assert reads["heads"][-1] == (1, 3, slice(t, t + 1))  # one query row of each head
    at.slider(key="w_dec_beam").set_value(1).run()
    assert any(t.get("name") == "chosen translation" for t in by_title(ok(at), "Beam search tree")["data"])


def test_sinks_measure_every_head_as_the_full_maps_do(full, reads):
    model, trace = full
    at = long_page("sinks")
    no_refusal(at)
    assert {args[:2] for args in reads["heads"]} == {(layer, head) for layer in range(2) for head in range(4)}
    expected = trace_sink_shares(trace)
    assert np.allclose(arr(charts(at)[0]["data"][0]["z"]), expected.first_token, atol=1e-6)
    bars = by_title(at, "Layer 1, head 1: mean weight on each token")["data"][0]
    assert list(bars["x"]) == list(range(len(trace.target_tokens)))  # positions, the tokens on hover
    np.testing.assert_allclose(arr(bars["y"]), np.nan_to_num(expected.head(0, 0)), atol=1e-6)
    at.toggle(key="w_sk_switch").set_value(True).run()
    ok(at)
    shown = {m.label: m.value for m in at.metric}
    assert "KL(intact ‖ switched)" in shown and not at.error


def test_ablation_runs_with_maps_on_demand(full):
    _, trace = full
    at = long_page("ablation")
    no_refusal(at)
    shown = {m.label: m.value for m in at.metric}
    assert shown["log P(original continuation), every head on"] == f"{trace.log_probability:.3f}", shown
    logits = by_title(at, "The prompt's next tokens, every head on and 1 head off")
    assert "tickvals" not in logits["layout"]["xaxis2"]  # positions: a label a token would stall a browser


def test_the_logit_lens_draws_the_prompts_last_positions_and_reads_one_row_a_head(full, reads):
    model, trace = full
    p = trace.settings["prompt_length"]
    at = long_page("logit_lens")
    no_refusal(at)
    grid = charts(at)[0]["data"][0]
    assert arr(grid["z"]).shape == (model.config.decoder_layers + 1, 48)
    assert list(grid["x"]) == list(range(p - 48, p))  # the prompt's last 48 positions
    assert f"The grid draws the last 48 of {p} positions." in "\n".join(c.value for c in at.caption)
    assert grid["text"][-1][-1] == escape(trace.output_tokens[p - 1])  # the model's prediction after the prompt
    heads = model.config.heads
    last = reads["heads"][-heads:]  # the deciding block's heads, each read for the chosen position's row alone
    assert [args[1:] for args in last] == [(h, slice(p - 1, p)) for h in range(heads)]
    assert len({args[0] for args in last}) == 1
