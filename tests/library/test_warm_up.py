"""`viz-model app` warms its server up (issue 62): once the server answers, it runs the default page once through
Streamlit's script health check, and says in one line whether that run ended well. Against a stand-in server."""

from __future__ import annotations

import contextlib
import http.server
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from viz_model.cli import launch, warm_up
from viz_model.cli.main import main
from viz_model.hf.hub_cache import HUB_ENV


class StandIn(http.server.BaseHTTPRequestHandler):
    """Answers the health check, and the script run with `run_answer` (status, text)."""

    run_answer = (200, "ok")
    asked: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.asked.append(self.path)
        status, text = (200, "ok") if self.path == warm_up.HEALTH else self.run_answer
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def stand_in(status: int = 200, text: str = "ok") -> Iterator[str]:
    handler = type("Handler", (StandIn,), {"run_answer": (status, text), "asked": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_server_is_reached_by_loopback_unless_an_address_is_given():
    assert warm_up.local_url("", 8501) == "http://127.0.0.1:8501"
    assert warm_up.local_url("0.0.0.0", 80) == "http://127.0.0.1:80"
    assert warm_up.local_url("::", 8501) == "http://[::1]:8501"
    assert warm_up.local_url("10.0.0.7", 8600) == "http://10.0.0.7:8600"


def test_the_warm_up_runs_the_script_once_the_server_answers(capsys):
    with stand_in() as url:
        seconds = warm_up.warm_up(url)
        warm_up.report_warm_up(url)
    assert seconds >= 0
    assert capsys.readouterr().err.startswith(warm_up.READY + " (")


def test_a_run_that_fails_or_a_server_that_never_answers_is_said_in_one_line(capsys):
    with stand_in(503, "error") as url, pytest.raises(RuntimeError, match="answered 503: error"):
        warm_up.warm_up(url)
    with pytest.raises(RuntimeError, match="no answer from"):
        warm_up.warm_up(f"http://127.0.0.1:{free_port()}", start_s=0.5)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="no answer from"):  # a server that died: no wait for the minutes
        warm_up.warm_up(f"http://127.0.0.1:{free_port()}", start_s=60, server_pid=gone.pid)
    assert time.monotonic() - started < 10
    with stand_in(503, "timeout") as url:
        warm_up.report_warm_up(url)
    err = capsys.readouterr().err
    assert err.startswith(warm_up.NOT_WARM) and "timeout" in err and len(err.strip().splitlines()) == 1


def test_the_background_warm_up_outlives_nothing_and_reports(capfd):
    with stand_in() as url:
        warm_up.warm_up_in_background(url)  # on POSIX a detached grandchild: this process only reaps the child
        deadline = time.monotonic() + 30
        err = ""
        while warm_up.READY not in err and time.monotonic() < deadline:
            time.sleep(0.1)
            err += capfd.readouterr().err
    assert warm_up.READY in err


@pytest.mark.parametrize("flag", [[], ["--no-warm-up"]])
def test_viz_model_app_starts_the_server_with_its_warm_up_unless_told_not_to(monkeypatch, flag):
    started, warmed = [], []

    def execve(path, command, env):  # the server is not started: its command is kept
        started.append(command)
        raise SystemExit(0)

    monkeypatch.setattr(launch.os, "execve", execve)
    monkeypatch.setattr(launch.subprocess, "call", lambda command, env: execve(None, command, env))
    monkeypatch.setattr(launch, "warm_up_in_background", warmed.append)
    port = free_port()
    with pytest.raises(SystemExit):
        main(["app", "--headless", "--address", "127.0.0.1", "--port", str(port), *flag])
    command = started[0]
    options = " ".join(warm_up.STREAMLIT_OPTIONS)
    assert "--server.fileWatcherType none" in " ".join(command)  # a served explorer watches no files, either way
    if flag:
        assert warmed == [] and options not in " ".join(command)
    else:
        assert warmed == [f"http://127.0.0.1:{port}"] and options in " ".join(command)


@pytest.mark.parametrize("flag", [[], ["--no-hub"]])
def test_viz_model_app_tells_the_server_whether_it_may_fetch_from_the_hub(monkeypatch, flag):
    envs = []

    def execve(path, command, env):  # the server is not started: its environment is kept
        envs.append(env)
        raise SystemExit(0)

    monkeypatch.setattr(launch.os, "execve", execve)
    monkeypatch.setattr(launch.subprocess, "call", lambda command, env: execve(None, command, env))
    monkeypatch.delenv(HUB_ENV, raising=False)
    with pytest.raises(SystemExit):
        main(["app", "--headless", "--no-warm-up", "--address", "127.0.0.1", "--port", str(free_port()), *flag])
    assert envs[0].get(HUB_ENV) == ("off" if flag else None)
