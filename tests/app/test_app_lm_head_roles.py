"""Streamlit AppTest tests of Head roles and Ablation with a language model open (CPU, fp32): a models folder holding
a tiny Llama (grouped-query heads, imported), a GPT-2 (a learned table of 128 positions) and a SmolLM2 (a chat
template); the pages draw the numbers `viz_model.analysis.lm_head_roles` computes on the same model, and the head
detectors those of `viz_model.analysis.head_detectors`."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from support.app import arr, charts, messages, ok, open_page, start, titles
from support.hf_lm import build_lm_folder, import_lm

import viz_model
from viz_model.analysis import head_detectors, lm_head_roles

LM, GPT2, CHAT = "llama", "gpt2", "smollm2"
PROMPT = "the dog sees the dog and the cat sees the cat"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm-roles-models")
    for family in (LM, GPT2, CHAT):
        import_lm(build_lm_folder(tmp_path_factory.mktemp("hf-lm"), family), root)
    return root


@pytest.fixture
def lm_app(models, monkeypatch, tmp_path):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(models))
    monkeypatch.setenv("VIZ_MODEL_DATA", str(tmp_path / "no-data"))
    return models


def lm_page(page: str, model: str = LM, **params: str):
    return open_page(page, timeout=180, **{"beam": "1", "model": model, "sentence": PROMPT, **params})


def grid(at) -> np.ndarray:
    """The (layers, heads) values of the page's head grid."""
    (fig,) = [c for c in charts(at) if c["data"][0]["type"] == "heatmap"]
    return arr(fig["data"][0]["z"])


def expected(models, name: str, column: str, table) -> np.ndarray:
    config = viz_model.load(models / name, device="cpu").config
    values = np.full((config.decoder_layers, config.heads), np.nan)
    for row in table.itertuples():
        values[row.layer, row.head] = getattr(row, column)
    return values


def test_head_roles_scores_repeated_random_tokens_by_default(lm_app):
    at = lm_page("head_roles", GPT2)
    assert at.title[0].value == "Head roles"
    assert titles(at) == ["induction of every head"]
    caption = "\n".join(c.value for c in at.caption)
    assert "10 sequences of 25 random tokens repeated 4 times" in caption  # 101 of GPT-2's 128 positions
    model = viz_model.load(lm_app / GPT2, device="cpu")
    table = lm_head_roles.repeated_roles(model)
    assert table["induction"].notna().all() and table["induction"].nunique() > 1
    np.testing.assert_allclose(grid(at), expected(lm_app, GPT2, "induction", table), atol=1e-6)
    (fig,) = [c for c in charts(at) if c["data"][0]["type"] == "heatmap"]  # a share: the fixed scale 0 to 1
    assert (fig["layout"]["coloraxis"]["cmin"], fig["layout"]["coloraxis"]["cmax"]) == (0.0, 1.0)


def test_head_roles_on_the_prompt_draw_the_chosen_score(lm_app):
    at = lm_page("head_roles")
    at.radio(key="w_hr_lm_source").set_value("prompt").run()
    at.selectbox(key="w_hr_lm_score").set_value("previous_token").run()
    ok(at)
    assert titles(at) == ["previous token of every head"]
    table = lm_head_roles.prompt_roles(viz_model.load(lm_app / LM, device="cpu"), PROMPT)
    assert table["previous_token"].notna().all() and table["previous_token"].nunique() > 1
    np.testing.assert_allclose(grid(at), expected(lm_app, LM, "previous_token", table), atol=1e-6)


def test_head_roles_on_the_corpus_say_where_it_is_from(lm_app, monkeypatch, tmp_path):
    (tmp_path / "data" / "multi30k").mkdir(parents=True)
    with gzip.open(tmp_path / "data" / "multi30k" / "val.en.gz", "wt", encoding="utf-8") as f:
        f.write("A dog runs in the park.\nTwo men sit on a bench.\n")
    monkeypatch.setenv("VIZ_MODEL_DATA", str(tmp_path / "data"))
    at = lm_page("head_roles")
    at.radio(key="w_hr_lm_source").set_value("corpus").run()
    ok(at)
    assert "Measured on 2 sentences: Multi30k (val.en.gz) from the data root." in [c.value for c in at.caption]
    assert charts(at)


def test_ablation_shows_the_continuation_and_the_prompts_logit_change(lm_app):
    at = lm_page("ablation", new_tokens="4")
    assert at.multiselect(key="w_abl_heads").value == [("decoder", 1, 0)]  # the last layer's first head
    captions = [c.value for c in at.caption]
    assert "Continuation, every head on" in captions and "Continuation, 1 head off" in captions
    (fig,) = [c for c in charts(at) if c["layout"]["title"]["text"].startswith("The prompt's next tokens")]
    model = viz_model.load(lm_app / LM, device="cpu")
    table = lm_head_roles.logit_change(model, model.encode(PROMPT), [("decoder", 1, 0)])
    kl = next(trace for trace in fig["data"] if trace["type"] == "bar")
    assert table["kl"].min() > 0 and table["kl"].nunique() > 1
    np.testing.assert_allclose(arr(kl["y"]), table["kl"], rtol=1e-6, atol=0)
    assert "cannot be run" not in messages(at)


