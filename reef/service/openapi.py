"""The OpenAPI document at `/openapi.json`: FastAPI's own, completed with what it cannot see.

FastAPI describes the `/reef/*` routes from their signatures. It does not see the `/v1/*` routes: `EdgeMiddleware`
serves them as plain ASGI handlers before FastAPI routes anything. This module adds them. It also adds what the
edge does for every route, outside any signature: bearer tokens (401), the body limit (413), the scenario header
some routes read, and the error shape Reef answers with (400, where FastAPI would say 422).
docs/http-api.md is the reader's version; tests/service/test_api_document.py keeps the two in step.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from reef.service.middleware import _open as is_open_path

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
                    "examples": ["invalid_request_error", "authentication_error", "not_found_error", "conflict_error"],
                },
                "message": {"type": "string", "description": "for a 400, starts with the offending field"},
            },
        }
    },
}
_SCENARIO_NAME = {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,128}$"}
_RELEASE_ID = {"type": "string", "minLength": 1, "maxLength": 200}
_STATUS_TEXT = {
    400: "Bad input; the message names the field (`messages.0.content: must be a string or a list`)",
    401: "Missing or invalid token",
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
    document["paths"] = {**document.get("paths", {}), **inference_paths()}
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
    if is_open_path(path):
        operation["security"] = []
    else:
        statuses.append(401)
    if "{" in path or key in _SCENARIO_HEADER_ROUTES:
        statuses.append(404)
    if key in _CONFLICT_ROUTES:
        statuses.append(409)
    if operation.get("requestBody"):
        statuses.append(413)
    responses.update(_errors(*statuses))


# --- the /v1 fast path -------------------------------------------------------------------------------------------

SCENARIO_HEADER: dict[str, Any] = {
    "name": "x-reef-scenario",
    "in": "header",
    "required": True,
    "description": "the scenario (records, releases, learner); a new name creates it unless implicit creation is off",
    "schema": _SCENARIO_NAME,
}
_RELEASE_HEADERS: list[dict[str, Any]] = [
    {
        "name": "x-reef-release-id",
        "in": "header",
        "required": False,
        "description": "serve this release of the scenario instead of the current one (404 if it is not one)",
        "schema": _RELEASE_ID,
    },
    {
        "name": "x-reef-artifact-version",
        "in": "header",
        "required": False,
        "deprecated": True,
        "description": "the former name of x-reef-release-id",
        "schema": _RELEASE_ID,
    },
]
_RECEIPT_HEADER = {
    "description": "the receipt: id of the durable record of this interaction, cite it in POST /reef/report "
    "(not sent on a stream, whose receipt is in-band)",
    "schema": {"type": "string"},
}
_SERVED_BY_HEADER = {"description": "the release that served the request", "schema": {"type": "string"}}


def _nullable(schema: _Schema) -> _Schema:
    return {"anyOf": [schema, {"type": "null"}]}


def _object(properties: dict[str, _Schema], required: tuple[str, ...] = (), **extra: Any) -> _Schema:
    """An object whose listed properties Reef reads; others are the provider's and pass through."""
    schema: _Schema = {"type": "object", "properties": properties, "additionalProperties": True, **extra}
    if required:
        schema["required"] = list(required)
    return schema


def _string_or_list(item: _Schema) -> _Schema:
    return {"anyOf": [{"type": "string"}, {"type": "array", "items": item}]}


