#!/usr/bin/env python
"""How long each page takes to settle in Chromium on a 4,096-token trace (issue 53: within 5 s on 2 cores).

The walk of ``tests/browser/test_browser_long_prompt.py`` (`support.long_walk`: its models folder, prompt, visits
and `settled_after`): `streamlit run app` on a tiny imported Llama with room for 4,608 positions (random weights, CPU,
fp32) and Debian's Chromium (headless, through Playwright). The first visit traces the prompt and is timed apart;
then every page that runs with a language model open, and each Explore view, is opened on the same prompt (the trace
cached), ``--rounds`` times: each page's seconds (the first its first visit, which may load a model or compute what
later visits find cached), their median and the slowest; a page is within ``--limit`` when every visit was. A visit
settles when the app's script has stopped running, no element waits for its code and Plotly has drawn every figure,
with the page unchanged for half a second (not counted). Results: ``benchmarks/results/bench_long_views.json``
(``--out`` elsewhere; none with ``--quick``).

    python benchmarks/bench_long_views.py [--tokens 4096] [--rounds 3] [--limit 5]
    python benchmarks/bench_long_views.py --quick --json      # smoke test: a 600-token prompt, three visits
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import REPO, emit, load_average, write_results

sys.path[:0] = [str(REPO), str(REPO / "tests")]  # the walk's support code (tests/support)

from support.browser import CHROMIUM, CHROMIUM_ARGS, streamlit_server  # noqa: E402
from support.long_lm import POSITIONS  # noqa: E402
from support.long_walk import TRACE_VISIT, language_model_pages, long_models, visit, visits  # noqa: E402

LIMIT_S = 5.0
QUICK_PAGES = ("explore", "positional")
QUICK_VIEWS = ("model",)


def walk(url: str, prompt: str, pages: dict[str, str], views: tuple[str, ...], rounds: int) -> dict[str, Any]:
    """Each visit's seconds to settle over `rounds` rounds (the tracing visit once), its note and any problem."""
    from playwright.sync_api import sync_playwright

    found: dict[str, Any] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        for round_ in range(rounds):
            for name, path, extra in visits(pages, views):
                if name == TRACE_VISIT and round_:
                    continue
                seconds, note, problem = visit(page, url, prompt, path, extra)
                entry = found.setdefault(name, {"path": path, "query": extra, "seconds": []})
                entry["seconds"].append(round(seconds, 2))
                entry |= {"note": note} if note else {}
                entry |= {"problem": str(problem)} if problem is not None else {}
                print(f"  {name}: {seconds:.2f} s" + (f" ({note})" if note else "")
                      + (f" PROBLEM: {problem}" if problem is not None else ""), file=sys.stderr)
        browser.close()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096, help="the prompt, in tokens (default 4,096)")
    parser.add_argument("--rounds", type=int, default=3, help="visits of each page (default 3)")
    parser.add_argument("--limit", type=float, default=LIMIT_S, help="seconds a page may take (default 5)")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke test: a 600-token prompt, pages {', '.join(QUICK_PAGES)} and Explore's "
                             f"{', '.join(QUICK_VIEWS)} view, one round")
    parser.add_argument("--json", action="store_true", help="the results as JSON on stdout")
    parser.add_argument("--out", type=Path, default=None, help="results file (default: benchmarks/results/"
                        "bench_long_views.json; none with --quick)")
    args = parser.parse_args(argv)
    pages, views = language_model_pages(), ("model", "head", "focus")
    if args.quick:
        args.tokens, args.rounds = 600, 1
        pages, views = {key: pages[key] for key in QUICK_PAGES}, QUICK_VIEWS
    if not 2 <= args.tokens <= POSITIONS - 101 or args.rounds < 1 or args.limit <= 0:
        parser.error(f"--tokens must be from 2 to {POSITIONS - 101} (the model's {POSITIONS} positions hold the "
                     "prompt, up to 100 tokens more, and a new token), --rounds at least 1 and --limit above 0")
    if not CHROMIUM.exists():
        parser.error(f"needs Debian's Chromium at {CHROMIUM} (apt-get install chromium)")
    found: dict[str, Any] = {"model": "tiny imported Llama (tests/support/long_lm.py), random weights",
                             "device": "cpu", "dtype": "fp32", "tokens": args.tokens, "rounds": args.rounds,
                             "limit_s": args.limit, "quick": args.quick, "load_average_before": load_average()}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        (scratch / "models").mkdir()
        (scratch / "hf").mkdir()
        with contextlib.redirect_stdout(sys.stderr):  # the import's messages: stdout is the results' with --json
            prompt = long_models(scratch / "models", scratch / "hf", args.tokens)
        with streamlit_server(scratch / "models", scratch / "streamlit.log") as url:
            timed = walk(url, prompt, pages, views, args.rounds)
    problems = {name: e["problem"] for name, e in timed.items() if "problem" in e}
    trace = timed.pop(TRACE_VISIT)
    for entry in timed.values():
        entry["median_s"] = round(statistics.median(entry["seconds"]), 2)
        entry["max_s"] = max(entry["seconds"])
        entry["within_limit"] = entry["max_s"] <= args.limit  # every visit, the page's first included
    found |= {"trace_visit_s": trace["seconds"][0], "pages": timed,
              "all_within_limit": all(e["within_limit"] for e in timed.values()),
              "slowest": max(timed, key=lambda name: timed[name]["max_s"]),
              "problems": problems,
              "wall_s": round(time.perf_counter() - start, 1), "load_average_after": load_average()}
    found["slowest_s"] = timed[found["slowest"]]["max_s"]
    if args.out is not None or not args.quick:
        write_results(args.out or REPO / "benchmarks" / "results" / "bench_long_views.json", found)
    lines = [f"{args.tokens}-token prompt, {args.rounds} round(s): median and slowest visit; tracing visit "
             f"{found['trace_visit_s']} s"]
    lines += [f"  {name:<16} {e['median_s']:6.2f} s {e['max_s']:6.2f} s  "
              f"{'ok' if e['within_limit'] else 'OVER ' + str(args.limit)}"
              + (f"  ({e['note']})" if "note" in e else "") for name, e in timed.items()]
    emit("\n".join(lines), found, args.json)
    return 1 if found["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
