"""A fast fake model provider speaking OpenAI chat, OpenAI Responses and Anthropic messages.

Run it with `python -m tests.fakes.upstream --port N`, or start it in-process with `start_fake_upstream()` (a
background thread; `received` keeps the last requests for inspection) or `spawn_fake_upstream()` (a subprocess,
for benchmarks). Raw asyncio + httptools, so it is far faster than the proxy in front of it.

Answers are deterministic: the reply text is `"echo: " + <the last user text>`. Test hooks by model name:
`error-400` / `error-500` answer that status; `slow` (or `slow-<seconds>`) waits before answering (1 s default);
`cut` drops the connection half-way through a stream (or before any answer when not streaming); a model whose
name contains `tool` calls the request's first tool (arguments `{"text": <last user text>}`) when the last turn
is the user's; `recall` answers a chat question with the assistant turn that followed the same question earlier
in the conversation (as the `chat` harness adapter serves worked examples), else `I do not know`. A body the
fake cannot read (a field it reads of the wrong type, or a required one missing) gets a 400 naming the field, as
a real provider answers.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httptools
import orjson

_REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 500: b"Internal Server Error"}
_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n"
)
_MODELS = orjson.dumps(
    {"object": "list", "data": [{"id": "fake-model", "object": "model", "created": 0, "owned_by": "fake"}]}
)


@dataclass(frozen=True)
class ReceivedRequest:
    """One request as the fake saw it (header names lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body) if self.body else None


# --- answers ----------------------------------------------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict):
                if part.get("type") in ("text", "input_text", "output_text"):
                    texts.append(part.get("text", ""))
                elif part.get("type") == "tool_result":
                    texts.append(_text(part.get("content")))
        return "\n".join(texts)
    return ""


def _last_turn(path: str, body: dict[str, Any]) -> tuple[str, bool]:
    """(the last user/tool text, whether the last turn is a plain user turn)."""
    if path == "/v1/responses":
        items = body.get("input")
        if isinstance(items, str):
            return items, True
        for item in reversed(items or []):
            if item.get("type") == "function_call_output":
                return str(item.get("output", "")), False
            if item.get("role", "user") == "user" and item.get("type", "message") == "message":
                return _text(item.get("content")), True
        return "", True
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "tool":
            return _text(message.get("content")), False
        if message.get("role") == "user":
            content = message.get("content")
            is_result = isinstance(content, list) and any(
                isinstance(p, dict) and p.get("type") == "tool_result" for p in content
            )
            return _text(content), not is_result
    return "", True


@dataclass(frozen=True)
class _Answer:
    text: str
    tool: tuple[str, str] | None  # (tool name, JSON arguments)
    prompt_tokens: int
    model: str


