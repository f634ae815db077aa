#!/usr/bin/env python
"""Start N explorer replicas and nginx in front of them, all on this machine (issue 37).

Each replica is ``viz-model app`` (one Streamlit server) on a loopback port of its own; nginx listens on ``--port``
and routes every browser session to one replica, sticky by a cookie (``deploy/nginx.conf.template`` says how).
The replicas share one cookie secret, so a session moved to another replica when its own fails keeps working.
Everything is checked before anything starts (nginx present, ports free, models readable, ``nginx -t`` on the
written configuration) and a failure is one line. Ctrl-C (or SIGTERM) stops nginx and every replica.

    python deploy/replicas.py --replicas 2 --port 8500                  # http://127.0.0.1:8500
    python deploy/replicas.py --replicas 4 --models ~/models --listen 0.0.0.0
    python deploy/replicas.py --replicas 2 --check                      # write and test the nginx config only
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "explorer.conf.template"
MAIN_CONFIG = """# written by deploy/replicas.py
worker_processes 1;
pid $WORKDIR/nginx.pid;
error_log $WORKDIR/error.log warn;
$USER_LINE
events { worker_connections 1024; }
http {
    access_log $WORKDIR/access.log;
    client_body_temp_path $WORKDIR/client_body;
    proxy_temp_path $WORKDIR/proxy;
    fastcgi_temp_path $WORKDIR/fastcgi;
    uwsgi_temp_path $WORKDIR/uwsgi;
    scgi_temp_path $WORKDIR/scgi;
    include $WORKDIR/explorer.conf;
}
"""
MAX_REPLICAS = 32
START_S = 180  # a replica imports torch and loads the model before it answers its health check
FAIL_TIMEOUT = "10s"


class DeployError(RuntimeError):
    """Something keeps the deployment from starting; the message says what in one line."""


def port_free(port: int, address: str) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((address, port))
        except OSError:
            return False
    return True


def replica_ports(first: int, count: int) -> list[int]:
    return list(range(first, first + count))


def check_ports(listen: str, port: int, ports: list[int]) -> None:
    """The proxy's port and every replica's must be valid and free."""
    for what, number, address in [("--port", port, listen), *[(f"replica {i + 1}", p, "127.0.0.1")
                                                               for i, p in enumerate(ports)]]:
        if not 1 <= number <= 65535:
            raise DeployError(f"{what}: port {number} is not a port number (1-65535)")
        if not port_free(number, address):
            raise DeployError(f"{what}: port {number} on {address} is taken; choose others with --port / "
                              "--first-port")


def nginx_configs(workdir: Path, listen: str, port: int, ports: list[int]) -> tuple[str, str]:
    """The proxy's main configuration (files in `workdir`) and its explorer part (the template, with this
    deployment's replicas and port)."""
    servers = "\n".join(f"    server 127.0.0.1:{p} max_fails=1 fail_timeout={FAIL_TIMEOUT};" for p in ports)
    user = "user root;" if os.geteuid() == 0 else ""  # nginx started as root would run its workers as nobody
    main = string.Template(MAIN_CONFIG).substitute(WORKDIR=workdir, USER_LINE=user)
    explorer = string.Template(TEMPLATE.read_text()).safe_substitute(LISTEN=f"{listen}:{port}", SERVERS=servers)
    return main, explorer


def write_and_test_config(nginx: str, workdir: Path, main: str, explorer: str) -> Path:
    """Write the configuration into `workdir` and have nginx check it (``nginx -t``)."""
    config = workdir / "nginx.conf"
    config.write_text(main)
    (workdir / "explorer.conf").write_text(explorer)
    for folder in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (workdir / folder).mkdir(exist_ok=True)
    checked = subprocess.run([nginx, "-t", "-q", "-p", str(workdir), "-c", str(config)], capture_output=True,
                             text=True)
    if checked.returncode != 0:
        lines = [line for line in checked.stderr.splitlines() if line.strip()]
        raise DeployError(f"nginx -t refused {config}: {lines[0] if lines else 'no reason given'}")
    return config


def wait_healthy(process: subprocess.Popen, port: int, log: Path, name: str) -> None:
    """Until the replica answers Streamlit's health check; a replica that exits first fails the start."""
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
            raise DeployError(f"{name} (port {port}) exited with {process.returncode}: "
                              f"{lines[-1] if lines else 'no output'} (log: {log})")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise DeployError(f"{name} (port {port}) did not answer in {START_S} s (log: {log})")


