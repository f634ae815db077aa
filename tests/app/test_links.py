"""A shared link restores everything the page shows (issue 38): the sidebar's top-k, the decoding page's own step,
layer, beam and length penalty, every setting of the Watch page; a bad value is named and the default kept."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest
from support.app import messages, ok, open_page

from app import chart_preload

SENTENCE = "Two dogs play in the snow."


def open_link(page: str | None, **params: str) -> AppTest:
    """A fresh session opening a link: straight onto `page` (None: the explore page) with these parameters."""
    return open_page(page, straight=True, timeout=180, **{"sentence": SENTENCE, **params})


def link_of(at: AppTest) -> dict[str, str]:
    return {k: v for k, v in at.query_params.items()}


def test_the_sidebars_top_k_survives_a_link(tiny):
    at = open_link(None, beam="1")
    at.slider(key="w_top_k").set_value(20).run()
    link = link_of(ok(at))
    assert link["top_k"] == "20"
    again = open_link(None, **link)
    assert again.slider(key="w_top_k").value == 20 and again.session_state["top_k"] == 20
    assert "top_k=99" in messages(open_link(None, top_k="99"))


def test_the_decoding_pages_own_settings_survive_a_link(tiny):
    at = open_link("decoding", beam="1")
    at.slider(key="w_dec_step").set_value(3).run()
    at.slider(key="w_dec_beam").set_value(6).run()
    at.slider(key="w_dec_alpha").set_value(1.4).run()
    at.slider(key="w_dec_per_parent").set_value(5).run()
    link = link_of(ok(at))
    assert (link["step"], link["tree_beam"], link["tree_alpha"], link["tree_pruned"]) == ("3", "6", "1.4", "5")
    again = open_link("decoding", **link)
    assert [again.slider(key=k).value for k in ("w_dec_step", "w_dec_beam", "w_dec_alpha", "w_dec_per_parent")] \
        == [3, 6, 1.4, 5]
    assert any("Beam search tree" in c.proto.spec and "beam 6" in c.proto.spec for c in again.get("plotly_chart"))
    shown = messages(open_link("decoding", beam="1", tree_beam="99", step="x"))
    assert "tree_beam=99` ignored" in shown and "step=x` ignored" in shown


def test_every_watch_setting_survives_a_link(tiny):
    at = open_link("watch")
    at.selectbox(key="watch_task").set_value("reverse")
    at.slider(key="watch_lengths").set_value((3, 9))
    at.select_slider(key="watch_heads").set_value(4)
    at.checkbox(key="watch_compare").uncheck()
    at.number_input(key="watch_seed").set_value(7)
    at.select_slider(key="watch_steps").set_value(200)
    at.slider(key="watch_seconds").set_value(5)
    next(b for b in at.button if b.label == "Train").click().run()  # a form's values count once submitted
    link = link_of(ok(at))
    assert (link["task"], link["lengths"], link["heads"], link["compare"], link["seed"], link["steps"]) == \
        ("reverse", "3-9", "4", "False", "7", "200")
    again = open_link("watch", **link)
    assert (again.selectbox(key="watch_task").value, again.slider(key="watch_lengths").value,
            again.select_slider(key="watch_heads").value, again.checkbox(key="watch_compare").value,
            again.number_input(key="watch_seed").value, again.select_slider(key="watch_steps").value) == \
        ("reverse", (3, 9), 4, False, 7, 200)


@pytest.mark.parametrize("params, named", [({"lengths": "9-3"}, "lengths=9-3"), ({"task": "dance"}, "task=dance"),
                                           ({"heads": "3"}, "heads=3"), ({"seed": "-1"}, "seed=-1")])
def test_a_bad_watch_link_value_is_named_and_the_default_kept(tiny, params, named):
    at = open_link("watch", **params)
    assert f"{named}` ignored" in messages(at)
    assert at.selectbox(key="watch_task").value == "copy" and at.slider(key="watch_lengths").value == (4, 8)


def test_a_link_has_the_browser_fetch_the_chart_script_while_the_page_runs(tiny):
    """Issue 62: the sidebar's end holds a hidden element whose script imports Streamlit's own Plotly chunk (a file of
    the installed frontend), drawn before the page (so before its first chart)."""
    chunk = chart_preload.plotly_chunk()
    assert chunk is not None and (Path(st.__file__).parent / "static" / "static" / "js" / chunk).is_file()
    at = ok(open_link(None, beam="1"))
    preloads = [e.proto for e in at.sidebar.get("html") if chart_preload.MARK in e.proto.body]
    assert len(preloads) == 1 and preloads[0].unsafe_allow_javascript
    assert f'import(new URL("{chunk}", index.src).href)' in preloads[0].body
    assert "display: none" in preloads[0].body and at.get("plotly_chart")  # hidden; the page's heatmap still drawn
