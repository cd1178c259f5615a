"""Server-sent events: split a byte stream into whole events, parse and encode them, and build receipt frames.

Pure functions and one small incremental splitter; nothing here does I/O. Frames are relayed byte-exact, so the
splitter hands back each event exactly as received, terminator included.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from reef.core.scenarios import Dialect
from reef.inference.base import StreamFrame

DONE = "[DONE]"
"""The data of the chat dialect's terminal frame."""

_TERMINAL_RESPONSES_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


@dataclasses.dataclass(frozen=True, slots=True)
class SSEEvent:
    """One parsed event: `name` from the `event:` field (None when absent); `data` is the JSON-decoded `data:`
    payload, or the raw string when it is not JSON (`[DONE]`), or None for a comment-only frame."""

    name: str | None
    data: Any


class SSESplitter:
    """Incremental splitter: feed byte chunks as they arrive, get back whole events (ending in a blank line)."""

    __slots__ = ("_buffer", "_scanned")

    def __init__(self) -> None:
        self._buffer = b""
        self._scanned = 0  # bytes already searched for a terminator, so a long event is not rescanned per chunk

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add `chunk`; return the events it completes, byte-exact, in order."""
        buffer = self._buffer + chunk if self._buffer else chunk
        events: list[bytes] = []
        start = 0
        scan = max(0, self._scanned - 3)
        while True:
            lf = buffer.find(b"\n\n", scan)
            crlf = buffer.find(b"\r\n\r\n", scan)
            if lf < 0 and crlf < 0:
                break
            end = lf + 2 if crlf < 0 or 0 <= lf < crlf else crlf + 4
            events.append(buffer[start:end])
            start = scan = end
        self._buffer = buffer[start:]
        self._scanned = len(self._buffer)
        return events

    def remainder(self) -> bytes:
        """Bytes received after the last whole event (an event cut short at end of stream)."""
        return self._buffer


def parse_event(frame: bytes) -> SSEEvent:
    """Parse one whole event's bytes into its name and decoded data (multi-line `data:` fields are joined)."""
    fast = _parse_common(frame)
    if fast is not None:
        return fast
    name: str | None = None
    data_lines: list[bytes] = []
    for line in frame.splitlines():
        if not line or line.startswith(b":"):
            continue
        field, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            data_lines.append(value)
        elif field == b"event":
            name = value.decode()
    if not data_lines:
        return SSEEvent(name, None)
    raw = data_lines[0] if len(data_lines) == 1 else b"\n".join(data_lines)
    try:
        return SSEEvent(name, orjson.loads(raw))
    except orjson.JSONDecodeError:
        return SSEEvent(name, raw.decode(errors="replace"))


def _parse_common(frame: bytes) -> SSEEvent | None:
    """The shapes providers actually send (`data: …\\n\\n`, `event: …\\ndata: …\\n\\n`), parsed without a line loop;
    None for anything else. Every streamed frame passes here, so this is on the proxy's hot path."""
    if not frame.endswith(b"\n\n") or b"\r" in frame:
        return None
    name = None
    body = frame[:-2]
    if body.startswith(b"event: "):
        head, _, body = body.partition(b"\n")
        name = head[7:].decode()
    if not body.startswith(b"data: ") or b"\n" in body:
        return None
    raw = body[6:]
    if raw == b"[DONE]":
        return SSEEvent(name, DONE)
    try:
        return SSEEvent(name, orjson.loads(raw))
    except orjson.JSONDecodeError:
        return None


def encode_event(event: SSEEvent) -> bytes:
    """The wire bytes of `event`: an optional `event:` line, one `data:` line, a blank line."""
    data = event.data
    payload = data.encode() if isinstance(data, str) else orjson.dumps(data)
    if event.name is None:
        return b"data: " + payload + b"\n\n"
    return b"event: " + event.name.encode() + b"\ndata: " + payload + b"\n\n"


def is_terminal(dialect: Dialect, event: SSEEvent) -> bool:
    """Whether `event` ends a stream of `dialect` (the frame the service holds back for the receipt)."""
    if dialect is Dialect.CHAT:
        return event.data == DONE
    if dialect is Dialect.MESSAGES:
        return event.name == "message_stop" or _data_type(event) == "message_stop"
    name = event.name or _data_type(event)
    return name in _TERMINAL_RESPONSES_EVENTS


def _data_type(event: SSEEvent) -> str | None:
    return event.data.get("type") if isinstance(event.data, dict) else None


def receipt_frames(dialect: Dialect, terminal: StreamFrame, last_chunk: dict[str, Any] | None, record_id: str) -> bytes:
    """What the service emits in place of the held-back `terminal` frame once the record is durable.

    chat: a receipt chunk (`choices: []`, id/created/model copied from `last_chunk`) then the `[DONE]` frame;
    messages / responses: the terminal event re-emitted with `"reef": {"agent_record_id": …}` added.
    """
    reef = {"agent_record_id": record_id}
    if dialect is Dialect.CHAT:
        chunk = last_chunk or {}
        receipt = {
            "id": chunk.get("id", ""),
            "object": "chat.completion.chunk",
            "created": chunk.get("created", 0),
            "model": chunk.get("model", ""),
            "choices": [],
            "reef": reef,
        }
        return b"data: " + orjson.dumps(receipt) + b"\n\n" + terminal.data
    event = parse_event(terminal.data)
    data = dict(event.data) if isinstance(event.data, dict) else {"type": event.name}
    data["reef"] = reef
    return encode_event(SSEEvent(event.name, data))
