"""The connection limits of `trilemma serve`: a client cannot hold the server's sockets for good.

uvicorn (0.27 and later, its h11 protocol) closes a keep-alive connection idle for
``timeout_keep_alive`` and answers a request over ``limit_concurrency`` with 503, but it has no
limit on how long a client may take to send a request: a connection that sends nothing, or half a
request line, or headers and then no body, holds a file descriptor until the client leaves. A few
hundred of them reach the open-file limit (1,024 on Linux by default, 256 on macOS); past it
``accept()`` fails, asyncio pauses accepting and logs the failure, and the server answers nobody.
``limit_concurrency`` does not help: it counts connections, but answers only one that sends a
request, so an idle one over it is never closed.

:class:`GuardedH11Protocol` (uvicorn's h11 protocol with three additions):

- a connection must complete its request's headers within ``header_timeout_s`` of opening (or of
  the end of its previous answer), and its body within ``body_timeout_s`` of the headers; else it
  is closed;
- at most ``max_connections`` are open (:func:`connection_cap`: below the process's open-file
  limit, with room for the files the server itself opens); a new one over the cap closes the
  connection that has owed its request (headers or body) the longest, or itself when every other
  one is being answered.

The accept backlog is kept small (:data:`BACKLOG`), because asyncio accepts up to that many
sockets before any of them reaches the protocol and the cap.
"""

from __future__ import annotations

import asyncio
import resource
import time
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from trilemma.units import KIB

HEADER_TIMEOUT_S = 10.0  # from a connection's opening (or its previous answer) to its headers' end
BODY_TIMEOUT_S = 10.0  # from the headers to the body's end (a body is at most 64 KiB)
KEEP_ALIVE_S = 5  # an idle keep-alive connection is closed (uvicorn's own timer)
SHUTDOWN_S = 5  # Ctrl-C waits this long for answers in progress
MAX_HEADER_BYTES = int(
    16 * KIB
)  # a request line and headers; more is answered 400 (h11's own limit)
MAX_CONNECTIONS = 4096  # whatever the open-file limit; a connection costs a few KiB
BACKLOG = 64  # the listen queue, and how many asyncio accepts at once before the cap applies


def connection_cap(soft_limit: int | None = None) -> int:
    """How many connections may be open: the open-file soft limit (``RLIMIT_NOFILE``, read when
    None) less a reserve for the server's own files and a burst of accepts (a quarter of the limit,
    at least 3 × BACKLOG + 32), at most MAX_CONNECTIONS; under a tiny limit an eighth of it, and
    at least 1. 1,024 files: 768 connections; 256 files (macOS): 32."""
    if soft_limit is None:
        soft_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft_limit == resource.RLIM_INFINITY or soft_limit < 0:
        return MAX_CONNECTIONS
    reserve = max(3 * BACKLOG + 32, soft_limit // 4)
    return min(MAX_CONNECTIONS, max(soft_limit - reserve, soft_limit // 8, 1))


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with time limits on reading a request and a cap on open connections."""

    max_connections: int = MAX_CONNECTIONS
    header_timeout_s: float = HEADER_TIMEOUT_S
    body_timeout_s: float = BODY_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read_deadline: asyncio.TimerHandle | None = None
        self.owing_since: float | None = None  # when it began sending a request not yet all read
        self.reading_body = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._wait_for_headers()
        if len(self.connections) > self.max_connections:
            _longest_waiting(self.connections, self).close_for_limit()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow_request()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._follow_request()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        self.owing_since = None
        super().connection_lost(exc)

    def close_for_limit(self) -> None:
        """Close the connection without an answer (a time limit passed, or the cap needs room)."""
        self._stop_deadline()
        self.owing_since = None
        if not self.transport.is_closing():
            self.transport.close()

    # ------------------------------------------------------------------ the deadlines

    def _follow_request(self) -> None:
        """Move the deadline along the request: headers awaited, body awaited, or none owed."""
        state = self.conn.their_state
        if state is h11.IDLE:
            if self.owing_since is None:  # a new request, after the previous answer
                self._wait_for_headers()
        elif state is h11.SEND_BODY:
            if not self.reading_body:
                self.reading_body = True
                self._set_deadline(self.body_timeout_s)
        else:  # the request is read (DONE), or the connection is ending: nothing is owed
            self._stop_deadline()
            self.owing_since, self.reading_body = None, False

    def _wait_for_headers(self) -> None:
        self.owing_since, self.reading_body = time.monotonic(), False
        self._set_deadline(self.header_timeout_s)

    def _set_deadline(self, seconds: float) -> None:
        self._stop_deadline()
        self.read_deadline = self.loop.call_later(seconds, self.close_for_limit)

    def _stop_deadline(self) -> None:
        if self.read_deadline is not None:
            self.read_deadline.cancel()
            self.read_deadline = None


def _longest_waiting(connections: set[Any], newest: GuardedH11Protocol) -> GuardedH11Protocol:
    """The connection to close for room: the one that has owed its request (headers or body) the
    longest, else the newest; one whose request is read and being answered is never chosen."""
    owing = [
        c for c in connections if isinstance(c, GuardedH11Protocol) and c.owing_since is not None
    ]
    return min(owing, key=lambda c: c.owing_since or 0.0, default=newest)


def guarded_protocol(
    max_connections: int | None = None,
    header_timeout_s: float = HEADER_TIMEOUT_S,
    body_timeout_s: float = BODY_TIMEOUT_S,
) -> type[GuardedH11Protocol]:
    """The protocol class with these limits (``max_connections`` None: :func:`connection_cap`)."""
    return type(
        "GuardedH11Protocol",
        (GuardedH11Protocol,),
        {
            "max_connections": connection_cap() if max_connections is None else max_connections,
            "header_timeout_s": header_timeout_s,
            "body_timeout_s": body_timeout_s,
        },
    )


def server_config(app: Any, host: str, port: int, **limits: Any) -> Any:
    """The uvicorn configuration of `trilemma serve`: the guarded protocol (``limits`` are
    :func:`guarded_protocol`'s), no WebSocket, the small backlog, keep-alive and shutdown limits,
    access log off."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=guarded_protocol(**limits),
        ws="none",
        backlog=BACKLOG,
        timeout_keep_alive=KEEP_ALIVE_S,
        timeout_graceful_shutdown=SHUTDOWN_S,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        log_level="warning",
        access_log=False,
    )
