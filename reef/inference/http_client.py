"""A small pooled HTTP/1.1 client for the upstream proxy: asyncio protocols, parsing by httptools.

It does what forwarding to one provider needs and nothing else: keep-alive connections to one origin (TLS
included), one write per request, bodies streamed as they arrive (chunked or sized, gzip/deflate decoded), a
bound on connecting, on waiting for the answer and on each wait for more body. No cookies, redirects or proxies.

Why not aiohttp (which Reef used before): its client spent ~70 µs of event-loop time per request in this proxy's
benchmark (request objects, header multidicts, URL objects, tracing hooks); this one spends a fraction of that,
and the event loop is what bounds the proxy's throughput (`benchmarks/proxy.py`).
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import time
import zlib
from typing import Any
from urllib.parse import urlsplit

import httptools

from reef.inference.deadline import Deadline

KEEPALIVE_S = 15.0  # an idle connection older than this is dropped rather than reused (servers close them)
PAUSE_BYTES = 1 << 20  # a body buffered beyond this pauses reading from the socket until the reader catches up


class HttpClientError(Exception):
    """The request could not be sent or its answer could not be read (connection refused, reset, malformed)."""


class _Stale(HttpClientError):
    """A reused keep-alive connection closed before answering: the request can go again on a new one."""


class HttpResponse:
    """One answer: `status` and `headers` (lower-case names) once returned; the body read with `read_chunk`."""

    def __init__(self, connection: _Connection) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self._connection = connection
        self._head: asyncio.Future[None] = connection.loop.create_future()
        self._chunks: collections.deque[bytes] = collections.deque()
        self._buffered = 0
        self._waiter: asyncio.Future[None] | None = None
        self._complete = False
        self._error: BaseException | None = None
        self._decoder: Any = None
        self._released = False

    # --- reading ------------------------------------------------------------------------------------------------

    @property
    def at_eof(self) -> bool:
        """Whether the whole body arrived and was read."""
        return self._complete and not self._chunks

    async def read_chunk(self, timeout_s: float | None = None) -> bytes:
        """All of the body that arrived and was not read yet (waiting for some); b"" at its end.

        Raises on a broken connection, TimeoutError after `timeout_s` without data.
        """
        while not self._chunks:
            if self._complete:
                return b""
            if self._error is not None:
                raise self._error
            self._waiter = self._connection.loop.create_future()
            try:
                async with Deadline(self._connection.loop, timeout_s):
                    await self._waiter
            finally:
                self._waiter = None
        chunk = self._chunks.popleft() if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks.clear()
        self._buffered = 0
        if self._buffered < PAUSE_BYTES // 2:
            self._connection.resume()
        return chunk

    async def read(self) -> bytes:
        """The whole (rest of the) body."""
        parts = []
        while chunk := await self.read_chunk():
            parts.append(chunk)
        return b"".join(parts)

    def release(self) -> None:
        """Done with this answer: its connection goes back to the pool if it can serve another request."""
        if not self._released:
            self._released = True
            self._connection.finished(reusable=self._complete and self._connection.keep_alive)

    def close(self) -> None:
        """Done with this answer, unread or not: its connection is closed."""
        if not self._released:
            self._released = True
            self._connection.finished(reusable=False)

    # --- fed by the connection ----------------------------------------------------------------------------------

    def _headers_done(self, status: int, headers: dict[str, str]) -> None:
        self.status = status
        self.headers = headers
        encoding = headers.get("content-encoding", "identity").lower()
        if encoding in ("gzip", "x-gzip"):
            self._decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._decoder = zlib.decompressobj()
        elif encoding != "identity":
            self._fail(HttpClientError(f"unsupported content-encoding {encoding!r}"))
            return
        if not self._head.done():
            self._head.set_result(None)

    def _body(self, data: bytes) -> None:
        if self._decoder is not None:
            data = self._decoder.decompress(data)
        if data:
            self._chunks.append(data)
            self._buffered += len(data)
            if self._buffered > PAUSE_BYTES:
                self._connection.pause()
            self._wake()

    def _done(self) -> None:
        if self._decoder is not None:
            tail = self._decoder.flush()
            if tail:
                self._chunks.append(tail)
        self._complete = True
        self._wake()

    def _fail(self, error: BaseException) -> None:
        if self._complete:
            return
        self._error = error
        if not self._head.done():
            self._head.set_exception(error)
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class _Connection(asyncio.Protocol):
    """One keep-alive connection; it carries one request at a time."""

    def __init__(self, pool: HttpClient) -> None:
        self.pool = pool
        self.loop = pool.loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.response: HttpResponse | None = None
        self.closed = False
        self.keep_alive = True
        self.idle_since = 0.0
        self._received = False  # any byte of the current answer
        self._header_items: list[tuple[bytes, bytes]] = []
        self._sized = False  # the current answer has a length (or chunked framing), not "until the connection ends"
        self._paused = False
        self._interim = False

    def send(self, head: bytes, body: bytes) -> HttpResponse:
        assert self.transport is not None
        self.response = HttpResponse(self)
        self._received = False
        self._header_items = []
        self.transport.write(head + body)
        return self.response

    def pause(self) -> None:
        if not self._paused and self.transport is not None and not self.closed:
            self._paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self._paused and self.transport is not None and not self.closed:
            self._paused = False
            self.transport.resume_reading()

    def finished(self, reusable: bool) -> None:
        self.response = None
        self.resume()
        self.pool._put_back(self, reusable and not self.closed)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    # --- asyncio.Protocol -----------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._broken(HttpClientError("the upstream switched protocols"))
        except httptools.HttpParserError as exc:
            self._broken(HttpClientError(f"malformed answer from the upstream: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        response = self.response
        if response is None:
            return
        if response._head.done() and not self._sized:
            response._done()  # an answer delimited by the end of the connection
        elif not self._received:
            response._fail(_Stale("the upstream closed the connection before answering"))
        else:
            response._fail(HttpClientError("the upstream closed the connection mid-answer"))

    def _broken(self, error: HttpClientError) -> None:
        if self.response is not None:
            self.response._fail(error)
        self.close()

    # --- httptools callbacks --------------------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_items.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # an interim answer (100 Continue, 103 Early Hints): the real one follows
            self._interim = True
            self._header_items = []
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in self._header_items}
        self.keep_alive = self.parser.should_keep_alive()
        self._sized = "content-length" in headers or "chunked" in headers.get("transfer-encoding", "").lower()
        if self.response is not None:
            self.response._headers_done(status, headers)

    def on_body(self, body: bytes) -> None:
        if self.response is not None:
            self.response._body(body)

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
        elif self.response is not None:
            self.response._done()


class HttpClient:
    """Keep-alive connections to one origin (`base_url`'s scheme, host and port), at most `max_connections`."""

    def __init__(
        self,
        base_url: str,
        headers: dict[str, str],
        *,
        max_connections: int = 100,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self._tls = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._tls else 80)
        self._prefix = parts.path.rstrip("/")
        self._ssl = (ssl_context or ssl.create_default_context()) if self._tls else None
        default_port = self._port == (443 if self._tls else 80)
        host = f"[{self._host}]" if ":" in self._host else self._host
        lines = [f"host: {host if default_port else f'{host}:{self._port}'}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        self._headers = ("\r\n".join(lines) + "\r\n").encode("latin-1")
        self._max = max_connections
        self._idle: collections.deque[_Connection] = collections.deque()
        self._open = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._closed = False
        self.loop = asyncio.get_running_loop()

    async def request(self, method: str, path: str, body: bytes = b"", timeout_s: float | None = None) -> HttpResponse:
        """Send one request; returns once the answer's status and headers are in (bounded by `timeout_s`).

        The caller reads the body from the response and then calls `release()` (or `close()`).
        """
        head = (
            f"{method} {self._prefix}{path} HTTP/1.1\r\n".encode("latin-1")
            + self._headers
            + b"content-length: %d\r\n\r\n" % len(body)
        )
        async with Deadline(self.loop, timeout_s):
            while True:
                connection, reused = await self._acquire()
                response = connection.send(head, body)
                try:
                    await response._head
                    return response
                except _Stale:
                    connection.finished(reusable=False)
                    if not reused:
                        raise
                    # The server closed an idle keep-alive connection as we sent: nothing of it was read.
                except BaseException:
                    connection.close()
                    connection.finished(reusable=False)
                    raise

    def deadline(self, seconds: float | None) -> Deadline:
        """A bound on a block of work with this client (like `asyncio.timeout`)."""
        return Deadline(self.loop, seconds)

    async def _acquire(self) -> tuple[_Connection, bool]:
        while True:
            if self._closed:
                raise HttpClientError("the HTTP client is closed")
            now = time.monotonic()
            while self._idle:
                connection = self._idle.pop()
                if not connection.closed and now - connection.idle_since < KEEPALIVE_S:
                    return connection, True
                connection.close()
                self._open -= 1
            if self._open < self._max:
                self._open += 1
                try:
                    return await self._connect(), False
                except BaseException:
                    self._open -= 1
                    self._wake_one()
                    raise
            waiter = self.loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # pass the wake-up on
                raise

    async def _connect(self) -> _Connection:
        try:
            _, connection = await self.loop.create_connection(
                lambda: _Connection(self),
                self._host,
                self._port,
                ssl=self._ssl,
                server_hostname=self._host if self._tls else None,
            )
        except (OSError, ssl.SSLError) as exc:
            raise HttpClientError(f"cannot connect to {self._host}:{self._port}: {exc}") from exc
        return connection

    def _put_back(self, connection: _Connection, reusable: bool) -> None:
        if reusable and not self._closed:
            connection.idle_since = time.monotonic()
            self._idle.append(connection)
        else:
            connection.close()
            self._open -= 1
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def aclose(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(HttpClientError("the HTTP client is closed"))
