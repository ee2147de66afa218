"""Start the `trilemma serve` server (uvicorn) on a host and port; localhost unless asked otherwise."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.request.serve import ServeRequest


def url(host: str, port: int) -> str:
    """The address to open in a browser (an IPv6 host in brackets; the wildcard shown as localhost)."""
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/"


def local(host: str) -> bool:
    """Whether ``host`` accepts connections from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def allowed_hosts(host: str) -> list[str] | None:
    """The Host header names a server on ``host`` answers: on the loopback, the local names and the
    address it was started on (as its printed URL writes it: ``127.0.0.2``, ``[::1]``); elsewhere
    None (any)."""
    from trilemma.web.app import LOCAL_HOSTS

    if not local(host):
        return None
    shown = url(host, 0).removeprefix("http://").rsplit(":", 1)[0]
    return list(dict.fromkeys([*LOCAL_HOSTS, host, shown]))


def run(host: str, port: int) -> None:
    """Serve the application until interrupted (uvicorn, one process, access log off, the connection
    limits of trilemma.web.guard); on the loopback it answers only requests addressed to a local name
    or to the address it was started on."""
    import uvicorn

    from trilemma.web.app import create_app
    from trilemma.web.guard import server_config

    app = create_app(allowed_hosts=allowed_hosts(host))
    uvicorn.Server(server_config(app, host, port)).run()


def check_bind(host: str, port: int) -> None:
    """InputError unless this machine resolves ``host`` and can bind ``port`` on it (as uvicorn
    binds), before the banner is printed."""
    import socket

    from trilemma.errors import InputError

    try:
        family, kind, proto, _, addr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (OSError, UnicodeError) as exc:
        raise InputError(
            "host", host, f"an address or name this machine resolves ({exc})"
        ) from None
    with socket.socket(family, kind, proto) as probe_socket:
        probe_socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe_socket.bind(addr)
        except OSError as exc:
            raise InputError("port", port, f"a port free on {host} ({exc.strerror})") from None


def serve(req: ServeRequest, say: Callable[[str], Any] = print) -> None:
    """`trilemma serve` as a library call: check the address and the web extra, ``say`` where it
    listens (and that other machines can reach it, off the loopback), then serve until
    interrupted."""
    import importlib.util

    from trilemma.errors import InputError

    check_bind(req.host, req.port)
    missing = [m for m in ("fastapi", "uvicorn", "plotly") if importlib.util.find_spec(m) is None]
    if missing:
        raise InputError(
            "serve", ", ".join(missing), "the web extra installed (pip install 'trilemma[web]')"
        )
    at = url(req.host, req.port)
    say(f"trilemma serve: {at}  (API docs at {at}docs; Ctrl-C stops it)")
    if not local(req.host):
        say(
            f"note: listening on {req.host}: other machines can reach it (--host 127.0.0.1 keeps "
            "it local)"
        )
    run(req.host, req.port)
