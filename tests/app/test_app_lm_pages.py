"""Streamlit AppTest tests of Explore, Masks, Decoding and Compare with a language model open (CPU, fp32): a models
folder with the shipped translator, an imported tiny Llama (4 query heads on 2 key/value heads), a GPT-2 (a learned
table of 128 positions) and a Mistral with a sliding window of 5 and a chat template that refuses a system message."""

from __future__ import annotations

import html
import shutil

import numpy as np
import pytest
from support.app import APP, arr, charts, messages, ok, open_page, titles
from support.hf_lm import STRICT_TEMPLATE, build_lm_folder, import_lm, lm_models_folder

from app.views.compare import compare_lm
from app.views.masks import masks_lm
from viz_model.modeldir.shipped import DEFAULT_MODEL
from viz_model.plot import window_bands

LLAMA, GPT2, MISTRAL = "llama", "gpt2", "mistral"
PROMPT = "a man plays in the snow"
WINDOW = 5  # the Mistral fixture's sliding window


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The shipped translator (copied) and three tiny language models imported with ``viz-model import``."""
    root = lm_models_folder(tmp_path_factory, (LLAMA, GPT2))
    shutil.copytree(APP.parents[1] / "assets" / DEFAULT_MODEL, root / DEFAULT_MODEL)
    import_lm(build_lm_folder(tmp_path_factory.mktemp("hf-lm"), MISTRAL, chat_template=STRICT_TEMPLATE), root)
    return root


@pytest.fixture(autouse=True)
def lm_app(models, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(models))
    return models


def lm_page(page: str, model: str = LLAMA, sentence: str = PROMPT, **params: str):
    return open_page(page, timeout=180, beam="1", model=model, sentence=sentence, **params)


def test_the_model_view_frames_each_key_value_heads_group():
    fig = charts(lm_page("explore", view="model"))[0]
    assert fig["layout"]["xaxis"]["ticktext"] == ["H1<br>kv 1", "H2<br>kv 1", "H3<br>kv 2", "H4<br>kv 2"]
    frames = [s for s in fig["layout"]["shapes"] if s.get("name", "").startswith("kv head")]
    assert [s["name"] for s in frames] == ["kv head 1", "kv head 2"]
    assert frames[0]["x1"] < frames[1]["x0"]  # head 1 and 2 framed apart from 3 and 4


def test_the_head_view_colours_a_group_in_shades_of_one_hue():
    at = lm_page("explore", view="head")
    at.multiselect(key="w_hv_heads").set_value(["Head 1 · kv 1", "Head 2 · kv 1", "Head 3 · kv 2"]).run()
    lines = {t["name"]: t["line"]["color"] for t in charts(ok(at))[0]["data"] if t.get("mode") == "lines"}
    assert set(lines) == {"head 1 · kv 1", "head 2 · kv 1", "head 3 · kv 2"}
    def rgb(c):
        return np.array([float(v) for v in c[c.index("(") + 1:-1].split(",")])
    blue, orange = rgb(lines["head 1 · kv 1"]), rgb(lines["head 3 · kv 2"])
    assert blue[2] > blue[0] and rgb(lines["head 2 · kv 1"])[2] > rgb(lines["head 2 · kv 1"])[0]  # both blue
    assert orange[0] > orange[2]  # the other group: orange


def test_a_sliding_window_layer_is_drawn_windowed():
    at = lm_page("explore", model=MISTRAL, sentence="two dogs play in the snow near a red house", new_tokens="4")
    heat = charts(at)[0]
    edge = [t for t in heat["data"] if t.get("name") == f"window of {WINDOW}"]
    assert len(edge) == 1
    n = len(heat["data"][0]["x"])
    xs = [x for x in arr(edge[0]["x"])]
    assert min(xs) == 0.5 and max(xs) == n - WINDOW - 0.5  # query i sees keys i - 4 .. i: the edge left of i - 4
    weights = arr(heat["data"][0]["z"]).reshape(n, n)
    hidden = np.tril(np.ones((n, n), dtype=bool), -WINDOW)
    assert weights[hidden].max() == 0.0 and weights[~hidden & np.tril(np.ones((n, n), bool))].min() > 0.0
    assert "sliding window of 5 tokens" in "\n".join(c.value for c in at.caption)
    fig = charts(lm_page("explore", model=MISTRAL, sentence="two dogs play in the snow near a red house",
                           view="model"))[0]
    assert fig["layout"]["yaxis"]["ticktext"] == ["L1<br>window 5", "L2<br>window 5"]
    assert any(t.get("name") == "sliding window" for t in fig["data"])


def test_every_view_works_for_gpt2():
    for view in ("heatmap", "model", "head", "focus"):
        at = lm_page("explore", model=GPT2, view=view)
        assert charts(at), view
        assert not any(t.get("name", "").startswith("window") for c in charts(at) for t in c["data"]), view


def test_the_completion_steps_table_is_drawn_once_opened():
    """Folded, the language model's steps table is not sent; opened, it has a row per position, the prompt's rows
    first, then the continuation's."""
    at = lm_page("explore", new_tokens="3")
    assert "Decoding steps" in " ".join(e.label for e in at.expander) and not at.dataframe
    at.session_state["completion_steps"] = True  # what opening it in the browser sets (it reruns the page)
    table = ok(at.run()).dataframe[0].value
    parts = table["part"].tolist()
    # the model's choices: from the prompt's last position on, one row more than the 3 new tokens
    assert parts.count("continuation") == 4 and parts == sorted(parts, key=lambda p: p == "continuation")
    assert len(table) == len(charts(at)[0]["layout"]["yaxis"]["ticktext"])  # a row per position of the maps


