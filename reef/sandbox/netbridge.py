"""Bring exactly one endpoint, the model's, into a sandbox that has no network.

bubblewrap's `--unshare-net` leaves the agent only its own loopback, so the host's Reef on 127.0.0.1 is out of
reach. The host side listens on a Unix socket inside the episode root (which the sandbox can see) and relays each
connection to Reef's TCP address; inside the sandbox, `FORWARDER` listens on 127.0.0.1 at Reef's port and relays
to that socket, then runs the agent as its child and exits with the agent's status (so nothing outlives it).

`episode_bridge` is the bridge of a gate episode: it reads the HTTP requests coming out of the sandbox and lets
through only `/v1/…` ones, each with the episode's own token and scenario put in place of whatever credentials and
scenario the request carried (responses go back untouched). Whatever the agent sends, Reef sees an episode token,
so it serves the agent only as the episode it is, even where no token is configured.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

# Run inside the sandbox as `python forwarder.py SOCKET PORT -- AGENT ARGS…` (stdlib only, no Reef import).
FORWARDER = r"""
import os, socket, subprocess, sys, threading

def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

def serve(listener, path):
    while True:
        client, _ = listener.accept()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(path)
        threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
        threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()

path, port, agent = sys.argv[1], int(sys.argv[2]), sys.argv[sys.argv.index("--") + 1:]
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen(64)
threading.Thread(target=serve, args=(listener, path), daemon=True).start()
sys.exit(subprocess.call(agent))
"""


async def _relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


MAX_HEAD_BYTES = 64 * 1024  # a request head (request line and headers) longer than this ends the connection
_REPLACED = frozenset({b"authorization", b"proxy-authorization", b"x-api-key", b"x-reef-scenario"})
_FORBIDDEN = (
    b"HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
)
_FORBIDDEN_BODY = b'{"error":{"type":"permission_error","message":"a gate episode reaches only /v1/*"}}'


class _Refused(Exception):
    """The request is not one the episode may send: the connection ends (after a 403 when nothing was relayed)."""

    def __init__(self, forbidden: bool = False) -> None:
        super().__init__()
        self.forbidden = forbidden  # a well-formed request for a path outside /v1/


def _rewritten_head(head: bytes, credentials: list[bytes]) -> tuple[bytes, int | None]:
    """The request head with `credentials` (header lines) in place of the request's own, and how its body is
    framed: its length, or None when chunked. Anything ambiguous (bare CR or LF, folded lines, two lengths, a length
    beside chunking, an upgrade) is refused rather than guessed at, so Reef reads the same requests as the bridge."""
    lines = head[:-4].split(b"\r\n")
    if any(b"\r" in line or b"\n" in line or b"\0" in line for line in lines):
        raise _Refused
    parts = lines[0].split(b" ")
    if len(parts) != 3 or parts[2] not in (b"HTTP/1.1", b"HTTP/1.0"):
        raise _Refused
    target = parts[1].split(b"?", 1)[0]
    if not target.startswith(b"/v1/") or b"/../" in target or target.endswith(b"/..") or b"%" in target:
        raise _Refused(forbidden=True)
    kept = [lines[0]]
    lengths: set[bytes] = set()
    chunked = False
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip() or line[:1] in (b" ", b"\t"):
            raise _Refused
        lowered, value = name.lower(), value.strip()
        if lowered == b"content-length":
            if not value.isdigit():
                raise _Refused
            lengths.add(value.lstrip(b"0") or b"0")
        elif lowered == b"transfer-encoding":
            if value.lower() != b"chunked" or chunked:
                raise _Refused
            chunked = True
        elif lowered == b"upgrade":
            raise _Refused
        if lowered not in _REPLACED:
            kept.append(line)
    if len(lengths) > 1 or (lengths and chunked) or (chunked and parts[2] != b"HTTP/1.1"):
        raise _Refused
    framing = None if chunked else (int(lengths.pop()) if lengths else 0)
    return b"\r\n".join([*kept, *credentials]) + b"\r\n\r\n", framing


async def _copy_exactly(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, size: int) -> None:
    while size > 0:
        data = await reader.read(min(size, 65536))
        if not data:
            raise _Refused
        writer.write(data)
        await writer.drain()
        size -= len(data)


async def _copy_chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Relay a chunked body chunk by chunk, up to its last chunk; trailers are dropped."""
    while True:
        line = await reader.readuntil(b"\r\n")
        size_text = line[:-2].split(b";", 1)[0].strip()
        if not size_text or len(size_text) > 15 or b"\n" in line[:-2] or b"\r" in line[:-2]:
            raise _Refused
        try:
            size = int(size_text, 16)
        except ValueError:
            raise _Refused from None
        writer.write(b"%x\r\n" % size)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass
            writer.write(b"\r\n")
            await writer.drain()
            return
        await _copy_exactly(reader, writer, size)
        if await reader.readexactly(2) != b"\r\n":
            raise _Refused
        writer.write(b"\r\n")


async def _relay_requests(
    reader: asyncio.StreamReader,
    upstream: asyncio.StreamWriter,
    client: asyncio.StreamWriter,
    credentials: list[bytes],
) -> None:
    """Relay the client's requests one by one, each with `credentials` in place of its own."""
    relayed = 0
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as ended:
                if ended.partial:
                    raise _Refused from None
                return
            rewritten, framing = _rewritten_head(head, credentials)
            upstream.write(rewritten)
            if framing is None:
                await _copy_chunked(reader, upstream)
            else:
                await _copy_exactly(reader, upstream, framing)
            await upstream.drain()
            relayed += 1
    except _Refused as refused:
        if refused.forbidden and relayed == 0:  # no answer of Reef's is on its way: this one may go back
            with contextlib.suppress(Exception):
                client.write(_FORBIDDEN % (len(_FORBIDDEN_BODY), _FORBIDDEN_BODY))
                await client.drain()
        with contextlib.suppress(Exception):
            client.close()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, ConnectionError, OSError):
        with contextlib.suppress(Exception):
            client.close()
    finally:
        with contextlib.suppress(Exception):
            upstream.close()


@contextlib.asynccontextmanager
async def episode_bridge(socket_path: Path, host: str, port: int, token: str, scenario: str) -> AsyncIterator[Path]:
    """While open, HTTP requests to `socket_path` for `/v1/…` are relayed to `host:port` carrying `token` and
    `scenario` (their own credentials and scenario dropped); any other request ends its connection."""
    credentials = [b"authorization: Bearer " + token.encode("latin-1"), b"x-reef-scenario: " + scenario.encode()]

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_relay_requests(reader, up_writer, writer, credentials), _relay(up_reader, writer))

    server = await asyncio.start_unix_server(on_connect, path=str(socket_path), limit=MAX_HEAD_BYTES)
    try:
        yield socket_path
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2)
