"""The OpenAPI document at `/openapi.json`: FastAPI's own, completed with what it cannot see.

FastAPI describes the `/reef/*` routes from their signatures. It does not see the `/v1/*` routes: `EdgeMiddleware`
serves them as plain ASGI handlers before FastAPI routes anything. This module adds them (described in
`openapi_inference`). It also adds what the
edge does for every route, outside any signature: bearer tokens (401) and their scopes (403; the scope a route
needs is its `x-reef-scope`), the body limit (413), JSON bodies only (415), the Host check (421), the scenario header
some routes read, and the error shape Reef answers with (400, where FastAPI would say 422).
docs/reference/http-api.md is the reader's version; tests/service/test_api_document.py keeps the two in step.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI

from reef.core.identifiers import SCENARIO_NAME_PATTERN
from reef.harness.catalog import adapter_names
from reef.service.openapi_harness import PROPOSAL_SCHEMA
from reef.service.openapi_inference import INFERENCE_SCHEMAS, SCENARIO_HEADER, STREAM_SCHEMAS, inference_paths
from reef.service.openapi_tasks import task_schema
from reef.service.scopes import Scope, required_scope, scope_words
from reef.service.state import ServiceState

_Schema = dict[str, Any]

_ERROR_REF = {"$ref": "#/components/schemas/Error"}
ERROR_SCHEMA: _Schema = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["type", "message"],
            "properties": {
                "type": {
                    "type": "string",
                    "examples": [
                        "invalid_request_error",
                        "authentication_error",
                        "permission_error",
                        "not_found_error",
                        "conflict_error",
                    ],
                },
                "message": {"type": "string", "description": "for a 400, starts with the offending field"},
            },
        }
    },
}
_STATUS_TEXT = {
    400: "Bad input; the message names the field (`messages.0.content: must be a string or a list`)",
    401: "Missing or invalid token",
    403: "The token's scope does not reach this route; the message names the scope it needs",
    404: "Unknown scenario, record or release",
    409: "Conflict: the same id with other content, a release that cannot be restored, a busy or paused learner",
    413: "The body is larger than `reef.max_body_bytes`",
    415: "A state-changing request's body is not JSON (`content-type: application/json`)",
    421: "A server with no token does not answer to this Host; add the name to `reef.allowed_hosts`",
    502: "The upstream provider failed (5xx) or could not be reached",
    503: "The local engine's queue is full; retry after `retry-after` seconds",
    504: "The upstream provider did not answer within `inference.timeout_s`",
}

# Routes that read `x-reef-scenario` from the request itself (FastAPI sees no parameter for it).
_SCENARIO_HEADER_ROUTES = frozenset(
    {
        ("post", "/reef/report"),
        ("post", "/reef/records"),
        ("post", "/reef/records/batch"),
        ("post", "/reef/train"),
        ("get", "/reef/harness"),
        ("get", "/reef/harness/releases"),
        ("get", "/reef/harness/versions"),
        ("get", "/reef/harness/install"),
        ("post", "/reef/harness/proposals"),
    }
)
# Routes without a scenario in their path or header that still answer 404 (a release id that names no release).
_NOT_FOUND_ROUTES = frozenset({("post", "/reef/scenarios")})
_CONFLICT_ROUTES = frozenset(
    {
        ("post", "/reef/report"),
        ("post", "/reef/records"),
        ("post", "/reef/records/batch"),
        ("post", "/reef/train"),
        ("post", "/reef/scenarios/{scenario}/update"),
        ("post", "/reef/scenarios/{scenario}/rollout"),
        ("post", "/reef/scenarios/{scenario}/rollback"),
        ("post", "/reef/scenarios/{scenario}/promote"),
    }
)
# Routes that read their body themselves (FastAPI sees none): what they take.
_RAW_BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("post", "/reef/scenarios/{scenario}/tasks"): {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["tasks"],
                "additionalProperties": False,
                "properties": {
                    "tasks": {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/Task"}}
                },
            }
        },
        "application/x-ndjson": {"schema": {"type": "string", "description": "one task (a JSON object) per line"}},
    },
    ("post", "/reef/harness/proposals"): {"application/json": {"schema": PROPOSAL_SCHEMA}},
}


def reef_openapi(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """What to set as `app.openapi`: FastAPI's document completed by `complete_document`, built once."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            state: ServiceState = app.state.reef
            evaluation = state.settings.evaluation
            app.openapi_schema = complete_document(generate(), evaluation.allow_api_code, evaluation.checker_modules)
        return app.openapi_schema

    return openapi


