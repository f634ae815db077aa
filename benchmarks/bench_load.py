#!/usr/bin/env python
"""Many browser sessions at once against one ``streamlit run app``: no cross-talk, no crash, time to heatmap.

Starts the app on a free loopback port (as `bench_app.py` does: the shipped model from ``assets/``, or
``--model-assets DIR``) and drives Debian's Chromium (``/usr/bin/chromium``, headless, Playwright's async API; no
browser is downloaded, Chromium resolves no host name, the server listens on 127.0.0.1 only).

1. **Open**: ``--sessions`` (16) fresh browser contexts open the app at the same moment, each with a sentence of
   its own in the URL, and wait for its heatmap.
2. **Rounds**: ``--rounds`` (3) times, every session types a new sentence of its own, then all press Translate at
   the same moment; each waits until the heatmap of *its* sentence is drawn. The time runs in the page's clock from
   the click to the animation frame of that heatmap (as in `bench_app.py`).

Every request is checked: the heatmap's column labels must spell the session's own sentence, and the translation
shown must be the one the model gives that sentence alone (computed beforehand in this process with the same
settings). A translation that belongs to another session's sentence is **cross-talk**; one that matches no sentence
is reported as "differs" (numerical noise can flip a beam-search choice). Errors shown by the app, timeouts, Python
tracebacks in the server log and a server that stops answering are failures. Every sentence is new to the server,
so no request is served from the trace cache. The server's resident memory (it and its children) is sampled every
0.5 s; the peak is reported with the app's cache bounds (traces are cached with ``max_entries``, not forever).

Bounded: at most 64 sessions and 20 rounds, every wait has a timeout and the whole run a budget (``--budget-s``).
Run it on an idle machine: sessions, server and Chromium share the CPUs, so a busy machine inflates every figure.

    python benchmarks/bench_load.py                       # 16 sessions, 3 rounds (64 requests), beam 4
    python benchmarks/bench_load.py --sessions 2 --rounds 1   # smoke test
    python benchmarks/bench_load.py --json                # JSON on stdout, the table on stderr
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from bench_app import (
    CHROMIUM,
    CHROMIUM_ARGS,
    INPUT_LABEL,
    PAGE_JS,
    VIEWPORT,
    BenchError,
    OtherCpu,
    _health,
    _tail,
    check_assets,
    sentences,
    streamlit_server,
    tree_memory,
)
from bench_common import describe_machine, emit, load_average, machine

MAX_SESSIONS, MAX_ROUNDS = 64, 20
STEP_TIMEOUT_S = 180.0  # one translation while every other session translates too, on a busy machine
OPEN_TIMEOUT_S = 300.0  # the first pages of a fresh server import torch and load the model
WAIT_JS = "(s) => window.__bench.heatmapFor(s) ? performance.now() : (window.__bench.failed() ? -1 : false)"
TRANSLATION_JS = """() => {
  // the text under the "Translation" caption of the translation panel (app/widgets.py, translation_panel)
  const caption = [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
    .find((e) => e.innerText.trim() === 'Translation');
  let box = caption && caption.closest('[data-testid="stElementContainer"]');
  for (box = box && box.nextElementSibling; box; box = box.nextElementSibling) {
    const text = box.querySelector('[data-testid="stMarkdownContainer"]');
    if (text) return text.innerText;
  }
  return null;
}"""
ERRORS_JS = """() => [...document.querySelectorAll('[data-testid="stException"], [data-testid="stAlertContentError"]')]
  .map((e) => e.innerText.trim().slice(0, 300))"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Concurrent browser sessions against one Streamlit app: cross-talk, "
                                            "crashes, p50/p95 time to heatmap and server memory.")
    p.add_argument("--sessions", type=int, default=16, help=f"browser sessions at once (default 16, at most "
                                                            f"{MAX_SESSIONS})")
    p.add_argument("--rounds", type=int, default=3, help=f"translations per session after the first page "
                                                         f"(default 3, at most {MAX_ROUNDS})")
    p.add_argument("--beam", type=int, default=4, help="beam size in every URL (1 = greedy; default 4)")
    p.add_argument("--alpha", type=float, default=0.6, help="length penalty in every URL (default 0.6)")
    p.add_argument("--model-assets", type=Path, help="directory of model directories for the server "
                                                     "(default: the repository's assets/)")
    p.add_argument("--model", help="model name in the assets (default: the app's default model)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sentence sample (default 0)")
    p.add_argument("--budget-s", type=float, default=1200.0, help="wall-clock budget; rounds stop early past it "
                                                                  "(default 1200)")
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout (table on stderr)")
    p.add_argument("--server-log", type=Path, help="keep the server's log here (default: a temporary file)")
    p.add_argument("--chromium", type=Path, default=CHROMIUM, help=f"Chromium executable (default {CHROMIUM})")
    args = p.parse_args(argv)
    if not 1 <= args.sessions <= MAX_SESSIONS or not 0 <= args.rounds <= MAX_ROUNDS:
        p.error(f"--sessions must be from 1 to {MAX_SESSIONS} and --rounds from 0 to {MAX_ROUNDS}")
    if not 1 <= args.beam <= 16 or not 0.0 <= args.alpha <= 5.0 or args.budget_s <= 0:
        p.error("--beam must be from 1 to 16, --alpha from 0 to 5 and --budget-s above 0")
    if args.model_assets is not None:
        args.model_assets = args.model_assets.resolve()  # the server runs in the repository root
    return args


