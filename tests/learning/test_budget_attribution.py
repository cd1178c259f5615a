"""The learner's upstream budget counts what the server knows is the learner's: a gate episode's requests, by
their episode token. A client's tag counts for nothing, and tags under `reef-` are refused at the edge."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from reef.application.runtime import Runtime
from reef.core.episode_tokens import EpisodeKey
from reef.core.scenarios import Dialect
from reef.core.settings import ServerSettings, Settings, StorageSettings
from reef.inference.base import CompletionStream, RequestContext, StreamFrame, StreamResult
from reef.releases.commit_log import FileCommitLog
from reef.releases.git import open_release_store
from reef.service.app import create_app
from reef.storage.sql import open_record_store
from tests.learning.test_budget import UsageEngine

BODY: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
AGENT = "agent-token"


class UsageStream(CompletionStream):
    """A one-chunk chat stream whose result reports 7 tokens."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request

    async def frames(self) -> AsyncIterator[StreamFrame]:
        yield StreamFrame(b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n')
        yield StreamFrame(b"data: [DONE]\n\n", terminal=True)

    def result(self) -> StreamResult:
        return StreamResult(body={"choices": []}, complete=True, usage={"total_tokens": 7})

    async def aclose(self) -> None:
        return None


class StreamingUsageEngine(UsageEngine):
    """Answers with 42 tokens, streams with 7."""

    async def stream(self, dialect: Dialect, body: dict[str, Any], ctx: RequestContext) -> CompletionStream:
        return UsageStream(body)


@dataclass
class Served:
    http: httpx.AsyncClient
    runtime: Runtime
    settings: Settings


async def _served(tmp_path: Path, tokens: bool) -> AsyncIterator[Served]:
    server = ServerSettings(tokens=[SecretStr(AGENT)] if tokens else [])
    settings = Settings(reef=server, storage=StorageSettings(dir=tmp_path / "state"))
    records = open_record_store("sqlite", directory=tmp_path / "records")
    releases = open_release_store(str(tmp_path / "releases.git"), tmp_path / "release-work")
    engine = StreamingUsageEngine()
    runtime = Runtime(settings, records, releases, FileCommitLog(tmp_path / "commits"), engine)
    edge = create_app(settings, runtime, engine)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=edge), base_url="http://reef.test") as http:
        yield Served(http, runtime, settings)
    records.close()


@pytest.fixture(params=[False, True], ids=["no-token-default", "tokens"])
async def served(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Served]:
    async for made in _served(tmp_path, request.param):
        yield made


def _headers(served: Served, **extra: str) -> dict[str, str]:
    headers = {"x-reef-scenario": "ep", **extra}
    if served.settings.reef.all_tokens():
        headers.setdefault("authorization", f"Bearer {AGENT}")
    return headers


async def test_a_forged_episode_tag_is_refused_and_counts_for_nothing(served: Served) -> None:
    assert (await served.http.post("/v1/chat/completions", json=BODY, headers=_headers(served))).status_code == 200
    forged = await served.http.post(
        "/v1/chat/completions", json=BODY, headers=_headers(served, **{"x-reef-tag-reef-episode": "e1-t0-candidate"})
    )
    assert forged.status_code == 400
    assert "x-reef-tag-reef-episode" in forged.json()["error"]["message"]
    reserved = _headers(served, **{"x-reef-tag-reef-anything": "1"})
    assert (await served.http.post("/v1/chat/completions", json=BODY, headers=reserved)).status_code == 400
    assert served.runtime.budget.spent("ep") == 0


async def test_an_episodes_calls_count_by_their_token_and_are_tagged_by_reef(served: Served) -> None:
    token = EpisodeKey.for_settings(served.settings).mint("ep", "e7-t1-current", 60)
    episode = {"x-reef-scenario": "ep", "authorization": f"Bearer {token}"}
    answered = await served.http.post("/v1/chat/completions", json=BODY, headers=episode)
    assert answered.status_code == 200, answered.text
    assert served.runtime.budget.spent("ep") == 42
    streamed = await served.http.post("/v1/chat/completions", json={**BODY, "stream": True}, headers=episode)
    assert streamed.status_code == 200, streamed.text
    assert served.runtime.budget.spent("ep") == 42 + 7
    plain = await served.http.post("/v1/chat/completions", json={**BODY, "stream": True}, headers=_headers(served))
    assert plain.status_code == 200 and served.runtime.budget.spent("ep") == 42 + 7  # a user's stream is not counted
    record = served.runtime.records.get("ep", answered.headers["x-reef-agent-record-id"])
    assert record is not None and record.payload["tags"] == {"reef-episode": "e7-t1-current"}
