"""OpenAI chat ⇄ Anthropic messages: request and response bodies (non-streaming)."""

from __future__ import annotations

import time
from typing import Any

import orjson

from reef.inference.translate.content import data_url, image_url_source, text_of

DEFAULT_MAX_TOKENS = 4096
"""Anthropic requires `max_tokens`; used when a chat request leaves it out."""

_STOP_TO_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "pause_turn": "stop",
    "refusal": "content_filter",
}
_FINISH_TO_STOP = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


def stop_reason_to_finish(stop_reason: str | None) -> str | None:
    """Anthropic `stop_reason` → chat `finish_reason`."""
    return None if stop_reason is None else _STOP_TO_FINISH.get(stop_reason, "stop")


def finish_to_stop_reason(finish_reason: str | None) -> str | None:
    """Chat `finish_reason` → Anthropic `stop_reason`."""
    return None if finish_reason is None else _FINISH_TO_STOP.get(finish_reason, "end_turn")


def arguments_to_input(arguments: str | None) -> dict[str, Any]:
    """A chat tool call's JSON `arguments` string → an Anthropic `tool_use.input` object."""
    if not arguments:
        return {}
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"value": value}


# --- requests -------------------------------------------------------------------------------------------------


def chat_request_to_messages(body: dict[str, Any]) -> dict[str, Any]:
    """Translate a `/v1/chat/completions` body into a `/v1/messages` body."""
    out: dict[str, Any] = {"model": body.get("model")}
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in body.get("messages", []):
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(text_of(message.get("content")))
        elif role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id", ""),
                "content": text_of(message.get("content")),
            }
            _append_turn(turns, "user", [block])
        elif role == "assistant":
            _append_turn(turns, "assistant", _assistant_blocks(message))
        else:
            _append_turn(turns, "user", _user_blocks(message.get("content")))
    if system:
        out["system"] = "\n\n".join(system)
    out["messages"] = turns
    out["max_tokens"] = body.get("max_completion_tokens") or body.get("max_tokens") or DEFAULT_MAX_TOKENS
    for key in ("temperature", "top_p", "stream"):
        if body.get(key) is not None:
            out[key] = body[key]
    stop = body.get("stop")
    if stop:
        out["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    if body.get("tools"):
        out["tools"] = [_chat_tool_to_messages(t) for t in body["tools"] if t.get("type", "function") == "function"]
    choice = _chat_tool_choice_to_messages(body.get("tool_choice"), body.get("parallel_tool_calls"))
    if choice is not None:
        out["tool_choice"] = choice
    if body.get("user"):
        out["metadata"] = {"user_id": body["user"]}
    return out


def _append_turn(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    # Anthropic wants alternating roles: consecutive same-role turns (e.g. several tool results) merge into one.
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"].extend(blocks)
    else:
        turns.append({"role": role, "content": blocks})


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type")
        if kind == "text":
            blocks.append({"type": "text", "text": part.get("text", "")})
        elif kind == "image_url":
            url = part["image_url"]["url"] if isinstance(part.get("image_url"), dict) else part.get("image_url", "")
            blocks.append({"type": "image", "source": image_url_source(url)})
    return blocks


def _assistant_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    text = text_of(message.get("content"))
    if text:
        blocks.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id", ""),
                "name": function.get("name", ""),
                "input": arguments_to_input(function.get("arguments")),
            }
        )
    return blocks


