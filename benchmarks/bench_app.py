#!/usr/bin/env python
"""The Streamlit attention explorer in a real browser: translate latency, first page load and server memory.

Starts the explorer as it is deployed, ``viz-model app`` (``python -m viz_model app`` from the repository root, the
command of deploy/Dockerfile), on a free loopback port with the shipped model (``assets/``, or ``--model-assets DIR``
as ``--models DIR``), and waits until it is started and idle: it answers, and its warm-up run (the default page, run
once by the server itself) is over. Then it drives Debian's Chromium
(``/usr/bin/chromium``, headless, through Playwright's Python package; no browser is ever downloaded). Nothing
leaves the machine: the server listens on 127.0.0.1 only, Chromium resolves no host name (``--host-resolver-rules``)
and uses no proxy, and every request the pages make to another host is counted and reported.

What is measured (targets from issue 5, "Performance"):

1. **Translate -> heatmap**: on the home page (head heatmap of encoder self-attention, layer 1, head 1, the app's
   default decoding: beam 4, alpha 0.6, unless ``--beam``), type a 15-word English sentence, press Translate and
   wait until the heatmap of *that* sentence is drawn: a Plotly heatmap in the main area whose image has a
   non-zero size and whose column labels (the source pieces, special tokens left out) spell the sentence. The
   time runs in the page's own clock, from the click event on the button (``event.timeStamp``) to the animation
   frame where that heatmap is first seen. p50 and p90 over ``--runs`` (20) runs, after ``--warmup`` (2) untimed
   ones. Target p50 <= 1.0 s.
2. **First load**: a fresh browser context (empty cache, no cookies) opens ``/?sentence=...``; from navigation
   start (``performance.timeOrigin``) to the animation frame where the sentence box is visible and enabled, and
   to the frame where the heatmap of the URL's sentence is drawn. p50 over ``--loads`` (5) contexts, on a server
   that has already served other sessions. Target p50 <= 3 s (both figures).
   **Cold start**: the same first page, but the first one a fresh server serves, started and idle; p50 over
   ``--cold-starts`` (3) servers. Each is followed by a server started with ``--no-warm-up`` (whose first page
   imports torch, loads the model and runs its first trace: what a shared link cost before the warm-up), in turn,
   so the two are measured side by side. Target p50 <= 3 s (with the warm-up).
3. **Server memory**: with 4 sessions open (4 browser contexts, each having translated a sentence of its own from
   its URL), the resident set size (VmRSS) of the streamlit process and all its children, sampled after the
   pages went idle; taken at the end of the run, so the app's trace cache holds the run's latest traces
   (conservative). Sessions of
   pages closed earlier may still be held by the server. Target <= 600 MB.
4. **Plotly alone** (no target; the floor under item 2's heatmap): fresh contexts open a blank page that only loads
   the plotly package's ``plotly.min.js`` and draws one 18 x 18 heatmap; seconds to the script's end and to the
   drawn heatmap, p50 over ``--loads``.

Every translation the benchmark asks for is a real, new one, never a cached trace: each page load and each press
of Translate uses a sentence that this (fresh) server process has not translated before. The sentences come from
one fixed 15-word template, "A <subject> in a <colour> <garment> is <verb> a <object> next to the old <place>.",
filled with a seeded sample of distinct combinations (``--seed``), so every run is similar but different.

Run it on an idle machine: on a busy 2-core machine the server, Chromium and the other processes fight over the
CPUs and all figures are inflated (the report says how busy the machine was).

    python benchmarks/bench_app.py                 # full run: 20 translations, 5 first loads, 3 + 3 cold starts
    python benchmarks/bench_app.py --json          # the same, JSON on stdout (the table goes to stderr)
    python benchmarks/bench_app.py --quick         # smoke test: 3 translations, 2 first loads, 2 + 2 cold starts
    python benchmarks/bench_app.py --runs 50 --model-assets /path/to/assets --model multi30k-en-de
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlparse

from bench_common import describe_machine, emit, load_average, machine, repo_label

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's viz_model, as the server started in REPO imports it

from viz_model.cli.warm_up import NOT_WARM, READY  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run",
                 # no network: no proxy, and no host name resolves (the app is reached by its IP literal)
                 "--no-proxy-server", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
VIEWPORT = {"width": 1400, "height": 1000}
INPUT_LABEL = "Sentence to translate (English)"  # the app's main input (app/widgets.py, sentence_form)
BUTTON_NAME = "Translate"
TARGET_TRANSLATE_P50_S = 1.0
TARGET_FIRST_LOAD_P50_S = 3.0
TARGET_RSS_MB = 600.0
SESSIONS = 4
STEP_TIMEOUT_S = 90.0  # one translation or one page load, on a busy machine
COLD_TIMEOUT_S = 240.0  # the first page of a fresh server imports torch and loads the model
SERVER_START_S = 120.0

SUBJECTS = ["man", "woman", "boy", "girl", "worker", "tourist", "musician", "child"]
COLOURS = ["red", "blue", "green", "yellow", "black", "white", "brown", "gray"]
GARMENTS = ["shirt", "jacket", "hat", "dress", "coat", "sweater"]
VERBS = ["carrying", "holding", "pushing", "pulling", "painting", "repairing", "watching", "cleaning"]
OBJECTS = ["bicycle", "box", "cart", "ladder", "bench", "wagon", "table", "sign"]
PLACES = ["building", "church", "fountain", "bridge", "market", "house", "station", "museum"]
TEMPLATE = "A {} in a {} {} is {} a {} next to the old {}."
WORDS = 15

# Installed in every page before the app's own scripts: the probes the benchmark waits on, and a recorder of the
# first animation frame where the input is interactive / the heatmap of window.__benchWant is drawn.
PAGE_JS = r"""
(() => {
  const B = window.__bench = {clicks: [], firstInput: null, firstHeatmap: null, firstTranslation: null,
                               firstPlot: null, want: window.__benchWant || null};
  const norm = (s) => s.normalize('NFKC').toLowerCase().replace(/[^\p{L}\p{N}]/gu, '');
  const shown = (el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  // the heatmap of `sentence`: a drawn Plotly heatmap in the main area whose column labels spell the sentence
  B.heatmapFor = (sentence) => {
    const want = norm(sentence);
    const main = document.querySelector('[data-testid="stMain"]') || document.body;
    if (!main) return false;
    for (const gd of main.querySelectorAll('.js-plotly-plot')) {
      const image = gd.querySelector('.heatmaplayer image');
      if (!image || !shown(image)) continue;
      const labels = [...gd.querySelectorAll('.xtick text')].map((e) => e.textContent)
        .filter((t) => !/^<[^<>]*>$/.test(t));  // </s>, <pad>, ...
      if (labels.length && norm(labels.join('')) === want) return true;
    }
    return false;
  };
  // the app failed: an exception or an error box in the main area (the wait stops at once)
  B.failed = () => !!document.querySelector(
    '[data-testid="stException"], [data-testid="stMain"] [data-testid="stAlertContentError"]');
  B.inputReady = () => {
    const box = document.querySelector('textarea[aria-label="__LABEL__"]');
    return !!box && !box.disabled && !box.readOnly && shown(box);
  };
  document.addEventListener('click', (e) => {
    const button = e.target && e.target.closest && e.target.closest('button');
    if (button) B.clicks.push(e.timeStamp);
  }, true);
  const watch = () => {
    const now = performance.now();
    if (B.firstInput === null && B.inputReady()) B.firstInput = now;
    if (B.want !== null && B.firstHeatmap === null && B.heatmapFor(B.want)) B.firstHeatmap = now;
    // diagnostics: the translation panel's caption, and the first Plotly chart element (any, maybe not drawn)
    if (B.firstTranslation === null && [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
        .some((e) => e.textContent.includes('log-probability'))) B.firstTranslation = now;
    if (B.firstPlot === null && document.querySelector('[data-testid="stMain"] .js-plotly-plot')) B.firstPlot = now;
    if (B.firstInput === null || (B.want !== null && B.firstHeatmap === null)) requestAnimationFrame(watch);
  };
  requestAnimationFrame(watch);
})();
""".replace("__LABEL__", INPUT_LABEL)


class BenchError(Exception):
    """The benchmark could not run (server, browser or app did not behave): reported, exit status 2."""


# --- arguments ---------------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Translate-to-heatmap latency, first page load and server RSS of the Streamlit attention "
                    "explorer, in headless Chromium on loopback.")
    p.add_argument("--model-assets", type=Path,
                   help="directory of model directories, passed to the server as VIZ_MODEL_ASSETS "
                        "(default: the repository's assets/, with the shipped multi30k-en-de)")
    p.add_argument("--model", help="model name (a directory in the assets; default: the app's default model)")
    p.add_argument("--beam", type=int, help="decoding beam size in the URL (1 = greedy; default: the app's "
                                            "default, beam 4)")
    p.add_argument("--runs", type=int, help="timed translations (default 20; 3 with --quick)")
    p.add_argument("--warmup", type=int, help="untimed translations first (default 2; 1 with --quick)")
    p.add_argument("--loads", type=int, help="first loads in fresh browser contexts (default 5; 2 with --quick)")
    p.add_argument("--cold-starts", type=int, help="fresh servers whose first page is timed, each with its warm-up "
                                                   "and, in turn, without (default 3; 2 with --quick)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sentence sample (default 0)")
    p.add_argument("--budget-s", type=float, help="wall-clock budget: phases stop early (and say so) past it "
                                                  "(default 1200; 240 with --quick)")
    p.add_argument("--quick", action="store_true", help="smoke test: few runs")
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout (table on stderr)")
    p.add_argument("--server-log", type=Path, help="keep the streamlit server's log here (default: a temporary "
                                                   "file, shown on failure)")
    p.add_argument("--chromium", type=Path, default=CHROMIUM, help=f"Chromium executable (default {CHROMIUM})")
    args = p.parse_args(argv)
    quick = args.quick
    args.runs = args.runs if args.runs is not None else (3 if quick else 20)
    args.warmup = args.warmup if args.warmup is not None else (1 if quick else 2)
    args.loads = args.loads if args.loads is not None else (2 if quick else 5)
    args.cold_starts = args.cold_starts if args.cold_starts is not None else (2 if quick else 3)
    args.budget_s = args.budget_s if args.budget_s is not None else (240.0 if quick else 1200.0)
    if args.runs < 1 or args.warmup < 0 or args.loads < 1 or args.cold_starts < 0 or args.budget_s <= 0:
        p.error("--runs and --loads must be >= 1, --warmup and --cold-starts >= 0, --budget-s > 0")
    if args.runs > 1000 or args.loads > 100 or args.cold_starts > 20:
        p.error("--runs is capped at 1000, --loads at 100 and --cold-starts at 20")
    if args.beam is not None and not 1 <= args.beam <= 16:
        p.error("--beam must be between 1 and 16")
    if args.model_assets is not None:
        args.model_assets = args.model_assets.resolve()  # the server runs in the repository root
    return args


# --- sentences ---------------------------------------------------------------------------------------------------
def sentences(count: int, seed: int) -> list[str]:
    """`count` distinct 15-word sentences from the template (a seeded sample of its slot combinations)."""
    slots = [SUBJECTS, COLOURS, GARMENTS, VERBS, OBJECTS, PLACES]
    total = 1
    for slot in slots:
        total *= len(slot)
    if count > total:
        raise BenchError(f"at most {total} distinct sentences")
    out = []
    for index in random.Random(seed).sample(range(total), count):
        words = []
        for slot in reversed(slots):
            index, i = divmod(index, len(slot))
            words.append(slot[i])
        sentence = TEMPLATE.format(*reversed(words))
        assert len(sentence.split()) == WORDS, sentence
        out.append(sentence)
    return out


# --- processes (read from /proc: no psutil needed) ---------------------------------------------------------------
def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()  # fields from 3 (state) on: the name may hold spaces


def _all_pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def process_tree(root: int) -> list[int]:
    """`root` and all its descendants (alive now)."""
    children: dict[int, list[int]] = {}
    for pid in _all_pids():
        fields = _stat_fields(pid)
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(pid)
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def _status_kb(pid: int, key: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def tree_memory(root: int) -> dict[str, Any]:
    """RSS of a process and its children (MB), and the peak RSS (VmHWM) of the process itself."""
    pids = process_tree(root)
    rss = [_status_kb(pid, "VmRSS") for pid in pids]
    return {"rss_mb": round(sum(r for r in rss if r) / 1024, 1), "processes": len(pids),
            "root_peak_mb": round((_status_kb(root, "VmHWM") or 0) / 1024, 1)}


class OtherCpu:
    """CPU time used by processes outside this benchmark's own tree (this script, its server, Chromium)."""

    def __init__(self) -> None:
        self.start, self.started = self._sample(), time.monotonic()

    @staticmethod
    def _sample() -> dict[int, float]:
        ours = set(process_tree(os.getpid()))
        tick = os.sysconf("SC_CLK_TCK")
        out = {}
        for pid in _all_pids():
            fields = _stat_fields(pid)
            if pid not in ours and fields is not None:
                out[pid] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
        return out

    def cores(self) -> float | None:
        """Average number of CPUs the other processes kept busy since construction (those alive at both ends)."""
        end, wall = self._sample(), time.monotonic() - self.started
        if wall <= 0:
            return None
        used = sum(cpu - self.start.get(pid, 0.0) for pid, cpu in end.items())
        return round(max(used, 0.0) / wall, 2)


# --- the server --------------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _health(url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
    try:
        with opener.open(f"{url}/_stcore/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _stop(process: subprocess.Popen) -> None:
    """Stop the server and its children (its own process group, started by us)."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)
    with contextlib.suppress(ProcessLookupError, PermissionError):  # children left in the group
        os.killpg(process.pid, signal.SIGKILL)


def server_command(port: int, assets: Path | None, warm: bool) -> list[str]:
    """`viz-model app` as it is deployed (deploy/Dockerfile), on loopback; `warm`: with its warm-up (the default)."""
    return [sys.executable, "-m", "viz_model", "app", "--headless", "--address", "127.0.0.1", "--port", str(port),
            *(["--models", str(assets)] if assets is not None else []), *([] if warm else ["--no-warm-up"])]


def _warm_up_line(log_path: Path) -> str | None:
    """The warm-up's line in the server's log (READY or NOT_WARM), None while it runs."""
    for line in _tail(log_path, 20000).splitlines():
        if line.startswith((READY, NOT_WARM)):
            return line
    return None


def _wait_for(ready: Callable[[], Any], process: subprocess.Popen, log_path: Path, limit_s: float, late: str,
              poll_s: float) -> Any:
    """`ready()`'s first true answer, asked every `poll_s` seconds; BenchError (with the server's log) where the
    server exits first, or ``"LATE within N s"`` after `limit_s`."""
    deadline = time.monotonic() + limit_s
    while not (found := ready()):
        if process.poll() is not None:
            raise BenchError(f"the server exited with {process.returncode}:\n{_tail(log_path)}")
        if time.monotonic() > deadline:
            raise BenchError(f"{late} within {limit_s:.0f} s:\n{_tail(log_path)}")
        time.sleep(poll_s)
    return found


@contextlib.contextmanager
def streamlit_server(assets: Path | None, log_path: Path, warm: bool = True) -> Iterator[tuple[str, subprocess.Popen,
                                                                                               dict[str, Any]]]:
    """`viz-model app` from the repository root on a free loopback port, started and idle: it answers and, with
    `warm`, its warm-up run is over. Yields (URL, process, {"start_s": seconds to the first answer, "warm_up_s":
    seconds from there to the warm-up's end})."""
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    env.pop("VIZ_MODEL_ASSETS", None)
    with log_path.open("w") as log:
        process = subprocess.Popen(server_command(port, assets, warm), cwd=REPO, env=env, stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    facts: dict[str, Any] = {"warm_up": warm}
    try:
        _wait_for(lambda: _health(url), process, log_path, SERVER_START_S, f"the server did not answer on {url}", 0.25)
        facts["start_s"] = round(time.monotonic() - started, 2)
        answered = time.monotonic()
        if warm:
            line = _wait_for(lambda: _warm_up_line(log_path), process, log_path, COLD_TIMEOUT_S,
                             "no end of the warm-up", 0.1)
            if line.startswith(NOT_WARM):
                raise BenchError(line)
            facts["warm_up_s"] = round(time.monotonic() - answered, 2)
        yield url, process, facts
    finally:
        _stop(process)


def _quietly(close: Any) -> Any:
    """A teardown callback that cannot hide the real error (the browser may already be gone)."""
    def run() -> None:
        with contextlib.suppress(Exception):
            close()
    return run


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return re.sub(r"\x1b\[[0-9;]*m", "", path.read_text(errors="replace"))[-chars:]  # no terminal colours
    except OSError:
        return "(no log)"


def check_assets(assets: Path | None, model: str | None) -> str:
    """Fail fast when there is no model to serve; returns the assets directory as a results file names it."""
    root = assets if assets is not None else REPO / "assets"  # the server runs without VIZ_MODEL_ASSETS then
    found = sorted(p.name for p in root.glob("*") if (p / "config.json").is_file()) if root.is_dir() else []
    if not found:
        raise BenchError(f"no model directory (with a config.json) in {root}: train one or pass --model-assets")
    if model is not None and model not in found:
        raise BenchError(f"no model {model!r} in {root}; found {', '.join(found)}")
    return repo_label(root)


# --- the browser -------------------------------------------------------------------------------------------------
class Browser:
    """Headless Chromium through Playwright; fresh contexts carry the page probes and count off-host requests."""

    def __init__(self, chromium: Any, base_url: str) -> None:
        self.chromium, self.base_url = chromium, base_url
        self.host = urlparse(base_url).netloc
        self.offhost: list[str] = []

    def context(self, want: str | None = None) -> Any:
        context = self.chromium.new_context(viewport=VIEWPORT)
        context.add_init_script(script=f"window.__benchWant = {json.dumps(want)};\n{PAGE_JS}")
        context.on("request", self._request)
        return context

    def _request(self, request: Any) -> None:
        parts = urlparse(request.url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.netloc != self.host and len(self.offhost) < 50:
            self.offhost.append(request.url[:200])

    def url(self, sentence: str, args: argparse.Namespace) -> str:
        params = {"sentence": sentence, "view": "heatmap", "kind": "encoder", "layer": "1", "head": "1"}
        if args.model:
            params["model"] = args.model
        if args.beam is not None:
            params["beam"] = str(args.beam)
        return f"{self.base_url}/?{urlencode(params)}"


# A blank page with nothing but Plotly's script and one heatmap: what Plotly alone costs this browser and machine
# (the floor under the app's first heatmap, which Streamlit's own start-up comes before).
PLOTLY_ALONE_HTML = """<!doctype html><html><body><div id="g"></div>
<script>window.t0 = performance.now();</script><script src="plotly.min.js"></script>
<script>window.t1 = performance.now();
const z = [...Array(18)].map((_, i) => [...Array(18)].map((_, j) => Math.sin(i * j)));
Plotly.newPlot('g', [{type: 'heatmap', z}]).then(() => { window.t2 = performance.now(); });</script></body></html>"""


def plotly_alone(browser: Browser, loads: int, timeout_s: float) -> dict[str, Any]:
    """Fresh contexts open a blank page that loads the plotly package's plotly.min.js (served from memory, the
    same library Streamlit bundles) and draws an 18 x 18 heatmap: seconds from the page's first script to Plotly
    being defined, and to the heatmap drawn."""
    import plotly

    script = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_bytes()
    base = "http://127.0.0.1:9/plotly-alone/"
    runs = []
    for _ in range(loads):
        context = browser.chromium.new_context(viewport=VIEWPORT)
        context.route(base + "index.html", lambda route: route.fulfill(body=PLOTLY_ALONE_HTML,
                                                                       content_type="text/html"))
        context.route(base + "plotly.min.js", lambda route: route.fulfill(body=script,
                                                                          content_type="text/javascript"))
        page = context.new_page()
        page.goto(base + "index.html", timeout=timeout_s * 1000)
        page.wait_for_function("() => window.t2 !== undefined", timeout=timeout_s * 1000)
        script_s, heatmap_s = page.evaluate("() => [(window.t1 - window.t0) / 1000, (window.t2 - window.t0) / 1000]")
        runs.append({"script": round(script_s, 3), "heatmap": round(heatmap_s, 3)})
        context.close()
    return {"kb": len(script) // 1024, "script": stats([r["script"] for r in runs]),
            "heatmap": stats([r["heatmap"] for r in runs])}


def open_page(browser: Browser, sentence: str, args: argparse.Namespace, timeout_s: float) -> tuple[Any, Any, dict]:
    """A fresh context that opens the app with `sentence` in the URL; waits for the input and the heatmap.

    Returns (context, page, timings in seconds from navigation start)."""
    context = browser.context(want=sentence)
    try:
        page = context.new_page()
        page.on("dialog", lambda dialog: dialog.dismiss())
        page.goto(browser.url(sentence, args), wait_until="commit", timeout=timeout_s * 1000)
        try:
            page.wait_for_function("() => { const B = window.__bench; return B && ((B.firstInput !== null "
                                   "&& B.firstHeatmap !== null) || B.failed()); }", timeout=timeout_s * 1000)
        except Exception as err:
            raise BenchError(f"the page did not show the heatmap of {sentence!r} within {timeout_s:.0f} s "
                             f"({type(err).__name__}); app says: {app_messages(page)}") from None
        if page.evaluate("() => window.__bench.firstHeatmap === null"):
            raise BenchError(f"the app failed on {sentence!r}: {app_messages(page)}")
        marks = page.evaluate("""() => {
            const n = performance.getEntriesByType('navigation')[0] || {};
            const B = window.__bench;
            // diagnostics: the three biggest scripts, when their download started and ended (ms)
            const scripts = performance.getEntriesByType('resource').filter((e) => e.initiatorType === 'script')
              .sort((a, b) => b.encodedBodySize - a.encodedBodySize).slice(0, 3)
              .map((e) => ({name: e.name.split('/').pop().slice(0, 60), kb: Math.round(e.encodedBodySize / 1024),
                            start: e.startTime, end: e.responseEnd}));
            return {marks: {input: B.firstInput, translation: B.firstTranslation, plot: B.firstPlot,
                            heatmap: B.firstHeatmap, dom_content_loaded: n.domContentLoadedEventEnd || null,
                            load: n.loadEventEnd || null}, scripts};
        }""")
    except BaseException:
        _quietly(context.close)()
        raise
    out: dict[str, Any] = {k: (round(v / 1000, 3) if v else None) for k, v in marks["marks"].items()}
    out["scripts"] = [{**e, "start": round(e["start"] / 1000, 3), "end": round(e["end"] / 1000, 3)}
                      for e in marks["scripts"]]
    return context, page, out


def app_messages(page: Any) -> str:
    """Errors, warnings and exceptions the app shows (for failure reports)."""
    with contextlib.suppress(Exception):
        texts = page.evaluate("""() => [...document.querySelectorAll(
            '[data-testid="stAlert"], [data-testid="stException"], [data-testid="stNotification"]')]
            .map(e => e.innerText.trim()).filter(Boolean).slice(0, 5)""")
        return "; ".join(t[:300] for t in texts) or "(nothing)"
    return "(page unreadable)"


def caption_info(page: Any) -> dict[str, Any]:
    """What the translation panel's caption says: decoding, token counts and the server-side trace time."""
    with contextlib.suppress(Exception):
        text = page.evaluate("""() => [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
            .map(e => e.innerText).find(t => t.includes('log-probability')) || ''""")
        out: dict[str, Any] = {"caption": text.strip()}
        if m := re.search(r"(\d+) source / (\d+) target tokens", text):
            out["source_tokens"], out["target_tokens"] = int(m.group(1)), int(m.group(2))
        if m := re.search(r"([\d.]+)\s*ms\s*$", text.strip()):
            out["trace_ms"] = float(m.group(1))
        if m := re.match(r"\s*(greedy|beam \d+, α [\d.]+)", text):
            out["decoding"] = m.group(1)
        return out
    return {}


def translate(page: Any, sentence: str, timeout_s: float) -> dict[str, Any]:
    """Type `sentence`, press Translate, wait for its heatmap; seconds from the click to the heatmap frame."""
    page.get_by_label(INPUT_LABEL).fill(sentence, timeout=timeout_s * 1000)
    clicks = page.evaluate("() => window.__bench.clicks.length")
    started = time.perf_counter()
    page.get_by_role("button", name=BUTTON_NAME).first.click(timeout=timeout_s * 1000)
    try:
        shown = page.wait_for_function(
            "(s) => window.__bench.heatmapFor(s) ? performance.now() : (window.__bench.failed() ? -1 : false)",
            arg=sentence, polling="raf", timeout=timeout_s * 1000).json_value()
    except Exception as err:
        raise BenchError(f"no heatmap of {sentence!r} within {timeout_s:.0f} s after Translate "
                         f"({type(err).__name__}); app says: {app_messages(page)}") from None
    if shown < 0:
        raise BenchError(f"the app failed on {sentence!r}: {app_messages(page)}")
    wall = time.perf_counter() - started
    clicked = page.evaluate("(n) => window.__bench.clicks[n] ?? null", clicks)
    if clicked is None:
        raise BenchError("the click on Translate was not seen by the page")
    return {"seconds": round((shown - clicked) / 1000, 3), "wall_seconds": round(wall, 3), **caption_info(page)}


# --- the benchmark -----------------------------------------------------------------------------------------------
def stats(values: list[float]) -> dict[str, Any] | None:
    if not values:
        return None
    ordered = sorted(values)

    def pct(q: float) -> float:  # linear interpolation, as numpy.percentile
        pos = (len(ordered) - 1) * q
        low = int(pos)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)

    return {"p50": round(pct(0.5), 3), "p90": round(pct(0.9), 3), "mean": round(statistics.fmean(ordered), 3),
            "min": round(ordered[0], 3), "max": round(ordered[-1], 3), "n": len(ordered)}


def cold_stats(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The cold starts' input and heatmap seconds (p50 ...), and each start's figures."""
    if not runs:
        return None
    return {"input": stats([r["input"] for r in runs if r["input"] is not None]),
            "heatmap": stats([r["heatmap"] for r in runs if r["heatmap"] is not None]), "runs": runs}


def run_benchmark(args: argparse.Namespace, result: dict[str, Any], log_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    started = time.monotonic()

    def left() -> float:
        return args.budget_s - (time.monotonic() - started)

    def step_timeout(limit: float = STEP_TIMEOUT_S) -> float:
        return max(5.0, min(limit, left()))

    pool = iter(sentences(2 * args.cold_starts + 1 + args.warmup + args.runs + args.loads + SESSIONS, args.seed))
    result["incomplete"] = []
    with contextlib.ExitStack() as stack:
        playwright = sync_playwright().start()
        stack.callback(_quietly(playwright.stop))
        chromium = playwright.chromium.launch(executable_path=str(args.chromium), args=CHROMIUM_ARGS, headless=True)
        stack.callback(_quietly(chromium.close))
        result["chromium"] = chromium.version
        cpu = OtherCpu()
        browsers = []

        # 0. cold starts: a fresh server, started and idle, and the first page a fresh browser opens on it; started as
        # deployed (its warm-up included) and, in turn, without the warm-up (what the first visitor paid before)
        cold: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
        for _ in range(args.cold_starts):
            if left() < COLD_TIMEOUT_S / 2:
                result["incomplete"].append(f"cold start: stopped after {len(cold[True])} of {args.cold_starts} "
                                            "(budget)")
                break
            for warm in (True, False):
                with streamlit_server(args.model_assets, log_path, warm) as (url, _server, facts):
                    browsers.append(Browser(chromium, url))
                    context, _page, marks = open_page(browsers[-1], next(pool), args, step_timeout(COLD_TIMEOUT_S))
                    context.close()
                cold[warm].append({**facts, **marks})
        result["cold_start"] = cold_stats(cold[True])
        result["cold_start_no_warm_up"] = cold_stats(cold[False])

        # the server of the phases below, started as deployed; its first page is the page phase 1 types into
        url, server, facts = stack.enter_context(streamlit_server(args.model_assets, log_path))
        result["server"] = facts
        browser = Browser(chromium, url)
        browsers.append(browser)
        context, page, first = open_page(browser, next(pool), args, step_timeout(COLD_TIMEOUT_S))
        stack.callback(_quietly(context.close))
        result["server_first_page"] = first
        result["memory_one_session"] = tree_memory(server.pid)

        # 1. translate -> heatmap, one session, a new sentence each time
        runs: list[dict[str, Any]] = []
        for i in range(args.warmup + args.runs):
            if left() < STEP_TIMEOUT_S / 3:
                result["incomplete"].append(f"translate: stopped after {len(runs)} of {args.runs} timed runs "
                                            "(budget)")
                break
            run = translate(page, next(pool), step_timeout())
            if i >= args.warmup:
                runs.append(run)
        result["translate_runs"] = runs
        result["translate"] = stats([r["seconds"] for r in runs])
        result["translate_wall"] = stats([r["wall_seconds"] for r in runs])
        result["trace_ms"] = stats([r["trace_ms"] for r in runs if "trace_ms" in r])
        result["overhead"] = stats([round(r["seconds"] - r["trace_ms"] / 1000, 3) for r in runs if "trace_ms" in r])
        if runs:
            last = runs[-1]
            result["decoding"] = last.get("decoding")
            result["tokens"] = {"source": last.get("source_tokens"), "target": last.get("target_tokens")}
        context.close()

        # 2. first loads, each in a fresh context, each with a new sentence in the URL
        loads = []
        for _ in range(args.loads):
            if left() < STEP_TIMEOUT_S / 3:
                result["incomplete"].append(f"first load: stopped after {len(loads)} of {args.loads} (budget)")
                break
            context, _page, marks = open_page(browser, next(pool), args, step_timeout())
            context.close()
            loads.append(marks)
        result["first_load_runs"] = loads
        result["first_load_input"] = stats([m["input"] for m in loads if m["input"] is not None])
        result["first_load_heatmap"] = stats([m["heatmap"] for m in loads if m["heatmap"] is not None])
        result["first_load_translation"] = stats([m["translation"] for m in loads if m["translation"] is not None])
        result["first_load_plot"] = stats([m["plot"] for m in loads if m["plot"] is not None])
        result["plotly_alone"] = plotly_alone(browser, args.loads, step_timeout())

        # 3. server memory with 4 sessions open, each having translated its own sentence
        opened = 0
        for _ in range(SESSIONS):
            if left() < STEP_TIMEOUT_S / 3:
                result["incomplete"].append(f"memory: only {opened} of {SESSIONS} sessions opened (budget)")
                break
            context, _page, _marks = open_page(browser, next(pool), args, step_timeout())
            stack.callback(_quietly(context.close))
            opened += 1
        if opened == SESSIONS:
            time.sleep(2.0)  # let the runs finish and the pages go idle
            samples = []
            for _ in range(5):
                samples.append(tree_memory(server.pid))
                time.sleep(0.4)
            result["memory"] = {**samples[-1], "rss_mb": round(statistics.median(s["rss_mb"] for s in samples), 1),
                                "sessions": opened, "samples_mb": [s["rss_mb"] for s in samples]}
        result["other_cpus"] = cpu.cores()
        result["offhost_requests"] = [request for b in browsers for request in b.offhost]
    result["elapsed_s"] = round(time.monotonic() - started, 1)


# --- report ------------------------------------------------------------------------------------------------------
def verdict(value: float | None, limit: float) -> bool | None:
    return None if value is None else value <= limit


def status(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def targets(r: dict[str, Any]) -> dict[str, Any]:
    def p50(key: str) -> float | None:
        return r[key]["p50"] if r.get(key) else None

    memory = r.get("memory")
    return {
        "translate_p50": verdict(p50("translate"), TARGET_TRANSLATE_P50_S),
        "first_load_input_p50": verdict(p50("first_load_input"), TARGET_FIRST_LOAD_P50_S),
        "first_load_heatmap_p50": verdict(p50("first_load_heatmap"), TARGET_FIRST_LOAD_P50_S),
        "cold_start_heatmap_p50": verdict(r["cold_start"]["heatmap"]["p50"] if r.get("cold_start") else None,
                                          TARGET_FIRST_LOAD_P50_S),
        "server_rss": verdict(memory["rss_mb"] if memory else None, TARGET_RSS_MB),
        "translate_p50_s_max": TARGET_TRANSLATE_P50_S, "first_load_p50_s_max": TARGET_FIRST_LOAD_P50_S,
        "rss_mb_max": TARGET_RSS_MB,
    }


def table(r: dict[str, Any]) -> str:
    lines = [f"bench_app: Streamlit attention explorer in headless Chromium {r.get('chromium', '?')} "
             f"(streamlit {r.get('streamlit', '?')}, Python {r['python']}, {describe_machine(r['machine'])})",
             f"model: {r['model'] or 'the app default'} from {r['assets']}; decoding: "
             f"{r.get('decoding') or ('beam ' + str(r['beam']) if r['beam'] else 'the app default')}; view: head "
             "heatmap, encoder self-attention, layer 1, head 1",
             f"input: {WORDS}-word English sentences, a new one for every translation (never a cached trace), "
             f"e.g. {r['example']!r}" + (f"; the last timed one had {r['tokens']['source']} source / "
                                          f"{r['tokens']['target']} target tokens" if r.get("tokens") else "")]
    server = r.get("server")
    if server:
        lines.append(f"server (`viz-model app`, as deployed): answered in {server['start_s']:.1f} s, its warm-up run "
                     f"(the default page, once) ended {server['warm_up_s']:.1f} s later")
    for key, how in (("cold_start", "started as deployed, warm-up included,"),
                     ("cold_start_no_warm_up", "started with --no-warm-up (the first page imports torch, loads the "
                                               "model)")):
        cold = r.get(key)
        if cold and cold["heatmap"]:
            lines.append(f"cold start, a fresh server {how} and idle, its first page: input p50 "
                         f"{cold['input']['p50']:.2f} s, heatmap p50 {cold['heatmap']['p50']:.2f} s (max "
                         f"{cold['heatmap']['max']:.2f} s, {cold['heatmap']['n']} servers)")
    one = r.get("memory_one_session")
    if one:
        lines.append(f"server RSS with the model loaded and 1 session: {one['rss_mb']:.0f} MB")
    lines.append(f"other processes kept {r.get('other_cpus', '?')} of {os.cpu_count()} CPUs busy meanwhile "
                 f"(load average {r['load_before']} before); {r.get('elapsed_s', '?')} s in all")
    if r.get("busy"):
        lines.append("WARNING: the machine was busy: the timings are inflated and noisy; measure on an idle machine")
    for note in r.get("incomplete", []):
        lines.append(f"INCOMPLETE: {note}")
    if r.get("offhost_requests"):
        lines.append(f"NOTE: the pages tried {len(r['offhost_requests'])} request(s) off loopback (blocked): "
                     + ", ".join(r["offhost_requests"][:3]))
    lines += ["", f"{'seconds':44}{'p50':>8}{'p90':>8}{'mean':>8}{'min':>8}{'max':>8}{'runs':>6}"]
    rows = [("translate -> heatmap (click to frame)", "translate"),
            ("  same, wall clock seen by the driver", "translate_wall"),
            ("first load -> input interactive", "first_load_input"),
            ("first load -> translation shown (caption)", "first_load_translation"),
            ("first load -> first Plotly element", "first_load_plot"),
            ("first load -> heatmap (sentence in URL)", "first_load_heatmap")]
    for name, key in rows:
        s = r.get(key)
        if s:
            lines.append(f"{name:44}{s['p50']:8.3f}{s['p90']:8.3f}{s['mean']:8.3f}{s['min']:8.3f}{s['max']:8.3f}"
                         f"{s['n']:6d}")
        else:
            lines.append(f"{name:44}{'-':>8}")
    if r.get("trace_ms"):
        s = r["trace_ms"]
        lines.append(f"{'  of which model trace (app caption)':44}{s['p50'] / 1000:8.3f}{s['p90'] / 1000:8.3f}"
                     f"{s['mean'] / 1000:8.3f}{s['min'] / 1000:8.3f}{s['max'] / 1000:8.3f}{s['n']:6d}")
    if r.get("overhead"):
        s = r["overhead"]
        lines.append(f"{'  the rest (app run, transfer, drawing)':44}{s['p50']:8.3f}{s['p90']:8.3f}{s['mean']:8.3f}"
                     f"{s['min']:8.3f}{s['max']:8.3f}{s['n']:6d}")
    loads = r.get("first_load_runs")
    if loads and loads[-1].get("scripts"):
        lines.append("  largest scripts of the last first load (kB, fetched from-to s): " + "; ".join(
            f"{e['name']} {e['kb']} kB {e['start']:.2f}-{e['end']:.2f}" for e in loads[-1]["scripts"]))
    alone = r.get("plotly_alone")
    if alone:
        lines.append(f"  Plotly alone, a blank page (plotly.min.js {alone['kb']} kB): script run p50 "
                     f"{alone['script']['p50']:.3f} s, heatmap drawn p50 {alone['heatmap']['p50']:.3f} s "
                     f"(max {alone['heatmap']['max']:.3f} s, {alone['heatmap']['n']} loads)")
    memory = r.get("memory")
    if memory:
        lines.append(f"server RSS, {memory['sessions']} sessions open: {memory['rss_mb']:.0f} MB "
                     f"({memory['processes']} process(es); samples {memory['samples_mb']}; peak RSS of the server "
                     f"process over the run {memory['root_peak_mb']:.0f} MB)")
    t = r["targets"]
    rss = f"{memory['rss_mb']:.0f} MB" if memory else "-"
    cold_p50 = f"{r['cold_start']['heatmap']['p50']:.3f} s" if r.get("cold_start") else "-"

    def fmt(key: str, unit: str) -> str:
        s = r.get(key)
        return f"{s['p50']:.3f} {unit}" if s else "-"

    lines += ["", f"{'target':44}{'measured':>12}  status",
              f"{'translate -> heatmap p50 <= 1.0 s':44}{fmt('translate', 's'):>12}  {status(t['translate_p50'])}",
              f"{'first load -> input p50 <= 3 s':44}{fmt('first_load_input', 's'):>12}  "
              f"{status(t['first_load_input_p50'])}",
              f"{'first load -> heatmap p50 <= 3 s':44}{fmt('first_load_heatmap', 's'):>12}  "
              f"{status(t['first_load_heatmap_p50'])}",
              f"{'cold start -> heatmap p50 <= 3 s':44}{cold_p50:>12}  {status(t['cold_start_heatmap_p50'])}",
              f"{'server RSS, 4 sessions <= 600 MB':44}{rss:>12}  {status(t['server_rss'])}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # tear down (finally blocks) on kill, too
    try:
        import streamlit
        from playwright.sync_api import Error as PlaywrightError
    except ImportError as err:
        print(f"bench_app: needs streamlit and playwright (pip install -e '.[test]'): {err}", file=sys.stderr)
        return 2
    if not args.chromium.exists():
        print(f"bench_app: no Chromium at {args.chromium} (apt-get install chromium)", file=sys.stderr)
        return 2
    result: dict[str, Any] = {
        "benchmark": "bench_app", "quick": args.quick, "runs": args.runs, "warmup": args.warmup,
        "loads": args.loads, "cold_starts": args.cold_starts, "sessions": SESSIONS, "seed": args.seed,
        "model": args.model, "beam": args.beam,
        "example": sentences(1, args.seed)[0], "streamlit": streamlit.__version__,
        "python": platform.python_version(), "machine": machine(),
        "load_before": load_average(),
    }
    with contextlib.ExitStack() as stack:
        if args.server_log:
            log_path = args.server_log
        else:
            log_path = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench_app-"))) / "streamlit.log"
        try:
            result["assets"] = check_assets(args.model_assets, args.model)
            run_benchmark(args, result, log_path)
        except (BenchError, PlaywrightError) as err:  # the server and the browser are stopped by now
            log = f"\n--- server log (tail) ---\n{_tail(log_path)}" if log_path.is_file() else ""
            print(f"bench_app: {err}{log}", file=sys.stderr)
            if args.json:
                print(json.dumps({**result, "error": str(err)}, indent=2, ensure_ascii=False))
            return 2
    result["busy"] = result.get("other_cpus") is not None and result["other_cpus"] > 0.25
    result["targets"] = targets(result)
    emit(table(result), result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
