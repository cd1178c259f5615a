"""The whole HTTP edge in process, on SQLite, a local git release store and a dictionary engine: for route tests
that need no server process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from reef.application.runtime import Runtime
from reef.core.settings import Settings
from reef.inference.base import Engine
from reef.releases.commit_log import FileCommitLog
from reef.releases.git import open_release_store
from reef.service.app import create_app
from reef.storage.sql import open_record_store
from tests.fakes.dict_engine import DictEngine


async def in_process_client(
    settings: Settings, tmp_path: Path, engine: Engine | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client on the app `reef serve` would build from `settings` (stores under `tmp_path`)."""
    async for http, _ in in_process_edge(settings, tmp_path, engine):
        yield http


async def in_process_edge(
    settings: Settings, tmp_path: Path, engine: Engine | None = None, start: bool = False
) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime]]:
    """`in_process_client` with the runtime behind it, started (learners running) when `start`: for a test that
    drives a learner step and reads its effect back over HTTP."""
    records = open_record_store("sqlite", directory=tmp_path / "records")
    releases = open_release_store(str(tmp_path / "releases.git"), tmp_path / "release-work")
    engine = engine or DictEngine()
    runtime = Runtime(settings, records, releases, FileCommitLog(tmp_path / "state" / "commits"), engine)
    edge = create_app(settings, runtime, engine)
    if start:
        await runtime.start()
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=edge), base_url="http://reef.test") as http:
            yield http, runtime
    finally:
        if start:
            await runtime.stop()
        records.close()
