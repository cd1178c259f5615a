"""The bridge of a gate episode: whatever the agent sends, Reef receives `/v1/…` requests carrying the episode's
token and scenario and nothing else, so an agent that drops its token cannot reach the admin API."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import uvicorn

from reef.application.runtime import Runtime
from reef.core.episode_tokens import EpisodeKey
from reef.core.settings import ServerSettings, Settings, StorageSettings
from reef.releases.commit_log import FileCommitLog
from reef.releases.git import open_release_store
from reef.sandbox.netbridge import episode_bridge
from reef.service.app import create_app
from reef.storage.sql import open_record_store
from tests.fakes.dict_engine import DictEngine

TOKEN = "reef-episode.the-episodes-token"
OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"


@dataclass
class Upstream:
    """A TCP server that keeps each request's head and body (content-length or chunked) and answers 200."""

    port: int = 0
    requests: list[tuple[bytes, bytes]] = field(default_factory=list)


@contextlib.asynccontextmanager
async def _upstream() -> AsyncIterator[Upstream]:
    seen = Upstream()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lowered = head.lower()
                if b"transfer-encoding: chunked" in lowered:
                    body = b""
                    while True:
                        size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
                        body += (await reader.readexactly(size + 2))[:-2]
                        if size == 0:
                            break
                else:
                    length = next(
                        (
                            int(line.split(b":")[1])
                            for line in lowered.split(b"\r\n")
                            if line.startswith(b"content-length:")
                        ),
                        0,
                    )
                    body = await reader.readexactly(length)
                seen.requests.append((head, body))
                writer.write(OK)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    seen.port = server.sockets[0].getsockname()[1]
    async with server:
        yield seen


async def _exchange(socket_path: Path, raw: bytes) -> bytes:
    """Send `raw` through the bridge and read what comes back until the connection ends or stays quiet."""
    reader, writer = await asyncio.open_unix_connection(str(socket_path))
    writer.write(raw)
    await writer.drain()
    said = b""
    with contextlib.suppress(TimeoutError, ConnectionError):
        while chunk := await asyncio.wait_for(reader.read(65536), 1.0):
            said += chunk
    writer.close()
    return said


def _headers(head: bytes) -> list[tuple[bytes, bytes]]:
    lines = head[:-4].split(b"\r\n")[1:]
    return [(name.strip().lower(), value.strip()) for name, _, value in (line.partition(b":") for line in lines)]


async def test_each_request_carries_the_episodes_token_and_scenario_and_nothing_of_the_agents(tmp_path: Path) -> None:
    async with _upstream() as upstream:
        path = tmp_path / "reef.sock"
        async with episode_bridge(path, "127.0.0.1", upstream.port, TOKEN, "gated"):
            body = b'{"model": "m"}'
            request = (
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: reef\r\nauthorization: Bearer admin-token\r\n"
                b"x-api-key: admin-token\r\nx-reef-scenario: another\r\ncontent-length: %d\r\n\r\n%s"
                % (len(body), body)
            )
            chunked = (
                b"POST /v1/responses HTTP/1.1\r\nhost: reef\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            )
            said = await _exchange(path, request + chunked)  # two requests on one connection
    assert said == OK + OK
    assert [head.split(b"\r\n")[0] for head, _ in upstream.requests] == [
        b"POST /v1/chat/completions HTTP/1.1",
        b"POST /v1/responses HTTP/1.1",
    ]
    assert [body for _, body in upstream.requests] == [b'{"model": "m"}', b"abc"]
    for head, _ in upstream.requests:
        headers = _headers(head)
        assert [value for name, value in headers if name in (b"authorization", b"x-api-key")] == [
            b"Bearer " + TOKEN.encode()
        ]
        assert [value for name, value in headers if name == b"x-reef-scenario"] == [b"gated"]


@pytest.mark.parametrize(
    "raw",
    [
        b"GET /reef/scenarios HTTP/1.1\r\nhost: reef\r\n\r\n",
        b"GET http://reef/reef/scenarios HTTP/1.1\r\nhost: reef\r\n\r\n",
        b"GET /v1/../reef/scenarios HTTP/1.1\r\nhost: reef\r\n\r\n",
        b"GET /v1/%2e%2e/reef/scenarios HTTP/1.1\r\nhost: reef\r\n\r\n",
        b"GET /v1/models HTTP/1.1\r\nx-pad: a\nauthorization: Bearer admin-token\r\n\r\n",  # a bare LF
        b"GET /v1/models HTTP/1.1\r\nx-pad: a\r\n authorization: Bearer admin-token\r\n\r\n",  # a folded line
        b"POST /v1/x HTTP/1.1\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /v1/x HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 40\r\n\r\nx",
        b"GET /v1/models HTTP/1.1\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n",
        b"ping",
    ],
)
async def test_anything_but_a_plain_v1_request_goes_no_further(tmp_path: Path, raw: bytes) -> None:
    async with _upstream() as upstream:
        path = tmp_path / "reef.sock"
        async with episode_bridge(path, "127.0.0.1", upstream.port, TOKEN, "gated"):
            said = await _exchange(path, raw)
    assert upstream.requests == []
    assert said == b"" or said.startswith(b"HTTP/1.1 403 ")


@contextlib.asynccontextmanager
async def _reef(tmp_path: Path) -> AsyncIterator[tuple[int, Settings, Runtime]]:
    """The real app, as `reef serve` builds it with no token configured (the loopback default), on a TCP port."""
    settings = Settings(reef=ServerSettings(implicit_scenarios=True), storage=StorageSettings(dir=tmp_path / "state"))
    records = open_record_store("sqlite", directory=tmp_path / "records")
    releases = open_release_store(str(tmp_path / "releases.git"), tmp_path / "release-work")
    engine = DictEngine()
    runtime = Runtime(settings, records, releases, FileCommitLog(tmp_path / "commits"), engine)
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings, runtime, engine), host="127.0.0.1", port=0, log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.05)
        yield server.servers[0].sockets[0].getsockname()[1], settings, runtime
    finally:
        server.should_exit = True
        await task
        records.close()


async def test_an_agent_that_drops_its_token_is_still_only_its_episode(tmp_path: Path) -> None:
    async with _reef(tmp_path) as (port, settings, runtime):
        token = EpisodeKey.for_settings(settings).mint("gated", "e1-t0-candidate", 60)
        path = tmp_path / "reef.sock"
        # The agent's binding names Reef's own address (the forwarder inside the sandbox listens there).
        agent = {"base_url": f"http://127.0.0.1:{port}", "timeout": 10}
        async with episode_bridge(path, "127.0.0.1", port, token, "gated"):
            async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(path)), **agent) as http:
                body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
                answered = await http.post("/v1/chat/completions", json=body, headers={"x-reef-scenario": "other"})
                assert answered.status_code == 200, answered.text
                record = runtime.records.get("gated", answered.headers["x-reef-agent-record-id"])
                assert record is not None and record.payload["tags"] == {"reef-episode": "e1-t0-candidate"}
            for route in ["/reef/scenarios", "/reef/scenarios/gated/records", "/v1/../reef/scenarios"]:
                async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(path)), **agent) as http:
                    refused = await http.get(route)
                    assert refused.status_code == 403, route
        # Straight to Reef, without the bridge, the loopback default is as open as ever.
        async with httpx.AsyncClient(**agent) as operator:
            assert (await operator.get("/reef/scenarios/gated/records")).status_code == 200