def write_state(workdir: Path, listen: str, port: int, proxy_pid: int, ports: list[int], pids: list[int]) -> None:
    """``replicas.json`` in `workdir`: the proxy's and each replica's port and process id (for operators, tests)."""
    state = {"proxy": {"url": f"http://{listen}:{port}", "pid": proxy_pid},
             "replicas": [{"port": p, "pid": pid, "log": str(workdir / f"replica-{i}.log")}
                          for i, (p, pid) in enumerate(zip(ports, pids), 1)]}
    (workdir / "replicas.json").write_text(json.dumps(state, indent=2))


def interrupt(signum: int, frame: object) -> None:
    """SIGTERM stops the deployment as Ctrl-C does."""
    raise KeyboardInterrupt


def stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--replicas", type=int, default=2, help="how many app servers (default 2)")
    p.add_argument("--port", type=int, default=8500, help="the port nginx listens on (default 8500)")
    p.add_argument("--listen", default="127.0.0.1", help="the address nginx listens on (default 127.0.0.1)")
    p.add_argument("--first-port", type=int, default=None,
                   help="the first replica's loopback port; the others follow (default: --port + 1)")
    p.add_argument("--models", action="append", default=[], metavar="DIR",
                   help="a folder of model directories every replica offers too (repeatable)")
    p.add_argument("--workdir", type=Path, default=None,
                   help="where the nginx config, its logs and the replicas' logs go (default: a new temporary folder)")
    p.add_argument("--nginx", default="nginx", help="the nginx program (default: nginx on PATH)")
    p.add_argument("--check", action="store_true", help="write and test the nginx configuration, start nothing")
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.replicas <= MAX_REPLICAS:
        raise DeployError(f"--replicas must be from 1 to {MAX_REPLICAS}, got {args.replicas}")
    nginx = shutil.which(args.nginx)
    if nginx is None:
        raise DeployError(f"{args.nginx} not found: install nginx (Debian: apt-get install nginx-light) or give "
                          "--nginx PATH")
    ports = replica_ports(args.port + 1 if args.first_port is None else args.first_port, args.replicas)
    if args.port in ports:
        raise DeployError(f"--port {args.port} is also a replica's port: choose --first-port elsewhere")
    check_ports(args.listen, args.port, ports)
    from viz_model.cli.launch import LaunchError, model_folders

    try:
        folders = model_folders(args.models)
    except LaunchError as err:
        raise DeployError(str(err)) from None
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="viz-model-deploy-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    config = write_and_test_config(nginx, workdir, *nginx_configs(workdir, args.listen, args.port, ports))
    if args.check:
        print(f"replicas: {config} is valid ({args.replicas} replicas on ports {ports[0]}-{ports[-1]})",
              file=sys.stderr)
        return 0
    # one cookie secret for all: Streamlit signs its XSRF cookie with it, so another replica accepts a session's
    # uploads after a failover
    env = {**os.environ, "STREAMLIT_SERVER_COOKIE_SECRET": secrets.token_hex(32), "PYTHONUNBUFFERED": "1"}
    processes: list[subprocess.Popen] = []
    signal.signal(signal.SIGTERM, interrupt)
    try:
        for number, port in enumerate(ports, 1):
            log = workdir / f"replica-{number}.log"
            command = [sys.executable, "-m", "viz_model", "app", "--port", str(port), "--address", "127.0.0.1",
                       "--headless", "--no-hub", *[arg for folder in folders for arg in ("--models", str(folder))]]
            with log.open("w") as out:
                processes.append(subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT))
        for number, (process, port) in enumerate(zip(processes, ports), 1):
            wait_healthy(process, port, workdir / f"replica-{number}.log", f"replica {number}")
        proxy = subprocess.Popen([nginx, "-p", str(workdir), "-c", str(config), "-g", "daemon off;"])
        processes.append(proxy)
        write_state(workdir, args.listen, args.port, proxy.pid, ports, [p.pid for p in processes[:-1]])
        print(f"replicas: the explorer on http://{args.listen}:{args.port} ({args.replicas} replicas on ports "
              f"{ports[0]}-{ports[-1]}; logs in {workdir}); Ctrl-C stops it", file=sys.stderr, flush=True)
        gone: set[int] = set()
        while proxy.poll() is None:
            for number, process in enumerate(processes[:-1], 1):
                if process.poll() is not None and number not in gone:
                    gone.add(number)
                    print(f"replicas: replica {number} exited with {process.returncode}; nginx routes its sessions "
                          "to the others", file=sys.stderr, flush=True)
            time.sleep(1.0)
        raise DeployError(f"nginx exited with {proxy.returncode} (log: {workdir / 'error.log'})")
    except KeyboardInterrupt:
        return 0
    finally:
        stop(processes[::-1])


def main(argv: list[str] | None = None) -> int:
    try:
        return run(parse(argv))
    except DeployError as err:
        print(f"replicas: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
