"""What Reef may assume of a request body once it reads it: `check_request(dialect, body)`.

The translators and the local engine read and rewrite a body's conversation, tools and sampling fields; they
call `check_request` once, where they first read the body, and trust it afterwards. It checks the types of the
fields they read (and the fields each dialect requires), and raises `BadRequest` naming the first offending
field as a dotted path (`messages.2.content.0.text`). Fields Reef does not read are the provider's business and
are not looked at. A body relayed to a same-dialect upstream unchanged is not checked: the upstream judges it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reef.core.errors import BadRequest
from reef.core.scenarios import Dialect

Check = Callable[[Any], None]
"""Raises `_Invalid` unless a value has the expected shape."""
Shape = Check | tuple[type, ...]
"""A field's shape in an object: a check, or the types its value may have (tested inline: most fields are)."""


def check_request(dialect: Dialect, body: Any) -> None:
    """Raise BadRequest (naming the field) unless `body` is a request in `dialect` that Reef can read."""
    if not isinstance(body, dict):
        raise BadRequest("must be a JSON object", "body")
    try:
        _REQUESTS[dialect](body)
    except _Invalid as exc:
        raise BadRequest(exc.message, ".".join(str(key) for key in reversed(exc.path))) from None


class _Invalid(Exception):
    """A shape error. Its path is collected on the way out, innermost key first, so that a body that passes
    never pays for building one."""

    def __init__(self, message: str, *path: str | int) -> None:
        super().__init__(message)
        self.message = message
        self.path = list(path)


# --- building blocks ------------------------------------------------------------------------------------------


def _string(value: Any) -> None:
    if not isinstance(value, str):
        raise _Invalid("must be a string")


