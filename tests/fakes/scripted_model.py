"""A scripted model for agent episodes: answers a coding agent's first request with a streamed tool call that runs
a shell command, and every later request (a tool result in the conversation) with a final message.

It speaks the three dialects the agents use, streamed: Anthropic Messages (`/v1/messages`, Claude Code), OpenAI
Responses (`/v1/responses`, Codex) and OpenAI chat completions (`/v1/chat/completions`, opencode and pi).

What the command writes follows the agent's harness: the double reads the whole request (system prompt and the
messages the agent built from its CLAUDE.md / AGENTS.md) and, when it finds a rule `Sign every file with WORD.`,
writes WORD into `answer.txt`; otherwise it writes `unsigned`. Tasks steer it: `Copy /PATH into the answer file.`
runs `cat /PATH > answer.txt` instead (to probe what the agent can read); a conversation holding `SCRIPTED-CRASH`
is answered 400 (the agent gives up), one holding `SCRIPTED-HANG` is never answered, one holding
`SCRIPTED-TOO-LARGE` gets the 400 Reef answers when a prompt exceeds the model's context.

Start it with `start_scripted_model()` (a background thread; `received` keeps every request).
"""

from __future__ import annotations

import http.server
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

RULE = re.compile(r"Sign every file with ([A-Za-z0-9-]+)\.")
COPY = re.compile(r"Copy (/[A-Za-z0-9_./-]+) into the answer file")
ANSWER_FILE = "answer.txt"
TOO_LARGE = "the prompt has 20480 tokens; the model's context is 8192"
SHELL_TOOLS = ("bash", "shell", "shell_command", "exec_command", "local_shell")


@dataclass(frozen=True)
class Received:
    """One request as the double saw it (header names lower-cased)."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class ScriptedModel:
    """The running double: its base URL (no `/v1`) and what it received."""

    url: str
    received: list[Received] = field(default_factory=list)
    server: http.server.ThreadingHTTPServer | None = None

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def word_for(body: dict[str, Any]) -> str:
    """What the harness says to write: the rule's word, or `unsigned`."""
    found = RULE.search(json.dumps(body))
    return found.group(1) if found else "unsigned"


def _tools(path: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(name, JSON schema of the parameters) of every function tool in the request."""
    tools = []
    for tool in body.get("tools") or []:
        if path.endswith("/chat/completions") and tool.get("type") == "function":
            function = tool.get("function", {})
            tools.append((function.get("name", ""), function.get("parameters") or {}))
        elif path.endswith("/messages"):
            tools.append((tool.get("name", ""), tool.get("input_schema") or {}))
        elif tool.get("type") == "function":
            tools.append((tool.get("name", ""), tool.get("parameters") or {}))
    return tools


def _conversation(body: dict[str, Any]) -> str:
    return json.dumps(body.get("messages") or body.get("input") or [])


def _answered(path: str, body: dict[str, Any]) -> bool:
    """Whether the conversation already holds a tool result (then the agent gets its final message)."""
    text = _conversation(body)
    return any(marker in text for marker in ('"tool_result"', '"function_call_output"', '"role": "tool"'))


def _shell_call(path: str, body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The shell tool's name and arguments that write the harness's word into `answer.txt`."""
    copy = COPY.search(_conversation(body))
    command = f"cat {copy.group(1)} > {ANSWER_FILE}" if copy else f"printf '%s\\n' {word_for(body)} > {ANSWER_FILE}"
    for name, schema in _tools(path, body):
        if name.lower() not in SHELL_TOOLS:
            continue
        properties = schema.get("properties") or {}
        if "cmd" in properties:
            arguments: dict[str, Any] = {"cmd": command}
        elif (properties.get("command") or {}).get("type") == "array":
            arguments = {"command": ["bash", "-lc", command]}
        else:
            arguments = {"command": command}
        if "description" in properties:
            arguments["description"] = "Write the answer file"
        return name, arguments
    return None


# --- the three dialects, streamed --------------------------------------------------------------------------------


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {payload}\n\n".encode()


def _messages_stream(model: str, call: tuple[str, dict[str, Any]] | None, text: str) -> list[bytes]:
    usage = {"input_tokens": 10, "output_tokens": 5}
    message = {"id": "msg_" + uuid.uuid4().hex[:12], "type": "message", "role": "assistant", "model": model}
    out = [_sse("message_start", {"type": "message_start", "message": {**message, "content": [], "usage": usage}})]
    if call is None:
        block: dict[str, Any] = {"type": "text", "text": ""}
        delta: dict[str, Any] = {"type": "text_delta", "text": text}
    else:
        block = {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:12], "name": call[0], "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(call[1])}
    out.append(_sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}))
    out.append(_sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}))
    out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
    stop = {"stop_reason": "end_turn" if call is None else "tool_use", "stop_sequence": None}
    out.append(_sse("message_delta", {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 5}}))
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return out