def _answer(path: str, body: dict[str, Any], size: int) -> _Answer:
    text, user_turn = _last_turn(path, body)
    model = body.get("model") or "fake-model"
    tools = body.get("tools") or []
    if "tool" in model and tools and user_turn:
        first = tools[0]
        name = first.get("function", {}).get("name") or first.get("name", "tool")
        return _Answer("", (name, orjson.dumps({"text": text}).decode()), max(1, size // 4), model)
    if model == "recall" and path == "/v1/chat/completions":
        return _Answer(_recalled(body.get("messages") or [], text), None, max(1, size // 4), model)
    return _Answer("echo: " + text, None, max(1, size // 4), model)


def _recalled(messages: list[dict[str, Any]], question: str) -> str:
    """The assistant turn that followed `question` earlier in `messages`, else `I do not know`."""
    for earlier, later in zip(messages, messages[1:-1], strict=False):
        if (
            earlier.get("role") == "user"
            and later.get("role") == "assistant"
            and _text(earlier.get("content")) == question
        ):
            return _text(later.get("content"))
    return "I do not know"


def _chat(answer: _Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
    if answer.tool:
        message["tool_calls"] = [
            {"id": "call_1", "type": "function", "function": {"name": answer.tool[0], "arguments": answer.tool[1]}}
        ]
    words = len(answer.text.split())
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1700000000,
        "model": answer.model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if answer.tool else "stop"}],
        "usage": {
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": words,
            "total_tokens": answer.prompt_tokens + words,
        },
    }


def _messages(answer: _Answer) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": answer.text}] if answer.text else []
    if answer.tool:
        content.append(
            {"type": "tool_use", "id": "toolu_1", "name": answer.tool[0], "input": orjson.loads(answer.tool[1])}
        )
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": answer.model,
        "content": content,
        "stop_reason": "tool_use" if answer.tool else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": answer.prompt_tokens, "output_tokens": len(answer.text.split())},
    }


def _response(answer: _Answer, status: str = "completed") -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if answer.text:
        part = {"type": "output_text", "text": answer.text, "annotations": []}
        output.append(
            {"type": "message", "id": "msg_fake", "status": "completed", "role": "assistant", "content": [part]}
        )
    if answer.tool:
        output.append(
            {"type": "function_call", "id": "fc_fake", "call_id": "call_1", "name": answer.tool[0],
             "arguments": answer.tool[1], "status": "completed"}
        )  # fmt: skip
    words = len(answer.text.split())
    return {
        "id": "resp_fake",
        "object": "response",
        "created_at": 1700000000,
        "status": status,
        "model": answer.model,
        "output": output,
        "usage": {
            "input_tokens": answer.prompt_tokens,
            "output_tokens": words,
            "total_tokens": answer.prompt_tokens + words,
        },
    }


def _sse(name: str | None, data: Any) -> bytes:
    payload = data if isinstance(data, bytes) else orjson.dumps(data)
    return (b"event: " + name.encode() + b"\n" if name else b"") + b"data: " + payload + b"\n\n"


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)] if text else []


def _chat_stream(answer: _Answer) -> list[bytes]:
    head = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": answer.model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(None, {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"content": piece}) for piece in _pieces(answer.text)]
    if answer.tool:
        call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": answer.tool[0], "arguments": ""}}
        frames.append(chunk({"tool_calls": [call]}))
        frames.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": answer.tool[1]}}]}))
    frames.append(chunk({}, "tool_calls" if answer.tool else "stop"))
    frames.append(_sse(None, {**head, "choices": [], "usage": _chat(answer)["usage"]}))
    frames.append(b"data: [DONE]\n\n")
    return frames


def _messages_stream(answer: _Answer) -> list[bytes]:
    final = _messages(answer)
    start = {
        **final,
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": answer.prompt_tokens, "output_tokens": 1},
    }
    frames = [_sse("message_start", {"type": "message_start", "message": start}), _sse("ping", {"type": "ping"})]
    for index, block in enumerate(final["content"]):
        if block["type"] == "text":
            opened = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block["text"])]
        else:
            opened = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": orjson.dumps(block["input"]).decode()}]
        frames.append(
            _sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": opened})
        )
        frames += [
            _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas
        ]
        frames.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta = {"stop_reason": final["stop_reason"], "stop_sequence": None}
    frames.append(
        _sse(
            "message_delta",
            {"type": "message_delta", "delta": delta, "usage": {"output_tokens": final["usage"]["output_tokens"]}},
        )
    )
    frames.append(_sse("message_stop", {"type": "message_stop"}))
    return frames


def _responses_stream(answer: _Answer) -> list[bytes]:
    final = _response(answer)
    seq = iter(range(1, 1000))

    def event(kind: str, **fields: Any) -> bytes:
        return _sse(kind, {"type": kind, "sequence_number": next(seq), **fields})

    running = {**final, "status": "in_progress", "output": [], "usage": None}
    frames = [event("response.created", response=running), event("response.in_progress", response=running)]
    for index, item in enumerate(final["output"]):
        if item["type"] == "message":
            frames.append(
                event(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "status": "in_progress", "content": []},
                )
            )
            ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
            frames.append(
                event("response.content_part.added", **ids, part={"type": "output_text", "text": "", "annotations": []})
            )
            frames += [event("response.output_text.delta", **ids, delta=p) for p in _pieces(item["content"][0]["text"])]
            frames.append(event("response.output_text.done", **ids, text=item["content"][0]["text"]))
            frames.append(event("response.content_part.done", **ids, part=item["content"][0]))
        else:
            frames.append(
                event(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "arguments": "", "status": "in_progress"},
                )
            )
            ids = {"item_id": item["id"], "output_index": index}
            frames.append(event("response.function_call_arguments.delta", **ids, delta=item["arguments"]))
            frames.append(event("response.function_call_arguments.done", **ids, arguments=item["arguments"]))
        frames.append(event("response.output_item.done", output_index=index, item=item))
    frames.append(event("response.completed", response=final))
    return frames