_STRING, _BOOLEAN, _OBJECT = {"type": "string"}, {"type": "boolean"}, {"type": "object"}
_COUNT = _nullable({"type": "integer", "minimum": 1})
_SAMPLING = {
    "model": _nullable(_STRING),
    "temperature": _nullable({"type": "number"}),
    "top_p": _nullable({"type": "number"}),
    "stream": _nullable({**_BOOLEAN, "description": "true: server-sent events, the receipt in-band"}),
}
_TAGGED = _object({"type": _STRING}, ("type",))
_FUNCTION = _object(
    {
        "name": _STRING,
        "description": _nullable(_STRING),
        "parameters": _nullable(_OBJECT),
        "strict": _nullable(_BOOLEAN),
    },
    ("name",),
)
_CHAT_MESSAGE = _object(
    {
        "role": _STRING,
        "content": _nullable(_string_or_list(_TAGGED)),
        "tool_call_id": _nullable(_STRING),
        "tool_calls": _nullable({"type": "array", "items": _object({"function": _OBJECT}, ("function",))}),
    },
    ("role",),
)
_MESSAGES_REQUEST = _object(
    {
        **_SAMPLING,
        "system": _nullable(_string_or_list(_object({"type": _STRING, "text": _STRING}, ("type", "text")))),
        "messages": {
            "type": "array",
            "minItems": 1,
            "items": _object({"role": _STRING, "content": _string_or_list(_TAGGED)}, ("role", "content")),
        },
        "max_tokens": _COUNT,
        "top_k": _nullable({"type": "integer"}),
        "stop_sequences": _nullable({"type": "array", "items": _STRING}),
        "tools": _nullable(
            {
                "type": "array",
                "items": _object(
                    {"name": _STRING, "description": _nullable(_STRING), "input_schema": _OBJECT}, ("name",)
                ),
            }
        ),
        "tool_choice": _nullable(_object({"type": _STRING, "name": _STRING}, ("type",))),
        "metadata": _nullable(_object({"user_id": _nullable(_STRING)})),
    },
    ("messages",),
    description="An Anthropic Messages request",
)
INFERENCE_SCHEMAS: dict[str, _Schema] = {
    "ChatCompletionRequest": _object(
        {
            **_SAMPLING,
            "messages": {"type": "array", "minItems": 1, "items": _CHAT_MESSAGE},
            "max_tokens": _COUNT,
            "max_completion_tokens": _COUNT,
            "stream_options": _nullable(_object({"include_usage": _nullable(_BOOLEAN)})),
            "stop": _nullable(_string_or_list(_STRING)),
            "tools": _nullable({"type": "array", "items": _object({"function": _FUNCTION}, ("function",))}),
            "tool_choice": _nullable({"anyOf": [_STRING, _OBJECT]}),
            "parallel_tool_calls": _nullable(_BOOLEAN),
            "user": _nullable(_STRING),
            "metadata": _nullable(_OBJECT),
            "n": _nullable({"type": "integer"}),
            "seed": _nullable({"type": "integer"}),
            "logprobs": _nullable(_BOOLEAN),
            "top_logprobs": _nullable({"type": "integer"}),
        },
        ("messages",),
        description="An OpenAI Chat Completions request",
    ),
    "ResponsesRequest": _object(
        {
            **_SAMPLING,
            "instructions": _nullable(_STRING),
            "input": _string_or_list(_object({"type": {**_STRING, "default": "message"}})),
            "max_output_tokens": _COUNT,
            "user": _nullable(_STRING),
            "metadata": _nullable(_OBJECT),
            "parallel_tool_calls": _nullable(_BOOLEAN),
            "tools": _nullable({"type": "array", "items": _TAGGED}),
            "tool_choice": _nullable({"anyOf": [_STRING, _OBJECT]}),
        },
        ("input",),
        description="An OpenAI Responses request",
    ),
    "MessagesRequest": _MESSAGES_REQUEST,
    "TokenCount": _object({"input_tokens": {"type": "integer"}}, ("input_tokens",)),
    "ModelList": {
        "type": "object",
        "required": ["object", "data"],
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": _object({"id": _STRING, "object": _STRING, "owned_by": _STRING})},
        },
    },
}

# (method, path, request schema, answer schema, summary, the receipt frame of a stream; None: not recorded)
_INFERENCE_ROUTES: list[tuple[str, str, str | None, str | None, str, str | None]] = [
    (
        "post",
        "/v1/chat/completions",
        "ChatCompletionRequest",
        None,
        "OpenAI Chat Completions",
        'one extra chunk `{"object": "chat.completion.chunk", "choices": [], "reef": {"agent_record_id": …}}` '
        "just before `data: [DONE]`",
    ),
    (
        "post",
        "/v1/responses",
        "ResponsesRequest",
        None,
        "OpenAI Responses",
        'the terminal `response.completed` (or `response.incomplete` / `response.failed`) event with `"reef": '
        '{"agent_record_id": …}` added',
    ),
    (
        "post",
        "/v1/messages",
        "MessagesRequest",
        None,
        "Anthropic Messages",
        'the `message_stop` event with `"reef": {"agent_record_id": …}` added',
    ),
    ("post", "/v1/messages/count_tokens", "MessagesRequest", "TokenCount", "Anthropic token counting", None),
    ("get", "/v1/models", None, "ModelList", "The served models (an OpenAI list)", None),
]
_DESCRIPTION = (
    "The body is the provider's own and goes upstream unchanged (a missing `model` is filled in); Reef checks the "
    "fields it reads when it translates the body or runs the local model. The answer is the provider's own. An "
    "upstream 4xx is relayed with its status and body. Headers `x-reef-tag-<name>: <value>` are stored on the "
    "record as tags."
)


def _inference_operation(
    method: str, path: str, request: str | None, answer: str | None, summary: str, receipt_frame: str | None
) -> dict[str, Any]:
    ok: dict[str, Any] = {
        "description": "The answer",
        "content": {"application/json": {"schema": _ref(answer) if answer else _OBJECT}},
    }
    operation: dict[str, Any] = {
        "tags": ["inference"],
        "summary": summary,
        "operationId": path.strip("/").replace("/", "_") + "_" + method,
        "responses": {"200": ok, **_errors(401)},
    }
    if request is None:  # GET /v1/models: no scenario, no body
        return operation
    operation["description"] = _DESCRIPTION
    if receipt_frame is not None:
        operation["description"] += (
            f" With `stream: true` the answer is server-sent events; the receipt is {receipt_frame}."
        )
        ok["headers"] = {"x-reef-agent-record-id": _RECEIPT_HEADER, "x-reef-release-id": _SERVED_BY_HEADER}
        ok["content"]["text/event-stream"] = {"schema": {"type": "string", "description": f"receipt: {receipt_frame}"}}
    operation["parameters"] = [SCENARIO_HEADER, *_RELEASE_HEADERS]
    operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": _ref(request)}}}
    operation["responses"].update(_errors(400, 401, 404, 413, 502, 503, 504))
    return operation


def _ref(name: str) -> _Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def inference_paths() -> dict[str, dict[str, Any]]:
    """The path items of the `/v1/*` routes (`reef.service.routes.inference.ROUTES`)."""
    paths: dict[str, dict[str, Any]] = {}
    for method, path, request, answer, summary, receipt_frame in _INFERENCE_ROUTES:
        operation = _inference_operation(method, path, request, answer, summary, receipt_frame)
        paths.setdefault(path, {})[method] = operation
    return paths
