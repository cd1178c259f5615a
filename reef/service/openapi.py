"""The OpenAPI document at `/openapi.json`: FastAPI's own, completed with what it cannot see.

FastAPI describes the `/reef/*` routes from their signatures. It does not see the `/v1/*` routes: `EdgeMiddleware`
serves them as plain ASGI handlers before FastAPI routes anything. This module adds them (described in
`openapi_inference`). It also adds what the
edge does for every route, outside any signature: bearer tokens (401) and their scopes (403; the scope a route
needs is its `x-reef-scope`), the body limit (413), the scenario header
some routes read, and the error shape Reef answers with (400, where FastAPI would say 422).
docs/reference/http-api.md is the reader's version; tests/service/test_api_document.py keeps the two in step.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from reef.service.openapi_inference import INFERENCE_SCHEMAS, SCENARIO_HEADER, inference_paths
from reef.service.scopes import Scope, required_scope, scope_words

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
        ("get", "/reef/harness/install"),
        ("post", "/reef/harness/proposals"),
    }
)
_CONFLICT_ROUTES = frozenset(
    {
        ("post", "/reef/report"),
        ("post", "/reef/records"),
        ("post", "/reef/records/batch"),
        ("post", "/reef/train"),
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
    ("post", "/reef/harness/proposals"): {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["mutations"],
                "additionalProperties": False,
                "properties": {
                    "mutations": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["op"],
                            "properties": {
                                "op": {"enum": ["create", "update", "remove"]},
                                "id": {"type": "string", "description": "the node to update or remove"},
                                "node": {"type": "object", "description": "create: the new node"},
                                "after": {"type": "string", "description": "create: the node it follows"},
                                "config": {"type": "object", "description": "update: merged into the node's config"},
                            },
                        },
                    },
                    "reason": {"type": "string"},
                },
            }
        }
    },
}
TASK_SCHEMA: _Schema = {
    "type": "object",
    "description": "a gate task: `prompt` or `messages`, a `checker` and what it checks against",
    "properties": {
        "id": {"type": "string"},
        "prompt": {"type": "string"},
        "messages": {"type": "array", "minItems": 1, "items": {"type": "object"}},
        "checker": {
            "type": "string",
            "default": "exact",
            "description": "exact, contains, regex, numeric, f1 or package.module:function",
        },
        "answer": {},
        "pattern": {"type": "string", "description": "regex checker"},
        "max_tokens": {"type": "integer", "minimum": 1},
    },
}


def reef_openapi(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """What to set as `app.openapi`: FastAPI's document completed by `complete_document`, built once."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = complete_document(generate())
        return app.openapi_schema

    return openapi


def complete_document(generated: dict[str, Any]) -> dict[str, Any]:
    """FastAPI's document plus the `/v1/*` routes, auth, the body limit and Reef's error shape."""
    document = copy.deepcopy(generated)
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas.update(Error=ERROR_SCHEMA, Task=TASK_SCHEMA, **INFERENCE_SCHEMAS)
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


def _complete_operation(method: str, path: str, operation: dict[str, Any]) -> None:
    responses = operation.setdefault("responses", {})
    responses.pop("422", None)  # validation errors are answered as 400 with the Error shape
    key = (method, path)
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
    if "{" in path or key in _SCENARIO_HEADER_ROUTES:
        statuses.append(404)
    if key in _CONFLICT_ROUTES:
        statuses.append(409)
    if operation.get("requestBody"):
        statuses.append(413)
    responses.update(_errors(*statuses))
