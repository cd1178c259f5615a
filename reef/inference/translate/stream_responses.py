"""OpenAI Responses stream events ⇄ OpenAI chat chunks."""

from __future__ import annotations

import time
from typing import Any

from reef.inference.sse import SSEEvent
from reef.inference.translate.chunks import ChatChunkDecoder
from reef.inference.translate.responses import (
    chat_usage_to_responses,
    function_call_item,
    message_item,
    new_item_id,
    response_object,
    responses_finish_reason,
    responses_usage_to_chat,
)

TERMINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")


class ResponsesDecoder(ChatChunkDecoder):
    """Responses stream events → chat chunks; a terminal `response.*` event ends the stream."""

    def __init__(self) -> None:
        super().__init__()
        self._tool_index: dict[str, int] = {}  # function_call item id → chat tool_calls index

    def feed(self, event: SSEEvent) -> list[dict[str, Any]]:
        data = event.data if isinstance(event.data, dict) else {}
        kind = data.get("type") or event.name
        if kind == "response.created":
            response = data.get("response") or {}
            self._id = response.get("id", "")
            self._model = response.get("model", "")
            self._created = response.get("created_at") or self._created
            return [self._chunk({"role": "assistant", "content": ""})]
        if kind == "response.output_text.delta":
            return [self._chunk({"content": data.get("delta", "")})]
        if kind == "response.output_item.added":
            item = data.get("item") or {}
            if item.get("type") != "function_call":
                return []
            index = self._tool_index[item.get("id", "")] = len(self._tool_index)
            call = {
                "index": index,
                "id": item.get("call_id", ""),
                "type": "function",
                "function": {"name": item.get("name", ""), "arguments": item.get("arguments", "")},
            }
            return [self._chunk({"tool_calls": [call]})]
        if kind == "response.function_call_arguments.delta":
            index = self._tool_index.get(data.get("item_id", ""), 0)
            return [self._chunk({"tool_calls": [{"index": index, "function": {"arguments": data.get("delta", "")}}]})]
        if kind in TERMINAL_EVENTS:
            self.done = True
            response = data.get("response") or {}
            finish = responses_finish_reason(response, bool(self._tool_index))
            usage = responses_usage_to_chat(response.get("usage"))
            return [self._chunk({}, finish), self._chunk(usage=usage)]
        return []


class ResponsesEncoder:
    """Chat chunks → Responses stream events; `finish()` closes the open item and emits the terminal event."""

    def __init__(self) -> None:
        self._started = False
        self._sequence = 0
        self._response: dict[str, Any] = {}
        self._output: list[dict[str, Any]] = []  # finished output items
        self._open: dict[str, Any] | None = None  # the output item being streamed
        self._text: list[str] = []
        self._tool_items: dict[int, dict[str, Any]] = {}  # chat tool_calls index → function_call item
        self._finish_reason: str | None = None
        self._usage: dict[str, Any] | None = None

    def _event(self, kind: str, **fields: Any) -> SSEEvent:
        self._sequence += 1
        return SSEEvent(kind, {"type": kind, "sequence_number": self._sequence, **fields})

    def _start(self, chunk: dict[str, Any]) -> list[SSEEvent]:
        self._started = True
        response_id = chunk.get("id") or new_item_id("resp")
        created = chunk.get("created") or int(time.time())
        self._response = response_object(response_id, chunk.get("model", ""), created, [], None, None, "in_progress")
        return [
            self._event("response.created", response=dict(self._response)),
            self._event("response.in_progress", response=dict(self._response)),
        ]

    def _close_open(self) -> list[SSEEvent]:
        item, self._open = self._open, None
        if item is None:
            return []
        index = len(self._output)
        events: list[SSEEvent] = []
        if item["type"] == "message":
            text = "".join(self._text)
            self._text = []
            item = message_item(text, item["id"])
            ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
            events.append(self._event("response.output_text.done", **ids, text=text))
            events.append(self._event("response.content_part.done", **ids, part=item["content"][0]))
        else:
            item = {**item, "status": "completed"}
            events.append(
                self._event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    arguments=item["arguments"],
                )
            )
        self._output.append(item)
        events.append(self._event("response.output_item.done", output_index=index, item=item))
        return events

    def _open_item(self, item: dict[str, Any]) -> list[SSEEvent]:
        events = self._close_open()
        self._open = item
        index = len(self._output)
        events.append(self._event("response.output_item.added", output_index=index, item=dict(item)))
        if item["type"] == "message":
            part = {"type": "output_text", "text": "", "annotations": []}
            ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
            events.append(self._event("response.content_part.added", **ids, part=part))
        return events

    def feed(self, chunk: dict[str, Any]) -> list[SSEEvent]:
        events = [] if self._started else self._start(chunk)
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                if self._open is None or self._open["type"] != "message":
                    events += self._open_item({**message_item("", status="in_progress"), "content": []})
                assert self._open is not None
                self._text.append(delta["content"])
                ids = {"item_id": self._open["id"], "output_index": len(self._output), "content_index": 0}
                events.append(self._event("response.output_text.delta", **ids, delta=delta["content"]))
            for call in delta.get("tool_calls") or []:
                events += self._feed_tool_call(call)
            if choice.get("finish_reason"):
                self._finish_reason = choice["finish_reason"]
        return events

    def _feed_tool_call(self, call: dict[str, Any]) -> list[SSEEvent]:
        index = call.get("index", 0)
        function = call.get("function") or {}
        events: list[SSEEvent] = []
        if index not in self._tool_items:
            item = function_call_item(call.get("id", ""), function.get("name", ""), "", status="in_progress")
            self._tool_items[index] = item
            events += self._open_item(item)
        item = self._tool_items[index]
        if function.get("arguments"):
            item["arguments"] += function["arguments"]  # the open item is this same dict
            events.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=len(self._output),
                    delta=function["arguments"],
                )
            )
        return events

    def finish(self) -> list[SSEEvent]:
        events = [] if self._started else self._start({})
        events += self._close_open()
        response = response_object(
            self._response["id"],
            self._response["model"],
            self._response["created_at"],
            self._output,
            self._finish_reason,
            chat_usage_to_responses(self._usage),
        )
        kind = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        events.append(self._event(kind, response=response))
        return events
