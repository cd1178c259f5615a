"""The rollout through HTTP (in process: the app over a learning world): the rollout mode per scenario, the
serving release in `x-reef-release-id`, the record's rollout id, `GET`/`POST …/rollout`, the refusals, metrics."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from reef.learning.rollout.assignment import arm_of
from reef.service.app import create_app
from tests.fakes.learning_world import QUESTIONS, World, make_world

S = "math"
HEADERS = {"x-reef-scenario": S}
Q = list(QUESTIONS)


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, World]]:
    world = make_world(tmp_path)
    app = create_app(world.settings, world.runtime, world.engine)
    await world.runtime.start()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://reef.test") as http:
        assert (await http.post("/reef/scenarios", json={"name": S})).status_code == 201
        yield http, world
    await world.runtime.stop()


async def ask(http: httpx.AsyncClient, session: str) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": Q[0]}]}
    response = await http.post("/v1/chat/completions", json=body, headers={**HEADERS, "x-reef-tag-session": session})
    assert response.status_code == 200, response.text
    return response


async def test_no_rollout_reads_as_state_none_and_an_action_then_is_a_conflict(client):
    http, world = client
    assert (await http.get(f"/reef/scenarios/{S}/rollout")).json()["state"] == "none"
    response = await http.post(f"/reef/scenarios/{S}/rollout", json={"action": "promote"})
    assert response.status_code == 409 and "no open rollout" in response.json()["error"]["message"]
    response = await http.post(f"/reef/scenarios/{S}/rollout", json={"action": "restart"})
    assert response.status_code == 400 and "action" in response.json()["error"]["message"]
    assert (await http.get(f"/reef/scenarios/{S}/rollout")).json()["state"] == "none"
    assert len(world.releases(S)) == 1


async def test_a_canary_serves_its_sessions_names_itself_and_is_recorded_with_its_rollout(client):
    http, world = client
    update = await http.post(f"/reef/scenarios/{S}/update", json={"rollout_mode": "canary"})
    assert update.status_code == 200 and update.json()["rollout_mode"] == "canary"
    for q in Q[:2]:
        world.report(S, q, QUESTIONS[q])
    await world.runtime.step(S)
    view = (await http.get(f"/reef/scenarios/{S}/rollout")).json()
    assert view["state"] == "canary" and view["share"] == 0.1

    sessions = (f"s{n}" for n in itertools.count())
    candidate = next(s for s in sessions if arm_of(f"session:{s}", view["rollout_id"], 0.1) == "candidate")
    incumbent = next(s for s in sessions if arm_of(f"session:{s}", view["rollout_id"], 0.1) == "incumbent")
    served = await ask(http, candidate)
    assert served.headers["x-reef-release-id"] == view["candidate_release_id"]
    assert (await ask(http, candidate)).headers["x-reef-release-id"] == view["candidate_release_id"]
    assert (await ask(http, incumbent)).headers["x-reef-release-id"] == view["incumbent_release_id"]
    record = (await http.get(f"/reef/scenarios/{S}/records/{served.headers['x-reef-agent-record-id']}")).json()
    assert record["payload"]["rollout_id"] == view["rollout_id"]
    assert record["release_id"] == view["candidate_release_id"]

    train = await http.post("/reef/train", json={}, headers=HEADERS)
    assert train.status_code == 409 and view["rollout_id"] in train.json()["error"]["message"]
    rollback = await http.post(f"/reef/scenarios/{S}/rollback", json={"release_id": view["candidate_release_id"]})
    assert rollback.status_code == 409 and view["rollout_id"] in rollback.json()["error"]["message"]

    await world.runtime.rollouts.tick()
    metrics = (await http.get("/metrics")).text
    assert f'reef_rollout_requests{{arm="candidate",scenario="{S}"}} 2.0' in metrics
    assert f'reef_rollout_open{{scenario="{S}"}} 1.0' in metrics

    ended = await http.post(f"/reef/scenarios/{S}/rollout", json={"action": "promote"})
    assert ended.status_code == 200 and ended.json()["state"] == "promoted"
    assert (await ask(http, incumbent)).headers["x-reef-release-id"] == ended.json()["release_id"]


async def test_canary_on_a_harness_an_agent_pulls_as_files_is_refused_naming_rollout_mode(tmp_path):
    from tests.fakes.learning_recipe import FileRecipe

    world = make_world(tmp_path, FileRecipe)
    world.runtime.settings = world.settings.model_copy(
        update={"harness": world.settings.harness.model_copy(update={"default_adapter": "pi"})}
    )
    world.runtime.rollouts.settings = world.runtime.settings
    app = create_app(world.settings, world.runtime, world.engine)
    await world.runtime.start()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://reef.test") as http:
        await http.post("/reef/scenarios", json={"name": S})
        response = await http.post(f"/reef/scenarios/{S}/update", json={"rollout_mode": "canary"})
        assert response.status_code == 400 and "rollout_mode" in response.json()["error"]["message"]
        assert world.runtime.rollouts.mode(S) == "immediate"
    await world.runtime.stop()
