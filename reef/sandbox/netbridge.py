"""Bring exactly one endpoint, the model's, into a sandbox that has no network.

bubblewrap's `--unshare-net` leaves the agent only its own loopback, so the host's Reef on 127.0.0.1 is out of
reach. The host side listens on a Unix socket inside the episode root (which the sandbox can see) and relays each
connection to Reef's TCP address; inside the sandbox, `FORWARDER` listens on 127.0.0.1 at Reef's port and relays
to that socket, then runs the agent as its child and exits with the agent's status (so nothing outlives it).
"""

from __future__ import annotations

import asyncio
import contextlib
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


@contextlib.asynccontextmanager
async def unix_bridge(socket_path: Path, host: str, port: int):  # type: ignore[no-untyped-def]
    """While open, connections to `socket_path` are relayed to `host:port`."""

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_relay(reader, up_writer), _relay(up_reader, writer))

    server = await asyncio.start_unix_server(on_connect, path=str(socket_path))
    try:
        yield socket_path
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2)
