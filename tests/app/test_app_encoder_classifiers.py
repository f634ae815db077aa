"""A maps-only encoder on every page (issue 59, bad input): a BERT and a DeBERTa-v3 sequence-classifier folder (no
masked-language-model head), imported, open on each page of the registry. Each page draws the maps with its fill-in
replaced by one line, or says in one line that it needs the head; no exception, no error box."""

from __future__ import annotations

import pytest
from support.app import charts, messages
from support.app_classifiers import CLASSIFIERS, build_classifier_assets
from support.app_encoders import encoder_page

import viz_model
from app import fill_in, registry

SENTENCE = "two young dogs are [MASK] in the snow ."
NEEDS_HEAD = {"ablation": "Ablation", "attribution": "Attribution", "sinks": "The switch that hides [SEP]"}
FILLED_IN = {"explore", "compare"}  # pages that, with the head, show the text filled in
MAPS_ONLY = {"explore", "sinks", "masks", "positional", "by_hand", "head_roles", "alignment", "compare"}


@pytest.fixture(scope="module")
def classifiers(tmp_path_factory, monkeypatch_module):
    """The classifiers' models folder (built once), the app pointed at it; an empty data root, so Head roles measures
    the shipped translator's sentences (a data root's Multi30k has captions longer than the fixtures' 64 positions)."""
    root = build_classifier_assets(tmp_path_factory.mktemp("classifier-assets"))
    monkeypatch_module.setenv("VIZ_MODEL_ASSETS", str(root))
    monkeypatch_module.setenv("VIZ_MODEL_DATA", str(tmp_path_factory.mktemp("no-data")))
    return root


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def one_line(model: viz_model.EncoderModel, what: str) -> str:
    """The line `has_head_or_say` shows, as the page's info box holds it."""
    with pytest.MonkeyPatch.context() as patch:
        shown = []
        patch.setattr(fill_in.st, "info", shown.append)
        fill_in.has_head_or_say(model, what)
    return shown[0]


def test_the_classifier_folders_open_as_encoders_without_their_head(classifiers):
    for name in CLASSIFIERS:
        model = viz_model.load(classifiers / name, device="cpu")
        assert model.kind == "encoder" and not model.has_head
        assert model.trace(SENTENCE).settings["predictions"] == []


@pytest.mark.parametrize("page", [page.key for page in registry.pages_for(registry.ENCODER)])
@pytest.mark.parametrize("name", list(CLASSIFIERS))
def test_every_page_draws_the_maps_or_says_in_one_line_it_needs_the_head(classifiers, name, page):
    model = viz_model.load(classifiers / name, device="cpu")
    at = encoder_page(page, name, sentence=SENTENCE)
    said = messages(at)
    assert not at.error and not at.exception, said
    assert "Traceback" not in said and "went wrong" not in said
    assert "no mask token" not in said  # the text has one: the head is what is missing
    if page in NEEDS_HEAD:
        assert said.count(one_line(model, NEEDS_HEAD[page])) == 1
    if page in FILLED_IN:  # the fill-in replaced by one line
        assert said.count(fill_in.no_head_line(model)) == 1
    if page == "explore":
        assert not at.dataframe  # no predictions table
    if page == "by_hand":  # the query followed first is the mask token's, as with the head
        assert at.selectbox(key="w_abh_enc_query").value == model.trace(SENTENCE).source_tokens.index("[MASK]")
    if page == "training":  # imported: no run of its own to draw
        assert f"{name} has no training_log.jsonl" in said and not charts(at)
    if page in MAPS_ONLY:
        assert charts(at), f"{page}: no map"
    elif page in NEEDS_HEAD:
        assert not charts(at)
