"""Request, response and error translation between chat, messages and responses."""

from __future__ import annotations

from typing import Any

import pytest

from reef.core.scenarios import Dialect
from reef.inference.translate import convert_error, convert_request, convert_response, with_system_prompt

CHAT, MESSAGES, RESPONSES = Dialect.CHAT, Dialect.MESSAGES, Dialect.RESPONSES

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}

CHAT_REQUEST: dict[str, Any] = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}},
                {"id": "call_b", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Rome"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_b", "content": "rain"},
        {"role": "user", "content": "Thanks!"},
    ],
    "max_tokens": 64,
    "temperature": 0.2,
    "stop": ["END"],
    "tools": [WEATHER_TOOL],
    "tool_choice": "auto",
}

CHAT_COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1700000000,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Let me look.",
                "tool_calls": [
                    {
                        "id": "call_x",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
                    }
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
}


def test_a_chat_request_becomes_an_anthropic_request() -> None:
    out = convert_request(CHAT_REQUEST, CHAT, MESSAGES)
    assert out["system"] == "Be brief."
    assert out["max_tokens"] == 64
    assert out["stop_sequences"] == ["END"]
    assert out["temperature"] == 0.2
    assert out["tools"] == [
        {"name": "weather", "description": "Weather for a city", "input_schema": WEATHER_TOOL["function"]["parameters"]}
    ]
    assert out["tool_choice"] == {"type": "auto"}
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user"]
    assistant = out["messages"][1]["content"]
    assert assistant[0] == {"type": "text", "text": "Checking."}
    assert assistant[1] == {"type": "tool_use", "id": "call_a", "name": "weather", "input": {"city": "Paris"}}
    # Both tool results and the next user text share one user turn (Anthropic roles alternate).
    assert out["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_a", "content": "sunny"},
        {"type": "tool_result", "tool_use_id": "call_b", "content": "rain"},
        {"type": "text", "text": "Thanks!"},
    ]


def test_a_chat_request_without_max_tokens_gets_the_anthropic_default() -> None:
    out = convert_request({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, CHAT, MESSAGES)
    assert out["max_tokens"] > 0


@pytest.mark.parametrize("via", [MESSAGES, RESPONSES])
def test_a_chat_request_survives_a_round_trip(via: Dialect) -> None:
    back = convert_request(convert_request(CHAT_REQUEST, CHAT, via), via, CHAT)
    assert back["messages"] == CHAT_REQUEST["messages"]
    assert back["max_tokens"] == 64
    assert back["tools"] == [WEATHER_TOOL]
    assert back["tool_choice"] == "auto"
    if via is MESSAGES:
        assert back["stop"] == ["END"]


def test_an_anthropic_request_with_block_system_and_images_becomes_chat() -> None:
    body = {
        "model": "claude",
        "system": [{"type": "text", "text": "You are terse."}, {"type": "text", "text": "Answer in French."}],
        "max_tokens": 100,
        "stop_sequences": ["\n\n"],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                ],
            }
        ],
        "tool_choice": {"type": "tool", "name": "weather"},
        "metadata": {"user_id": "u1"},
    }
    out = convert_request(body, MESSAGES, CHAT)
    assert out["messages"][0] == {"role": "system", "content": "You are terse.\nAnswer in French."}
    assert out["messages"][1]["content"][1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    assert out["stop"] == ["\n\n"]
    assert out["max_tokens"] == 100
    assert out["tool_choice"] == {"type": "function", "function": {"name": "weather"}}
    assert out["user"] == "u1"


def test_a_chat_request_becomes_a_responses_request() -> None:
    out = convert_request(CHAT_REQUEST, CHAT, RESPONSES)
    assert out["instructions"] == "Be brief."
    assert out["max_output_tokens"] == 64
    assert out["tools"][0]["name"] == "weather" and out["tools"][0]["type"] == "function"
    kinds = [item.get("type") for item in out["input"]]
    assert kinds == [
        "message",
        "message",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "message",
    ]
    assert out["input"][2] == {
        "type": "function_call",
        "call_id": "call_a",
        "name": "weather",
        "arguments": '{"city":"Paris"}',
    }
    assert out["input"][4] == {"type": "function_call_output", "call_id": "call_a", "output": "sunny"}


def test_a_responses_request_with_a_plain_string_input_becomes_chat() -> None:
    body = {"model": "m", "instructions": "Be kind.", "input": "hello", "max_output_tokens": 5, "stream": True}
    out = convert_request(body, RESPONSES, CHAT)
    assert out["messages"] == [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "hello"}]
    assert out["max_tokens"] == 5
    assert out["stream_options"] == {"include_usage": True}


