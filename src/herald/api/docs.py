"""``/docs``: Swagger UI served from this machine, so the API documentation works offline.

The assets come from the ``swagger-ui-py`` package (Swagger UI 5, Apache License 2.0,
(c) SmartBear Software), which ships them with their licence; Herald serves the few
files the page needs, and the licence beside them (linked from the page).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse

from herald.api.problems import Problem

ASSETS = "/docs/assets"
_SERVED = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
    "LICENSE": "text/plain; charset=utf-8",
}
_NOTICE = (
    '<p style="font: 12px sans-serif; margin: 1em 2em; color: #555">'
    "API documentation by Swagger UI, &copy; SmartBear Software, "
    f'<a href="{ASSETS}/LICENSE">Apache License 2.0</a>.</p>'
)


def _static_dir() -> Path | None:
    # Located without importing the package (its __init__ loads web-framework glue).
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "static"


def install(app: FastAPI) -> None:
    """Serve ``/docs`` (and its assets) from the installed package; no CDN is asked."""
    static = _static_dir()

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        page = get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
        )
        html = bytes(page.body).decode("utf-8").replace("</body>", f"{_NOTICE}</body>")
        return HTMLResponse(html)

    @app.get(ASSETS + "/{name}", include_in_schema=False)
    async def asset(name: str) -> FileResponse:
        if name not in _SERVED or static is None or not (static / name).is_file():
            raise Problem(404, "not-found", f"no documentation asset {name!r}")
        return FileResponse(
            static / name,
            media_type=_SERVED[name],
            headers={"Cache-Control": "public, max-age=86400"},
        )
