"""Headless Chromium: a Streamlit server on the tiny model, the browser and page fixtures (import them into a test
module to use them), and waiting helpers."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.app import ROOT, build_tiny_assets

CHROMIUM = Path("/usr/bin/chromium")


CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


ARTIFACTS = ROOT / "test-artifacts"


FIRST_LOAD_S = 180  # a cold server imports torch and decodes 47 greedy steps on a busy 2-core CI machine


STEP_S = 90


QUIET_S = 0.5  # the page unchanged and idle this long: its run is over (a page may rerun itself)


POLL_S = 0.1


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def worker_ports() -> range:
    """This process's share of the loopback ports 20000-32767: one share per pytest-xdist worker (the whole range
    outside xdist), so that two workers never pick the same port for their servers."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    span = (32768 - 20000) // workers
    return range(20000 + index * span, 20000 + (index + 1) * span)


def free_ports(count: int) -> list[int]:
    """`count` consecutive free loopback ports of `worker_ports`, below Linux's ephemeral range (32768+), where the
    kernel does not hand ports to outgoing connections meanwhile: a port the kernel chose (bind to 0) or its
    neighbour may be taken later."""
    rng = random.Random()
    ports = worker_ports()
    for _ in range(1000):
        first = rng.randrange(ports.start, ports.stop - count)
        if all(_bindable(port) for port in range(first, first + count)):
            return list(range(first, first + count))
    raise RuntimeError(f"no {count} consecutive free ports found between {ports.start} and {ports.stop - 1}")


def free_port() -> int:
    return free_ports(1)[0]


@contextlib.contextmanager
def streamlit_server(assets: Path | None, log_path: Path):
    """Run `streamlit run app` (as a user would, from the repository root) on a free port; yield its URL."""
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("VIZ_MODEL_ASSETS", None)
    if assets is not None:
        env["VIZ_MODEL_ASSETS"] = str(assets)
    command = [sys.executable, "-m", "streamlit", "run", "app", "--server.headless", "true",
               "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none"]
    with log_path.open("w") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(f"streamlit exited with {process.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"streamlit did not answer on {url}:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """The app on the tiny model, started once per worker for every module that uses it."""
    assets = build_tiny_assets(tmp_path_factory.mktemp("browser-assets"))
    with streamlit_server(assets, tmp_path_factory.mktemp("server") / "streamlit.log") as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium per worker, shared by every browser test module (each test gets a context of its own)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A fresh page that records every dialog (alert/confirm/prompt); the test fails if one opened. It asks for
    reduced motion: Streamlit's running and loading animations stop, which saves Chromium's GPU process about a
    third of its CPU."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True,
                                  reduced_motion="reduce")
    page = context.new_page()
    page.dialogs = []

    def on_dialog(dialog):
        page.dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    yield page
    dialogs = page.dialogs
    context.close()
    assert dialogs == [], f"a dialog opened: {dialogs}"


# --- helpers -----------------------------------------------------------------------------------------------------
def wait_title(page, text: str, timeout_s: float = STEP_S) -> None:
    page.wait_for_function(
        "(t) => [...document.querySelectorAll('.js-plotly-plot .gtitle')].some(e => e.textContent.includes(t))",
        arg=text, timeout=timeout_s * 1000)


def switch_view(page, name: str, title: str, tries: int = 4) -> None:
    """Click a view button until its figure shows: a click that lands while Streamlit is rerunning can be lost."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(tries - 1):
        page.get_by_role("radio", name=name).click()
        try:
            wait_title(page, title, STEP_S / tries)
            return
        except PlaywrightTimeout:
            continue
    page.get_by_role("radio", name=name).click()
    wait_title(page, title)  # the last try fails the test if the view never shows


def wait_url(page, fragment: str) -> None:
    page.wait_for_function("(f) => decodeURIComponent(location.search.replaceAll('+', ' ')).includes(f)",
                           arg=fragment, timeout=STEP_S * 1000)


def plot_area(page, index: int = 0) -> dict:
    plot = page.locator(".js-plotly-plot").nth(index)
    plot.scroll_into_view_if_needed()
    time.sleep(0.3)
    return plot.locator(".nsewdrag").first.bounding_box()


def tick_labels(page, axis: str, index: int = 0) -> list[str]:
    return page.evaluate(
        "([a, i]) => [...document.querySelectorAll('.js-plotly-plot')[i].querySelectorAll(`.${a}tick text`)]"
        ".map(e => e.textContent)", [axis, index])


def hover_text(page) -> str:
    page.wait_for_selector(".hoverlayer .hovertext", timeout=10_000)
    return page.locator(".hoverlayer .hovertext").first.text_content()


def pick(page, label: str, option: str) -> None:
    page.locator('[data-testid="stSelectbox"]').filter(has_text=label).first.click()
    page.get_by_role("option", name=option, exact=True).click()


def shot(page, name: str) -> None:
    """Screenshot the whole app (Streamlit scrolls inside its main container, so grow the viewport to fit it)."""
    ARTIFACTS.mkdir(exist_ok=True)
    size = page.viewport_size
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]')?.scrollHeight || 0")
    page.set_viewport_size({"width": size["width"], "height": max(size["height"], min(int(height), 6000))})
    next_frame(page)
    page.screenshot(path=str(ARTIFACTS / name))
    page.set_viewport_size(size)
    next_frame(page)


@contextlib.contextmanager
def shot_on_failure(page, name: str) -> Iterator[None]:
    """Run a visit's checks; where one fails, screenshot the page as `name` (`shot`) before the failure goes on. A
    walk's passing visits take none: a full-height screenshot costs Chromium about 0.3 CPU-s."""
    try:
        yield
    except Exception:
        shot(page, name)
        raise


