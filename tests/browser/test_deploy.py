"""Issue 37: two explorer replicas behind nginx on loopback (`deploy/replicas.py`), driven by Chromium: every session
sees its own sentence, a download reaches the replica that holds it (the sticky path), a shared link works in a fresh
browser, and with one replica killed the other serves every new session. Also the start script's one-line refusals."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest
from support.app import ROOT, TINY_MODEL, build_tiny_assets
from support.browser import CHROMIUM, FIRST_LOAD_S, STEP_S, free_port, free_ports, shot

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
SCRIPT = ROOT / "deploy" / "replicas.py"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium"),
    pytest.mark.skipif(NGINX is None, reason="needs nginx (Debian's nginx-light; .ci/run installs it)"),
]


@pytest.fixture(scope="module")
def start_script():
    """deploy/replicas.py as a module: its `main` is what ``python deploy/replicas.py ARGS`` runs and exits with."""
    spec = importlib.util.spec_from_file_location("replicas_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def replicas(capsys, start_script, *args: str) -> tuple[int, str]:
    """The start script's exit status and stderr on ARGS (run in this process: no interpreter start per case)."""
    code = start_script.main(list(args))
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    """Two replicas of the app on the tiny model and nginx in front, started as documented; yields (url, state)."""
    assets = build_tiny_assets(tmp_path_factory.mktemp("deploy-assets"))
    workdir = tmp_path_factory.mktemp("deploy")
    port, first, _ = free_ports(3)  # the two replicas take first and first + 1
    env = {**os.environ, "VIZ_MODEL_ASSETS": ""}
    log = (workdir / "replicas.out").open("w")
    process = subprocess.Popen([sys.executable, str(SCRIPT), "--nginx", NGINX, "--replicas", "2", "--port", str(port),
                                "--first-port", str(first), "--models", str(assets), "--workdir", str(workdir)],
                               env=env, stdout=log, stderr=subprocess.STDOUT)
    state_file = workdir / "replicas.json"
    try:
        deadline = time.monotonic() + FIRST_LOAD_S
        while not state_file.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"replicas.py did not start: {(workdir / 'replicas.out').read_text()[-3000:]}")
            time.sleep(0.5)
        url = f"http://127.0.0.1:{port}"
        while True:  # nginx answers once its workers run
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.3)
        yield url, json.loads(state_file.read_text())
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
    # Ctrl-C / SIGTERM stops every replica and nginx: nothing is left listening
    state = json.loads(state_file.read_text())
    assert all(not alive(pid) for pid in [state["proxy"]["pid"], *[r["pid"] for r in state["replicas"]]])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/status").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


def open_session(browser, url: str, sentence: str):
    """A fresh browser (its own cookies: a new sticky session) on the explore page with `sentence`."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    page.goto(f"{url}/?" + urlencode({"sentence": sentence, "beam": "1", "model": TINY_MODEL}))
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=FIRST_LOAD_S * 1000)
    return context, page


def replica_of(context, url: str) -> str:
    """The replica (host:port) nginx routes this browser's requests to."""
    return context.request.get(f"{url}/_stcore/health").headers["x-viz-replica"]


def shown_sentence(page) -> str:
    return page.get_by_label("Sentence to translate (English)").input_value()


def downloaded_trace(page) -> dict:
    page.get_by_role("button", name="Download trace").click()
    with page.expect_download(timeout=STEP_S * 1000) as download:
        page.get_by_role("button", name="Trace as JSON").click()
    data = json.loads(Path(download.value.path()).read_text(encoding="utf-8"))
    page.keyboard.press("Escape")
    return data


SENTENCES = ["A man reads a book.", "Two dogs play in the snow.", "A girl rides a red bike.", "The sun is hot.",
             "A cat sleeps on a chair.", "Three boys run fast.", "A woman sings a song.", "An old man walks."]


@pytest.mark.slow
def test_sessions_stick_to_their_replica_and_survive_one_replica_dying(deployment, browser):
    url, state = deployment
    ports = {f"127.0.0.1:{r['port']}": r for r in state["replicas"]}
    sessions: dict[str, tuple] = {}  # one browser session on each replica
    for sentence in SENTENCES:
        context, page = open_session(browser, url, sentence)
        where = replica_of(context, url)
        assert where in ports, where
        if where in sessions:
            context.close()
            continue
        sessions[where] = (context, page, sentence)
        if len(sessions) == len(ports):
            break
    assert len(sessions) == 2, "eight new browsers all went to one replica: the proxy does not spread sessions"
    for where, (context, page, sentence) in sessions.items():
        shot(page, f"deploy-{ports[where]['port'] - state['replicas'][0]['port'] + 1}.png")
        assert shown_sentence(page) == sentence  # no cross-talk: each sees its own sentence
        assert downloaded_trace(page)["source_text"] == sentence  # the download came from the session's replica
        assert replica_of(context, url) == where  # still the same replica (sticky)

    # a shared link opened in a fresh browser works on whichever replica answers it
    first_context, first_page, first_sentence = next(iter(sessions.values()))
    link = first_page.url
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(link)
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=FIRST_LOAD_S * 1000)
    assert shown_sentence(page) == first_sentence
    context.close()

    # one replica killed: every new session is served by the other
    victim, (victim_context, _, _) = next(iter(sessions.items()))
    os.kill(ports[victim]["pid"], signal.SIGKILL)
    for sentence in SENTENCES[:4]:
        context, page = open_session(browser, url, sentence)
        assert shown_sentence(page) == sentence
        assert replica_of(context, url) != victim
        context.close()
    # the killed replica's own browser reconnects to the survivor on its next page load
    page = victim_context.pages[0]
    page.reload()
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=FIRST_LOAD_S * 1000)
    assert replica_of(victim_context, url) != victim
    for context, _, _ in sessions.values():
        context.close()


def test_the_start_script_refuses_in_one_line(tmp_path, capsys, start_script):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        cases = [(["--replicas", "0"], "--replicas must be from 1 to 32"),
                 (["--port", str(busy), "--check"], f"--port: port {busy} on 127.0.0.1 is taken"),
                 (["--port", str(free_port()), "--first-port", str(busy), "--check"],
                  f"replica 1: port {busy} on 127.0.0.1 is taken"),
                 (["--models", str(tmp_path / "none"), "--port", str(free_port()), "--first-port", str(free_port()),
                  "--check"], "no such folder"),
                 (["--port", "8500", "--first-port", "8500", "--check"], "also a replica's port")]
        for args, words in cases:
            code, stderr = replicas(capsys, start_script, "--nginx", NGINX, *args)
            assert code == 1 and words in stderr, (args, stderr)
            assert len(stderr.strip().splitlines()) == 1
    code, stderr = replicas(capsys, start_script, "--nginx", "no-such-nginx", "--check")
    assert code == 1 and "no-such-nginx not found" in stderr
    port = free_ports(4)[0]  # the replicas default to the three ports after --port
    code, stderr = replicas(capsys, start_script, "--nginx", NGINX, "--port", str(port), "--replicas", "3", "--check",
                            "--workdir", str(tmp_path / "w"))
    assert code == 0, stderr
    config = (tmp_path / "w" / "explorer.conf").read_text()
    assert config.count("server 127.0.0.1:") == 3 and "hash $viz_route consistent" in config
    assert "${" not in config
