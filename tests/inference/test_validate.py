"""`check_request`: what Reef assumes of a body it reads, and the field it blames when the body falls short."""

from __future__ import annotations

from typing import Any

import pytest

from reef.core.errors import BadRequest
from reef.core.scenarios import Dialect
from reef.inference.translate import check_request, convert_request

CHAT, MESSAGES, RESPONSES = Dialect.CHAT, Dialect.MESSAGES, Dialect.RESPONSES
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}

WELL_FORMED: dict[Dialect, dict[str, Any]] = {
    CHAT: {
        "model": "m",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image_url", "image_url": "u"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ],
        "max_tokens": 8,
        "stop": "END",
        "tools": [{"type": "function", "function": {"name": "w", "parameters": SCHEMA}}],
        "tool_choice": {"type": "function", "function": {"name": "w"}},
        "stream_options": {"include_usage": True},
        "temperature": None,
    },
    MESSAGES: {
        "model": "m",
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "thinking", "thinking": "…"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "w", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]},
        ],
        "max_tokens": 8,
        "tools": [{"name": "w", "input_schema": SCHEMA}, {"type": "web_search_20250305", "name": "web_search"}],
        "tool_choice": {"type": "auto"},
        "metadata": {"user_id": None},
    },
    RESPONSES: {
        "model": "m",
        "instructions": "Be brief.",
        "input": [
            {"role": "developer", "content": "Rules."},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ],
        "tools": [{"type": "function", "name": "w", "parameters": SCHEMA}, {"type": "web_search"}],
        "tool_choice": "auto",
        "max_output_tokens": 16,
    },
}


@pytest.mark.parametrize("dialect", list(Dialect))
def test_a_well_formed_request_passes_with_fields_reef_does_not_read_left_alone(dialect: Dialect) -> None:
    check_request(dialect, {**WELL_FORMED[dialect], "reasoning_effort": 5, "x-vendor": [None]})


@pytest.mark.parametrize("source", list(Dialect))
@pytest.mark.parametrize("target", list(Dialect))
def test_what_reef_translates_an_accepted_request_into_is_accepted_in_the_target_dialect(
    source: Dialect, target: Dialect
) -> None:
    check_request(target, convert_request(WELL_FORMED[source], source, target))


@pytest.mark.parametrize(
    ("dialect", "body", "field"),
    [
        (MESSAGES, {"messages": 5}, "messages"),
        (MESSAGES, {"messages": []}, "messages"),
        (MESSAGES, {"max_tokens": 8}, "messages"),
        (
            MESSAGES,
            {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
            "messages.0.content.0.text",
        ),
        (MESSAGES, {"messages": [{"role": "user", "content": [{"text": "a"}]}]}, "messages.0.content.0.type"),
        (MESSAGES, {"messages": [{"role": "user", "content": "a"}], "metadata": [1]}, "metadata"),
        (MESSAGES, {"messages": [{"role": "user", "content": "a"}], "tools": [{"name": 5}]}, "tools.0.name"),
        (MESSAGES, {"messages": [{"role": "user", "content": "a"}], "max_tokens": 0}, "max_tokens"),
        (CHAT, {"messages": [{"content": "a"}]}, "messages.0.role"),
        (CHAT, {"messages": [{"role": "user", "content": "a"}], "stop": 8}, "stop"),
        (CHAT, {"messages": [{"role": "user", "content": "a"}], "tool_choice": ["auto"]}, "tool_choice"),
        (CHAT, {"messages": [{"role": "user", "content": "a"}], "stream": "yes"}, "stream"),
        (
            CHAT,
            {"messages": [{"role": "assistant", "tool_calls": [{"function": None}]}]},
            "messages.0.tool_calls.0.function",
        ),
        (RESPONSES, {"input": [None]}, "input.0"),
        (RESPONSES, {"input": "a", "tools": [{"type": "function"}]}, "tools.0.name"),
        (RESPONSES, {"model": "m"}, "input"),
        (RESPONSES, [1], "body"),
    ],
)
def test_a_refusal_names_the_offending_field_as_a_dotted_path(dialect: Dialect, body: Any, field: str) -> None:
    with pytest.raises(BadRequest) as caught:
        check_request(dialect, body)
    assert caught.value.field == field and caught.value.message.startswith(f"{field}: ")