def next_frame(page) -> None:
    """Return once the browser has laid out and painted a frame after the last change (two animation frames)."""
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")


# True once the app has been idle, and its page unchanged, for `quiet` ms (the quiet spell's length then), polled in
# the page. Idle: the app's script has run and stopped (its run state "notRunning", no status widget), no element
# waits for its code (a skeleton) and Plotly has drawn every figure; unchanged: the count of the main area's elements
# and each figure's size, so that a figure still being laid out counts as a change. `token` starts a fresh watch.
QUIET_JS = """([token, quiet]) => {
  const app = document.querySelector('[data-testid="stApp"]');
  const charts = document.querySelectorAll('[data-testid="stPlotlyChart"]').length;
  const plots = [...document.querySelectorAll('.js-plotly-plot')].filter((p) => p.querySelector('svg.main-svg'));
  const idle = app?.dataset.testScriptState === 'notRunning' && plots.length >= charts
    && !document.querySelector('[data-testid="stStatusWidget"], [data-testid="stSkeleton"]');
  const state = idle ? `${document.querySelectorAll('[data-testid="stMain"] *').length}|`
    + plots.map((p) => { const b = p.getBoundingClientRect(); return `${b.width}x${b.height}`; }).join(',') : null;
  const watch = window.__vizSettle?.token === token ? window.__vizSettle : (window.__vizSettle = {token});
  const now = performance.now();
  if (state === null || state !== watch.state) Object.assign(watch, {state, since: now});
  return state !== null && now - watch.since >= quiet && now - watch.since;
}"""
BUSY_JS = """() => ({state: document.querySelector('[data-testid="stApp"]')?.dataset.testScriptState,
  status: !!document.querySelector('[data-testid="stStatusWidget"]'),
  skeletons: document.querySelectorAll('[data-testid="stSkeleton"]').length,
  charts: document.querySelectorAll('[data-testid="stPlotlyChart"]').length,
  plots: document.querySelectorAll('.js-plotly-plot').length})"""


def settled_after(page, started: float, limit_s: float = FIRST_LOAD_S) -> float:
    """Seconds from `started` until the page is drawn: idle and unchanged for `QUIET_S` (`QUIET_JS`, polled in the
    page every `POLL_S`; a page that reruns itself counts until its last run is drawn), the quiet spell not counted;
    raises TimeoutError, saying what it still waits for, after `limit_s`."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.wait_for_selector('[data-testid="stMain"]', timeout=limit_s * 1000)
    left_ms = max(started + limit_s - time.monotonic(), 0.001) * 1000
    try:
        quiet_ms = page.wait_for_function(QUIET_JS, arg=[random.random(), QUIET_S * 1000], polling=POLL_S * 1000,
                                          timeout=left_ms).json_value()
    except PlaywrightTimeout:
        raise TimeoutError(f"{page.url} did not finish running in {limit_s:.0f} s: {page.evaluate(BUSY_JS)}") from None
    return time.monotonic() - started - quiet_ms / 1000


def settle(page) -> None:
    """Wait until Streamlit has finished running the page and drawn it (`settled_after`)."""
    settled_after(page, time.monotonic())


def main_text(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def navigate(page, path: str) -> float:
    """Open the page at URL path `path` ("" for the page the app opens on) by a click on its link in the sidebar's
    navigation: Streamlit runs it in the same session and page load (the shared settings stay in session state and
    the link; the query of the link is not read again), far cheaper for Chromium than a `page.goto`, which reboots
    Streamlit's frontend; returns the seconds from the click until the page is drawn (`settled_after`)."""
    started = time.monotonic()
    page.locator(f'[data-testid="stSidebarNav"] a[href$="/{path}"]').click()
    page.wait_for_function("(p) => location.pathname === p", arg=f"/{path}", timeout=STEP_S * 1000)
    return settled_after(page, started)


def show_view(page, view: str) -> float:
    """Show Explore's `view` (a key of the app's VIEWS) by a click on its view picker; returns the seconds from the
    click until it is drawn."""
    from app.shared_settings import VIEWS

    started = time.monotonic()
    page.get_by_role("radio", name=VIEWS[view]).click()
    wait_url(page, f"view={view}")
    return settled_after(page, started)


def walk(page, link: str, paths: dict[str, str], views: tuple[str, ...] = ()) -> Iterator[tuple[str, str]]:
    """Open `link` (a URL on the first page of `paths`, page key -> URL path) with one page load, then Explore's
    `views` (``view``; the link's page must be Explore) by the view picker and the other pages of `paths` by the
    sidebar's navigation (`navigate`) in that load; yields (page key, visit name: the key, ``explore-VIEW`` for a
    view) once each is drawn, for the caller to check."""
    (first, *others) = paths
    yield from open_each(page, [(link, first, first)])
    for view in views:
        show_view(page, view)
        yield first, f"{first}-{view}"
    for key in others:
        navigate(page, paths[key])
        yield key, key


def open_each(page, links: list[tuple[str, str, str]]) -> Iterator[tuple[str, str]]:
    """Open each (URL, page key, visit name) of `links` with a page load of its own (a fresh session, which reads
    the whole link); yields (page key, visit name) once each is drawn (`settle`)."""
    for link, key, name in links:
        page.goto(link)
        settle(page)
        yield key, name
