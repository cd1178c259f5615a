"""The OpenAPI description of the `/v1/*` fast path: the provider-native inference routes FastAPI cannot see.

`EdgeMiddleware` serves them as plain ASGI handlers, so `reef.service.openapi` adds these path items and schemas
to FastAPI's document. The schemas name the fields Reef reads; everything else passes through to the provider.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_Schema = dict[str, Any]
Errors = Callable[..., dict[str, Any]]

_SCENARIO_NAME = {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,128}$"}
_RELEASE_ID = {"type": "string", "minLength": 1, "maxLength": 200}

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


def _ref(name: str) -> _Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _event(name: _Schema, data: _Schema, description: str) -> _Schema:
    """One server-sent event as a client parses it: `event` (`message` when the frame names none) and `data`."""
    return {
        "type": "object",
        "required": ["data"],
        "description": description,
        "properties": {"event": name, "data": data, "id": _STRING, "retry": {"type": "integer", "minimum": 0}},
    }


def _json_text(schema: str) -> _Schema:
    """An event's `data`: JSON text whose decoded value is the named schema."""
    return {"type": "string", "contentMediaType": "application/json", "contentSchema": _ref(schema)}


_RECEIPT = _object({"agent_record_id": _STRING}, ("agent_record_id",), description="Reef's receipt, in-band")
STREAM_SCHEMAS: dict[str, _Schema] = {
    "ChatCompletionChunk": _object(
        {"id": _STRING, "object": {"const": "chat.completion.chunk"}, "choices": {"type": "array"}, "reef": _RECEIPT},
        description="one chunk of a Chat Completions stream; the receipt chunk has no choices and carries `reef`",
    ),
    "ResponsesStreamEvent": _object(
        {"type": _STRING, "sequence_number": {"type": "integer"}, "response": _OBJECT, "reef": _RECEIPT},
        ("type",),
        description="one Responses event; `reef` is added to the terminal `response.completed` / "
        "`response.incomplete` / `response.failed` event",
    ),
    "MessagesStreamEvent": _object(
        {"type": _STRING, "message": _OBJECT, "delta": _OBJECT, "reef": _RECEIPT},
        ("type",),
        description="one Anthropic Messages event; `reef` is added to `message_stop`",
    ),
}
_MESSAGES_EVENTS = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "error",
]
# The event each streaming route sends, as `text/event-stream`'s schema (one event; Open API 3.2's `itemSchema`).
_STREAM_EVENTS: dict[str, _Schema] = {
    "/v1/chat/completions": _event(
        {"const": "message", "description": "the frames name no event"},
        {"anyOf": [_json_text("ChatCompletionChunk"), {"const": "[DONE]"}]},
        "a chunk, then the receipt chunk, then `data: [DONE]`",
    ),
    "/v1/responses": _event(
        {"type": "string", "pattern": r"^(response\.[a-z_.]+|error)$", "examples": ["response.output_text.delta"]},
        _json_text("ResponsesStreamEvent"),
        "a Responses event named by `event` and by its `type`",
    ),
    "/v1/messages": _event(
        {"enum": _MESSAGES_EVENTS}, _json_text("MessagesStreamEvent"), "an Anthropic event named by `event`"
    ),
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
    errors: Errors,
    method: str,
    path: str,
    request: str | None,
    answer: str | None,
    summary: str,
    receipt_frame: str | None,
) -> dict[str, Any]:
    ok: dict[str, Any] = {
        "description": "The answer",
        "content": {"application/json": {"schema": _ref(answer) if answer else _OBJECT}},
    }
    operation: dict[str, Any] = {
        "tags": ["inference"],
        "summary": summary,
        "operationId": path.strip("/").replace("/", "_") + "_" + method,
        "responses": {"200": ok, **errors(401, 421)},
    }
    if request is None:  # GET /v1/models: no scenario, no body
        return operation
    operation["description"] = _DESCRIPTION
    if receipt_frame is not None:
        operation["description"] += (
            f" With `stream: true` the answer is server-sent events; the receipt is {receipt_frame}."
        )
        ok["headers"] = {"x-reef-agent-record-id": _RECEIPT_HEADER, "x-reef-release-id": _SERVED_BY_HEADER}
        ok["content"]["text/event-stream"] = {"schema": _STREAM_EVENTS[path]}
    operation["parameters"] = [SCENARIO_HEADER, *_RELEASE_HEADERS]
    operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": _ref(request)}}}
    operation["responses"].update(errors(400, 401, 403, 404, 413, 415, 421, 502, 503, 504))
    return operation


def inference_paths(errors: Errors) -> dict[str, dict[str, Any]]:
    """The path items of the `/v1/*` routes (`reef.service.routes.inference.ROUTES`); `errors(*statuses)` gives the
    responses of Reef's error statuses, as the rest of the document has them."""
    paths: dict[str, dict[str, Any]] = {}
    for method, path, request, answer, summary, receipt_frame in _INFERENCE_ROUTES:
        operation = _inference_operation(errors, method, path, request, answer, summary, receipt_frame)
        paths.setdefault(path, {})[method] = operation
    return paths