def _malformed(path: str, request: dict[str, Any]) -> str | None:
    """`field: why` for the first field the fake reads that is missing or of the wrong type; None when readable."""
    for key, kinds in (("model", str), ("stream", bool)):
        if request.get(key) is not None and not isinstance(request[key], kinds):
            return f"{key}: wrong type"
    field = "input" if path == "/v1/responses" else "messages"
    turns = request.get(field)
    if turns is None and field == "messages":
        return "messages: is required"
    if isinstance(turns, list):
        for index, turn in enumerate(turns):
            if not isinstance(turn, dict):
                return f"{field}.{index}: must be an object"
    elif turns is not None and not (field == "input" and isinstance(turns, str)):
        return f"{field}: must be a list"
    if path == "/v1/messages" and not isinstance(request.get("max_tokens"), int):
        return "max_tokens: is required (an integer)"
    tools = request.get("tools")
    if tools is not None and not isinstance(tools, list):
        return "tools: must be a list"
    for index, tool in enumerate(tools or []):
        if not isinstance(tool, dict) or not isinstance(tool.get("function", {}), dict):
            return f"tools.{index}: must be an object (with an object function)"
    return None


def _error_body(path: str, status: int, message: str) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "api_error"
    if path.startswith("/v1/messages"):
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"type": kind, "message": message, "param": None, "code": None}}


_ROUTES = ("/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/messages/count_tokens")
_FINAL = {"/v1/chat/completions": _chat, "/v1/messages": _messages, "/v1/responses": _response}
_STREAMS = {"/v1/chat/completions": _chat_stream, "/v1/messages": _messages_stream, "/v1/responses": _responses_stream}


def answer_body(path: str, request: dict[str, Any]) -> dict[str, Any]:
    """The non-streaming answer the fake gives to `request` on `path` (for tests that need it without HTTP)."""
    return _FINAL[path](_answer(path, request, len(orjson.dumps(request))))


def answer_frames(path: str, request: dict[str, Any]) -> list[bytes]:
    """The SSE frames the fake streams for `request` on `path`."""
    return _STREAMS[path](_answer(path, request, len(orjson.dumps(request))))


def _http(status: int, body: bytes, keep_alive: bool) -> bytes:
    head = b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n" % (
        status, _REASONS.get(status, b"Status"), len(body)
    )  # fmt: skip
    return head + (b"\r\n" if keep_alive else b"connection: close\r\n\r\n") + body


