"""Streamlit AppTest tests of the Analyze pages: head roles, ablation, alignment & rollout, compare; with and without
precomputed tables in the model directory, and with bad input of every kind."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from support.app import INJECTION, TINY_CONFIG, TINY_MODEL, arr, charts, messages, ok, start, switch_to, titles  # noqa: E402  # noqa: E402

import viz_model  # noqa: E402
from app import analyze_pages, sessions, texts  # noqa: E402
from viz_model.analysis import rollout, store  # noqa: E402
from viz_model.analysis.ablation import all_heads, head_importance, layer_counts  # noqa: E402
from viz_model.analysis.corpus_attention import analyze_corpus  # noqa: E402
from viz_model.config import ModelConfig  # noqa: E402
from viz_model.modeldir.checkpoint import save_model_dir  # noqa: E402
from viz_model.nn.model import Transformer  # noqa: E402

SENTENCE = "Two dogs play in the snow."
ABLATED = texts.EXAMPLES[0]


@pytest.fixture(scope="module")
def model(assets):
    return viz_model.load(assets / TINY_MODEL, device="cpu")


@pytest.fixture
def own(tmp_path, assets, monkeypatch):
    """A private assets folder with a copy of the tiny model (tests write analysis/ tables into it)."""
    shutil.copytree(assets / TINY_MODEL, tmp_path / TINY_MODEL)
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    return tmp_path


def page(name: str, sentence: str = SENTENCE):
    at = start(sentence=sentence)
    switch_to(at, name).run()
    return ok(at)


def text_of(at) -> str:
    return messages(at).replace("\\", "")


def expander_text(at) -> str:
    return "\n".join(f"{e.label}\n" + "\n".join(m.value for m in e.markdown) for e in at.expander)


def submit(at, key: str, label: str, value: str):
    at.text_area(key=key).input(value)
    next(b for b in at.button if b.label == label).click().run()
    return at


# --- head roles --------------------------------------------------------------------------------------------------
def test_head_roles_live_over_the_examples(tiny, model):
    at = page("head_roles")
    assert at.title[0].value == "Head roles"
    assert store.HEAD_STATS_FILE in text_of(at) and "viz-model analyze" in text_of(at)
    assert titles(at) == ["entropy of every head", "The role of every head"]
    counts, heads = layer_counts(model.config), model.config.heads
    grids = [t for t in charts(at)[0]["data"] if t["type"] == "heatmap"]
    assert {t["name"]: arr(t["z"]).shape for t in grids} == {k: (n, heads) for k, n in counts.items()}
    expected = analyze_corpus(model, list(texts.EXAMPLES)).heads
    np.testing.assert_allclose(arr(grids[0]["z"]).ravel(),
                               expected[expected["kind"] == "encoder"]["entropy"], rtol=1e-5)
    table = at.dataframe[0].value
    assert len(table) == len(all_heads(model.config)) and table["layer"].min() == 1 and table["head"].min() == 1
    roles = expander_text(at)
    assert any(texts.md_escape(sentence) in roles for sentence in texts.EXAMPLES)
    at.selectbox(key="w_hr_stat").set_value("previous").run()
    ok(at)
    grids = {t["name"]: arr(t["z"]) for t in charts(at)[0]["data"] if t["type"] == "heatmap"}
    assert titles(at)[0] == "previous of every head" and np.isnan(grids["cross"]).all()


@pytest.mark.parametrize("value, expected", [
    ("\n".join(["A dog."] * (analyze_pages.MAX_LIVE_SENTENCES + 1)),
     f"{analyze_pages.MAX_LIVE_SENTENCES + 1} sentences: at most {analyze_pages.MAX_LIVE_SENTENCES}"),
    ("  \n\n", "type at least one sentence"),
    ("A dog.\nA \x07 cat.", "source sentence 2 contains control characters"),
])
def test_head_roles_bad_sentences_get_a_message(tiny, value, expected):
    at = ok(submit(page("head_roles"), "hr_text_input", "Analyze these sentences", value))
    assert "These sentences cannot be analysed" in text_of(at) and expected in text_of(at)
    assert charts(at) == []


def test_head_roles_typed_sentences(tiny):
    at = ok(submit(page("head_roles"), "hr_text_input", "Analyze these sentences", f"A man runs.\n\n{INJECTION}"))
    assert "2 sentences" in "\n".join(c.value for c in at.caption)
    assert texts.md_escape(INJECTION) in expander_text(at) or "A man runs" in expander_text(at)
    for element in at.markdown:
        assert not element.proto.allow_html


def test_head_roles_from_the_model_directory(own, model):
    sentences = ["A man runs.", "Two dogs play in the snow.", "The girl climbs."]
    store.write_head_stats(own / TINY_MODEL, analyze_corpus(model, sentences))
    at = page("head_roles")
    assert at.radio(key="w_hr_source").value == "stored"
    assert f"From {store.HEAD_STATS_FILE} (3 sentences)." in [c.value for c in at.caption]
    assert any(texts.md_escape(s) in expander_text(at) for s in sentences)
    assert len(at.dataframe[0].value) == len(all_heads(model.config))
    at.radio(key="w_hr_source").set_value("live").run()
    assert titles(ok(at)) == ["entropy of every head", "The role of every head"]


def test_a_bad_table_in_the_model_directory_is_a_message(own, model):
    (own / TINY_MODEL / store.ANALYSIS_DIR).mkdir()
    (own / TINY_MODEL / store.HEAD_STATS_FILE).write_text("kind,layer,head\nencoder,0,0\n")
    at = page("head_roles")
    assert "The precomputed table cannot be used" in text_of(at) and "head_stats.csv" in text_of(at)
    assert "are missing" in text_of(at)
    assert titles(at) == ["entropy of every head", "The role of every head"]  # computed live instead


def test_a_table_of_another_model_is_refused(own, model):
    stats = analyze_corpus(model, ["A dog."]).heads
    stats.loc[0, "layer"] = TINY_CONFIG["encoder_layers"]
    store.write_head_stats(own / TINY_MODEL, analyze_corpus(model, ["A dog."]))
    stats.to_csv(own / TINY_MODEL / store.HEAD_STATS_FILE, index=False)
    assert "a table of another model" in text_of(page("head_roles"))


# --- ablation ----------------------------------------------------------------------------------------------------
def test_ablation_of_one_head(tiny, model):
    at = page("ablation", ABLATED)
    assert at.title[0].value == "Ablation"
    total = len(all_heads(model.config))
    assert titles(at)[0].startswith(f"Heads switched off: 1 of {total}")
    captions = {c.value for c in at.caption}
    assert {"Translation, every head on", "Translation, 1 head off"} <= captions
    assert texts.md_escape(model.translate(ABLATED, beam=1)) in [m.value for m in at.markdown]
    intact, ablated = at.metric
    assert intact.label == "log P(original translation), every head on"
    assert float(intact.value) == pytest.approx(model.trace(ABLATED, beam=1).log_probability, abs=1e-3)
    assert ablated.label == "log P(original translation), 1 head off"
    assert float(ablated.delta) == pytest.approx(float(ablated.value) - float(intact.value), abs=2e-3)
    assert store.HEAD_IMPORTANCE_FILE in text_of(at) and "viz-model importance" in text_of(at)


def test_ablation_never_changes_the_shared_model(tiny, model):
    at = page("ablation", ABLATED)
    cross = [h for h in all_heads(model.config) if h[0] == "cross"]
    at.multiselect(key="w_abl_heads").set_value(cross).run()
    ok(at)
    assert titles(at)[0].startswith(f"Heads switched off: {len(cross)} of")
    assert f"Translation, {len(cross)} heads off" in [c.value for c in at.caption]
    shared = sessions.load_model(sessions.ModelRef(str(tiny), TINY_MODEL, sessions.model_stamp(tiny, TINY_MODEL)))
    fresh = viz_model.load(tiny / TINY_MODEL, device="cpu")
    for (name, a), (_, b) in zip(shared.network.state_dict().items(), fresh.network.state_dict().items()):
        assert torch.equal(a.cpu(), b), name
    switch_to(at, "explore").run()
    assert texts.md_escape(model.translate(ABLATED, beam=1)) in [m.value for m in ok(at).markdown]


def test_ablation_of_an_output_that_runs_to_the_length_limit(tiny):
    at = page("ablation", SENTENCE)  # the random model writes to its length limit: the ids are forced, not re-encoded
    assert len(at.metric) == 2 and "This ablation cannot be run" not in text_of(at)


def test_ablation_with_no_head_picked(tiny):
    at = page("ablation", ABLATED)
    at.multiselect(key="w_abl_heads").set_value([]).run()
    assert "Pick at least one head" in text_of(ok(at))
    assert not at.metric


def test_ablation_importance_map_from_the_model_directory(own, model):
    table = head_importance(model, ["A man runs.", "Two dogs play."], ["Ein Mann läuft.", "Zwei Hunde spielen."])
    store.write_head_importance(own / TINY_MODEL, table)
    at = page("ablation", ABLATED)
    assert titles(at)[1] == "NLL rise (nats per token) when each head alone is switched off"
    grids = {t["name"]: arr(t["z"]) for t in charts(at)[1]["data"] if t["type"] == "heatmap"}
    for kind, grid in grids.items():
        np.testing.assert_allclose(grid.ravel(), table[table["kind"] == kind]["nll_rise"], rtol=1e-6)


def test_ablation_bad_importance_table(own):
    (own / TINY_MODEL / store.ANALYSIS_DIR).mkdir()
    (own / TINY_MODEL / store.HEAD_IMPORTANCE_FILE).write_text("kind,layer,head,nll_rise\nencoder,0,0,oops\n")
    at = page("ablation")
    assert "The importance table cannot be used" in text_of(at) and "'nll_rise' must hold numbers" in text_of(at)


# --- alignment & rollout -----------------------------------------------------------------------------------------
def test_alignment_and_rollout(tiny, model):
    at = page("alignment")
    cross, encoder = TINY_CONFIG["decoder_layers"], TINY_CONFIG["encoder_layers"]
    assert titles(at) == [f"Cross-attention links, layer {cross}, mean over heads",
                          f"Cross-attention (decoder → encoder): layer {cross}, mean over heads, words",
                          f"Raw attention, layer {encoder} (mean over heads)", f"Rollout through layers 1–{encoder}",
                          f"Flow through layers 1–{encoder}"]
    trace = model.trace(SENTENCE, beam=1)
    expected = rollout.attention_rollout(trace.encoder_attentions)[-1]
    np.testing.assert_allclose(arr(charts(at)[3]["data"][0]["z"]), expected, atol=1e-5)
    flow = rollout.attention_flow(trace.encoder_attentions)
    np.testing.assert_allclose(arr(charts(at)[4]["data"][0]["z"]), flow, atol=1e-5)
    at.radio(key="w_ro_kind").set_value("decoder").run()
    at.selectbox(key="w_ro_layer").set_value(1).run()
    at.selectbox(key="w_al_head").set_value(2).run()
    at.slider(key="w_al_threshold").set_value(0.5).run()
    ok(at)
    assert titles(at)[0] == f"Cross-attention links, layer {cross}, head 2"
    assert titles(at)[3] == "Rollout through layers 1–1"


def test_a_gold_alignment_gives_the_aer_of_every_head(tiny):
    at = page("alignment")
    at.text_input(key="w_al_gold").input("0-0 1?1 2-2").run()
    ok(at)
    assert "Alignment error rate of every cross-attention head (lower is better)" in titles(at)
    table = at.dataframe[0].value
    assert list(table.columns) == ["layer", "head", "aer", "precision", "recall", "links"]
    assert len(table) == TINY_CONFIG["decoder_layers"] * (TINY_CONFIG["heads"] + 1)
    assert ((table["aer"] >= 0) & (table["aer"] <= 1)).all()


@pytest.mark.parametrize("gold, expected", [
    ("0-0 1+1", "bad alignment link '1+1'"),
    (INJECTION, "bad alignment link"),
    ("0-0 999-0", "link 999-0 is out of range: this sentence has"),
])
def test_bad_gold_alignments_get_a_message(tiny, gold, expected):
    at = page("alignment")
    at.text_input(key="w_al_gold").input(gold).run()
    ok(at)
    assert "The gold alignment cannot be used" in text_of(at) and expected in text_of(at)
    assert not any(t.startswith("Alignment error rate") for t in titles(at))


def test_flow_is_skipped_for_long_sentences(tiny, monkeypatch):
    monkeypatch.setattr(analyze_pages, "FLOW_MAX_TOKENS", 3)
    at = page("alignment")
    assert "Attention flow is shown for up to 3 tokens" in text_of(at)
    assert not any(t.startswith("Flow through") for t in titles(at))


# --- compare -----------------------------------------------------------------------------------------------------
def test_compare_two_sentences(tiny):
    at = page("compare")
    assert at.text_input(key="w_cmp_other").value == analyze_pages.one_word_changed(SENTENCE)
    at.text_input(key="w_cmp_other").input(SENTENCE).run()
    ok(at)
    names = titles(at)
    assert names[:2] == ["Encoder self-attention: layer 1, mean over heads"] * 2
    assert names[2] == "Sentence 1 − Sentence 2: Encoder self-attention: layer 1, mean over heads"
    assert np.abs(arr(charts(at)[2]["data"][0]["z"])).max() == 0.0
    assert "Only one model is available" in text_of(at)
    at.text_input(key="w_cmp_other").input("A dog.").run()
    assert "No difference map" in text_of(ok(at)) and len(titles(at)) == 2
    at.text_input(key="w_cmp_other").input(" ").run()
    assert "The second sentence cannot be used" in text_of(ok(at))
    at.text_area(key="sentence_input").input("A man runs.")
    next(b for b in at.button if b.label == "Translate").click().run()
    assert ok(at).text_input(key="w_cmp_other").value == analyze_pages.one_word_changed("A man runs.")


def test_compare_two_models(own, model):
    shutil.copytree(own / TINY_MODEL, own / "zz-copy")
    smaller = dict(TINY_CONFIG, encoder_layers=TINY_CONFIG["encoder_layers"] - 1)
    torch.manual_seed(1)
    save_model_dir(Transformer(ModelConfig(vocab_size=model.tokenizer.vocab_size, **smaller)), model.tokenizer,
                   own / "zz-small")
    at = page("compare")
    assert at.selectbox(key="w_cmp_model").options == ["zz-copy", "zz-small"]
    at.text_input(key="w_cmp_other").input("A dog.").run()
    ok(at)
    assert f"{TINY_MODEL} − zz-copy: Encoder self-attention: layer 1, mean over heads" in titles(at)
    assert np.abs(arr(charts(at)[-1]["data"][0]["z"])).max() == 0.0  # the same weights
    at.selectbox(key="w_cmp_layer").set_value(TINY_CONFIG["encoder_layers"]).run()
    at.selectbox(key="w_cmp_model").set_value("zz-small").run()
    ok(at)
    assert f"has {smaller['encoder_layers']} encoder layers" in text_of(at) and "does not exist there" in text_of(at)


def test_compare_with_a_broken_second_model(own):
    shutil.copytree(own / TINY_MODEL, own / "zz-broken")
    (own / "zz-broken" / "model.safetensors").write_bytes(b"not weights")
    at = page("compare")
    at.selectbox(key="w_cmp_model").set_value("zz-broken").run()
    assert "Model zz-broken cannot be used" in text_of(ok(at)) and "model.safetensors" in text_of(at)


def test_compare_with_an_encoder_among_the_models(own):
    """CPU, float32: an encoder-only model (a tiny random BERT, imported and as its Hugging Face folder) among the
    models is refused as the second model in one line, with no traceback."""
    from support.hf_encoders import build_encoder_folder

    from viz_model.hf.importer import import_model

    folder = build_encoder_folder(own, "bert")
    import_model(str(folder), own / "bert-imported")
    at = start(sentence=SENTENCE, model=TINY_MODEL)
    switch_to(at, "compare").run()
    for name in ("bert", "bert-imported"):
        at.selectbox(key="w_cmp_model").set_value(name).run()
        assert (f"Model {name} cannot be used: {name} is an encoder (encoder-only, a masked language model), not a "
                "translation model") in text_of(ok(at))


@pytest.fixture(scope="module")
def many_to_many(tmp_path_factory, assets):
    """An assets folder with an M2M100 and an mBART-50 model imported English -> German, and the tiny model."""
    from support.hf import build_m2m100_folder
    from support.hf_families import build_mbart50_folder

    from viz_model.hf.importer import import_model

    root = tmp_path_factory.mktemp("many-to-many")
    shutil.copytree(assets / TINY_MODEL, root / TINY_MODEL)
    import_model(str(build_m2m100_folder(tmp_path_factory.mktemp("m2m"))), root / "m2m", source_lang="en",
                 target_lang="de")
    import_model(str(build_mbart50_folder(tmp_path_factory.mktemp("mbart"))), root / "mbart", source_lang="en_XX",
                 target_lang="de_DE")
    return root


def test_the_second_model_takes_the_sidebars_target_language_in_its_own_code(many_to_many, monkeypatch):
    m2m, mbart = (viz_model.load(many_to_many / name, device="cpu") for name in ("m2m", "mbart"))
    tiny_model = viz_model.load(many_to_many / TINY_MODEL, device="cpu")
    assert (sessions.matching_target(mbart, "fr"), sessions.matching_target(m2m, "fr_XX")) == ("fr_XX", "fr")
    assert sessions.matching_target(m2m, "de_DE") == ""  # its own target: no view needed
    assert sessions.matching_target(m2m, "xx_YY") == sessions.matching_target(tiny_model, "fr") == ""
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(many_to_many))
    at = start(sentence=SENTENCE, model="m2m", lang="fr", kind="cross")
    switch_to(at, "compare").run()
    at.selectbox(key="w_cmp_model").set_value("mbart").run()
    ok(at)
    first, second = (chart["layout"]["yaxis"]["ticktext"] for chart in charts(at)[-2:])  # target tokens: code first
    assert "__fr__" in first and "fr_XX" in second, (first, second)
    assert "cannot translate into" not in text_of(at)
    at.selectbox(key="w_cmp_model").set_value(TINY_MODEL).run()
    assert "tiny-en-de cannot translate into French (fr): it translates into German (de)" in text_of(ok(at))


# --- every kind of input in the boxes these pages add (issue 38: tried as the sentence box was) -----------------------
ODD_INPUTS = {"empty": "", "long": "word " * 600, "emoji": "Two dogs 🐶🐕 play in the ❄ snow.",
              "markup": INJECTION, "chinese": "两只狗在雪地里玩。"}


@pytest.mark.parametrize("name", ODD_INPUTS)
def test_the_second_sentence_of_compare_takes_any_input(tiny, name):
    at = page("compare")
    value = ODD_INPUTS[name]
    at.text_input(key="w_cmp_other").input(value).run()
    ok(at)
    shown = text_of(at)
    if name == "empty":
        assert "The second sentence cannot be used: the second sentence is empty" in shown
    elif name == "long":
        assert "The second sentence cannot be used: the second sentence has 3000 characters; the limit is" in shown
    else:  # translated and drawn, its text shown as text (never markup)
        assert "The second sentence cannot be used" not in shown
        assert titles(at)[1] == "Encoder self-attention: layer 1, mean over heads"
        assert "<script>" not in "".join(m.value for m in at.markdown)


@pytest.mark.parametrize("name", ["long", "emoji", "markup", "chinese"])
def test_the_gold_alignment_box_takes_any_input(tiny, name):
    at = page("alignment")
    at.text_input(key="w_al_gold").input(ODD_INPUTS[name]).run()
    ok(at)
    shown = text_of(at)
    assert "The gold alignment cannot be used" in shown, shown
    assert not any(t.startswith("Alignment error rate") for t in titles(at))


def test_an_empty_gold_alignment_box_means_no_gold(tiny):
    at = page("alignment")
    at.text_input(key="w_al_gold").input("   ").run()
    assert "The gold alignment cannot be used" not in text_of(ok(at))
