"""Token capture from a streamed chat answer of vLLM: the same `training` record as a whole answer's.

Asked with `return_token_ids: true`, vLLM sends the prompt's ids in the first chunk (`prompt_token_ids`) and each
chunk's completion ids in `choices[0].token_ids`, beside that chunk's `logprobs.content`. `CapturingStream` relays
the frames with those fields removed (and `logprobs` too, unless the client asked for them), gathers them, and
gives the assembled capture with the stream's result, when the stream completed. SGLang's streamed chunks carry no
token ids: its streamed answers are not captured, and a report citing one is counted as `no_training_capture`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from reef.core.payloads import TrainingCapture
from reef.inference.base import CompletionStream, StreamFrame, StreamResult
from reef.inference.capture import client_view, training_from_chat
from reef.inference.sse import SSEEvent, encode_event, parse_event


class StreamCapture:
    """The ids and log-probs of one streamed answer, gathered chunk by chunk."""

    def __init__(self) -> None:
        self.prompt_ids: Any = None
        self.completion_ids: list[Any] = []
        self.logprobs: list[Any] = []

    def feed(self, chunk: dict[str, Any]) -> None:
        choices = chunk.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        if self.prompt_ids is None:
            self.prompt_ids = chunk.get("prompt_token_ids") or choice.get("prompt_token_ids")
        ids = choice.get("token_ids")
        if isinstance(ids, list):
            self.completion_ids.extend(ids)
        logprobs = choice.get("logprobs")
        content = logprobs.get("content") if isinstance(logprobs, dict) else None
        if isinstance(content, list):
            self.logprobs.extend(content)

    def training(self) -> TrainingCapture | None:
        """The capture in the embedded engine's shape, or None when the ids and log-probs do not line up."""
        assembled = {
            "prompt_token_ids": self.prompt_ids,
            "choices": [{"token_ids": self.completion_ids, "logprobs": {"content": self.logprobs}}],
        }
        return training_from_chat(assembled)


class CapturingStream(CompletionStream):
    """`inner` (a chat stream asked for capture) relayed as the client asked for it, its capture in `result()`."""

    def __init__(self, inner: CompletionStream, client_request: dict[str, Any]) -> None:
        self.request = inner.request
        self.release_id = inner.release_id
        self.last_chunk = None
        self._inner = inner
        self._client_request = client_request
        self._capture = StreamCapture()

    async def frames(self) -> AsyncIterator[StreamFrame]:
        async for frame in self._inner.frames():
            event = parse_event(frame.data)
            if isinstance(event.data, dict):
                self._capture.feed(event.data)
                frame = dataclasses.replace(
                    frame, data=encode_event(SSEEvent(event.name, client_view(event.data, self._client_request)))
                )
            self.last_chunk = self._inner.last_chunk
            yield frame

    def result(self) -> StreamResult:
        result = self._inner.result()
        return dataclasses.replace(result, training=self._capture.training() if result.complete else None)

    async def aclose(self) -> None:
        await self._inner.aclose()