def _render(method: str, path: str, request: Any, size: int, keep_alive: bool) -> tuple[bytes, bool]:
    """The whole HTTP answer to one request, and whether it is whole (False: drop the connection after it)."""
    if method == "GET" and path == "/v1/models":
        return _http(200, _MODELS, keep_alive), True
    if method != "POST" or path not in _ROUTES:
        return _http(404, orjson.dumps(_error_body(path, 404, "no such route")), keep_alive), True
    if not isinstance(request, dict):
        return _http(400, orjson.dumps(_error_body(path, 400, "bad JSON")), keep_alive), True
    malformed = _malformed(path, request)
    if malformed is not None:
        return _http(400, orjson.dumps(_error_body(path, 400, malformed)), keep_alive), True
    model = str(request.get("model") or "")
    for status in (400, 500):
        if f"error-{status}" in model:
            return _http(status, orjson.dumps(_error_body(path, status, f"fake upstream {status}")), keep_alive), True
    if path == "/v1/messages/count_tokens":
        return _http(200, orjson.dumps({"input_tokens": max(1, size // 4)}), keep_alive), True
    answer = _answer(path, request, size)
    cut = "cut" in model
    if not request.get("stream"):
        return (b"", False) if cut else (_http(200, orjson.dumps(_FINAL[path](answer)), keep_alive), True)
    frames = _STREAMS[path](answer)
    if cut:
        frames = frames[: len(frames) // 2]
    out = [_STREAM_HEAD, b"\r\n" if keep_alive else b"connection: close\r\n\r\n"]
    for frame in frames:
        out += [b"%x\r\n" % len(frame), frame, b"\r\n"]
    if not cut:
        out.append(b"0\r\n\r\n")
    return b"".join(out), not cut


# --- HTTP -------------------------------------------------------------------------------------------------------


class _Connection(asyncio.Protocol):
    def __init__(self, server: FakeUpstream) -> None:
        self._server = server
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._url = b""
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            if self._transport is not None:
                self._transport.write(
                    _http(400, b'{"error":{"type":"invalid_request_error","message":"bad HTTP"}}', False)
                )
            self._close()

    def on_message_begin(self) -> None:
        self._url, self._headers, self._body = b"", {}, []

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode().lower()] = value.decode()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        method = self._parser.get_method().decode()
        path = self._url.decode().split("?", 1)[0]
        body = b"".join(self._body)
        keep_alive = self._parser.should_keep_alive()
        self._server.received.append(ReceivedRequest(method, path, self._headers, body))
        cache = self._server.cache
        cached = cache.get((path, body)) if keep_alive else None
        if cached is not None:
            assert self._transport is not None
            self._transport.write(cached)
            return
        try:
            request = orjson.loads(body) if body else {}
        except orjson.JSONDecodeError:
            request = None
        model = str(request.get("model") or "") if isinstance(request, dict) else ""
        if model.startswith("slow"):
            delay_s = float(model.split("-", 1)[1]) if "-" in model else 1.0
            asyncio.get_running_loop().call_later(delay_s, self._respond, method, path, request, body, keep_alive)
            return
        wire, complete = self._respond(method, path, request, body, keep_alive)
        # Answers are deterministic, so a repeated request (the benchmark's) is served from a cache.
        if complete and keep_alive and not any(hook in model for hook in ("error", "cut", "slow")):
            if len(cache) > 4096:
                cache.clear()
            cache[(path, body)] = wire

    def _respond(self, method: str, path: str, request: Any, body: bytes, keep_alive: bool) -> tuple[bytes, bool]:
        """Write the answer; returns (the bytes written, whether the answer was whole)."""
        wire, complete = _render(method, path, request, len(body), keep_alive)
        if self._transport is None or self._transport.is_closing():
            return wire, False
        self._transport.write(wire)
        if not complete or not keep_alive:
            self._transport.close()
        return wire, complete

    def _close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class FakeUpstream:
    """The fake provider on its own event loop in a background thread; `url` is its base URL (no `/v1`)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.received: collections.deque[ReceivedRequest] = collections.deque(maxlen=256)
        self.cache: dict[tuple[str, bytes], bytes] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def serve(self) -> asyncio.AbstractServer:
        """Listen on the running loop (used by the thread and by the command line)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Connection(self), self.host, self.port, backlog=4096)
        self.port = self._server.sockets[0].getsockname()[1]
        return self._server

    def start(self) -> FakeUpstream:
        """Serve in a daemon thread; returns once listening (a no-op when already serving)."""
        if self._thread is not None:
            return self
        ready = threading.Event()

        def run() -> None:
            self._loop = _new_loop()
            self._loop.run_until_complete(self.serve())
            ready.set()
            self._loop.run_forever()
            self._loop.close()

        self._thread = threading.Thread(target=run, name="fake-upstream", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is None or self._server is None:
            return
        loop, server = self._loop, self._server

        async def shutdown() -> None:
            server.close()
            loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), loop)
        if self._thread is not None:
            self._thread.join(5)
        self._loop = self._server = self._thread = None

    def __enter__(self) -> FakeUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_fake_upstream(port: int = 0) -> FakeUpstream:
    """Start the fake in a background thread of this process; call `.stop()` when done."""
    return FakeUpstream(port=port).start()


class FakeUpstreamProcess:
    """The fake in a subprocess (its own interpreter and CPU), for benchmarks."""

    def __init__(self, port: int = 0) -> None:
        command = [sys.executable, "-m", "tests.fakes.upstream", "--port", str(port)]
        root = Path(__file__).resolve().parents[2]
        self._process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=root)
        assert self._process.stdout is not None
        self.url = self._process.stdout.readline().strip().rsplit(" ", 1)[-1]

    def stop(self) -> None:
        self._process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(5)

    def __enter__(self) -> FakeUpstreamProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def spawn_fake_upstream(port: int = 0) -> FakeUpstreamProcess:
    """Start the fake in a subprocess; its first stdout line is `listening on <url>`."""
    return FakeUpstreamProcess(port)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())

    async def run() -> None:
        fake = FakeUpstream(args.host, args.port)
        server = await fake.serve()
        print(f"listening on {fake.url}", flush=True)
        async with server:
            await server.serve_forever()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    main()
