"""The API reference as built: the public API with every field of its dataclasses documented, no private names."""

from __future__ import annotations

import dataclasses
import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from viz_model.analysis import AblationResult, Alignment, CorpusAnalysis, RoleRule, SentenceAttention
from viz_model.attribution import Attribution
from viz_model.config import ModelConfig
from viz_model.lessons.watch_trainer import Snapshot, WatchConfig, WatchResult
from viz_model.nn.attention import AttentionRecord
from viz_model.nn.model import DecoderOutput, EncoderOutput, HeadMask, Seq2SeqOutput
from viz_model.search.settings import HFGeneration, ModelGeneration, Search
from viz_model.trace import AttentionTrace, DecodingStep

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("reference", "reference-network", "reference-analysis")
PUBLIC = (
    "viz_model.api.load", "viz_model.api.from_transformers", "viz_model.modeldir.shipped.available_models",
    "viz_model.kinds.translator.TranslationModel", "viz_model.kinds.base.ModelKind",
    "viz_model.kinds.translator.TranslationModel.trace", "viz_model.kinds.translator.TranslationModel.translate",
    "viz_model.kinds.language_model.LanguageModel",
    "viz_model.trace.AttentionTrace", "viz_model.trace.AttentionTrace.save", "viz_model.trace.AttentionTrace.load",
    "viz_model.trace.DecodingStep", "viz_model.nn.model.Transformer", "viz_model.nn.model.Transformer.forward",
    "viz_model.config.ModelConfig", "viz_model.nn.model.HeadMask", "viz_model.nn.attention",
    "viz_model.nn.attention.attention", "viz_model.nn.attention.AttentionRecord", "viz_model.lessons.watch_trainer",
    "viz_model.lessons.watch_trainer.train_watch", "viz_model.analysis", "viz_model.analysis.analyze_corpus",
    "viz_model.analysis.ablate", "viz_model.attribution", "viz_model.attribution.attribute",
    "viz_model.attribution.Attribution", "viz_model.plot", "viz_model.plot.heatmap", "viz_model.plot.model_view",
)
DATACLASSES = {  # the anchor each is rendered under
    "viz_model.trace.AttentionTrace": AttentionTrace, "viz_model.trace.DecodingStep": DecodingStep,
    "viz_model.config.ModelConfig": ModelConfig, "viz_model.nn.model.HeadMask": HeadMask,
    "viz_model.nn.model.Seq2SeqOutput": Seq2SeqOutput, "viz_model.nn.model.EncoderOutput": EncoderOutput,
    "viz_model.nn.model.DecoderOutput": DecoderOutput, "viz_model.nn.attention.AttentionRecord": AttentionRecord,
    "viz_model.search.settings.HFGeneration": HFGeneration, "viz_model.search.settings.ModelGeneration":
        ModelGeneration,
    "viz_model.search.settings.Search": Search, "viz_model.attribution.Attribution": Attribution,
    "viz_model.analysis.AblationResult": AblationResult, "viz_model.analysis.Alignment": Alignment,
    "viz_model.analysis.CorpusAnalysis": CorpusAnalysis, "viz_model.analysis.SentenceAttention": SentenceAttention,
    "viz_model.analysis.RoleRule": RoleRule, "viz_model.lessons.watch_trainer.WatchConfig": WatchConfig,
    "viz_model.lessons.watch_trainer.Snapshot": Snapshot, "viz_model.lessons.watch_trainer.WatchResult": WatchResult,
}
# a name with a leading underscore, not inside a word or a dotted name's middle (d_model, *_positional are fine)
PRIVATE = re.compile(r"(?<![\w*])_{1,2}[A-Za-z]\w*")


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The reference pages' HTML, from one strict build of the site."""
    site = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return {page: (site / page / "index.html").read_text(encoding="utf-8") for page in PAGES}


def article_text(page: str) -> str:
    """The page's main text, tags removed."""
    main = page[page.index("<article"):page.index("</article>")]
    return html.unescape(re.sub(r"<[^>]+>", " ", main))


def test_the_reference_shows_the_public_api(pages: dict[str, str]) -> None:
    anchors = {a for page in pages.values() for a in re.findall(r'id="(viz_model[^"]*)"', page)}
    missing = [name for name in PUBLIC if name not in anchors]
    assert not missing, f"not in the API reference: {missing}"


def test_the_reference_shows_no_private_names(pages: dict[str, str]) -> None:
    for name, page in pages.items():
        anchors = re.findall(r'id="(viz_model[^"]*)"', page)
        assert anchors, f"{name}: no API entries rendered"
        assert not [a for a in anchors if re.search(r"(^|\.)_", a)], name
        assert not sorted(set(PRIVATE.findall(article_text(page)))), f"{name} names private objects"


def test_every_field_of_a_rendered_dataclass_is_documented(pages: dict[str, str]) -> None:
    everything = "".join(pages.values())
    for anchor, cls in DATACLASSES.items():
        assert f'id="{anchor}"' in everything, anchor
        undocumented = [f.name for f in dataclasses.fields(cls) if f'title="{anchor}.{f.name}"' not in everything]
        assert not undocumented, f"{anchor}: fields without a description in the reference: {undocumented}"


def test_the_private_name_check_finds_a_private_name() -> None:
    assert PRIVATE.findall("see _project_search and viz_model._app; d_model and *_positional are fine") == [
        "_project_search", "_app"]
