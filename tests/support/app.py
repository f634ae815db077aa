"""Shared by the app tests: a tiny random model directory (built once per test session) and helpers.

Importing this module is cheap; `build_tiny_assets` trains a 100-odd piece SentencePiece tokenizer on generated
sentences and saves a randomly initialised 2-encoder / 3-decoder-layer model, so layer counts that differ per
kind are exercised. The sentences include HTML so the injection tests see real pieces such as ``<`` and ``img``.
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
import random
from pathlib import Path

import numpy as np
import torch
from streamlit.components.v2 import manifest_scanner
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from app import registry, widgets
from support import app_scripts  # noqa: F401  (every AppTest run shares one compiled copy of each script)
from support.data import TINY_ARCHITECTURE, tiny_model_config
from viz_model.config.model import POSITIONAL_KINDS
from viz_model.modeldir.checkpoint import save_model_dir
from viz_model.modeldir.coverage import TRAINING_STATS, training_stats
from viz_model.nn.model import Transformer
from viz_model.tokenization.tokenizer import Tokenizer, train_tokenizer

# Each new AppTest scans every installed package's metadata for Streamlit components (a third of a second, paid by
# every `start`); the installed packages do not change during a test run, so this process scans them once.
manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)

TINY_MODEL = "tiny-en-de"
TINY_CONFIG = {**TINY_ARCHITECTURE, "decoder_layers": 3, "max_positions": 48}  # 2 + 3: layer counts differ
INJECTION = "<img src=x onerror=alert(1)><script>alert(2)</script>"
ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app" / "streamlit_app.py"


def _sentences(count: int = 400) -> list[str]:
    rng = random.Random(0)
    subjects = ["a man", "two dogs", "the girl", "several people", "a woman", "the children", "ein Mann",
                "zwei Hunde", "das Mädchen", "eine Frau"]
    verbs = ["plays", "runs", "is reading", "climbs", "walks", "spielt", "läuft", "liest", "klettert"]
    places = ["in the snow", "on the beach", "down the street", "into a playhouse", "im Schnee", "am Strand",
              "auf der Straße", "in front of a building"]
    lines = [f"{rng.choice(subjects).capitalize()} {rng.choice(verbs)} {rng.choice(places)}." for _ in range(count)]
    lines += [INJECTION, "<b>bold</b> & <i>x</i> = 'y' \"z\"", "script alert img src onerror"] * 5
    return lines


def build_tiny_assets(root: Path) -> Path:
    """Write ``root/tiny-en-de`` (a complete model directory) unless it exists; returns `root`."""
    directory = root / TINY_MODEL
    if (directory / "model.safetensors").is_file():
        return root
    root.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(_sentences(), root / "tokenizer.model", vocab_size=160)
    torch.manual_seed(0)
    model = Transformer(tiny_model_config(tokenizer.vocab_size, **TINY_CONFIG))
    save_model_dir(model, tokenizer, directory, card="# tiny-en-de\n\nA random model for the app tests.\n")
    (directory / TRAINING_STATS).write_text(training_stats(tokenizer, {"multi30k": _sentences()}).to_json())
    (root / "tokenizer.model").unlink()
    return root


def build_scheme_assets(root: Path) -> Path:
    """`build_tiny_assets` plus ``root/tiny-<scheme>`` for every positional scheme: the tiny model's tokenizer with a
    random network (relative-bias tables drawn wide, so the bias shows); returns `root`."""
    build_tiny_assets(root)
    tokenizer = Tokenizer.load(root / TINY_MODEL / "tokenizer.model")
    for scheme in POSITIONAL_KINDS:
        if (root / f"tiny-{scheme}" / "model.safetensors").is_file():
            continue
        torch.manual_seed(3)
        network = Transformer(tiny_model_config(tokenizer.vocab_size, positional=scheme, **TINY_CONFIG))
        for table in (network.encoder_position_bias, network.decoder_position_bias):
            if table is not None:
                torch.nn.init.normal_(table.embedding.weight, std=1.0)
        save_model_dir(network, tokenizer, root / f"tiny-{scheme}")
    return root


def long_sentence(words: int) -> str:
    return " ".join(itertools.islice(itertools.cycle(["two", "dogs", "play", "in", "the", "snow"]), words)) + "."


def arr(value) -> np.ndarray:
    """A data array from figure JSON: Plotly 6+ writes numpy arrays as base64 typed arrays."""
    if isinstance(value, dict) and "bdata" in value:
        out = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        return out.reshape([int(n) for n in shape.split(",")]) if shape else out
    return np.array(value, dtype=float)


def start(**params: str) -> AppTest:
    """Run the app as a fresh browser session would, with these URL query parameters (greedy unless told)."""
    at = AppTest.from_file(str(APP), default_timeout=180)
    at.query_params.update({"beam": "1", **params})
    return at.run()


def charts(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def titles(at: AppTest) -> list[str]:
    return [c["layout"]["title"]["text"] for c in charts(at)]


def ok(at: AppTest) -> AppTest:
    """No traceback, and no unexpected failure caught by the app's guard."""
    assert not at.exception, [e.message for e in at.exception]
    unexpected = [e.value for e in at.error if e.value.startswith(widgets.UNEXPECTED)]
    assert not unexpected, unexpected
    return at


def markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def messages(at: AppTest) -> str:
    return "\n".join(str(e.value) for e in [*at.error, *at.warning, *at.info])


IMPORTED_MODEL_PAGES = ["explore", "masks", "positional", "by_hand", "decoding", "training", "head_roles",
                        "ablation", "alignment", "compare", "attribution"]


def switch_to(at: AppTest, page: str) -> AppTest:
    """`at` (run at least once) switched to page `page` (a registry key): the script the registry names for the kind
    of model `at` has open (the one `st.navigation` registered). Not run yet."""
    for kind in registry.KINDS:
        script = registry.script(page, kind)
        if script is not None:
            try:
                return at.switch_page(script)
            except ValueError:  # not this kind's: the other kind is open
                continue
    raise ValueError(f"page {page!r} is not in this run's navigation")


def open_page(page: str | None, at: AppTest | None = None, *, straight: bool = False, timeout: int = 240,
              **params: str) -> AppTest:
    """Page `page` (a registry key; None or "explore": the page the app opens on) run, without an exception or an
    unexpected-error box: on `at` (already run), else on a fresh session whose link holds `params`, run on the
    home page first, or opened `straight` onto the page (as a link to it: the home page never runs)."""
    if at is None:
        at = AppTest.from_file(str(APP), default_timeout=timeout)
        at.query_params.update(params)
        if straight and page is not None:  # before a run AppTest finds a page by the hash of its link path only
            at._page_hash = calc_hash(registry.BY_KEY[page].url_path)
            return ok(at.run())
        ok(at.run())
    if page not in (None, registry.DEFAULT):
        switch_to(at, page).run()
    return ok(at)


def check_every_page_opens(sentence: str, timeout: int = 240) -> None:
    """Every page in `IMPORTED_MODEL_PAGES` runs with `sentence` in the URL (the assets directory set through
    ``VIZ_MODEL_ASSETS``): no exception, no unexpected-error box, at least one figure."""
    for page in IMPORTED_MODEL_PAGES:
        at = open_page(page, timeout=timeout, beam="1", sentence=sentence)
        errors = [e.value for e in at.error]
        assert not [e for e in errors if e.startswith("Something went wrong")], (page, errors)
        assert at.get("plotly_chart"), f"{page}: no figure"