def test_a_chat_prompt_goes_through_the_template_and_shows_its_tokens():
    at = lm_page("explore", model=MISTRAL, chat="True", new_tokens="3")
    keys = charts(at)[0]["data"][0]["x"]
    heat = charts(at)[0]
    labels = heat["layout"]["xaxis"]["ticktext"]
    text = html.unescape("".join(labels)).replace("▁", " ")
    assert text.startswith("<s>[INST] a man plays in the snow [/INST]")
    assert len(keys) == len(labels)
    assert "through the model's chat template" in "\n".join(c.value for c in at.caption)


def test_a_chat_template_that_fails_is_one_line():
    at = lm_page("explore", model=MISTRAL, chat="True", system="Be brief.")
    assert "chat template fails on this message: System role not supported" in messages(at)
    assert not at.get("plotly_chart")
    at = lm_page("explore", model=GPT2, chat="True")  # a base model: no template at all
    assert "has no chat template" in messages(at)
    assert lm_page("explore", model=GPT2).toggle(key="w_lm_chat").disabled is True  # greyed out there
    assert lm_page("explore", model=MISTRAL).toggle(key="w_lm_chat").disabled is False


def test_the_masks_page_shows_causal_window_and_padding():
    at = lm_page("masks", model=MISTRAL, sentence="two dogs play in the snow near a red house")
    assert "layers 1, 2: a window of 5 tokens" in "\n".join(c.value for c in at.caption)
    names = titles(at)
    assert names[0].startswith("Layer 1's mask") and "sliding window of 5" in names[0]
    masked = [m for m in at.metric if m.label.startswith("Largest weight on a masked cell")]
    assert masked[0].value == "0.0e+00"
    assert at.radio(key="w_m_pad_side").value == "right"  # no padding side in the tokenizer's files
    mask = arr(charts(at)[1]["data"][0]["z"]).reshape(2, -1)
    short = int(np.argmin(mask.sum(axis=1)))
    assert mask[short].sum() < mask.shape[1] and mask[short, -1] == 0 and mask[short, 0] == 1  # padded on the right
    at.radio(key="w_m_pad_side").set_value("left").run()
    mask = arr(charts(ok(at))[1]["data"][0]["z"]).reshape(2, -1)
    assert mask[short, 0] == 0 and mask[short, -1] == 1
    combined = arr(charts(at)[2]["data"][0]["z"]).reshape(mask.shape[1], mask.shape[1])
    assert not combined[:, ~mask[short].astype(bool)].any()  # no query sees a pad key
    assert not combined[np.triu_indices(mask.shape[1], 1)].any()  # nor a later one


def test_padding_and_layer_masks_by_hand():
    tokens, keys = masks_lm.padded([["a", "b", "c"], ["d"]], "left")
    assert tokens[1] == ["<pad>", "<pad>", "d"] and keys.tolist() == [[True] * 3, [False, False, True]]
    mask = masks_lm.layer_mask(3, 2, np.array([False, True, True]))
    assert mask.tolist() == [[False, False, False], [False, True, False], [False, True, True]]
    assert masks_lm.windows_line([4, None, 4]) == "layers 1, 3: a window of 4 tokens · layer 2: every earlier token"


