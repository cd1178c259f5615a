"""Assemble a stream's events into the final message of its dialect (what a non-streaming call would return).

Each assembler is fed the client-dialect events in order; `result()` is valid at any point, so a stream cut
short still yields what arrived.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import orjson

from reef.core.scenarios import Dialect
from reef.inference.sse import SSEEvent
from reef.inference.translate.responses import (
    chat_usage_to_responses,
    function_call_item,
    message_item,
    response_object,
)


class ChatAssembler:
    """Chat chunks → a `chat.completion` object."""

    def __init__(self) -> None:
        self._head: dict[str, Any] = {}
        self._content: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None

    def feed(self, event: SSEEvent) -> None:
        chunk = event.data
        if not isinstance(chunk, dict):
            return
        if not self._head:
            self._head = {k: chunk.get(k) for k in ("id", "created", "model")}
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self._content.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                slot = self._calls.setdefault(
                    call.get("index", 0), {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                if call.get("id"):
                    slot["id"] = call["id"]
                function = call.get("function") or {}
                if function.get("name"):
                    slot["function"]["name"] = function["name"]
                slot["function"]["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                self._finish_reason = choice["finish_reason"]

    def result(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._content) if self._content else None}
        if self._calls:
            message["tool_calls"] = [self._calls[i] for i in sorted(self._calls)]
        body = {
            "id": self._head.get("id") or "",
            "object": "chat.completion",
            "created": self._head.get("created") or int(time.time()),
            "model": self._head.get("model") or "",
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish_reason}],
        }
        if self.usage is not None:
            body["usage"] = self.usage
        return body


class MessagesAssembler:
    """Anthropic stream events → the final message object."""

    def __init__(self) -> None:
        self._message: dict[str, Any] = {"type": "message", "role": "assistant", "content": []}
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self.usage: dict[str, Any] | None = None

    def feed(self, event: SSEEvent) -> None:
        data = event.data
        if not isinstance(data, dict):
            return
        kind = data.get("type") or event.name
        if kind == "message_start":
            self._message = {**(data.get("message") or {}), "content": []}
            self.usage = dict(self._message.get("usage") or {})
        elif kind == "content_block_start":
            self._blocks[data.get("index", 0)] = copy.deepcopy(data.get("content_block") or {})
        elif kind == "content_block_delta":
            block = self._blocks.setdefault(data.get("index", 0), {"type": "text", "text": ""})
            delta = data.get("delta") or {}
            kind = delta.get("type")
            if kind == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif kind == "input_json_delta":
                self._json.setdefault(data.get("index", 0), []).append(delta.get("partial_json", ""))
            elif kind == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif kind == "signature_delta":
                block["signature"] = delta.get("signature", "")
        elif kind == "message_delta":
            self._message.update(data.get("delta") or {})
            usage = {k: v for k, v in (data.get("usage") or {}).items() if v is not None}
            self.usage = {**(self.usage or {}), **usage}

    def result(self) -> dict[str, Any]:
        content = []
        for index in sorted(self._blocks):
            block = dict(self._blocks[index])
            if index in self._json:
                raw = "".join(self._json[index])
                try:
                    block["input"] = orjson.loads(raw) if raw else {}
                except orjson.JSONDecodeError:
                    block["input"] = {"arguments": raw}
            content.append(block)
        body = {**self._message, "content": content}
        if self.usage is not None:
            body["usage"] = self.usage
        return body


class ResponsesAssembler:
    """Responses stream events → the `response` object (taken whole from the terminal event when it arrives)."""

    def __init__(self) -> None:
        self._response: dict[str, Any] = {}
        self._final: dict[str, Any] | None = None
        self._items: dict[int, dict[str, Any]] = {}
        self._text: dict[int, list[str]] = {}
        self.usage: dict[str, Any] | None = None

    def feed(self, event: SSEEvent) -> None:
        data = event.data
        if not isinstance(data, dict):
            return
        kind = data.get("type") or event.name
        if kind in ("response.created", "response.in_progress"):
            self._response = data.get("response") or self._response
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self._final = data.get("response") or {}
            self.usage = self._final.get("usage")
        elif kind in ("response.output_item.added", "response.output_item.done"):
            self._items[data.get("output_index", 0)] = copy.deepcopy(data.get("item") or {})
        elif kind == "response.output_text.delta":
            self._text.setdefault(data.get("output_index", 0), []).append(data.get("delta", ""))
        elif kind == "response.function_call_arguments.delta":
            item = self._items.get(data.get("output_index", 0))
            if item is not None:
                item["arguments"] = item.get("arguments", "") + data.get("delta", "")

    def result(self) -> dict[str, Any]:
        if self._final is not None:
            return self._final
        output = []
        for index in sorted(self._items):
            item = self._items[index]
            if item.get("type") == "message" and item.get("status") != "completed":
                item = message_item("".join(self._text.get(index, [])), item.get("id"), status="incomplete")
            elif item.get("type") == "function_call" and item.get("status") != "completed":
                item = function_call_item(item.get("call_id", ""), item.get("name", ""), item.get("arguments", ""))
                item["status"] = "incomplete"
            output.append(item)
        head = self._response
        return response_object(
            head.get("id", ""),
            head.get("model", ""),
            head.get("created_at") or int(time.time()),
            output,
            None,
            chat_usage_to_responses(None) if self.usage is None else self.usage,
            status="incomplete",
        )


Assembler = ChatAssembler | MessagesAssembler | ResponsesAssembler


def assembler_for(dialect: Dialect) -> Assembler:
    """A fresh assembler for a stream in `dialect`."""
    if dialect is Dialect.CHAT:
        return ChatAssembler()
    if dialect is Dialect.MESSAGES:
        return MessagesAssembler()
    return ResponsesAssembler()
