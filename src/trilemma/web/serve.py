"""Start the `trilemma serve` server (uvicorn) on a host and port; localhost unless asked otherwise."""

from __future__ import annotations

import ipaddress


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