def _chat_tool_to_messages(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function", {})
    out = {"name": function.get("name", ""), "input_schema": function.get("parameters") or {"type": "object"}}
    if function.get("description"):
        out["description"] = function["description"]
    return out


def _chat_tool_choice_to_messages(choice: Any, parallel: bool | None) -> dict[str, Any] | None:
    if choice is None and parallel is None:
        return None
    if isinstance(choice, dict):
        out: dict[str, Any] = {"type": "tool", "name": choice.get("function", {}).get("name", "")}
    else:
        out = {"type": {"required": "any", "none": "none"}.get(choice or "auto", "auto")}
    if parallel is False and out["type"] != "none":
        out["disable_parallel_tool_use"] = True
    return out


def messages_request_to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """Translate a `/v1/messages` body into a `/v1/chat/completions` body."""
    out: dict[str, Any] = {"model": body.get("model")}
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        messages.append({"role": "system", "content": text_of(system)})
    for turn in body.get("messages", []):
        if turn.get("role") == "assistant":
            messages.append(_assistant_turn_to_chat(turn.get("content")))
        else:
            messages.extend(_user_turn_to_chat(turn.get("content")))
    out["messages"] = messages
    if body.get("max_tokens") is not None:
        out["max_tokens"] = body["max_tokens"]
    for key in ("temperature", "top_p", "stream"):
        if body.get(key) is not None:
            out[key] = body[key]
    if body.get("stream"):
        out["stream_options"] = {"include_usage": True}
    if body.get("stop_sequences"):
        out["stop"] = list(body["stop_sequences"])
    if body.get("tools"):
        out["tools"] = [_messages_tool_to_chat(t) for t in body["tools"] if "input_schema" in t]
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        kind = choice.get("type")
        if kind == "tool":
            out["tool_choice"] = {"type": "function", "function": {"name": choice.get("name", "")}}
        else:
            out["tool_choice"] = {"any": "required", "none": "none"}.get(kind or "auto", "auto")
        if choice.get("disable_parallel_tool_use"):
            out["parallel_tool_calls"] = False
    user_id = (body.get("metadata") or {}).get("user_id")
    if user_id:
        out["user"] = user_id
    return out


def _user_turn_to_chat(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    tool_messages: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in content or []:
        kind = block.get("type")
        if kind == "tool_result":
            tool_messages.append(
                {"role": "tool", "tool_call_id": block.get("tool_use_id", ""), "content": text_of(block.get("content"))}
            )
        elif kind == "text":
            parts.append({"type": "text", "text": block.get("text", "")})
        elif kind == "image":
            parts.append({"type": "image_url", "image_url": {"url": data_url(block.get("source", {}))}})
    # Tool results answer the previous assistant turn, so they come before any new user text.
    messages = tool_messages
    if parts:
        only_text = all(p["type"] == "text" for p in parts)
        user_content: Any = "\n".join(p["text"] for p in parts) if only_text else parts
        messages.append({"role": "user", "content": user_content})
    return messages


def _assistant_turn_to_chat(content: Any) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in content or []:
        if block.get("type") == "text":
            texts.append(block.get("text", ""))
        elif block.get("type") == "tool_use":
            calls.append(
                {
                    "id": block.get("id", ""),
                    "type": "function",
                    "function": {
                        "name": block.get("name", ""),
                        "arguments": orjson.dumps(block.get("input", {})).decode(),
                    },
                }
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return message


def _messages_tool_to_chat(tool: dict[str, Any]) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.get("name", ""), "parameters": tool.get("input_schema", {})}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


# --- responses ------------------------------------------------------------------------------------------------


def chat_response_to_messages(body: dict[str, Any]) -> dict[str, Any]:
    """Translate a `chat.completion` object into an Anthropic message object."""
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    content = _assistant_blocks(message)
    usage = body.get("usage") or {}
    return {
        "id": body.get("id", ""),
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": content,
        "stop_reason": finish_to_stop_reason(choice.get("finish_reason")),
        "stop_sequence": None,
        "usage": {"input_tokens": usage.get("prompt_tokens", 0), "output_tokens": usage.get("completion_tokens", 0)},
    }


def messages_response_to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """Translate an Anthropic message object into a `chat.completion` object."""
    message = _assistant_turn_to_chat(body.get("content") or [])
    return {
        "id": body.get("id", ""),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": message, "finish_reason": stop_reason_to_finish(body.get("stop_reason"))}],
        "usage": messages_usage_to_chat(body.get("usage")),
    }


def messages_usage_to_chat(usage: dict[str, Any] | None) -> dict[str, Any]:
    """Anthropic usage → chat usage (cached input counts as prompt tokens)."""
    usage = usage or {}
    prompt = (
        (usage.get("input_tokens") or 0)
        + (usage.get("cache_read_input_tokens") or 0)
        + (usage.get("cache_creation_input_tokens") or 0)
    )
    completion = usage.get("output_tokens") or 0
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