def _integer(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid("must be an integer")


def _count(value: Any) -> None:
    _integer(value)
    if value < 1:
        raise _Invalid("must be at least 1")


def _number(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Invalid("must be a number")


def _optional(check: Check) -> Check:
    """`check`, or null (which the translators read as absent)."""

    def optional(value: Any) -> None:
        if value is not None:
            check(value)

    return optional


_STRING, _BOOLEAN, _OBJECT = (str,), (bool,), (dict,)
_NULL = (type(None),)
_OPTIONAL_STRING, _OPTIONAL_BOOLEAN, _OPTIONAL_OBJECT = _STRING + _NULL, _BOOLEAN + _NULL, _OBJECT + _NULL
_TYPE_NAMES = {str: "a string", bool: "a boolean", dict: "an object"}


def _object(fields: dict[str, Shape], required: tuple[str, ...] = ()) -> Check:
    """An object whose listed fields, where present, have their shapes (others are not looked at)."""
    shapes = tuple(fields.items())

    def check_object(value: Any) -> None:
        if not isinstance(value, dict):
            raise _Invalid("must be an object")
        for key in required:
            if key not in value:
                raise _Invalid("is required", key)
        for key, shape in shapes:
            if key not in value:
                continue
            if isinstance(shape, tuple):
                if not isinstance(value[key], shape):
                    raise _Invalid(f"must be {_TYPE_NAMES[shape[0]]}", key)
                continue
            try:
                shape(value[key])
            except _Invalid as exc:
                exc.path.append(key)
                raise

    return check_object


def _list_of(item: Check, non_empty: bool = False) -> Check:
    def check_list(value: Any) -> None:
        if not isinstance(value, list):
            raise _Invalid("must be a list")
        if non_empty and not value:
            raise _Invalid("must not be empty")
        for index, element in enumerate(value):
            try:
                item(element)
            except _Invalid as exc:
                exc.path.append(index)
                raise

    return check_list


def _string_or_list(item: Check) -> Check:
    """A string, or a list whose elements pass `item` (content in every dialect)."""
    check_list = _list_of(item)

    def check_either(value: Any) -> None:
        if isinstance(value, list):
            check_list(value)
        elif not isinstance(value, str):
            raise _Invalid("must be a string or a list")

    return check_either


def _string_or_object(check_object: Check) -> Check:
    """A string, or an object passing `check_object` (tool choices, image URLs)."""

    def check_either(value: Any) -> None:
        if isinstance(value, dict):
            check_object(value)
        elif not isinstance(value, str):
            raise _Invalid("must be a string or an object")

    return check_either


def _tagged(kinds: dict[str, Check], default: str | None = None) -> Check:
    """An object told apart by its `type` (required unless `default`); kinds not listed pass as any object."""

    def check_tagged(value: Any) -> None:
        if not isinstance(value, dict):
            raise _Invalid("must be an object")
        kind = value.get("type", default)
        if not isinstance(kind, str):
            raise _Invalid("is required" if "type" not in value else "must be a string", "type")
        check = kinds.get(kind)
        if check is not None:
            check(value)

    return check_tagged


_text = _object({"text": _STRING}, required=("text",))
_TEXT_KINDS = {"text": _text, "input_text": _text, "output_text": _text}
_sampling: dict[str, Shape] = {
    "temperature": _optional(_number),
    "top_p": _optional(_number),
    "stream": _OPTIONAL_BOOLEAN,
}
_model: dict[str, Shape] = {"model": _OPTIONAL_STRING}


# --- OpenAI chat ----------------------------------------------------------------------------------------------

_chat_image = _object({"url": _STRING}, required=("url",))
_chat_part = _tagged(
    {"text": _text, "image_url": _object({"image_url": _string_or_object(_chat_image)}, required=("image_url",))}
)
_chat_function_call = _object({"name": _STRING, "arguments": _OPTIONAL_STRING}, required=("name",))
_chat_tool_call = _tagged(
    {"function": _object({"id": _STRING, "function": _chat_function_call}, required=("function",))}, default="function"
)
_chat_message = _object(
    {
        "role": _STRING,
        "content": _optional(_string_or_list(_chat_part)),
        "tool_call_id": _OPTIONAL_STRING,
        "tool_calls": _optional(_list_of(_chat_tool_call)),
    },
    required=("role",),
)
_chat_function = _object(
    {
        "name": _STRING,
        "description": _OPTIONAL_STRING,
        "parameters": _OPTIONAL_OBJECT,
        "strict": _OPTIONAL_BOOLEAN,
    },
    required=("name",),
)
_chat_tool = _tagged({"function": _object({"function": _chat_function}, required=("function",))}, default="function")
_chat_tool_choice = _string_or_object(
    _object({"type": _STRING, "function": _object({"name": _STRING}, required=("name",))})
)
_CHAT = _object(
    {
        **_model,
        "messages": _list_of(_chat_message, non_empty=True),
        "max_tokens": _optional(_count),
        "max_completion_tokens": _optional(_count),
        **_sampling,
        "stream_options": _optional(_object({"include_usage": _OPTIONAL_BOOLEAN})),
        "stop": _optional(_string_or_list(_string)),
        "tools": _optional(_list_of(_chat_tool)),
        "tool_choice": _optional(_chat_tool_choice),
        "parallel_tool_calls": _OPTIONAL_BOOLEAN,
        "user": _OPTIONAL_STRING,
        "metadata": _OPTIONAL_OBJECT,
        "n": _optional(_integer),
        "seed": _optional(_integer),
        "logprobs": _OPTIONAL_BOOLEAN,
        "top_logprobs": _optional(_integer),
    },
    required=("messages",),
)


# --- Anthropic messages ---------------------------------------------------------------------------------------

_image_source = _object({"type": _STRING, "media_type": _STRING, "data": _STRING, "url": _STRING})
_image_block = _object({"source": _image_source}, required=("source",))
_tool_result_block = _object(
    {
        "tool_use_id": _STRING,
        "content": _optional(_string_or_list(_tagged({**_TEXT_KINDS, "image": _image_block}))),
        "is_error": _OPTIONAL_BOOLEAN,
    },
    required=("tool_use_id",),
)
_messages_block = _tagged(
    {
        "text": _text,
        "image": _image_block,
        "tool_use": _object({"id": _STRING, "name": _STRING, "input": _OBJECT}, required=("id", "name")),
        "tool_result": _tool_result_block,
    }
)
_messages_turn = _object({"role": _STRING, "content": _string_or_list(_messages_block)}, required=("role", "content"))
_messages_tool = _object(
    {"name": _STRING, "description": _OPTIONAL_STRING, "input_schema": _OBJECT, "type": _OPTIONAL_STRING},
    required=("name",),
)
_MESSAGES = _object(
    {
        **_model,
        "system": _optional(_string_or_list(_tagged({"text": _text}))),
        "messages": _list_of(_messages_turn, non_empty=True),
        "max_tokens": _optional(_count),
        **_sampling,
        "top_k": _optional(_integer),
        "stop_sequences": _optional(_list_of(_string)),
        "tools": _optional(_list_of(_messages_tool)),
        "tool_choice": _optional(
            _object({"type": _STRING, "name": _STRING, "disable_parallel_tool_use": _OPTIONAL_BOOLEAN}, ("type",))
        ),
        "metadata": _optional(_object({"user_id": _OPTIONAL_STRING})),
    },
    required=("messages",),
)


# --- OpenAI Responses -----------------------------------------------------------------------------------------

_responses_part = _tagged({**_TEXT_KINDS, "input_image": _object({"image_url": _OPTIONAL_STRING})})
_responses_item = _tagged(
    {
        "message": _object({"role": _STRING, "content": _string_or_list(_responses_part)}, required=("content",)),
        "function_call": _object(
            {"call_id": _STRING, "name": _STRING, "arguments": _OPTIONAL_STRING}, required=("call_id", "name")
        ),
        "function_call_output": _object(
            {"call_id": _STRING, "output": _string_or_list(_responses_part)},
            required=("call_id", "output"),
        ),
    },
    default="message",
)
_responses_tool = _tagged(
    {
        "function": _object(
            {
                "name": _STRING,
                "description": _OPTIONAL_STRING,
                "parameters": _OPTIONAL_OBJECT,
                "strict": _OPTIONAL_BOOLEAN,
            },
            required=("name",),
        )
    }
)
_RESPONSES = _object(
    {
        **_model,
        "instructions": _OPTIONAL_STRING,
        "input": _string_or_list(_responses_item),
        "max_output_tokens": _optional(_count),
        **_sampling,
        "user": _OPTIONAL_STRING,
        "metadata": _OPTIONAL_OBJECT,
        "parallel_tool_calls": _OPTIONAL_BOOLEAN,
        "tools": _optional(_list_of(_responses_tool)),
        "tool_choice": _optional(_string_or_object(_object({"type": _STRING, "name": _STRING}))),
    },
    required=("input",),
)

_REQUESTS: dict[Dialect, Check] = {Dialect.CHAT: _CHAT, Dialect.MESSAGES: _MESSAGES, Dialect.RESPONSES: _RESPONSES}
