"""The explorer's warm-up: once its server answers, one run of the app's default page through Streamlit's script
health check, so the first visitor finds torch and the pages imported, the default model loaded and its trace run."""

from __future__ import annotations

import os
import sys
import threading
import time
import urllib.error
import urllib.request

HEALTH = "/_stcore/health"
SCRIPT_RUN = "/_stcore/script-health-check"  # runs the app's script once in a session of its own (no browser)
STREAMLIT_OPTIONS = ["--server.scriptHealthCheckEnabled", "true"]  # what the server needs for SCRIPT_RUN
READY = "viz-model: the explorer is warm"  # the line written once the run is over (bench_app waits for it)
NOT_WARM = "viz-model: the explorer's warm-up run did not finish"
START_S = 300.0  # how long the server may take to answer
RUN_S = 600.0  # and the run (Streamlit itself gives up after 60 s and says "timeout")


def local_url(address: str, port: int) -> str:
    """The server's URL as this machine reaches it: a server on every address (or 0.0.0.0, ::) by loopback."""
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(address, address)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _get(url: str, timeout: float) -> tuple[int, str]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
    try:
        with opener.open(url, timeout=timeout) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


def _alive(pid: int | None) -> bool:
    """Whether process `pid` still runs (None: not known, taken as running)."""
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def wait_until_up(url: str, timeout_s: float = START_S, server_pid: int | None = None) -> bool:
    """Whether the server at `url` answered its health check within `timeout_s` (False at once when its process,
    `server_pid`, is gone)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _alive(server_pid):
        try:
            if _get(url + HEALTH, 2)[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(0.25)
    return False


def warm_up(url: str, start_s: float = START_S, run_s: float = RUN_S, server_pid: int | None = None) -> float:
    """Wait for the server at `url` (process `server_pid`, when known), then have it run the app's script once;
    returns the run's seconds. Raises RuntimeError (saying why) when the server does not answer or the run does not
    end well."""
    if not wait_until_up(url, start_s, server_pid):
        raise RuntimeError(f"no answer from {url} within {start_s:.0f} s")
    started = time.monotonic()
    try:
        status, text = _get(url + SCRIPT_RUN, run_s)
    except OSError as err:
        raise RuntimeError(f"the run broke off ({err})") from None
    if status != 200:
        raise RuntimeError(f"the server answered {status}: {text.strip()[:200] or 'no reason given'}")
    return time.monotonic() - started


def report_warm_up(url: str, server_pid: int | None = None) -> None:
    """`warm_up`, then one line on stderr: READY with the seconds, or NOT_WARM with the reason."""
    try:
        print(f"{READY} ({warm_up(url, server_pid=server_pid):.1f} s)", file=sys.stderr, flush=True)
    except RuntimeError as err:
        print(f"{NOT_WARM}: {err}; the first visitor's page starts it", file=sys.stderr, flush=True)


def warm_up_in_background(url: str) -> None:
    """`report_warm_up` beside the server this process is about to become (POSIX: a detached grandchild, which
    outlives the exec and leaves no zombie; elsewhere a thread of this process, which waits for the server)."""
    if os.name != "posix":
        threading.Thread(target=report_warm_up, args=(url,), daemon=True).start()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    server = os.getpid()  # the server's process once this one execs
    child = os.fork()
    if child == 0:  # the child forks the grandchild and exits at once: init adopts the grandchild
        try:
            if os.fork() == 0:
                report_warm_up(url, server)
        finally:
            os._exit(0)
    os.waitpid(child, 0)
