"""The discovery routes over the real app (SQLite records, git releases, the `tttd` recipe): the archive, the next
step, and bad attempts refused with the field named and nothing stored."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import orjson
import pytest

from reef.application.runtime import Runtime
from reef.core.settings import LearningSettings, Settings, StorageSettings
from reef.releases.commit_log import FileCommitLog
from reef.releases.git import open_release_store
from reef.service.app import create_app
from reef.storage.sql import open_record_store
from tests.fakes.dict_engine import DictEngine

HEADERS = {"x-reef-scenario": "pack"}


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    config = {"problem": "circle-packing", "problem_options": {"n": 2}, "groups": 2, "rollouts": 2}
    learning = LearningSettings(recipe="tttd", mode="manual", recipe_config=config)
    settings = Settings(storage=StorageSettings(dir=tmp_path / "state"), learning=learning)
    records = open_record_store("sqlite", directory=tmp_path / "records")
    releases = open_release_store(str(tmp_path / "releases.git"), tmp_path / "release-work")
    engine = DictEngine(fallback="[[0.25,0.5,0.25],[0.75,0.5,0.25]]")
    runtime = Runtime(settings, records, releases, FileCommitLog(tmp_path / "state" / "commits"), engine)
    edge = create_app(settings, runtime, engine)
    transport = httpx.ASGITransport(app=edge)
    async with (
        edge.app.router.lifespan_context(edge.app),
        httpx.AsyncClient(transport=transport, base_url="http://reef.test") as client,
    ):
        yield client
    records.close()


async def _records(http: httpx.AsyncClient) -> int:
    return len((await http.get("/reef/scenarios/pack/records")).json()["records"])


async def test_a_client_drives_one_attempt_through_the_archive_routes(http: httpx.AsyncClient) -> None:
    await http.post("/reef/scenarios", json={"name": "pack"})
    archive = (await http.get("/reef/scenarios/pack/archive")).json()
    assert archive["problem"] == "circle-packing" and archive["entries"][0]["score"] == pytest.approx(0.5)
    assert archive["best_known"] == pytest.approx(2 - 2**0.5, abs=1e-6)  # n = 2: two circles in opposite corners
    assert "Circles in Squares" in archive["best_known_source"]
    step = (await http.get("/reef/scenarios/pack/archive/next", params={"groups": 2})).json()
    parent = step["parents"][0]
    assert step["answer"] == "edit"  # circle packing's answers are edits of the parent, one of its n circles
    assert step["response_format"]["json_schema"]["schema"]["properties"]["circle"]["enum"] == [0, 1]
    assert parent["solution"] == archive["entries"][0]["solution"]
    answer = await http.post(
        "/v1/chat/completions", headers=HEADERS, json={"model": "m", "messages": parent["messages"]}
    )
    receipt = answer.headers["x-reef-agent-record-id"]
    meta = {"step": step["step"], "group": 0, "rollout": 0, "parent_id": parent["parent_id"]}
    report = {
        "score": 0.5,
        "references": [receipt],
        "metadata": {**meta, "solution": answer.json()["choices"][0]["message"]["content"]},
    }
    stored = await http.post("/reef/report", headers=HEADERS, json=report)
    assert stored.status_code == 200, stored.text


async def test_bad_attempts_are_refused_naming_the_field_and_nothing_is_stored(http: httpx.AsyncClient) -> None:
    await http.post("/reef/scenarios", json={"name": "pack"})
    answer = await http.post(
        "/v1/chat/completions", headers=HEADERS, json={"model": "m", "messages": [{"role": "user", "content": "go"}]}
    )
    receipt = answer.headers["x-reef-agent-record-id"]
    before = await _records(http)
    good = {"step": 1, "group": 0, "rollout": 0, "parent_id": "seed-0", "solution": "[[0.25,0.5,0.25]]"}
    cases = [
        ({"score": 1.0, "metadata": {**good, "solution": "not json ["}}, "metadata.solution"),
        ({"score": 1.0, "metadata": {**good, "group": 5}}, "metadata.group"),
        ({"score": 1.0, "metadata": {**good, "rollout": 2}}, "metadata.rollout"),
    ]
    for body, field in cases:
        refused = await http.post("/reef/report", headers=HEADERS, json={"references": [receipt], **body})
        assert refused.status_code == 400 and refused.json()["error"]["message"].startswith(field), refused.text
    for bad in (math.nan, math.inf):
        content = orjson.dumps({"score": 0.0, "references": [receipt], "metadata": good}).replace(
            b'"score":0.0', b'"score":' + (b"NaN" if math.isnan(bad) else b"Infinity")
        )
        refused = await http.post(
            "/reef/report", headers={**HEADERS, "content-type": "application/json"}, content=content
        )
        assert refused.status_code == 400, refused.text
    assert await _records(http) == before
    assert (await http.get("/reef/scenarios/pack/archive")).status_code == 200  # still serving


async def test_the_next_step_must_ask_for_the_scenarios_grid(http: httpx.AsyncClient) -> None:
    await http.post("/reef/scenarios", json={"name": "pack"})
    refused = await http.get("/reef/scenarios/pack/archive/next", params={"groups": 3})
    assert refused.status_code == 400 and refused.json()["error"]["message"].startswith("groups")
    assert (await http.get("/reef/scenarios/nobody/archive")).status_code == 404
