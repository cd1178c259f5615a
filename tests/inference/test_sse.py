"""SSE splitting, parsing and the in-band receipt frames."""

from __future__ import annotations

import orjson
import pytest

from reef.core.scenarios import Dialect
from reef.inference.base import StreamFrame
from reef.inference.sse import SSEEvent, SSESplitter, encode_event, is_terminal, parse_event, receipt_frames

STREAM = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[]}\n\n'
    b": keep-alive comment\n\n"
    b'event: message_stop\r\ndata: {"type":"message_stop"}\r\n\r\n'
    b"data: [DONE]\n\n"
)


def test_whole_events_come_out_byte_exact_whatever_the_chunking() -> None:
    expected = SSESplitter().feed(STREAM)
    assert b"".join(expected) == STREAM
    assert len(expected) == 4
    for size in (1, 2, 3, 7, 64):
        splitter = SSESplitter()
        events = []
        for start in range(0, len(STREAM), size):
            events += splitter.feed(STREAM[start : start + size])
        assert events == expected
        assert splitter.remainder() == b""


def test_an_unfinished_event_stays_in_the_remainder() -> None:
    splitter = SSESplitter()
    assert splitter.feed(b'data: {"a": 1}\n\ndata: {"b"') == [b'data: {"a": 1}\n\n']
    assert splitter.remainder() == b'data: {"b"'


def test_events_parse_into_name_and_json_data() -> None:
    assert parse_event(b'event: ping\ndata: {"type":"ping"}\n\n') == SSEEvent("ping", {"type": "ping"})
    assert parse_event(b"data: [DONE]\n\n") == SSEEvent(None, "[DONE]")
    assert parse_event(b'data:{"a":1}\r\n\r\n') == SSEEvent(None, {"a": 1})
    assert parse_event(b": comment\n\n") == SSEEvent(None, None)
    assert parse_event(b'data: {"a":\ndata: 1}\n\n') == SSEEvent(None, {"a": 1})


def test_encoding_and_parsing_round_trip() -> None:
    for event in (
        SSEEvent("message_stop", {"type": "message_stop"}),
        SSEEvent(None, {"x": [1, 2]}),
        SSEEvent(None, "[DONE]"),
    ):
        assert parse_event(encode_event(event)) == event


@pytest.mark.parametrize(
    ("dialect", "event", "terminal"),
    [
        (Dialect.CHAT, SSEEvent(None, "[DONE]"), True),
        (Dialect.CHAT, SSEEvent(None, {"choices": []}), False),
        (Dialect.MESSAGES, SSEEvent("message_stop", {"type": "message_stop"}), True),
        (Dialect.MESSAGES, SSEEvent("message_delta", {"type": "message_delta"}), False),
        (Dialect.RESPONSES, SSEEvent("response.completed", {"type": "response.completed"}), True),
        (Dialect.RESPONSES, SSEEvent("response.incomplete", {"type": "response.incomplete"}), True),
        (Dialect.RESPONSES, SSEEvent(None, {"type": "response.failed"}), True),
        (Dialect.RESPONSES, SSEEvent("response.output_text.delta", {}), False),
    ],
)
def test_the_terminal_event_of_each_dialect_is_recognised(dialect: Dialect, event: SSEEvent, terminal: bool) -> None:
    assert is_terminal(dialect, event) is terminal


def test_the_chat_receipt_is_an_extra_chunk_before_done() -> None:
    last = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 5, "model": "m", "choices": []}
    out = receipt_frames(Dialect.CHAT, StreamFrame(b"data: [DONE]\n\n", True), last, "rec_1")
    events = SSESplitter().feed(out)
    assert events[1] == b"data: [DONE]\n\n"
    assert orjson.loads(events[0][len(b"data: ") :]) == {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 5,
        "model": "m",
        "choices": [],
        "reef": {"agent_record_id": "rec_1"},
    }


def test_the_messages_receipt_rides_on_message_stop() -> None:
    terminal = StreamFrame(b'event: message_stop\ndata: {"type":"message_stop"}\n\n', True)
    out = receipt_frames(Dialect.MESSAGES, terminal, None, "rec_2")
    assert parse_event(out) == SSEEvent("message_stop", {"type": "message_stop", "reef": {"agent_record_id": "rec_2"}})


def test_the_responses_receipt_rides_on_the_terminal_event() -> None:
    data = {"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}}
    terminal = StreamFrame(encode_event(SSEEvent("response.completed", data)), True)
    out = receipt_frames(Dialect.RESPONSES, terminal, None, "rec_3")
    assert parse_event(out) == SSEEvent("response.completed", {**data, "reef": {"agent_record_id": "rec_3"}})
