"""The read routes reach git and the database from a worker thread, never from the event loop that serves every
other request: the release listing (`git rev-list`), the commit log, the record store's pages and scenario list,
and the rollouts it keeps."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from reef.service.app import create_app
from tests.fakes.learning_world import World, make_world

S = "math"


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    world = make_world(tmp_path)
    await world.runtime.start()
    await world.runtime.ensure_scenario(S)
    yield world
    await world.runtime.stop()
    world.records.close()


@pytest.fixture
async def http(world: World) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(world.settings, world.runtime, world.engine)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://reef.test") as client:
        yield client


def _watch(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, threads: list[str]) -> None:
    """Record the name of the thread each call of `owner.name` runs on."""
    original: Callable[..., Any] = getattr(owner, name)

    def watched(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, watched)


@pytest.mark.parametrize(
    ("path", "owner", "method"),
    [
        (f"/reef/scenarios/{S}/releases", "releases", "list"),
        (f"/reef/scenarios/{S}/commits", "commits", "list"),
        (f"/reef/scenarios/{S}/records", "records", "page"),
        ("/reef/scenarios", "records", "scenarios"),
        (f"/reef/scenarios/{S}/rollout", "records", "rollout"),
        ("/metrics", "records", "rollouts"),
    ],
)
async def test_a_read_route_calls_its_store_from_a_worker_thread(
    http: httpx.AsyncClient, world: World, monkeypatch: pytest.MonkeyPatch, path: str, owner: str, method: str
) -> None:
    stores = {"releases": world.runtime.release_store, "commits": world.runtime.commit_log, "records": world.records}
    threads: list[str] = []
    _watch(monkeypatch, stores[owner], method, threads)
    loop_thread = threading.current_thread().name

    response = await http.get(path)

    assert response.status_code == 200, response.text
    assert threads and loop_thread not in threads
