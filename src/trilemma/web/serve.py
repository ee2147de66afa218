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


def run(host: str, port: int) -> None:
    """Serve the application until interrupted (uvicorn, one process, access log off, the connection
    limits of trilemma.web.guard); on the loopback it answers only requests addressed to a local
    name."""
    import uvicorn

    from trilemma.web.app import LOCAL_HOSTS, create_app
    from trilemma.web.guard import server_config

    app = create_app(allowed_hosts=LOCAL_HOSTS if local(host) else None)
    uvicorn.Server(server_config(app, host, port)).run()