# --- expected results --------------------------------------------------------------------------------------------
def model_dir(args: argparse.Namespace) -> Path:
    """The model directory the server will serve (the app's default unless --model)."""
    import viz_model

    root = Path(check_assets(args.model_assets, args.model))
    return root / (args.model or viz_model.available_models(root)[0])


def reference_translations(directory: Path, texts: list[str], beam: int, alpha: float) -> dict[str, str]:
    """What the model translates each sentence into on its own (the app calls the same `trace`)."""
    import viz_model

    model = viz_model.load(directory, device="cpu")
    return {text: model.trace(text, beam=beam, alpha=alpha).translation for text in texts}


def normal(text: str | None) -> str:
    return " ".join((text or "").split())


def verdict(own: str, shown: str | None, references: dict[str, str]) -> str:
    """"ok", "cross-talk" (another sentence's translation), "differs" or "missing"."""
    if shown is None:
        return "missing"
    if normal(shown) == normal(references[own]):
        return "ok"
    if any(normal(shown) == normal(t) for s, t in references.items() if s != own):
        return "cross-talk"
    return "differs"


# --- sessions ----------------------------------------------------------------------------------------------------
class MemorySampler(threading.Thread):
    """Samples the server's RSS (process tree) every 0.5 s; keeps the peak and the last value."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_mb, self.last_mb, self.samples = pid, 0.0, 0.0, 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.5):
            rss = tree_memory(self.pid)["rss_mb"]
            self.peak_mb, self.last_mb, self.samples = max(self.peak_mb, rss), rss, self.samples + 1


class Session:
    """One browser context (a Streamlit session of its own) on the app."""

    def __init__(self, index: int, context: Any, page: Any) -> None:
        self.index, self.context, self.page = index, context, page

    async def check(self, sentence: str, references: dict[str, str]) -> dict[str, Any]:
        shown = await self.page.evaluate(TRANSLATION_JS)
        return {"session": self.index, "sentence": sentence, "translation": shown,
                "status": verdict(sentence, shown, references)}

    async def wait_heatmap(self, sentence: str, timeout_s: float) -> float:
        """performance.now() of the frame where the heatmap of `sentence` is drawn; BenchError if the app failed."""
        handle = await self.page.wait_for_function(WAIT_JS, arg=sentence, polling="raf", timeout=timeout_s * 1000)
        shown = await handle.json_value()
        if shown < 0:
            raise BenchError(f"the app shows an error: {await self.page.evaluate(ERRORS_JS)}")
        return shown


async def open_session(browser: Any, index: int, url: str, sentence: str, references: dict[str, str],
                       timeout_s: float) -> tuple[Session | None, dict[str, Any]]:
    """A fresh context on the app with `sentence` in its URL, once its heatmap is drawn."""
    context = await browser.new_context(viewport=VIEWPORT)
    await context.add_init_script(script=f"window.__benchWant = {json.dumps(sentence)};\n{PAGE_JS}")
    page = await context.new_page()
    page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.dismiss()))
    session = Session(index, context, page)
    try:
        await page.goto(url, wait_until="commit", timeout=timeout_s * 1000)
        shown = await session.wait_heatmap(sentence, timeout_s)
        return session, {**await session.check(sentence, references), "seconds": round(shown / 1000, 3)}
    except Exception as err:  # a timeout or an app error: recorded, the other sessions go on
        return session, {"session": index, "sentence": sentence, "status": "error", "error": _short(err)}


async def type_sentence(session: Session, sentence: str, timeout_s: float) -> dict[str, Any] | None:
    """Type `sentence` into the session's box; an error record if that fails."""
    try:
        await session.page.get_by_label(INPUT_LABEL).fill(sentence, timeout=timeout_s * 1000)
    except Exception as err:
        return {"session": session.index, "sentence": sentence, "status": "error", "error": _short(err)}
    return None


