"""The upstream HTTP client against small scripted servers: pooling, framing, failures, timeouts, TLS."""

from __future__ import annotations

import asyncio
import gzip
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from reef.inference.http_client import HttpClient, HttpClientError


class Server:
    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[bytes] = []
        self.url = ""


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    body = await reader.readexactly(length) if length else b""
    return head + body


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[Server]]]:
    servers: list[asyncio.AbstractServer] = []

    async def start(answer: Callable[[bytes], bytes | None], ssl_context: ssl.SSLContext | None = None) -> Server:
        """`answer(request)` gives the bytes to write back (None: close without answering)."""
        state = Server()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            state.connections += 1
            try:
                while (request := await _read_request(reader)) is not None:
                    state.requests.append(request)
                    wire = answer(request)
                    if wire is None:
                        break
                    writer.write(wire)
                    await writer.drain()
                    if b"connection: close" in wire.lower():
                        break
            finally:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ssl_context)
        servers.append(server)
        port = server.sockets[0].getsockname()[1]
        state.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"
        return state

    yield start
    for server in servers:
        server.close()


def ok(body: bytes = b'{"ok":true}', extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%s\r\n%s" % (len(body), extra, body)


async def fetch(client: HttpClient, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    """One whole exchange: (status, body), the connection handed back."""
    response = await client.request(method, path, body)
    try:
        return response.status, await response.read()
    finally:
        response.release()


async def test_requests_reuse_one_keep_alive_connection(serve) -> None:
    server = await serve(lambda request: ok())
    client = HttpClient(server.url, {"x-key": "k"})
    for _ in range(3):
        assert await fetch(client, "POST", "/v1/x", b"{}") == (200, b'{"ok":true}')
    await client.aclose()
    assert server.connections == 1
    assert server.requests[0].startswith(b"POST /v1/x HTTP/1.1\r\n")
    assert b"x-key: k\r\n" in server.requests[0] and server.requests[0].endswith(b"\r\n\r\n{}")


async def test_the_base_urls_path_prefixes_every_request(serve) -> None:
    server = await serve(lambda request: ok())
    client = HttpClient(server.url + "/api/", {})
    (await client.request("GET", "/v1/models")).release()
    await client.aclose()
    assert server.requests[0].startswith(b"GET /api/v1/models HTTP/1.1\r\n")


async def test_chunked_bodies_arrive_decoded_piece_by_piece(serve) -> None:
    wire = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    server = await serve(lambda request: wire)
    client = HttpClient(server.url, {})
    response = await client.request("POST", "/", b"")
    assert await response.read() == b"hello world"
    assert response.at_eof
    response.release()
    await client.aclose()


async def test_a_body_ended_by_closing_the_connection_is_whole_and_not_reused(serve) -> None:
    server = await serve(lambda request: b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil the end")
    client = HttpClient(server.url, {})
    for _ in range(2):
        assert (await fetch(client, "GET", "/"))[1] == b"until the end"
    await client.aclose()
    assert server.connections == 2


async def test_an_interim_answer_is_skipped_for_the_real_one(serve) -> None:
    server = await serve(lambda request: b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"real"))
    client = HttpClient(server.url, {})
    for _ in range(2):
        assert await fetch(client, "POST", "/", b"{}") == (200, b"real")
    await client.aclose()
    assert server.connections == 1


async def test_gzip_bodies_are_decoded(serve) -> None:
    packed = gzip.compress(b'{"zipped":1}')
    server = await serve(lambda request: ok(packed, b"content-encoding: gzip\r\n"))
    client = HttpClient(server.url, {})
    assert (await fetch(client, "GET", "/"))[1] == b'{"zipped":1}'
    await client.aclose()


async def test_a_stale_keep_alive_connection_is_retried_once_on_a_new_one(serve) -> None:
    answers = iter([ok(b"first"), None, ok(b"second")])
    server = await serve(lambda request: next(answers))
    client = HttpClient(server.url, {})
    assert (await fetch(client, "POST", "/", b"1"))[1] == b"first"
    # The server drops the pooled connection on this one.
    assert (await fetch(client, "POST", "/", b"2"))[1] == b"second"
    await client.aclose()
    assert server.connections == 2


async def test_a_connection_closed_before_any_answer_on_a_new_connection_is_an_error(serve) -> None:
    server = await serve(lambda request: None)
    client = HttpClient(server.url, {})
    with pytest.raises(HttpClientError, match="before answering"):
        await client.request("POST", "/", b"")
    await client.aclose()


async def test_a_cut_body_is_an_error_for_the_reader(serve) -> None:
    server = await serve(lambda request: b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\nconnection: close\r\n\r\nshort")
    client = HttpClient(server.url, {})
    response = await client.request("GET", "/")
    assert await response.read_chunk() == b"short"
    with pytest.raises(HttpClientError, match="mid-answer"):
        await response.read_chunk()
    response.close()
    await client.aclose()


async def test_a_malformed_answer_is_an_error(serve) -> None:
    server = await serve(lambda request: b"NOT HTTP AT ALL\r\n\r\n")
    client = HttpClient(server.url, {})
    with pytest.raises(HttpClientError, match="malformed"):
        await client.request("GET", "/")
    await client.aclose()


async def test_an_unreachable_origin_is_an_error() -> None:
    client = HttpClient("http://127.0.0.1:9", {})
    with pytest.raises(HttpClientError, match="cannot connect"):
        await client.request("GET", "/")
    await client.aclose()


async def test_waiting_for_the_head_is_bounded() -> None:
    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        await asyncio.sleep(5)
        writer.close()

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    client = HttpClient(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", {})
    with pytest.raises(TimeoutError):
        await client.request("GET", "/", timeout_s=0.2)
    await client.aclose()
    server.close()


async def test_waiting_for_more_body_is_bounded(serve) -> None:
    server = await serve(lambda request: b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\npart")
    client = HttpClient(server.url, {})
    response = await client.request("GET", "/", timeout_s=2)
    assert await response.read_chunk(0.2) == b"part"
    with pytest.raises(TimeoutError):
        await response.read_chunk(0.2)
    response.close()
    await client.aclose()


async def test_at_most_max_connections_are_open_and_callers_queue_for_them(serve) -> None:
    server = await serve(lambda request: ok())
    client = HttpClient(server.url, {}, max_connections=2)

    async def one() -> bytes:
        response = await client.request("GET", "/")
        await asyncio.sleep(0.01)  # hold the connection a little
        body = await response.read()
        response.release()
        return body

    assert await asyncio.gather(*(one() for _ in range(10))) == [b'{"ok":true}'] * 10
    await client.aclose()
    assert server.connections == 2


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is needed to make a test certificate")
async def test_https_origins_are_reached_over_tls(serve, tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1"]
        + ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    server = await serve(lambda request: ok(b"secret"), ssl_context=server_context)
    trusting = ssl.create_default_context(cafile=str(cert))
    client = HttpClient(server.url, {}, ssl_context=trusting)
    assert (await fetch(client, "GET", "/"))[1] == b"secret"
    await client.aclose()
    # Without trusting the certificate the connection is refused.
    strict = HttpClient(server.url, {})
    with pytest.raises(HttpClientError, match="cannot connect"):
        await strict.request("GET", "/")
    await strict.aclose()


async def test_a_deadline_times_out_only_its_own_block_and_lets_other_cancellations_through() -> None:
    from reef.inference.deadline import Deadline

    loop = asyncio.get_running_loop()
    with pytest.raises(TimeoutError):
        async with Deadline(loop, 0.05):
            await asyncio.sleep(5)
    async with Deadline(loop, None), Deadline(loop, 5):
        await asyncio.sleep(0)  # no bound, and a bound not reached: nothing happens

    async def bounded() -> None:
        async with Deadline(loop, 5):
            await asyncio.sleep(5)

    task = asyncio.create_task(bounded())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
