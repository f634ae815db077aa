"""The link's round trip, derived from the settings declarations (app/shared_settings.py, app/page_settings.py): for
every linked setting a default is left out (or written, where the link always names it), any other value comes back
from its link text, and a bad link value is named with the same message as before the declarations existed."""

from __future__ import annotations

import pytest

from app import page_settings, shared_settings
from app.sessions import ModelRef
from app.setting_types import PageSettings, Setting, ignored

MODELS = ("mixed-en-de", "tiny-en-de")
SHARED = shared_settings.SHARED.for_models(MODELS)
DECLARED: dict[str, PageSettings] = {"shared": SHARED, "form": shared_settings.FORM, **page_settings.BY_PAGE}

# link name -> (a value other than the default, its link text); one entry per linked setting of every page
OTHER_VALUES = {
    "shared": {"sentence": ("A dog.", "A dog."), "model": ("tiny-en-de", "tiny-en-de"), "target": ("Ein Hund.",
               "Ein Hund."), "view": ("focus", "focus"), "kind": ("cross", "cross"), "layer": (3, "3"),
               "head": ("max", "max"), "level": ("word", "word"), "rule": ("transformers", "transformers"),
               "beam": (1, "1"), "alpha": (1.4, "1.4"), "search": ("int8", "int8"), "top_k": (20, "20"),
               "lang": ("fr", "fr"), "prefix": ("translate English to French: ", "translate English to French: ")},
    "explore": {"new_tokens": (50, "50"), "chat": (True, "True"), "system": ("Be brief.", "Be brief."),
                "pair": ("The dog runs.", "The dog runs.")},
    "sinks": {"sink_layer": (2, "2"), "sink_head": (3, "3"), "hide_first": (True, "True")},
    "decoding": {"step": (3, "3"), "cross_layer": (2, "2"), "tree_beam": (6, "6"),
                          "tree_alpha": (-1.5, "-1.5"), "tree_pruned": (5, "5")},
    "watch": {"task": ("reverse", "reverse"), "lengths": ((3, 9), "3-9"), "k": (4, "4"),
                       "layers": (2, "2"), "heads": (4, "4"), "d_model": (64, "64"), "pe": ("none", "none"),
                       "compare": (False, "False"), "steps": (200, "200"), "seconds": (5, "5"), "seed": (7, "7"),
                       "experiment": ("induction", "induction"), "induction_steps": (1000, "1000"),
                       "induction_seconds": (90, "90"), "induction_seed": (3, "3")},
}
# link name -> (a bad link value, the message that names it); the texts of the hand-written parsing they replaced
BAD_VALUES = {
    "shared": {"model": ("../etc", "no such model; available: mixed-en-de, tiny-en-de"),
               "view": ("table", "use one of heatmap, model, head, focus"),
               "kind": ("self", "use encoder, decoder or cross"), "layer": ("0", "use a layer number from 1"),
               "head": ("abc", "use a head number from 1, mean or max"), "level": ("letters", "use one of piece, word"),
               "rule": ("fast", "use one of auto, transformers, project"),
               "beam": ("999", "use a beam size from 1 to 16"), "alpha": ("nan", "use a length penalty from -5 to 5"),
               "search": ("fp16", "use one of auto, int8, fp32"),
               "top_k": ("99", "use a number of candidates from 1 to 20"),
               "prefix": ("x" * 201, "use a task prefix of one line, at most 200 characters")},
    "explore": {"new_tokens": ("201", "use a whole number from 1 to 200"),
                         "chat": ("yes", "use one of True, False"),
                         "system": ("x" * 501, "use a system message of one line, at most 500 characters"),
                         "pair": ("x" * 2001, "use a second sentence of one line, at most 2000 characters")},
    "sinks": {"sink_layer": ("0", "use a whole number from 1 to 1000"),
                       "sink_head": ("x", "use a whole number from 1 to 1000"),
                       "hide_first": ("yes", "use one of True, False")},
    "decoding": {"step": ("x", "use a whole number from 1 to 100000"),
                          "cross_layer": ("0", "use a whole number from 1 to 1000"),
                          "tree_beam": ("99", "use a whole number from 1 to 16"),
                          "tree_alpha": ("1e999", "use a number from -5 to 5"),
                          "tree_pruned": ("-1", "use a whole number from 0 to 32")},
    "watch": {"task": ("dance", "use one of copy, reverse, sort, shift, every_other"),
                       "lengths": ("9-3", "use two lengths from 2 to 16, the shorter first, as in 4-8"),
                       "k": ("16", "use a whole number from 1 to 15"), "layers": ("3", "use one of 1, 2"),
                       "heads": ("3", "use one of 1, 2, 4"), "d_model": ("8", "use one of 16, 32, 64"),
                       "pe": ("rotary", "use one of sinusoidal, learned, rope, alibi, relative, none"),
                       "compare": ("yes", "use one of True, False"),
                       "steps": ("100", "use one of 200, 400, 800, 1600, 3200"),
                       "seconds": ("61", "use a whole number from 5 to 60"),
                       "seed": ("-1", "use a whole number from 0 to 1000000"),
                       "experiment": ("sinks", "use one of task, induction, series"),
                       "induction_steps": ("7", "use one of 500, 1000, 2000, 3000, 5000"),
                       "induction_seconds": ("121", "use a whole number from 5 to 120"),
                       "induction_seed": ("x", "use a whole number from 0 to 1000000")},
}
ANY_TEXT = {"sentence", "target", "lang"}  # free text: no value is bad (the model checks the language code)