def test_decoding_steps_through_the_continuation_and_draws_the_beam_tree():
    at = lm_page("decoding", new_tokens="4")
    assert at.title[0].value == "Decoding step by step"
    assert "Step 1 of 4" in "\n".join(m.value for m in at.markdown)
    at.slider(key="w_dec_step").set_value(2).run()
    names = titles(ok(at))
    assert "Step 2 of 4" in "\n".join(m.value for m in at.markdown)
    assert names[1].startswith("Self-attention, layer 2, step 2")
    rows = arr(charts(at)[1]["data"][0]["z"])
    assert rows.shape[0] == 4 and np.allclose(rows.sum(axis=-1), 1.0, atol=1e-5)  # each head's row over the past
    assert any(t.get("name") == "chosen translation" for t in charts(at)[3]["data"])  # the beam tree, its red path
    at.slider(key="w_dec_beam").set_value(1).run()
    ok(at)


def test_the_trees_greedy_search_writes_the_pages_continuation(models):
    import viz_model
    from app.texts import md_escape

    at = lm_page("decoding", new_tokens="4")
    expected = md_escape(viz_model.load(models / LLAMA, device="cpu").complete(PROMPT, 4))
    shown = [m.value for m in at.markdown]
    assert shown.count(expected) >= 2, (expected, shown)  # the continuation above, greedy (beam 1) below


def test_compare_puts_a_translator_beside_the_language_model():
    at = lm_page("compare", new_tokens="6")
    assert at.title[0].value == "Compare"
    assert at.selectbox(key="w_cmp_translator").options == [DEFAULT_MODEL]
    left, right = charts(at)[:2]
    assert left["layout"]["title"]["text"].startswith("Cross-attention")
    source = "Two young dogs are playing in the snow."
    labels = right["layout"]["xaxis"]["ticktext"]
    assert "".join(labels).replace("▁", " ").replace("Ġ", " ").strip() == source
    assert len(right["data"][0]["y"]) == 6  # one row per new token


def test_compare_refuses_an_encoder_as_the_translator_in_one_line(models, tmp_path, monkeypatch):
    """CPU, float32: an encoder-only model (a tiny random BERT, imported) is no translator to compare with: one
    line, no traceback."""
    from support.hf_encoders import build_encoder_folder

    from app.texts import md_escape
    from viz_model.hf.importer import import_model

    root = tmp_path / "models"
    shutil.copytree(models / LLAMA, root / LLAMA)
    import_model(str(build_encoder_folder(tmp_path, "bert")), root / "bert")
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(root))
    at = lm_page("compare")
    assert md_escape("Model bert cannot be used: bert is an encoder (encoder-only, a masked language model), not a "
                     "translation model") in messages(at)


def test_compare_template_without_the_text_is_one_line():
    at = lm_page("compare")
    at.text_area(key="w_cmp_template").set_value("German:").run()
    assert "must hold {src} exactly once" in messages(ok(at))


def test_the_source_span_by_offsets_and_by_counts(models):
    import viz_model

    model = viz_model.load(models / LLAMA, device="cpu")
    prompt, start_, end = compare_lm.lm_prompt("English: {src}\nGerman:", "two dogs")
    first, last = compare_lm.source_span(model, prompt, start_, end)
    ids = model.encode(prompt)
    assert model.tokenizer.decode(ids[first:last]).strip() == "two dogs"
    with pytest.raises(ValueError, match="exactly once"):
        compare_lm.lm_prompt("{src} and {src}", "x")


def test_a_prompt_past_the_positions_is_one_line_on_every_page():
    for page in ("explore", "masks", "decoding"):
        at = lm_page(page, model=GPT2, sentence=" ".join(["snow"] * 200))
        assert "this model has 128" in messages(at), page
        assert not at.get("plotly_chart"), page
    at = lm_page("compare", model=GPT2)
    at.text_input(key="w_cmp_source").set_value(" ".join(["snow"] * 150)).run()
    assert "this model has 128" in messages(ok(at))


def test_window_edges_by_hand():
    xs, ys = window_bands.window_edge(2, 4)
    assert list(zip(xs, ys)) == [(0.5, 1.5), (0.5, 2.5), (1.5, 2.5), (1.5, 2.5), (1.5, 3.5)]


def test_a_translators_compare_page_offers_translators_only():
    at = lm_page("compare", model=DEFAULT_MODEL, sentence="Two dogs play in the snow.")
    assert at.title[0].value == "Compare"
    assert "Only one model is available" in messages(at)  # the only other models are language models
    assert "Language models are compared with a translator from their own Compare page" in "\n".join(
        c.value for c in at.caption)
