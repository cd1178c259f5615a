"""The HTTP server's connection protocol: uvicorn's httptools protocol, with one system call per response.

uvicorn writes a response's head and each body message separately. On a fast path that is one `send` syscall
for the head and one for the body of every answer, and on loopback each syscall also does the receiver's TCP
work. Here the writes a connection makes within one event-loop turn leave together, once the turn ends.
Nothing waits longer than that turn: a head followed by its body in the same turn (Reef's JSON answers, and its
streams when frames are at hand) becomes one write; a head whose body comes later still leaves at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class _CoalescingTransport:
    """Delegates to a transport, gathering the writes of one event-loop turn into one."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(data)

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def _flush(self) -> None:
        if self._pending:
            data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
            self._pending = []
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(data) for data in self._pending)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol writing through `_CoalescingTransport` (pass as `uvicorn.Config(http=…)`)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(_CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
