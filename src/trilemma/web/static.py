"""The files `trilemma serve` sends: the page (``static/``), plotly.js from the installed ``plotly``
package and Swagger UI's files from ``fastapi-offline``, so that the page and ``/docs`` work with no
internet access. Nothing else on disk is served."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles

from trilemma.units import DAY
from trilemma.web.errors import error

STATIC = Path(__file__).parent / "static"
#: how long a browser may keep plotly.js, s (it changes only with the installed package)
PLOTLY_MAX_AGE_S = int(DAY)


def swagger_ui_files() -> dict[str, Path] | None:
    """Swagger UI's script and stylesheet inside the installed ``fastapi-offline`` package (the web
    extra), so /docs works offline too; None without it (FastAPI's default /docs then loads them
    from a CDN)."""
    try:
        root = resources.files("fastapi_offline") / "static"
    except ModuleNotFoundError:
        return None
    files = {name: Path(str(root / name)) for name in ("swagger-ui-bundle.js", "swagger-ui.css")}
    return files if all(p.is_file() for p in files.values()) else None


def plotly_path() -> Path | None:
    """plotly.min.js inside the installed plotly package (no CDN: the page works offline)."""
    try:
        p = resources.files("plotly") / "package_data" / "plotly.min.js"
    except ModuleNotFoundError:
        return None
    return Path(str(p)) if p.is_file() else None


def add_files(app: FastAPI, docs: dict[str, Path] | None) -> None:
    """The page at ``/``, ``static/``, plotly.js and (with ``docs``, swagger_ui_files()) the API
    docs page at ``/docs`` with its files."""

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    if docs:
        _add_docs(app, docs)

    @app.get("/vendor/plotly.min.js", include_in_schema=False)
    def plotly_js() -> Response:
        path = plotly_path()
        if path is None:
            return error(404, None, "plotly is not installed: pip install 'trilemma[web]'")
        return FileResponse(
            path,
            media_type="text/javascript",
            headers={"Cache-Control": f"max-age={PLOTLY_MAX_AGE_S}"},
        )

    app.mount("/static", StaticFiles(directory=STATIC), name="static")


def _add_docs(app: FastAPI, docs: dict[str, Path]) -> None:
    """The API docs page with Swagger UI's files from the installed fastapi-offline: no CDN."""
    from fastapi.openapi.docs import get_swagger_ui_html

    @app.get("/docs", include_in_schema=False)
    def api_docs() -> Response:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="trilemma — API",
            swagger_js_url="/vendor/swagger-ui-bundle.js",
            swagger_css_url="/vendor/swagger-ui.css",
            swagger_favicon_url="data:,",
        )

    @app.get("/vendor/swagger-ui-bundle.js", include_in_schema=False)
    def swagger_js() -> FileResponse:
        return FileResponse(docs["swagger-ui-bundle.js"], media_type="text/javascript")

    @app.get("/vendor/swagger-ui.css", include_in_schema=False)
    def swagger_css() -> FileResponse:
        return FileResponse(docs["swagger-ui.css"], media_type="text/css")
