"""The API is documented whole: /openapi.json describes every route the server answers (the `/v1` fast path
included), its `/v1` request schemas agree with what Reef checks, and docs/reference/http-api.md has a section for every
route, so a route added without documentation fails here."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from openapi_spec_validator import validate as validate_openapi

from reef.application.runtime import Runtime
from reef.core.errors import BadRequest
from reef.core.scenarios import Dialect
from reef.core.settings import Settings, StorageSettings
from reef.inference.translate import check_request
from reef.releases.commit_log import FileCommitLog
from reef.releases.git import open_release_store
from reef.service.app import create_app
from reef.service.routes.inference import ROUTES as INFERENCE_ROUTES
from reef.storage.sql import open_record_store
from tests.fakes.dict_engine import DictEngine
from tests.service.test_fuzz_v1 import BODIES

DOC = Path(__file__).resolve().parents[2] / "docs" / "reference" / "http-api.md"
# A route's section: a heading naming it in code, e.g. "### `GET /reef/scenarios/{scenario}/records`".
_HEADING = re.compile(r"^#{2,4} .*$", re.MULTILINE)
_ROUTE_IN_HEADING = re.compile(r"`(GET|POST|PUT|PATCH|DELETE) (/[^`\s]*)`")
_METHODS = {"get", "post", "put", "patch", "delete"}
_DIALECTS = {
    "/v1/chat/completions": Dialect.CHAT,
    "/v1/responses": Dialect.RESPONSES,
    "/v1/messages": Dialect.MESSAGES,
    "/v1/messages/count_tokens": Dialect.MESSAGES,
}


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The real app (SQLite records, git releases, the default recipe) behind its edge, over an ASGI transport."""
    settings = Settings(storage=StorageSettings(dir=tmp_path / "state"))
    records = open_record_store("sqlite", directory=tmp_path / "records")
    releases = open_release_store(str(tmp_path / "releases.git"), tmp_path / "release-work")
    engine = DictEngine()
    runtime = Runtime(settings, records, releases, FileCommitLog(tmp_path / "state" / "commits"), engine)
    edge = create_app(settings, runtime, engine)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=edge), base_url="http://reef.test") as http:
        yield edge.app, http
    records.close()


async def _document(http: httpx.AsyncClient) -> dict[str, Any]:
    response = await http.get("/openapi.json")
    assert response.status_code == 200, response.text
    return response.json()


def _operations(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, item in document["paths"].items() for method in item if method in _METHODS}


def _app_routes(app: FastAPI) -> list[tuple[str, str, bool]]:
    """(method, path, in the schema) of every route the FastAPI app serves, through included routers too."""
    try:  # FastAPI ≥ 0.130 keeps included routers nested; this walks them
        from fastapi.routing import iter_route_contexts

        routes = [context.original_route for context in iter_route_contexts(app.routes)]
        paths = [context.path for context in iter_route_contexts(app.routes)]
    except ImportError:
        routes = list(app.routes)
        paths = [getattr(route, "path", "") for route in routes]
    found = []
    for route, path in zip(routes, paths, strict=True):
        for method in sorted(getattr(route, "methods", None) or ()):
            if method != "HEAD":
                found.append((method, path, isinstance(route, APIRoute) and route.include_in_schema))
    return found


