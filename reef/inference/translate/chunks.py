"""OpenAI chat chunks: the pivot every stream conversion goes through.

A decoder turns one dialect's SSE events into chat chunk dicts; an encoder turns chat chunks into another
dialect's SSE events. Chat itself has an identity decoder and encoder here.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from reef.inference.sse import DONE, SSEEvent


class ChunkDecoder(Protocol):
    """Source-dialect events → chat chunks; `done` turns true at the source's terminal event."""

    done: bool

    def feed(self, event: SSEEvent) -> list[dict[str, Any]]: ...


class ChunkEncoder(Protocol):
    """Chat chunks → target-dialect events; `finish()` emits the closing events, the terminal one last."""

    def feed(self, chunk: dict[str, Any]) -> list[SSEEvent]: ...

    def finish(self) -> list[SSEEvent]: ...


def chat_chunk(
    chunk_id: str,
    created: int,
    model: str,
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `chat.completion.chunk`; with `delta` None and `usage` set it is the usage-only chunk (`choices: []`)."""
    chunk: dict[str, Any] = {"id": chunk_id, "object": "chat.completion.chunk", "created": created, "model": model}
    if delta is None and finish_reason is None:
        chunk["choices"] = []
    else:
        chunk["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}]
    if usage is not None:
        chunk["usage"] = usage
    return chunk


class ChatDecoder:
    """Chat events → chat chunks (identity); `[DONE]` ends the stream."""

    def __init__(self) -> None:
        self.done = False

    def feed(self, event: SSEEvent) -> list[dict[str, Any]]:
        if event.data == DONE:
            self.done = True
            return []
        return [event.data] if isinstance(event.data, dict) else []


class ChatEncoder:
    """Chat chunks → chat events (identity); `finish()` emits `[DONE]`."""

    def feed(self, chunk: dict[str, Any]) -> list[SSEEvent]:
        return [SSEEvent(None, chunk)]

    def finish(self) -> list[SSEEvent]:
        return [SSEEvent(None, DONE)]


class ChatChunkDecoder:
    """Base of the decoders that turn another dialect's stream events into chat chunks of one completion."""

    def __init__(self) -> None:
        self.done = False
        self._id = ""
        self._model = ""
        self._created = int(time.time())

    def _chunk(self, delta: dict[str, Any] | None = None, finish_reason: str | None = None, **kw: Any) -> dict:
        return chat_chunk(self._id, self._created, self._model, delta, finish_reason, **kw)
