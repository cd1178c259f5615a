"""`reef.max_scenarios` bounds the scenarios a deployment keeps: a token that may create scenarios implicitly
(an agent's, an episode's) cannot fill the store with them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from reef.core.settings import ServerSettings, Settings, StorageSettings
from tests.fakes.service_app import in_process_client

CHAT = {"messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(reef=ServerSettings(max_scenarios=2), storage=StorageSettings(dir=tmp_path / "state"))
    async for client in in_process_client(settings, tmp_path):
        yield client


async def _scenarios(http: httpx.AsyncClient) -> list[str]:
    return sorted(s["name"] for s in (await http.get("/reef/scenarios")).json()["scenarios"])


def _refused(response: httpx.Response) -> bool:
    return response.status_code == 403 and "reef.max_scenarios" in response.json()["error"]["message"]


async def test_a_scenario_past_the_limit_is_refused_naming_the_setting_and_nothing_is_stored(http):
    assert (await http.post("/v1/chat/completions", headers={"x-reef-scenario": "one"}, json=CHAT)).status_code == 200
    assert (await http.post("/reef/scenarios", json={"name": "two"})).status_code == 201

    assert _refused(await http.post("/v1/chat/completions", headers={"x-reef-scenario": "three"}, json=CHAT))
    assert _refused(await http.post("/reef/scenarios", json={"name": "three"}))
    assert _refused(await http.post("/reef/report", headers={"x-reef-scenario": "three"}, json={"score": 1.0}))
    assert _refused(await http.post("/reef/scenarios/three/tasks", json={"tasks": [{"prompt": "p", "answer": "a"}]}))
    assert await _scenarios(http) == ["one", "two"]
    assert (await http.get("/reef/scenarios/three/records")).status_code == 404

    # The scenarios it has keep working, and a deleted one makes room.
    assert (await http.post("/v1/chat/completions", headers={"x-reef-scenario": "one"}, json=CHAT)).status_code == 200
    assert (await http.post("/reef/scenarios", json={"name": "two"})).status_code == 200
    assert (await http.delete("/reef/scenarios/two")).status_code == 200
    assert (await http.post("/reef/scenarios", json={"name": "three"})).status_code == 201
    assert await _scenarios(http) == ["one", "three"]


def test_a_deployment_is_bounded_by_default():
    assert ServerSettings().max_scenarios == 1000