async def press_translate(session: Session, sentence: str, references: dict[str, str], timeout_s: float
                          ) -> dict[str, Any]:
    """Press Translate and wait for the heatmap of `sentence`; seconds from the click to that frame."""
    page = session.page
    try:
        clicks = await page.evaluate("() => window.__bench.clicks.length")
        await page.get_by_role("button", name="Translate").first.click(timeout=timeout_s * 1000)
        shown = await session.wait_heatmap(sentence, timeout_s)
        clicked = await page.evaluate("(n) => window.__bench.clicks[n] ?? null", clicks)
        result = await session.check(sentence, references)
        return {**result, "seconds": round((shown - clicked) / 1000, 3) if clicked is not None else None}
    except Exception as err:
        return {"session": session.index, "sentence": sentence, "status": "error", "error": _short(err)}


def _short(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}"


async def drive(args: argparse.Namespace, url: str, model: str, pool: list[str], references: dict[str, str],
                result: dict[str, Any], deadline: float) -> None:
    from playwright.async_api import async_playwright

    def link(sentence: str) -> str:
        return f"{url}/?" + urlencode({"sentence": sentence, "model": model, "beam": str(args.beam),
                                       "alpha": f"{args.alpha:g}", "view": "heatmap"})

    sentence_of = iter(pool)
    opened: list[tuple[Session, dict[str, Any]]] = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(args.chromium), args=CHROMIUM_ARGS,
                                                   headless=True)
        result["chromium"] = browser.version
        try:
            first = [next(sentence_of) for _ in range(args.sessions)]
            opened = await asyncio.gather(*(open_session(browser, i, link(s), s, references, OPEN_TIMEOUT_S)
                                            for i, s in enumerate(first)))
            sessions = [s for s, r in opened if r["status"] != "error"]
            result["open"] = [r for _, r in opened]
            result["rounds"] = []
            for number in range(args.rounds):
                if time.monotonic() + STEP_TIMEOUT_S > deadline:
                    result["incomplete"].append(f"stopped after {number} of {args.rounds} rounds (budget)")
                    break
                mine = {s.index: next(sentence_of) for s in sessions}
                typed = await asyncio.gather(*(type_sentence(s, mine[s.index], STEP_TIMEOUT_S) for s in sessions))
                failed = [r for r in typed if r is not None]
                ready = [s for s, r in zip(sessions, typed) if r is None]
                started = time.monotonic()  # every session has typed: all press Translate together
                requests = await asyncio.gather(*(press_translate(s, mine[s.index], references, STEP_TIMEOUT_S)
                                                  for s in ready))
                result["rounds"].append({"round": number + 1, "wall_s": round(time.monotonic() - started, 2),
                                         "requests": failed + list(requests)})
        finally:
            for session, _ in opened:
                with contextlib.suppress(Exception):
                    await session.context.close()
            await browser.close()


# --- report ------------------------------------------------------------------------------------------------------
def percentiles(values: list[float]) -> dict[str, Any] | None:
    if not values:
        return None
    if len(values) == 1:
        return {"p50": values[0], "p95": values[0], "max": values[0], "n": 1}
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": round(cuts[49], 3), "p95": round(cuts[94], 3), "max": round(max(values), 3), "n": len(values)}


def summarise(result: dict[str, Any]) -> None:
    requests = [r for rnd in result.get("rounds", []) for r in rnd["requests"]]
    every = result.get("open", []) + requests
    counts: dict[str, int] = {}
    for r in every:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    result["counts"] = counts
    result["requests"] = len(every)
    result["translate"] = percentiles([r["seconds"] for r in requests if r.get("seconds") is not None])
    result["first_page"] = percentiles([r["seconds"] for r in result.get("open", []) if r.get("seconds")])
    result["cross_talk"] = counts.get("cross-talk", 0)
    result["failures"] = (counts.get("error", 0) + counts.get("missing", 0) + result["cross_talk"]
                          + result.get("server_tracebacks", 0) + (0 if result.get("server_alive", True) else 1))


