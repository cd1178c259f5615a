"""The API pages load no script a third party could change: `/docs` serves Swagger UI's files itself, and
`/redoc`'s one script is pinned to a version and its hash."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from reef.core.settings import ServerSettings, Settings, StorageSettings
from tests.fakes.service_app import in_process_client

_URL_IN_TAG = re.compile(r"<(?:script|link)\b[^>]*?(?:src|href)=[\"']([^\"']+)", re.IGNORECASE)


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    # With tokens: the pages and their files are open, like the API document they show.
    server = ServerSettings(tokens=[SecretStr("agent")], admin_tokens=[SecretStr("admin")])
    settings = Settings(reef=server, storage=StorageSettings(dir=tmp_path / "state"))
    async for client in in_process_client(settings, tmp_path):
        yield client


async def test_the_docs_page_loads_only_reefs_own_files(http: httpx.AsyncClient):
    page = await http.get("/docs")
    assert page.status_code == 200 and "swagger" in page.text.lower()

    urls = _URL_IN_TAG.findall(page.text)
    assert urls and all(url.startswith("/") and not url.startswith("//") for url in urls), urls
    assert "https://" not in page.text and "http://" not in page.text
    for url in urls:
        served = await http.get(url)
        assert served.status_code == 200 and served.content, url
    script = await http.get("/docs/assets/swagger-ui-bundle.js")
    assert "javascript" in script.headers["content-type"] and b"SwaggerUIBundle" in script.content


async def test_the_oauth2_helper_page_is_served(http: httpx.AsyncClient):
    page = await http.get("/docs/oauth2-redirect")
    assert page.status_code == 200 and "<script" in page.text and "https://" not in page.text


async def test_redoc_loads_its_script_pinned_to_a_version_and_a_hash(http: httpx.AsyncClient):
    page = await http.get("/redoc")
    assert page.status_code == 200
    scripts = re.findall(r"<script\b[^>]*>", page.text)
    assert len(scripts) == 1
    (script,) = scripts
    assert re.search(r'src="https://cdn\.jsdelivr\.net/npm/redoc@\d+\.\d+\.\d+/', script), script
    assert re.search(r'integrity="sha384-[A-Za-z0-9+/=]{64}"', script) and 'crossorigin="anonymous"' in script
    assert "fonts.googleapis" not in page.text
    assert 'spec-url="/openapi.json"' in page.text


async def test_a_file_outside_swagger_ui_is_not_served(http: httpx.AsyncClient):
    for path in ("/docs/assets/../../pyproject.toml", "/docs/assets/%2e%2e/%2e%2e/etc/passwd", "/docs/assets/nope.js"):
        assert (await http.get(path)).status_code in (401, 404), path