def linked(page: str) -> list[Setting]:
    return list(DECLARED[page].linked())


CASES = [(page, s) for page in DECLARED for s in linked(page)]


def test_every_linked_setting_has_a_case_and_only_these_pages_link():
    assert {page for page, _ in CASES} == set(OTHER_VALUES)
    for page, table in OTHER_VALUES.items():
        names = [s.link.name for s in linked(page)]
        assert sorted(names) == sorted(table), page
        assert sorted(names) == sorted([*BAD_VALUES[page], *(ANY_TEXT & set(names))]), page


@pytest.mark.parametrize("page, setting", CASES, ids=lambda c: c if isinstance(c, str) else c.link.name)
def test_a_default_is_left_out_of_the_link_unless_the_link_always_names_it(page, setting):
    link = DECLARED[page].to_link({setting.key: setting.default})
    if setting.link.omit_default:
        assert link == {}
    else:
        assert link == {setting.link.name: setting.link.format(setting.default)}
        assert DECLARED[page].from_link(link) == ({setting.key: setting.default}, [])


@pytest.mark.parametrize("page, setting", CASES, ids=lambda c: c if isinstance(c, str) else c.link.name)
def test_any_other_value_survives_the_round_trip(page, setting):
    value, text = OTHER_VALUES[page][setting.link.name]
    assert value != setting.default
    link = DECLARED[page].to_link({setting.key: value})
    assert link == {setting.link.name: text}
    assert DECLARED[page].from_link(link) == ({setting.key: value}, [])


@pytest.mark.parametrize("page, setting", [(p, s) for p, s in CASES if s.link.name not in ANY_TEXT],
                         ids=lambda c: c if isinstance(c, str) else c.link.name)
def test_a_bad_value_is_named_with_the_message_it_always_had(page, setting):
    raw, why = BAD_VALUES[page][setting.link.name]
    values, problems = DECLARED[page].from_link({setting.link.name: raw})
    assert values == {} and problems == [ignored(setting.link.name, raw, why)]


def test_the_link_names_the_shared_settings_in_the_order_links_have_always_had():
    assert shared_settings.SHARED.link_names() == (
        "sentence", "model", "target", "view", "kind", "layer", "head", "level", "rule", "beam", "alpha", "search",
        "top_k", "lang", "prefix")
    every = {**OTHER_VALUES["shared"], "target": ("", ""), "lang": ("", ""), "prefix": (None, "")}
    link = SHARED.to_link({s.key: every[s.link.name][0] for s in SHARED.linked()})
    assert list(link) == ["sentence", "model", "view", "kind", "layer", "head", "level", "rule", "beam", "alpha",
                          "search", "top_k"]


def test_the_search_defaults_of_the_rule_replace_the_declared_ones():
    beam, alpha = SHARED.beam, SHARED.alpha
    assert SHARED.to_link({beam.key: 5, alpha.key: 1.0}, {beam.key: 5, alpha.key: 1.0}) == {}
    assert SHARED.to_link({beam.key: 4, alpha.key: 0.6}, {beam.key: 5, alpha.key: 1.0}) == {"beam": "4", "alpha": "0.6"}


def test_a_value_is_quoted_safely_in_the_message():
    assert ignored("sentence", "a`b\nc" + "x" * 100, "why") == f"`sentence=a'b c{'x' * 55}` ignored: why"
    values, problems = SHARED.from_link({"layer": "²", "head": "0", "alpha": "0.123"})
    assert values == {"alpha": 0.12} and [p.split("`")[1] for p in problems] == ["layer=²", "head=0"]


def test_no_two_settings_share_a_session_key():
    keys = [s.key for settings in DECLARED.values() for s in settings.settings()]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)
    assert {s.widget_key for s in shared_settings.SHARED.settings()}.isdisjoint(keys)


def test_the_model_reference_is_hashable_and_loading_ignores_search_and_language():
    ref = ModelRef("/models", "tiny-en-de", "1:2/3:4", "int8", "fr")
    assert hash(ref) == hash(ModelRef("/models", "tiny-en-de", "1:2/3:4", "int8", "fr"))
    assert ref.stored == ModelRef("/models", "tiny-en-de", "1:2/3:4") == ref.searching("auto").stored
    assert ref.searching("fp32") == ModelRef("/models", "tiny-en-de", "1:2/3:4", "fp32", "")
    t5 = ref.searching("auto", "", "summarize: ")
    assert t5.prefix == "summarize: " and t5.stored.prefix is None and hash(t5) != hash(t5.stored)
    assert str(ref.directory) == "/models/tiny-en-de"
