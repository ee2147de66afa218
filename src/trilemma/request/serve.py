"""``ServeRequest``: every input of `trilemma serve` (where the web app listens), each field written
once. Whether this machine can bind the address is checked by ``trilemma.web.serve.serve``."""

from __future__ import annotations

from typing import ClassVar

from trilemma.errors import InputError
from trilemma.request.field import Request, option

#: the TCP ports a server may listen on
PORTS = (1, 65535)


def _host(v: str) -> str:
    if not v.strip():
        raise InputError(
            "host", v, "an address to listen on, e.g. 127.0.0.1 (this machine) or 0.0.0.0 (all)"
        )
    return v


def _port(v: int) -> int:
    if not PORTS[0] <= v <= PORTS[1]:
        raise InputError("port", v, f"a TCP port from {PORTS[0]} to {PORTS[1]}")
    return v


class ServeRequest(Request):
    """The verbs as a JSON API over HTTP (docs at /docs) and a page that explores the triangle
    (needs the web extra: pip install 'trilemma[web]')."""

    VERB: ClassVar[str] = "serve"

    host: str = option(
        "127.0.0.1",
        "--host",
        help="address to listen on (default: this machine only)",
        parse=_host,
    )
    port: int = option(8000, "--port", help="TCP port", kind="int", parse=_port)
