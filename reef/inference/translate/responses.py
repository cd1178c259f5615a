"""OpenAI chat ⇄ OpenAI Responses: request and response bodies (non-streaming)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from reef.inference.translate.content import text_of


def new_item_id(prefix: str) -> str:
    """A fresh Responses-style id (`resp_…`, `msg_…`, `fc_…`)."""
    return f"{prefix}_{uuid.uuid4().hex}"


# --- requests -------------------------------------------------------------------------------------------------


def chat_request_to_responses(body: dict[str, Any]) -> dict[str, Any]:
    """Translate a `/v1/chat/completions` body into a `/v1/responses` body."""
    out: dict[str, Any] = {"model": body.get("model")}
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    for message in body.get("messages", []):
        role = message.get("role")
        if role in ("system", "developer"):
            instructions.append(text_of(message.get("content")))
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id", ""),
                    "output": text_of(message.get("content")),
                }
            )
        elif role == "assistant":
            text = text_of(message.get("content"))
            if text:
                items.append(
                    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
                )
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.get("id", ""),
                        "name": function.get("name", ""),
                        "arguments": function.get("arguments") or "{}",
                    }
                )
        else:
            items.append({"type": "message", "role": "user", "content": _chat_user_parts(message.get("content"))})
    if instructions:
        out["instructions"] = "\n\n".join(instructions)
    out["input"] = items
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    if max_tokens is not None:
        out["max_output_tokens"] = max_tokens
    for key in ("temperature", "top_p", "stream", "user", "metadata", "parallel_tool_calls"):
        if body.get(key) is not None:
            out[key] = body[key]
    if body.get("tools"):
        out["tools"] = [_chat_tool_to_responses(t) for t in body["tools"] if t.get("type", "function") == "function"]
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        out["tool_choice"] = {"type": "function", "name": choice.get("function", {}).get("name", "")}
    elif choice is not None:
        out["tool_choice"] = choice
    return out


def _chat_user_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    parts: list[dict[str, Any]] = []
    for part in content or []:
        if part.get("type") == "text":
            parts.append({"type": "input_text", "text": part.get("text", "")})
        elif part.get("type") == "image_url":
            image = part.get("image_url")
            url = image.get("url", "") if isinstance(image, dict) else image
            parts.append({"type": "input_image", "image_url": url})
    return parts


def _chat_tool_to_responses(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function", {})
    out: dict[str, Any] = {
        "type": "function",
        "name": function.get("name", ""),
        "parameters": function.get("parameters") or {"type": "object"},
    }
    if function.get("description"):
        out["description"] = function["description"]
    if function.get("strict") is not None:
        out["strict"] = function["strict"]
    return out


def responses_request_to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """Translate a `/v1/responses` body into a `/v1/chat/completions` body."""
    out: dict[str, Any] = {"model": body.get("model")}
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    source = body.get("input")
    if isinstance(source, str):
        messages.append({"role": "user", "content": source})
    for item in source if isinstance(source, list) else []:
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role", "user")
            role = "system" if role == "developer" else role
            messages.append({"role": role, "content": _responses_content_to_chat(item.get("content"), role)})
        elif kind == "function_call":
            call = {
                "id": item.get("call_id", ""),
                "type": "function",
                "function": {"name": item.get("name", ""), "arguments": item.get("arguments") or "{}"},
            }
            last = messages[-1] if messages else None
            # Text and parallel calls arrive as consecutive items; chat carries them on one assistant message.
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append(
                {"role": "tool", "tool_call_id": item.get("call_id", ""), "content": text_of(output) or str(output)}
            )
    out["messages"] = messages
    if body.get("max_output_tokens") is not None:
        out["max_tokens"] = body["max_output_tokens"]
    for key in ("temperature", "top_p", "stream", "user", "metadata", "parallel_tool_calls"):
        if body.get(key) is not None:
            out[key] = body[key]
    if body.get("stream"):
        out["stream_options"] = {"include_usage": True}
    if body.get("tools"):
        out["tools"] = [_responses_tool_to_chat(t) for t in body["tools"] if t.get("type") == "function"]
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function":
        out["tool_choice"] = {"type": "function", "function": {"name": choice.get("name", "")}}
    elif isinstance(choice, str):
        out["tool_choice"] = choice
    return out


def _responses_content_to_chat(content: Any, role: str) -> Any:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in content or []:
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": part.get("text", "")})
        elif kind == "input_image" and role == "user":
            parts.append({"type": "image_url", "image_url": {"url": part.get("image_url", "")}})
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def _responses_tool_to_chat(tool: dict[str, Any]) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.get("name", ""), "parameters": tool.get("parameters") or {}}
    if tool.get("description"):
        function["description"] = tool["description"]
    if tool.get("strict") is not None:
        function["strict"] = tool["strict"]
    return {"type": "function", "function": function}


# --- responses ------------------------------------------------------------------------------------------------


def chat_usage_to_responses(usage: dict[str, Any] | None) -> dict[str, Any]:
    """Chat usage → Responses usage."""
    usage = usage or {}
    prompt = usage.get("prompt_tokens") or 0
    completion = usage.get("completion_tokens") or 0
    return {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion}


def responses_usage_to_chat(usage: dict[str, Any] | None) -> dict[str, Any]:
    """Responses usage → chat usage."""
    usage = usage or {}
    prompt = usage.get("input_tokens") or 0
    completion = usage.get("output_tokens") or 0
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def response_object(
    response_id: str,
    model: str,
    created_at: int,
    output: list[dict[str, Any]],
    finish_reason: str | None,
    usage: dict[str, Any] | None,
    status: str | None = None,
) -> dict[str, Any]:
    """A Responses `response` object; `finish_reason` (chat naming) decides completed vs incomplete."""
    if status is None:
        status = "incomplete" if finish_reason == "length" else "completed"
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "model": model,
        "output": output,
        "incomplete_details": {"reason": "max_output_tokens"} if finish_reason == "length" else None,
        "error": None,
        "usage": usage,
    }


def message_item(text: str, item_id: str | None = None, status: str = "completed") -> dict[str, Any]:
    """A Responses assistant `message` output item holding `text`."""
    return {
        "type": "message",
        "id": item_id or new_item_id("msg"),
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def function_call_item(
    call_id: str, name: str, arguments: str, item_id: str | None = None, status: str = "completed"
) -> dict[str, Any]:
    """A Responses `function_call` output item."""
    return {
        "type": "function_call",
        "id": item_id or new_item_id("fc"),
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def chat_response_to_responses(body: dict[str, Any]) -> dict[str, Any]:
    """Translate a `chat.completion` object into a Responses `response` object."""
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    output: list[dict[str, Any]] = []
    text = text_of(message.get("content"))
    if text:
        output.append(message_item(text))
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        output.append(function_call_item(call.get("id", ""), function.get("name", ""), function.get("arguments", "")))
    response_id = body.get("id") or new_item_id("resp")
    return response_object(
        response_id,
        body.get("model", ""),
        body.get("created") or int(time.time()),
        output,
        choice.get("finish_reason"),
        chat_usage_to_responses(body.get("usage")),
    )


def responses_response_to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """Translate a Responses `response` object into a `chat.completion` object."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in body.get("output") or []:
        if item.get("type") == "message":
            texts.append(text_of(item.get("content")))
        elif item.get("type") == "function_call":
            calls.append(
                {
                    "id": item.get("call_id", ""),
                    "type": "function",
                    "function": {"name": item.get("name", ""), "arguments": item.get("arguments", "")},
                }
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": body.get("id", ""),
        "object": "chat.completion",
        "created": body.get("created_at") or int(time.time()),
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": message, "finish_reason": responses_finish_reason(body, bool(calls))}],
        "usage": responses_usage_to_chat(body.get("usage")),
    }


def responses_finish_reason(body: dict[str, Any], has_calls: bool) -> str:
    """The chat `finish_reason` a Responses `response` object amounts to."""
    if body.get("status") == "incomplete":
        return "length" if (body.get("incomplete_details") or {}).get("reason") == "max_output_tokens" else "stop"
    return "tool_calls" if has_calls else "stop"