def test_with_chat_on_ablation_runs_on_the_chat_turn(lm_app):
    """The page's prompt form puts the prompt through the chat template; the ablation must measure that turn too."""
    at = lm_page("ablation", model=CHAT, new_tokens="2")
    at.toggle(key="w_lm_chat").set_value(True).run()
    model = viz_model.load(lm_app / CHAT, device="cpu")
    turn = model.encode([{"role": "user", "content": PROMPT}])
    assert len(turn) != len(model.encode(PROMPT))  # the two are told apart
    (fig,) = [c for c in charts(ok(at)) if c["layout"]["title"]["text"].startswith("The prompt's next tokens")]
    table = lm_head_roles.logit_change(model, turn, [("decoder", 1, 0)])
    kl = next(trace for trace in fig["data"] if trace["type"] == "bar")
    np.testing.assert_allclose(arr(kl["y"]), table["kl"], rtol=1e-6, atol=0)


def test_with_chat_on_head_roles_on_the_prompt_read_the_chat_turn(lm_app):
    """"My prompt" is the prompt of Complete & explore: with chat on there, the turn through the chat template."""
    at = ok(start(model=CHAT, sentence=PROMPT, new_tokens="2"))
    at.toggle(key="w_lm_chat").set_value(True).run()
    open_page("head_roles", at)
    at.radio(key="w_hr_lm_source").set_value("prompt").run()
    at.selectbox(key="w_hr_lm_score").set_value("previous_token").run()
    model = viz_model.load(lm_app / CHAT, device="cpu")
    turn = lm_head_roles.prompt_roles(model, [{"role": "user", "content": PROMPT}])
    bare = lm_head_roles.prompt_roles(model, PROMPT)
    assert not np.allclose(turn["previous_token"], bare["previous_token"], atol=1e-6)  # the two are told apart
    np.testing.assert_allclose(grid(ok(at)), expected(lm_app, CHAT, "previous_token", turn), atol=1e-6)


def test_head_roles_on_a_prompt_past_the_trained_length_say_so(lm_app):
    at = ok(start(model=LM, sentence=" ".join(["the dog sees the cat"] * 60), new_tokens="1"))
    open_page("head_roles", at)
    at.radio(key="w_hr_lm_source").set_value("prompt").run()
    assert titles(ok(at)) == ["induction of every head"]
    assert "positions are past the 256 this model was trained on" in messages(at)


def titled_grid(at, title: str) -> np.ndarray:
    """The (layers, heads) values of the heatmap titled `title`."""
    (fig,) = [c for c in charts(at) if c["layout"]["title"]["text"] == title]
    return arr(fig["data"][0]["z"])


def test_head_detectors_score_a_named_and_a_drawn_pattern_on_every_head(lm_app):
    at = lm_page("head_roles", GPT2)
    assert titles(at) == ["induction of every head"]  # the section is off until asked for
    at.toggle(key="w_hr_detect").set_value(True).run()
    assert titles(ok(at)) == ["induction of every head", "duplicate token detector of every head"]
    model = viz_model.load(lm_app / GPT2, device="cpu")
    ids = lm_head_roles.repeated_sequences(model, 6, 2, samples=1)[0]
    table = head_detectors.detect_heads(model, ids, "duplicate_token", exclude_bos=True)
    assert table["score"].nunique() > 1
    found = titled_grid(at, "duplicate token detector of every head")
    np.testing.assert_allclose(found, expected(lm_app, GPT2, "score", table), atol=1e-6)
    at.checkbox(key="w_hr_det_bos").uncheck().run()  # the first token's weight counted: lower shares
    unexcluded = titled_grid(ok(at), "duplicate token detector of every head")
    table = head_detectors.detect_heads(model, ids, "duplicate_token")
    np.testing.assert_allclose(unexcluded, expected(lm_app, GPT2, "score", table), atol=1e-6)
    assert (unexcluded <= found + 1e-9).all() and not np.allclose(unexcluded, found)
    at.radio(key="w_hr_detector").set_value("drawn").run()  # starts from the previous-token pattern, editable
    (editor,) = at.data_editor
    assert editor.value.shape == (len(ids), len(ids)) and (editor.value.to_numpy() == np.eye(len(ids), k=-1)).all()
    table = head_detectors.detect_heads(model, ids, head_detectors.previous_token_pattern(len(ids)))
    np.testing.assert_allclose(titled_grid(ok(at), "my pattern detector of every head"),
                               expected(lm_app, GPT2, "score", table), atol=1e-6)


def test_a_drawn_pattern_over_a_long_prompt_is_refused_in_one_line(lm_app):
    at = ok(start(model=GPT2, sentence=" ".join(["the dog sees the cat"] * 3), new_tokens="1"))
    open_page("head_roles", at)
    at.toggle(key="w_hr_detect").set_value(True).run()
    at.radio(key="w_hr_det_text").set_value("prompt").run()
    at.radio(key="w_hr_detector").set_value("drawn").run()
    assert "draw a pattern on one of up to 24 tokens" in messages(ok(at))
    assert titles(at) == ["induction of every head"]
