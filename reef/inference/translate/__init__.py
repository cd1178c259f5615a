"""Dialect translation: chat ⇄ messages ⇄ responses for requests, responses, errors and stream events.

Pure functions; OpenAI chat is the pivot (messages ⇄ responses goes through chat). The local engine produces
chat natively and uses `convert_response` / `StreamConverter(Dialect.CHAT, target)` to answer other dialects.
A request is checked once with `check_request` before it is translated; the translators trust its shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reef.core.scenarios import Dialect
from reef.inference.sse import SSEEvent
from reef.inference.translate.assemble import (
    Assembler,
    ChatAssembler,
    MessagesAssembler,
    ResponsesAssembler,
    assembler_for,
)
from reef.inference.translate.chunks import ChatDecoder, ChatEncoder, ChunkDecoder, ChunkEncoder, chat_chunk
from reef.inference.translate.messages import (
    chat_request_to_messages,
    chat_response_to_messages,
    messages_request_to_chat,
    messages_response_to_chat,
)
from reef.inference.translate.responses import (
    chat_request_to_responses,
    chat_response_to_responses,
    responses_request_to_chat,
    responses_response_to_chat,
)
from reef.inference.translate.stream_messages import MessagesDecoder, MessagesEncoder
from reef.inference.translate.stream_responses import ResponsesDecoder, ResponsesEncoder
from reef.inference.translate.system import with_system_prompt
from reef.inference.translate.validate import check_request

__all__ = [
    "Assembler",
    "ChatAssembler",
    "MessagesAssembler",
    "ResponsesAssembler",
    "StreamConverter",
    "assembler_for",
    "chat_chunk",
    "check_request",
    "convert_error",
    "convert_request",
    "convert_response",
    "decoder_for",
    "encoder_for",
    "with_system_prompt",
]

_Body = dict[str, Any]
_Convert = Callable[[_Body], _Body]
_identity: _Convert = dict

_REQUEST_TO_CHAT: dict[Dialect, _Convert] = {
    Dialect.CHAT: _identity,
    Dialect.MESSAGES: messages_request_to_chat,
    Dialect.RESPONSES: responses_request_to_chat,
}
_REQUEST_FROM_CHAT: dict[Dialect, _Convert] = {
    Dialect.CHAT: _identity,
    Dialect.MESSAGES: chat_request_to_messages,
    Dialect.RESPONSES: chat_request_to_responses,
}
_RESPONSE_TO_CHAT: dict[Dialect, _Convert] = {
    Dialect.CHAT: _identity,
    Dialect.MESSAGES: messages_response_to_chat,
    Dialect.RESPONSES: responses_response_to_chat,
}
_RESPONSE_FROM_CHAT: dict[Dialect, _Convert] = {
    Dialect.CHAT: _identity,
    Dialect.MESSAGES: chat_response_to_messages,
    Dialect.RESPONSES: chat_response_to_responses,
}


def convert_request(body: _Body, source: Dialect, target: Dialect) -> _Body:
    """A request body in `source` dialect (one `check_request` passed), rewritten for an upstream speaking `target`."""
    if source is target:
        return body
    return _REQUEST_FROM_CHAT[target](_REQUEST_TO_CHAT[source](body))


def convert_response(body: _Body, source: Dialect, target: Dialect) -> _Body:
    """A finished (non-streaming) response body in `source` dialect, rewritten as `target` would answer."""
    if source is target:
        return body
    return _RESPONSE_FROM_CHAT[target](_RESPONSE_TO_CHAT[source](body))


def convert_error(body: Any, source: Dialect, target: Dialect) -> _Body:
    """An upstream error body (any shape) in `source` dialect, rewritten in `target`'s error shape."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        kind, message = error.get("type") or "api_error", error.get("message") or ""
    else:
        kind, message = "api_error", str(error if error is not None else body)
    if source is target and isinstance(body, dict):
        return body
    if target is Dialect.MESSAGES:
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"type": kind, "message": message, "param": None, "code": None}}


def decoder_for(dialect: Dialect) -> ChunkDecoder:
    """A fresh decoder from `dialect` stream events to chat chunks."""
    if dialect is Dialect.MESSAGES:
        return MessagesDecoder()
    if dialect is Dialect.RESPONSES:
        return ResponsesDecoder()
    return ChatDecoder()


def encoder_for(dialect: Dialect) -> ChunkEncoder:
    """A fresh encoder from chat chunks to `dialect` stream events."""
    if dialect is Dialect.MESSAGES:
        return MessagesEncoder()
    if dialect is Dialect.RESPONSES:
        return ResponsesEncoder()
    return ChatEncoder()


class StreamConverter:
    """Converts a `source` event stream into a `target` one on the fly, one event in, zero or more out.

    When the source's terminal event arrives the target's closing events follow, its terminal event last;
    `done` then turns true. Feed chat chunks with `feed_chunk` when producing chat natively (the local engine)
    and call `finish()` at the end.
    """

    def __init__(self, source: Dialect, target: Dialect) -> None:
        self._decoder = decoder_for(source)
        self._encoder = encoder_for(target)
        self.done = False

    def feed(self, event: SSEEvent) -> list[SSEEvent]:
        """Convert one source event."""
        if self.done or event.data is None:
            return []
        out: list[SSEEvent] = []
        for chunk in self._decoder.feed(event):
            out += self._encoder.feed(chunk)
        if self._decoder.done:
            out += self.finish()
        return out

    def feed_chunk(self, chunk: _Body) -> list[SSEEvent]:
        """Convert one chat chunk (the pivot form) directly."""
        return [] if self.done else self._encoder.feed(chunk)

    def finish(self) -> list[SSEEvent]:
        """The target's closing events (terminal last); idempotent."""
        if self.done:
            return []
        self.done = True
        return self._encoder.finish()
