"""The server on a free localhost port in a background thread, and Debian's Chromium for Playwright:
what the browser test (tests/test_serve_browser.py) and benchmarks/serve_speed.py share; and
`trilemma serve` itself in a subprocess under a given open-file limit, with a plain HTTP client, for
the tests of its connection limits (tests/test_serve_flood.py).

Playwright is pointed at the system's Chromium (``/usr/bin/chromium``, Debian's package, which .ci/run
installs); it never downloads a browser. The flags keep Chromium off the network (this machine's
network is closed: background connections would be refused many at a time) and run it as root.
"""

from __future__ import annotations

import json
import os
import re
import resource
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
START_TIMEOUT_S = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_server(port: int | None = None, app: Any = None, **limits: Any) -> Iterator[str]:
    """The application (``app``, default a new create_app()) served by uvicorn on 127.0.0.1 in a daemon
    thread, with the connection limits of `trilemma serve` (``limits``: trilemma.web.guard.guarded_protocol's);
    yields its base URL."""
    import uvicorn

    from trilemma.web.app import create_app
    from trilemma.web.guard import server_config

    port = port or free_port()
    server = uvicorn.Server(server_config(app or create_app(), "127.0.0.1", port, **limits))
    thread = threading.Thread(target=server.run, daemon=True, name="trilemma-serve-test")
    thread.start()
    t0 = time.monotonic()
    while not server.started:
        if not thread.is_alive() or time.monotonic() - t0 > START_TIMEOUT_S:
            raise RuntimeError(f"the test server did not start on port {port}")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        thread.join(timeout=START_TIMEOUT_S)


@contextmanager
def serve_process(
    log: Path, host: str = "127.0.0.1", nofile: int = 1024
) -> Iterator[tuple[str, int]]:
    """`trilemma serve --host HOST` on a free port in a subprocess whose open-file soft limit is
    ``nofile``, its output written to ``log``; yields the URL it printed, once it answers there,
    and its process id."""
    port = free_port()

    def limit() -> None:
        resource.setrlimit(
            resource.RLIMIT_NOFILE, (nofile, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
        )

    cmd = [sys.executable, "-m", "trilemma.cli", "serve", "--host", host, "--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, preexec_fn=limit)
    try:
        yield _printed_url(proc, log), proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=START_TIMEOUT_S)


def _printed_url(proc: subprocess.Popen, log: Path) -> str:
    """The URL the server printed, once a request there is answered (within START_TIMEOUT_S)."""
    t0, last = time.monotonic(), None
    while time.monotonic() - t0 < START_TIMEOUT_S:
        if proc.poll() is not None:
            raise RuntimeError(f"trilemma serve exited: {log.read_text(errors='replace')[-2000:]}")
        found = re.search(r"trilemma serve: (http://\S+/)", log.read_text(errors="replace"))
        if found:
            last = post_json(found.group(1) + "api/presets", {"kind": "hardware"})
            if last[0] == 200:
                return found.group(1)
        time.sleep(0.1)
    raise RuntimeError(
        f"trilemma serve did not answer its printed URL within {START_TIMEOUT_S:g} s: {last}"
    )


def post_json(
    url: str, body: object, timeout_s: float = 2.0, host: str | None = None
) -> tuple[int, Any]:
    """POST ``body`` as JSON: (HTTP status, the answer's JSON), or (0, the error) when no answer
    came within ``timeout_s`` seconds. ``host``: another Host header than the URL's."""
    headers = {"content-type": "application/json", **({"host": host} if host else {})}
    req = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")
    except OSError as exc:
        return 0, repr(exc)


def open_files(pid: int) -> int | None:
    """How many files process ``pid`` has open (Linux's /proc; None elsewhere)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
