"""The server on a free localhost port in a background thread, and Debian's Chromium for Playwright:
what the browser test (tests/test_serve_browser.py) and benchmarks/serve_speed.py share.

Playwright is pointed at the system's Chromium (``/usr/bin/chromium``, Debian's package, which .ci/run
installs); it never downloads a browser. The flags keep Chromium off the network (this machine's
network is closed: background connections would be refused many at a time) and run it as root.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

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
def running_server(port: int | None = None) -> Iterator[str]:
    """The application served by uvicorn on 127.0.0.1 in a daemon thread; yields its base URL."""
    import uvicorn

    from trilemma.web.app import create_app

    port = port or free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(), host="127.0.0.1", port=port, log_level="warning", access_log=False
        )
    )
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