def table(r: dict[str, Any]) -> str:
    t, first, mem = r.get("translate"), r.get("first_page"), r.get("memory", {})
    lines = [f"bench_load: {r['sessions']} browser sessions x {r['rounds_asked']} rounds against one streamlit "
             f"server (headless Chromium {r.get('chromium', '?')}, Python {r['python']}, "
             f"{describe_machine(r['machine'])})",
             f"model {r['model']}, beam {r['beam']}, alpha {r['alpha']:g}; a new sentence for every request, e.g. "
             f"{r['example']!r}",
             f"other processes kept {r.get('other_cpus', '?')} of {os.cpu_count()} CPUs busy (load average "
             f"{r['load_before']} before); {r.get('elapsed_s', '?')} s in all", ""]
    if first:
        lines.append(f"open {r['sessions']} sessions at once, URL -> heatmap: p50 {first['p50']:.2f} s, "
                     f"p95 {first['p95']:.2f} s, max {first['max']:.2f} s")
    for rnd in r.get("rounds", []):
        secs = [q["seconds"] for q in rnd["requests"] if q.get("seconds") is not None]
        lines.append(f"round {rnd['round']}: {len(rnd['requests'])} Translate presses at once, all done in "
                     f"{rnd['wall_s']:.1f} s" + (f"; slowest {max(secs):.2f} s" if secs else ""))
    if t:
        lines.append(f"Translate -> own heatmap (click to frame), {t['n']} requests: p50 {t['p50']:.2f} s, "
                     f"p95 {t['p95']:.2f} s, max {t['max']:.2f} s")
    lines += [f"requests checked: {r['requests']} ({', '.join(f'{k} {v}' for k, v in sorted(r['counts'].items()))})",
              f"cross-talk: {r['cross_talk']}; server tracebacks: {r.get('server_tracebacks', '?')}; server alive "
              f"after the run: {r.get('server_alive', '?')}",
              f"server RSS: peak {mem.get('peak_mb', 0):.0f} MB over {mem.get('samples', 0)} samples, "
              f"{mem.get('last_mb', 0):.0f} MB at the end (peak RSS of the server process itself "
              f"{mem.get('root_peak_mb', 0):.0f} MB)",
              f"FAILURES: {r['failures']}" if r["failures"] else "no failures"]
    for note in r.get("incomplete", []):
        lines.append(f"INCOMPLETE: {note}")
    for q in [q for q in r.get("open", []) + [q for rnd in r.get("rounds", []) for q in rnd["requests"]]
              if q["status"] != "ok"][:10]:
        lines.append(f"  session {q['session']}: {q['status']}: {q.get('error') or q.get('translation')!r} "
                     f"for {q['sentence']!r}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # tear down (server, browser) on kill, too
    try:
        import playwright  # noqa: F401
    except ImportError as err:
        print(f"bench_load: needs playwright (pip install -e '.[test]'): {err}", file=sys.stderr)
        return 2
    if not args.chromium.exists():
        print(f"bench_load: no Chromium at {args.chromium} (apt-get install chromium)", file=sys.stderr)
        return 2
    started = time.monotonic()
    pool = sentences(args.sessions * (1 + args.rounds), args.seed)
    result: dict[str, Any] = {"benchmark": "bench_load", "sessions": args.sessions, "rounds_asked": args.rounds,
                              "beam": args.beam, "alpha": args.alpha, "seed": args.seed, "example": pool[0],
                              "python": platform.python_version(), "machine": machine(), "load_before": load_average(),
                              "incomplete": []}
    with contextlib.ExitStack() as stack:
        log_path = args.server_log or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench_load-"))
                                           ) / "streamlit.log"
        try:
            directory = model_dir(args)
            result["model"] = directory.name
            references = reference_translations(directory, pool, args.beam, args.alpha)
            url, server = stack.enter_context(streamlit_server(args.model_assets, log_path))
            sampler = MemorySampler(server.pid)
            sampler.start()
            cpu = OtherCpu()
            asyncio.run(drive(args, url, directory.name, pool, references, result, started + args.budget_s))
            sampler.done.set()
            result["memory"] = {"peak_mb": sampler.peak_mb, "last_mb": sampler.last_mb, "samples": sampler.samples,
                                "root_peak_mb": tree_memory(server.pid)["root_peak_mb"]}
            result["other_cpus"] = cpu.cores()
            result["server_alive"] = server.poll() is None and _health(url)
            result["server_tracebacks"] = len(re.findall(r"^Traceback", _tail(log_path, 10**7), flags=re.M))
        except BenchError as err:
            print(f"bench_load: {err}\n--- server log (tail) ---\n{_tail(log_path)}", file=sys.stderr)
            return 2
    result["elapsed_s"] = round(time.monotonic() - started, 1)
    summarise(result)
    emit(table(result), result, args.json)
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
