"""Answers from the local engine: a finished completion, or a token-by-token stream in the request's dialect.

Both are built as OpenAI chat (chunks) and translated to messages / responses by `reef.inference.translate`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import orjson

from reef.core.scenarios import Dialect
from reef.inference.base import Completion, CompletionStream, StreamFrame, StreamResult
from reef.inference.local.chat_output import (
    chunk,
    completion_body,
    logprob_entries,
    new_completion_id,
    now_s,
    training_of,
    usage_of,
)
from reef.inference.local.request import Submitted, raise_failure
from reef.inference.local.sampling import Choice
from reef.inference.local.scheduler import Delta, Event, Failed, Finished
from reef.inference.sse import encode_event
from reef.inference.translate import StreamConverter, convert_response


async def complete(submitted: Submitted, tokenizer: Any, model: str, request: dict[str, Any]) -> Completion:
    """Wait for the whole answer of `submitted`."""
    texts: list[str] = []
    choices: list[Choice] = []
    while True:
        event = await submitted.next_event()
        if isinstance(event, Delta):
            texts.append(event.text)
            choices.append(event.choice)
        elif isinstance(event, Finished):
            reason = event.reason
            break
        else:
            raise_failure(event)
    sequence = submitted.sequence
    logprobs = logprob_entries(tokenizer, choices) if submitted.params.logprobs else None
    chat = completion_body(new_completion_id(), now_s(), model, "".join(texts), reason, usage_of(sequence), logprobs)
    body = convert_response(chat, Dialect.CHAT, submitted.dialect)
    return Completion(
        status=200,
        raw=orjson.dumps(body),
        body=body,
        request=request,
        release_id=submitted.binding.release_id,
        usage=body.get("usage"),
        training=training_of(sequence),
    )


class LocalStream(CompletionStream):
    """A streaming answer; frames are the chat chunks the model produces, translated to the request's dialect."""

    def __init__(self, submitted: Submitted, first: Event, tokenizer: Any, model: str, request: dict[str, Any]):
        self.request = request
        self.release_id = submitted.binding.release_id
        self._submitted = submitted
        self._first: Event | None = first
        self._tokenizer = tokenizer
        self._model = model
        self._id = new_completion_id()
        self._created = now_s()
        self._converter = StreamConverter(Dialect.CHAT, submitted.dialect)
        options = submitted.chat.get("stream_options") or {}
        # Other dialects always report usage at the end; chat only when the client asks (as OpenAI does).
        self._include_usage = submitted.dialect is not Dialect.CHAT or bool(options.get("include_usage"))
        self._texts: list[str] = []
        self._choices: list[Choice] = []
        self._finish_reason: str | None = None
        self._error: str | None = None
        self._iterator: AsyncIterator[StreamFrame] | None = None

    def frames(self) -> AsyncIterator[StreamFrame]:
        if self._iterator is None:
            self._iterator = self._frames()
        return self._iterator

    async def _frames(self) -> AsyncIterator[StreamFrame]:
        for frame in self._encode(chunk(self._id, self._created, self._model, {"role": "assistant", "content": ""})):
            yield frame
        want_logprobs = self._submitted.params.logprobs
        pending: list[Choice] = []  # tokens whose text is still held back (their log-probs ride the next chunk)
        while True:
            event = self._first or await self._submitted.next_event()
            self._first = None
            if isinstance(event, Failed):
                self._error = event.message
                return
            if isinstance(event, Delta):
                self._texts.append(event.text)
                self._choices.append(event.choice)
                pending.append(event.choice)
                if event.text:
                    entries = logprob_entries(self._tokenizer, pending) if want_logprobs else None
                    pending = []
                    delta = chunk(self._id, self._created, self._model, {"content": event.text}, logprobs=entries)
                    for frame in self._encode(delta):
                        yield frame
                continue
            self._finish_reason = event.reason
            entries = logprob_entries(self._tokenizer, pending) if want_logprobs and pending else None
            last = chunk(self._id, self._created, self._model, {}, event.reason, logprobs=entries)
            for frame in self._encode(last):
                yield frame
            if self._include_usage:
                usage = usage_of(self._submitted.sequence)
                for frame in self._encode(chunk(self._id, self._created, self._model, None, usage=usage)):
                    yield frame
            closing = self._converter.finish()
            for index, sse in enumerate(closing):
                yield StreamFrame(encode_event(sse), terminal=index == len(closing) - 1)
            return

    def _encode(self, body: dict[str, Any]) -> list[StreamFrame]:
        return [StreamFrame(encode_event(sse)) for sse in self._converter.feed_chunk(body)]

    def result(self) -> StreamResult:
        sequence = self._submitted.sequence
        logprobs = logprob_entries(self._tokenizer, self._choices) if self._submitted.params.logprobs else None
        text = "".join(self._texts)
        chat = completion_body(
            self._id, self._created, self._model, text, self._finish_reason, usage_of(sequence), logprobs
        )
        body = convert_response(chat, Dialect.CHAT, self._submitted.dialect)
        return StreamResult(
            body=body,
            complete=self._finish_reason is not None,
            usage=body.get("usage"),
            training=training_of(sequence),
            error=self._error,
        )

    async def aclose(self) -> None:
        self._submitted.sequence.cancelled = True
        if self._iterator is not None:
            with contextlib.suppress(RuntimeError):  # being iterated by another task: it ends on its own
                await self._iterator.aclose()  # type: ignore[attr-defined]
