"""`trilemma serve`: the verbs as a JSON API over HTTP and a page that explores the triangle.

    pip install 'trilemma[web]'
    trilemma serve            # http://127.0.0.1:8000/

The planning core never imports this package (nor FastAPI): ``trilemma.cli`` imports it inside the
``serve`` command only. ``create_app()`` (trilemma.web.app) builds the FastAPI application; the page is
plain HTML and JavaScript in ``static/`` with plotly.js served from the installed ``plotly`` package,
so it works with no internet access.
"""

from __future__ import annotations

from typing import Any


def create_app() -> Any:
    """The FastAPI application (imports FastAPI on first use)."""
    from trilemma.web.app import create_app as _create

    return _create()


__all__ = ["create_app"]
