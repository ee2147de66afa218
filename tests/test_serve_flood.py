"""`trilemma serve` as a real server on the loopback: idle and half-sent connections are closed in
time, their number is capped below the open-file limit, and the server keeps answering while
hundreds are held and after they leave; it answers the URL it printed when started on another
loopback address. Traffic goes only to 127.0.0.1 and 127.0.0.2; every loop is bounded.
"""

from __future__ import annotations

import resource
import socket
import time

import pytest

pytest.importorskip(
    "fastapi", reason="the web extra is not installed (pip install 'trilemma[web]')"
)
pytest.importorskip(
    "uvicorn", reason="the web extra is not installed (pip install 'trilemma[web]')"
)

from trilemma.web.guard import connection_cap  # noqa: E402
from trilemma.web.testing import open_files, post_json, running_server, serve_process  # noqa: E402

ESTIMATE = {"gpus": 8, "tokens": "1B"}
#: (the server's open-file limit, idle connections held): the issue's 500 at Linux's usual limit,
#: and two that locked the server for good before it closed and capped them (500 at macOS's usual
#: limit, 1,200 at Linux's)
FLOODS = [(1024, 500), (256, 500), (1024, 1200)]
PARTIAL = (  # what an idle connection sends: nothing, half a request line, headers and no body
    b"",
    b"POST /api/estimate HT",
    b"POST /api/estimate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Content-Length: 100\r\n\r\n{",
)


def _answered_within(url: str, limit_s: float) -> tuple[int, float]:
    """The status of a small /api/estimate and how long it took (s)."""
    t0 = time.monotonic()
    status, _ = post_json(url + "api/estimate", ESTIMATE, timeout_s=limit_s)
    return status, time.monotonic() - t0


def _hold(port: int, n: int) -> list[socket.socket]:
    """``n`` connections to 127.0.0.1:port, each sending one of PARTIAL and then nothing."""
    held = []
    for i in range(n):
        s = socket.socket()
        s.settimeout(5)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(PARTIAL[i % len(PARTIAL)])
        except OSError:
            pass  # closed by the server's cap: still held here, as a flood would
        held.append(s)
    return held


@pytest.fixture
def enough_files():
    """This process's own open-file soft limit raised for the held connections (the server's is set
    apart, in its subprocess)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 2 * max(n for _, n in FLOODS) + 256
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            pytest.skip(f"the open-file hard limit {hard} is under {need}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.slow
@pytest.mark.parametrize(("nofile", "idle"), FLOODS)
def test_idle_half_open_connections_do_not_lock_the_server(tmp_path, enough_files, nofile, idle):
    """While ``idle`` connections that send nothing or half a request are held, /api/estimate is
    answered within 2 s; 5 s after they close, again within 2 s; no accept() failed."""
    log = tmp_path / "serve.log"
    with serve_process(log, nofile=nofile) as (url, pid):
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        held = _hold(port, idle)
        try:
            status, took = _answered_within(url, 2.0)
            assert status == 200 and took < 2.0, ("while held", status, took)
            files = open_files(pid)
            assert files is None or files < nofile, files  # the cap kept accept() from failing
        finally:
            for s in held:
                s.close()
        time.sleep(5)
        status, took = _answered_within(url, 2.0)
        assert status == 200 and took < 2.0, ("after", status, took)
    text = log.read_text(errors="replace")
    assert "Traceback" not in text and "Too many open files" not in text, text[-2000:]


def _closed_by_server(s: socket.socket, within_s: float) -> bool:
    """Whether the server closes ``s`` (EOF or reset) within ``within_s`` seconds."""
    s.settimeout(within_s)
    try:
        return s.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_a_silent_or_half_sent_request_is_closed_not_held():
    with running_server(header_timeout_s=0.5, body_timeout_s=0.5) as url:
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        held = _hold(port, len(PARTIAL))
        try:
            for s, sent in zip(held, PARTIAL, strict=True):
                assert _closed_by_server(s, 5.0), sent
        finally:
            for s in held:
                s.close()
        # one byte at a time does not renew the header deadline
        with socket.create_connection(("127.0.0.1", port), timeout=5) as slow:
            t0, cut = time.monotonic(), False
            for ch in b"POST /api/estimate HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 60:
                try:
                    slow.sendall(bytes([ch]))
                except OSError:
                    cut = True
                    break
                time.sleep(0.05)
            assert cut or _closed_by_server(slow, 1.0), time.monotonic() - t0


def test_connections_over_the_cap_close_the_longest_waiting_not_the_new_request():
    """With room for 4, four silent connections and then a real request: the request is answered and
    the connection that waited longest is the one closed."""
    with running_server(max_connections=4) as url:
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        held = _hold(port, 4)
        try:
            time.sleep(0.2)
            status, _ = post_json(url + "api/estimate", ESTIMATE, timeout_s=5.0)
            assert status == 200
            assert _closed_by_server(held[0], 5.0)
        finally:
            for s in held:
                s.close()


def test_the_connection_cap_is_below_the_open_file_limit():
    for nofile in (64, 256, 1024, 4096, 65536):
        assert 1 <= connection_cap(nofile) < nofile
    assert connection_cap(1024) > 500  # Linux's usual limit holds the 500 and one more


def test_serve_answers_its_own_printed_url_on_another_loopback_address(tmp_path):
    with serve_process(tmp_path / "serve.log", host="127.0.0.2") as (url, _):
        assert url.startswith("http://127.0.0.2:")
        status, doc = post_json(url + "api/estimate", ESTIMATE, timeout_s=30.0)
        assert status == 200 and doc["schema"].startswith("trilemma.estimate"), doc
        # another name in the Host header is still refused (DNS rebinding)
        status, doc = post_json(url + "api/estimate", ESTIMATE, host="rebound.example")
        assert status == 400 and doc["field"] == "host", doc
