"""Anthropic messages stream events ⇄ OpenAI chat chunks."""

from __future__ import annotations

from typing import Any

from reef.inference.sse import SSEEvent
from reef.inference.translate.chunks import ChatChunkDecoder
from reef.inference.translate.messages import finish_to_stop_reason, messages_usage_to_chat, stop_reason_to_finish


class MessagesDecoder(ChatChunkDecoder):
    """Anthropic stream events → chat chunks; `message_stop` ends the stream (then a usage-only chunk)."""

    def __init__(self) -> None:
        super().__init__()
        self._usage: dict[str, Any] = {}
        self._tool_index: dict[int, int] = {}  # content block index → chat tool_calls index

    def feed(self, event: SSEEvent) -> list[dict[str, Any]]:
        data = event.data if isinstance(event.data, dict) else {}
        kind = data.get("type") or event.name
        if kind == "message_start":
            message = data.get("message") or {}
            self._id = message.get("id", "")
            self._model = message.get("model", "")
            self._usage.update(message.get("usage") or {})
            return [self._chunk({"role": "assistant", "content": ""})]
        if kind == "content_block_start":
            block = data.get("content_block") or {}
            if block.get("type") == "tool_use":
                index = self._tool_index[data.get("index", 0)] = len(self._tool_index)
                call = {
                    "index": index,
                    "id": block.get("id", ""),
                    "type": "function",
                    "function": {"name": block.get("name", ""), "arguments": ""},
                }
                return [self._chunk({"tool_calls": [call]})]
            if block.get("type") == "text" and block.get("text"):
                return [self._chunk({"content": block["text"]})]
            return []
        if kind == "content_block_delta":
            delta = data.get("delta") or {}
            if delta.get("type") == "text_delta":
                return [self._chunk({"content": delta.get("text", "")})]
            if delta.get("type") == "input_json_delta":
                index = self._tool_index.get(data.get("index", 0), 0)
                call = {"index": index, "function": {"arguments": delta.get("partial_json", "")}}
                return [self._chunk({"tool_calls": [call]})]
            return []
        if kind == "message_delta":
            self._usage.update({k: v for k, v in (data.get("usage") or {}).items() if v is not None})
            reason = stop_reason_to_finish((data.get("delta") or {}).get("stop_reason"))
            return [self._chunk({}, reason or "stop")]
        if kind == "message_stop":
            self.done = True
            return [self._chunk(usage=messages_usage_to_chat(self._usage))]
        return []


class MessagesEncoder:
    """Chat chunks → Anthropic stream events; `finish()` closes the open block and emits `message_stop`."""

    def __init__(self) -> None:
        self._started = False
        self._id = ""
        self._model = ""
        self._block: int | None = None  # index of the open content block
        self._block_kind: str | None = None
        self._next_block = 0
        self._tool_blocks: dict[int, int] = {}  # chat tool_calls index → content block index
        self._finish_reason: str | None = None
        self._usage: dict[str, Any] | None = None

    def _start(self, chunk: dict[str, Any]) -> list[SSEEvent]:
        self._started = True
        self._id = chunk.get("id") or "msg_reef"
        self._model = chunk.get("model", "")
        message: dict[str, Any] = {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": self._model,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return [SSEEvent("message_start", {"type": "message_start", "message": message})]

    def _close_block(self) -> list[SSEEvent]:
        if self._block is None:
            return []
        index, self._block, self._block_kind = self._block, None, None
        return [SSEEvent("content_block_stop", {"type": "content_block_stop", "index": index})]

    def _open_block(self, kind: str, block: dict[str, Any]) -> list[SSEEvent]:
        events = self._close_block()
        self._block, self._block_kind = self._next_block, kind
        self._next_block += 1
        start = {"type": "content_block_start", "index": self._block, "content_block": block}
        events.append(SSEEvent("content_block_start", start))
        return events

    def _delta(self, index: int, delta: dict[str, Any]) -> SSEEvent:
        return SSEEvent("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})

    def feed(self, chunk: dict[str, Any]) -> list[SSEEvent]:
        events = [] if self._started else self._start(chunk)
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                if self._block_kind != "text":
                    events += self._open_block("text", {"type": "text", "text": ""})
                assert self._block is not None
                events.append(self._delta(self._block, {"type": "text_delta", "text": delta["content"]}))
            for call in delta.get("tool_calls") or []:
                index = call.get("index", 0)
                function = call.get("function") or {}
                if index not in self._tool_blocks:
                    block = {
                        "type": "tool_use",
                        "id": call.get("id", ""),
                        "name": function.get("name", ""),
                        "input": {},
                    }
                    events += self._open_block("tool_use", block)
                    assert self._block is not None
                    self._tool_blocks[index] = self._block
                if function.get("arguments"):
                    json_delta = {"type": "input_json_delta", "partial_json": function["arguments"]}
                    events.append(self._delta(self._tool_blocks[index], json_delta))
            if choice.get("finish_reason"):
                self._finish_reason = choice["finish_reason"]
        return events

    def finish(self) -> list[SSEEvent]:
        events = [] if self._started else self._start({})
        events += self._close_block()
        usage = self._usage or {}
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": finish_to_stop_reason(self._finish_reason or "stop"), "stop_sequence": None},
            "usage": {
                "input_tokens": usage.get("prompt_tokens", 0),
                "output_tokens": usage.get("completion_tokens", 0),
            },
        }
        events.append(SSEEvent("message_delta", delta))
        events.append(SSEEvent("message_stop", {"type": "message_stop"}))
        return events