def complete_document(
    generated: dict[str, Any], allow_api_code: bool = False, checker_modules: Sequence[str] = ()
) -> dict[str, Any]:
    """FastAPI's document plus the `/v1/*` routes, auth, the body limit and Reef's error shape."""
    document = copy.deepcopy(generated)
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas.update(Error=ERROR_SCHEMA, Task=task_schema(allow_api_code, checker_modules), **INFERENCE_SCHEMAS)
    schemas.update(STREAM_SCHEMAS)
    components["securitySchemes"] = {
        "bearer": {"type": "http", "scheme": "bearer", "description": "any of `reef.tokens`; none configured = off"},
        "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key", "description": "the same token"},
    }
    document["security"] = [{"bearer": []}, {"apiKey": []}]
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            _complete_operation(method, path, operation)
    document["paths"] = {**document.get("paths", {}), **inference_paths(_errors)}
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    document.setdefault("tags", []).append(
        {"name": "inference", "description": "Provider-native `/v1/*` endpoints; every answer is recorded"}
    )
    return document


def _errors(*statuses: int) -> dict[str, Any]:
    return {
        str(status): {"description": _STATUS_TEXT[status], "content": {"application/json": {"schema": _ERROR_REF}}}
        for status in statuses
    }


def _adapter_schema(declared: dict[str, Any]) -> dict[str, Any]:
    """The `adapter` query parameter: one of the shipped adapters (null where the route has a default)."""
    names = {"enum": adapter_names()}
    return {"anyOf": [names, {"type": "null"}]} if "anyOf" in declared else names


def _complete_operation(method: str, path: str, operation: dict[str, Any]) -> None:
    responses = operation.setdefault("responses", {})
    responses.pop("422", None)  # validation errors are answered as 400 with the Error shape
    key = (method, path)
    for parameter in operation.get("parameters", []):
        if parameter.get("in") == "path" and parameter.get("name") == "scenario":  # checked by the route itself
            parameter["schema"] = {"type": "string", "pattern": SCENARIO_NAME_PATTERN, "title": "Scenario"}
        if parameter.get("in") == "query" and parameter.get("name") == "adapter":  # checked by load_adapter
            parameter["schema"] = _adapter_schema(parameter["schema"])
    if key in _SCENARIO_HEADER_ROUTES:
        operation.setdefault("parameters", []).append(SCENARIO_HEADER)
    if key in _RAW_BODIES:
        operation["requestBody"] = {"required": True, "content": _RAW_BODIES[key]}
    statuses = []
    if operation.get("parameters") or operation.get("requestBody"):
        statuses.append(400)
    needed = required_scope(method.upper(), path)
    operation["x-reef-scope"] = needed.name.lower()
    if needed is Scope.OPEN:
        operation["security"] = []
    else:
        statuses += [401, 403] if needed > Scope.EPISODE else [401]
        operation["description"] = (operation.get("description") or "") + f"\n\nNeeds {scope_words(needed)}."
    if "{" in path or key in _SCENARIO_HEADER_ROUTES or key in _NOT_FOUND_ROUTES:
        statuses.append(404)
    if key in _CONFLICT_ROUTES:
        statuses.append(409)
    if operation.get("requestBody"):
        statuses += [413, 415]
    if path != "/healthz":
        statuses.append(421)
    responses.update(_errors(*statuses))