def _documented_routes() -> set[tuple[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    return {
        (method, path.rstrip("/") or "/")
        for heading in _HEADING.findall(text)
        for method, path in _ROUTE_IN_HEADING.findall(heading)
    }


async def test_the_served_document_is_valid_openapi(served):
    _, http = served
    validate_openapi(await _document(http))


async def test_the_document_describes_every_v1_route_of_the_fast_path(served):
    _, http = served
    document = await _document(http)
    assert set(INFERENCE_ROUTES) <= _operations(document)
    chat = document["paths"]["/v1/chat/completions"]["post"]
    assert {p["name"] for p in chat["parameters"]} >= {"x-reef-scenario", "x-reef-release-id"}
    ok = chat["responses"]["200"]
    assert set(ok["headers"]) == {"x-reef-agent-record-id", "x-reef-release-id"}
    assert set(ok["content"]) == {"application/json", "text/event-stream"}
    for status in ("400", "401", "404", "413", "502", "504"):
        assert chat["responses"][status]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/Error"
        }


async def test_the_document_describes_every_route_the_framework_serves(served):
    app, http = served
    operations = _operations(await _document(http))
    in_schema = {(method, path) for method, path, shown in _app_routes(app) if shown}
    assert in_schema, "no routes found: the walk over the app's routes is broken"
    assert in_schema <= operations, f"missing from /openapi.json: {sorted(in_schema - operations)}"


async def test_validation_errors_are_documented_as_400_with_the_error_shape(served):
    _, http = served
    document = await _document(http)
    report = document["paths"]["/reef/report"]["post"]["responses"]
    assert "422" not in report and report["400"]["content"]["application/json"]["schema"]["$ref"].endswith("/Error")
    assert "HTTPValidationError" not in document["components"]["schemas"]
    assert document["paths"]["/healthz"]["get"]["security"] == []
    assert "401" in document["paths"]["/reef/status"]["get"]["responses"]


async def test_every_route_in_the_document_has_a_section_in_http_api_md(served):
    _, http = served
    operations = {(method, path.rstrip("/") or "/") for method, path in _operations(await _document(http))}
    missing = operations - _documented_routes()
    assert not missing, f"docs/reference/http-api.md has no `### METHOD /path` section for {sorted(missing)}"


async def test_routes_left_out_of_the_document_are_still_documented(served):
    app, _ = served
    hidden = {(method, path.rstrip("/") or "/") for method, path, shown in _app_routes(app) if not shown}
    hidden.discard(("GET", "/docs/oauth2-redirect"))  # Swagger UI's helper page, named in the /docs section
    assert ("GET", "/metrics") in hidden and ("GET", "/openapi.json") in hidden
    missing = hidden - _documented_routes()
    assert not missing, f"docs/reference/http-api.md has no section for {sorted(missing)}"
    assert "/docs/oauth2-redirect" in DOC.read_text(encoding="utf-8")


# What a wrong value may look like; each is tried at every top-level field of each well-formed body.
_CANDIDATES: list[Any] = [0, 12345, 0.5, "x", True, None, [1], ["x"], {"k": 1}]


def _schema_accepts(document: dict[str, Any], name: str, body: Any) -> bool:
    # The whole document is the root, so `#/components/schemas/...` references resolve in it.
    validator = jsonschema.Draft202012Validator({**document, "$ref": f"#/components/schemas/{name}"})
    return validator.is_valid(body)


def _reef_accepts(dialect: Dialect, body: Any) -> bool:
    try:
        check_request(dialect, body)
    except BadRequest:
        return False
    return True


@pytest.mark.parametrize("route", sorted(_DIALECTS))
async def test_the_v1_request_schema_agrees_with_what_reef_checks_at_the_top_level(served, route):
    _, http = served
    document = await _document(http)
    dialect = _DIALECTS[route]
    name = document["paths"][route]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    name = name.rsplit("/", 1)[1]
    fields = set(document["components"]["schemas"][name]["properties"])
    compared = 0
    for good in BODIES[route]:
        assert _schema_accepts(document, name, good) and _reef_accepts(dialect, good), good
        for field in fields:
            for value in _CANDIDATES:
                body = {**good, field: value}
                assert _schema_accepts(document, name, body) == _reef_accepts(dialect, body), (field, value)
                compared += 1
        for field in document["components"]["schemas"][name].get("required", []):
            body = {k: v for k, v in good.items() if k != field}
            assert not _schema_accepts(document, name, body) and not _reef_accepts(dialect, body), field
    assert compared > 100
