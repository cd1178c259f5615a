"""The interactive pages over `/openapi.json`, which load no script a third party could change.

`/docs` is Swagger UI served from Reef's own files (the `swagger-ui-bundle-v2` package, under `/docs/assets/`), with
its helper page `/docs/oauth2-redirect`. `/redoc` is ReDoc, whose one script comes from a CDN pinned to a version
and checked by the browser against its hash (subresource integrity): a changed file does not run.
"""

from __future__ import annotations

import html

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

ASSETS = "/docs/assets"
OAUTH2_REDIRECT = "/docs/oauth2-redirect"
REDOC_VERSION = "2.5.4"
REDOC_SCRIPT = f"https://cdn.jsdelivr.net/npm/redoc@{REDOC_VERSION}/bundles/redoc.standalone.js"
# sha384 of bundles/redoc.standalone.js in the npm package redoc@2.5.4 (what the CDN serves, byte for byte).
REDOC_INTEGRITY = "sha384-w447zOpYfw/1Tv/5AK9NfHTlQIqE3RVR6KY62jCyy9zNDgO64cMwGGP1Fj0zJVf5"


def _redoc_html(title: str, openapi_url: str) -> str:
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>body {{ margin: 0; padding: 0; }}</style>
</head>
<body>
<noscript>ReDoc needs JavaScript.</noscript>
<redoc spec-url="{html.escape(openapi_url)}"></redoc>
<script src="{REDOC_SCRIPT}" integrity="{REDOC_INTEGRITY}" crossorigin="anonymous"></script>
</body>
</html>
"""


def install_api_pages(app: FastAPI) -> None:
    """Serve `/docs` (with its assets and OAuth2 helper) and `/redoc` on `app` (built with `docs_url=None` and
    `redoc_url=None`, so FastAPI adds its CDN-loading pages nowhere)."""
    app.mount(ASSETS, StaticFiles(directory=str(swagger_ui_path)), name="swagger-ui")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS}/favicon-32x32.png",
            oauth2_redirect_url=root + OAUTH2_REDIRECT,
        )

    @app.get(OAUTH2_REDIRECT, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return HTMLResponse(_redoc_html(f"{app.title} - ReDoc", root + openapi_url))
