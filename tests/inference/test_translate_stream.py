"""Stream event conversion between dialects, checked against the non-streaming translation and the real SDKs."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2 as httpx  # the SDKs take httpx2 clients
import openai
import pytest

from reef.core.scenarios import Dialect
from reef.inference.sse import SSEEvent, encode_event, is_terminal, parse_event
from reef.inference.translate import StreamConverter, assembler_for, chat_chunk, convert_response
from tests.fakes.upstream import answer_body, answer_frames

PATHS = {Dialect.CHAT: "/v1/chat/completions", Dialect.MESSAGES: "/v1/messages", Dialect.RESPONSES: "/v1/responses"}
TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
PAIRS = [(s, t) for s in Dialect for t in Dialect if s is not t]


def _request(dialect: Dialect, model: str, tools: bool) -> dict[str, Any]:
    """The same question asked in each dialect (tools in the dialect's own shape)."""
    if dialect is Dialect.CHAT:
        body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "one two three"}]}
        if tools:
            body["tools"] = [TOOL]
    elif dialect is Dialect.MESSAGES:
        body = {"model": model, "max_tokens": 9, "messages": [{"role": "user", "content": "one two three"}]}
        if tools:
            body["tools"] = [{"name": "lookup", "input_schema": {"type": "object"}}]
    else:
        body = {"model": model, "input": "one two three"}
        if tools:
            body["tools"] = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
    return body


def _convert(source: Dialect, target: Dialect, frames: list[bytes]) -> list[SSEEvent]:
    converter = StreamConverter(source, target)
    out: list[SSEEvent] = []
    for frame in frames:
        out += converter.feed(parse_event(frame))
    return out


def _essence(dialect: Dialect, body: dict[str, Any]) -> dict[str, Any]:
    """What must agree between a streamed and a non-streamed translation (ids are generated, so left out)."""
    chat = convert_response(body, dialect, Dialect.CHAT)
    choice = chat["choices"][0]
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in choice["message"].get("tool_calls") or []]
    return {
        "text": choice["message"]["content"],
        "calls": calls,
        "finish_reason": choice["finish_reason"],
        "completion_tokens": chat["usage"]["completion_tokens"],
    }


@pytest.mark.parametrize("tools", [False, True], ids=["text", "tool-call"])
@pytest.mark.parametrize(("source", "target"), PAIRS, ids=[f"{s.value}-to-{t.value}" for s, t in PAIRS])
def test_a_converted_stream_assembles_to_the_converted_answer(source: Dialect, target: Dialect, tools: bool) -> None:
    request = _request(source, "tool-model" if tools else "m", tools)
    events = _convert(source, target, answer_frames(PATHS[source], request))
    assert events, "the conversion produced nothing"
    assert [is_terminal(target, e) for e in events].count(True) == 1
    assert is_terminal(target, events[-1])
    assembler = assembler_for(target)
    for event in events:
        assembler.feed(parse_event(encode_event(event)))
    expected = convert_response(answer_body(PATHS[source], request), source, target)
    assert _essence(target, assembler.result()) == _essence(target, expected)
    if tools:
        assert _essence(target, expected)["calls"] == [("lookup", '{"text":"one two three"}')]


def test_a_cut_stream_converts_what_arrived_without_a_terminal_event() -> None:
    frames = answer_frames(PATHS[Dialect.MESSAGES], _request(Dialect.MESSAGES, "m", False))
    events = _convert(Dialect.MESSAGES, Dialect.CHAT, frames[:5])
    assert not any(is_terminal(Dialect.CHAT, e) for e in events)
    assembler = assembler_for(Dialect.CHAT)
    for event in events:
        assembler.feed(event)
    assert assembler.result()["choices"][0]["message"]["content"].startswith("echo:")


def _chat_chunks() -> list[dict[str, Any]]:
    head = ("chatcmpl-9", 1700000000, "local")
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": ""}}
    return [
        chat_chunk(*head, {"role": "assistant", "content": ""}),
        chat_chunk(*head, {"content": "Hello"}),
        chat_chunk(*head, {"content": " world"}),
        chat_chunk(*head, {"tool_calls": [call]}),
        chat_chunk(*head, {"tool_calls": [{"index": 0, "function": {"arguments": '{"q": 1}'}}]}),
        chat_chunk(*head, {}, "tool_calls"),
        chat_chunk(*head, usage={"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10}),
    ]


def _wire(target: Dialect) -> bytes:
    """What the local engine would send: chat chunks fed straight into a converter, then finished."""
    converter = StreamConverter(Dialect.CHAT, target)
    events: list[SSEEvent] = []
    for chunk in _chat_chunks():
        events += converter.feed_chunk(chunk)
    events += converter.finish()
    return b"".join(encode_event(e) for e in events)


def _transport(body: bytes) -> httpx.MockTransport:
    return httpx.MockTransport(
        lambda request: httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
    )


def test_the_anthropic_sdk_accepts_a_stream_converted_from_chat_chunks() -> None:
    client = anthropic.Anthropic(
        api_key="x", base_url="http://fake", http_client=httpx.Client(transport=_transport(_wire(Dialect.MESSAGES)))
    )
    with client.messages.stream(model="local", max_tokens=9, messages=[{"role": "user", "content": "hi"}]) as stream:
        message = stream.get_final_message()
    assert message.content[0].type == "text" and message.content[0].text == "Hello world"
    assert message.content[1].type == "tool_use" and message.content[1].input == {"q": 1}
    assert message.stop_reason == "tool_use"
    assert message.usage.output_tokens == 6


def test_the_openai_sdk_accepts_a_responses_stream_converted_from_chat_chunks() -> None:
    client = openai.OpenAI(
        api_key="x", base_url="http://fake/v1", http_client=httpx.Client(transport=_transport(_wire(Dialect.RESPONSES)))
    )
    with client.responses.stream(model="local", input="hi") as stream:
        response = stream.get_final_response()
    assert response.output_text == "Hello world"
    assert response.output[1].type == "function_call" and response.output[1].arguments == '{"q": 1}'
    assert response.usage is not None and response.usage.output_tokens == 6


def test_the_openai_sdk_accepts_a_chat_stream_converted_from_anthropic_events() -> None:
    request = _request(Dialect.MESSAGES, "m", False)
    events = _convert(Dialect.MESSAGES, Dialect.CHAT, answer_frames(PATHS[Dialect.MESSAGES], request))
    body = b"".join(encode_event(e) for e in events)
    client = openai.OpenAI(api_key="x", base_url="http://fake/v1", http_client=httpx.Client(transport=_transport(body)))
    with client.chat.completions.stream(model="m", messages=[{"role": "user", "content": "one two three"}]) as stream:
        completion = stream.get_final_completion()
    assert completion.choices[0].message.content == "echo: one two three"
    assert completion.choices[0].finish_reason == "stop"
