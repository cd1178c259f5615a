"""The operator's web console at `/console`, served from the wheel (files in `reef/service/console/`).

The console is a small static page: HTML, CSS and plain ES-module JavaScript, no build step and no third-party
code. It holds no data: the browser fetches every datum from the public JSON routes with the operator's token
(`Authorization: Bearer`), so what the console shows a script can get, and these files need no token (the edge
middleware leaves `/console` and `/console/...` open). The Content-Security-Policy lets the page load and fetch
only from this server, so nothing is ever pulled from a CDN.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from fastapi import APIRouter
from starlette.responses import FileResponse, Response

from reef.core.errors import NotFound

router = APIRouter(tags=["console"], include_in_schema=False)

_FILES = Path(str(resources.files("reef.service.console")))
_ASSET_NAME = re.compile(r"^[a-z0-9_-]{1,64}\.(js|css)$")
_MEDIA_TYPES = {"js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8"}
_HEADERS = {
    # Scripts, styles and requests from this origin only; inline SVG is built through the DOM, not markup.
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data: blob:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    # Revalidate every load, so an upgraded wheel's console is the one the browser runs.
    "cache-control": "no-cache",
}


# `/console/` is redirected here by the router; the page names its files relative to `/console`.
@router.get("/console", summary="The web console's page")
async def console_page() -> Response:
    return FileResponse(_FILES / "index.html", media_type="text/html; charset=utf-8", headers=_HEADERS)


@router.get("/console/{name}", summary="One of the web console's scripts or style sheets")
async def console_asset(name: str) -> Response:
    match = _ASSET_NAME.match(name)
    path = _FILES / name
    if match is None or not path.is_file():
        raise NotFound(f"no console file {name!r}")
    return FileResponse(path, media_type=_MEDIA_TYPES[match.group(1)], headers=_HEADERS)