def test_an_anthropic_request_reaches_a_responses_upstream_through_chat() -> None:
    body = {"model": "m", "system": "sys", "max_tokens": 9, "messages": [{"role": "user", "content": "hey"}]}
    out = convert_request(body, MESSAGES, RESPONSES)
    assert out["instructions"] == "sys"
    assert out["max_output_tokens"] == 9
    assert out["input"] == [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hey"}]}]
    assert convert_request(out, RESPONSES, MESSAGES)["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hey"}]}
    ]


def test_a_chat_completion_becomes_an_anthropic_message() -> None:
    out = convert_response(CHAT_COMPLETION, CHAT, MESSAGES)
    assert out["type"] == "message" and out["role"] == "assistant"
    assert out["content"] == [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "call_x", "name": "weather", "input": {"city": "Oslo"}},
    ]
    assert out["stop_reason"] == "tool_use"
    assert out["usage"] == {"input_tokens": 11, "output_tokens": 7}


def test_a_chat_completion_becomes_a_response_object() -> None:
    out = convert_response(CHAT_COMPLETION, CHAT, RESPONSES)
    assert out["object"] == "response" and out["status"] == "completed"
    assert out["output"][0]["content"][0]["text"] == "Let me look."
    assert out["output"][1]["type"] == "function_call" and out["output"][1]["call_id"] == "call_x"
    assert out["usage"] == {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}


@pytest.mark.parametrize("via", [MESSAGES, RESPONSES])
def test_a_chat_completion_survives_a_round_trip(via: Dialect) -> None:
    back = convert_response(convert_response(CHAT_COMPLETION, CHAT, via), via, CHAT)
    assert back["choices"][0]["message"] == CHAT_COMPLETION["choices"][0]["message"]
    assert back["choices"][0]["finish_reason"] == "tool_calls"
    assert back["usage"] == CHAT_COMPLETION["usage"]


@pytest.mark.parametrize(
    ("finish_reason", "stop_reason", "status"),
    [
        ("stop", "end_turn", "completed"),
        ("length", "max_tokens", "incomplete"),
        ("tool_calls", "tool_use", "completed"),
    ],
)
def test_finish_reasons_map_across_dialects(finish_reason: str, stop_reason: str, status: str) -> None:
    message: dict[str, Any] = {"role": "assistant", "content": "x"}
    if finish_reason == "tool_calls":
        message["tool_calls"] = [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    body = {**CHAT_COMPLETION, "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}]}
    as_messages = convert_response(body, CHAT, MESSAGES)
    as_responses = convert_response(body, CHAT, RESPONSES)
    assert as_messages["stop_reason"] == stop_reason
    assert as_responses["status"] == status
    assert convert_response(as_messages, MESSAGES, CHAT)["choices"][0]["finish_reason"] == finish_reason
    assert convert_response(as_responses, RESPONSES, CHAT)["choices"][0]["finish_reason"] == finish_reason


def test_an_anthropic_message_becomes_a_response_object() -> None:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "max_tokens",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 2, "cache_read_input_tokens": 4},
    }
    out = convert_response(message, MESSAGES, RESPONSES)
    assert out["status"] == "incomplete"
    assert out["incomplete_details"] == {"reason": "max_output_tokens"}
    assert out["usage"] == {"input_tokens": 7, "output_tokens": 2, "total_tokens": 9}


def test_error_bodies_take_the_clients_shape() -> None:
    openai_error = {"error": {"type": "invalid_request_error", "message": "bad model", "param": None, "code": None}}
    anthropic_error = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad model"}}
    assert convert_error(openai_error, CHAT, MESSAGES) == anthropic_error
    assert convert_error(anthropic_error, MESSAGES, RESPONSES) == openai_error
    assert convert_error(openai_error, CHAT, CHAT) is openai_error


def test_a_harness_system_prompt_goes_first_in_every_dialect() -> None:
    chat = with_system_prompt(CHAT, {"messages": [{"role": "system", "content": "client"}]}, "harness")
    assert chat["messages"] == [{"role": "system", "content": "harness\n\nclient"}]
    chat = with_system_prompt(CHAT, {"messages": [{"role": "user", "content": "hi"}]}, "harness")
    assert chat["messages"][0] == {"role": "system", "content": "harness"}
    assert with_system_prompt(MESSAGES, {"messages": []}, "harness")["system"] == "harness"
    blocks = with_system_prompt(MESSAGES, {"system": [{"type": "text", "text": "c"}]}, "harness")["system"]
    assert blocks == [{"type": "text", "text": "harness"}, {"type": "text", "text": "c"}]
    assert with_system_prompt(RESPONSES, {"instructions": "c"}, "harness")["instructions"] == "harness\n\nc"
    body = {"messages": []}
    assert with_system_prompt(CHAT, body, None) is body