def _event(kind: str, **fields: Any) -> bytes:
    """One Responses stream event (its `type` repeated as the SSE event name)."""
    return _sse(kind, {"type": kind, **fields})


def _responses_stream(model: str, call: tuple[str, dict[str, Any]] | None, text: str) -> list[bytes]:
    response_id = "resp_" + uuid.uuid4().hex[:12]
    base = {"id": response_id, "object": "response", "created_at": 0, "model": model, "status": "in_progress"}
    out = [_event("response.created", sequence_number=0, response=base)]
    if call is None:
        item: dict[str, Any] = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed"}
        done_item = {**item, "content": [{"type": "output_text", "text": text, "annotations": []}]}
        out.append(_event("response.output_item.added", output_index=0, item={**item, "content": []}))
        delta = {"item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": text}
        out.append(_event("response.output_text.delta", **delta))
    else:
        arguments = json.dumps(call[1])
        item = {"id": "fc_1", "type": "function_call", "call_id": "call_" + uuid.uuid4().hex[:12], "name": call[0]}
        done_item = {**item, "arguments": arguments, "status": "completed"}
        out.append(_event("response.output_item.added", output_index=0, item={**item, "arguments": ""}))
        delta = {"item_id": "fc_1", "output_index": 0, "delta": arguments}
        out.append(_event("response.function_call_arguments.delta", **delta))
    out.append(_event("response.output_item.done", output_index=0, item=done_item))
    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    final = {**base, "status": "completed", "output": [done_item], "usage": usage}
    out.append(_event("response.completed", response=final))
    return out


def _chat_stream(model: str, call: tuple[str, dict[str, Any]] | None, text: str) -> list[bytes]:
    chunk = {"id": "chatcmpl-" + uuid.uuid4().hex[:12], "object": "chat.completion.chunk", "created": 0, "model": model}
    if call is None:
        delta: dict[str, Any] = {"role": "assistant", "content": text}
        finish = "stop"
    else:
        function = {"name": call[0], "arguments": json.dumps(call[1])}
        tool_call = {"index": 0, "id": "call_" + uuid.uuid4().hex[:12], "type": "function", "function": function}
        delta, finish = {"role": "assistant", "content": None, "tool_calls": [tool_call]}, "tool_calls"
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    return [
        _sse(None, {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
        _sse(None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage}),
        _sse(None, "[DONE]"),
    ]


STREAMS = {"/v1/messages": _messages_stream, "/v1/responses": _responses_stream}


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    model: ScriptedModel

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def do_GET(self) -> None:  # a model list, for agents that ask
        self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "reef"}]})

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.split("?")[0]
        self.model.received.append(Received(path, {k.lower(): v for k, v in self.headers.items()}, body))
        if "SCRIPTED-HANG" in _conversation(body):
            time.sleep(3600)
        if "SCRIPTED-TOO-LARGE" in _conversation(body):  # as Reef's local engine refuses an overlong prompt
            error = {"type": "invalid_request_error", "message": TOO_LARGE}
            return self._send(400, {"type": "error", "error": error})
        if "SCRIPTED-CRASH" in _conversation(body):
            error = {"type": "invalid_request_error", "message": "scripted crash"}
            return self._send(400, {"type": "error", "error": error})
        if path.endswith("/count_tokens"):
            return self._send(200, {"input_tokens": 10})
        call = None if _answered(path, body) else _shell_call(path, body)
        text = f"Done: wrote {word_for(body)} to {ANSWER_FILE}."
        stream = STREAMS.get(path, _chat_stream)(str(body.get("model", "scripted")), call, text)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        for event in stream:
            self.wfile.write(event)
            self.wfile.flush()
        self.close_connection = True

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def start_scripted_model(host: str = "127.0.0.1", port: int = 0) -> ScriptedModel:
    """Serve the scripted model on a background thread; `stop()` ends it."""
    model = ScriptedModel("")
    handler = type("Handler", (_Handler,), {"model": model})
    server = http.server.ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    model.server = server
    model.url = f"http://{host}:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return model
