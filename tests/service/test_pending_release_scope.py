"""Agents see what is published: a pending release (unreviewed, perhaps holding model-written code), its metrics
and pins to it are the admin's; with no token configured the loopback operator sees everything as before."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from reef.core.episode_tokens import EpisodeKey
from reef.core.releases import Release
from reef.core.settings import LearningSettings, ServerSettings, Settings, StorageSettings
from reef.harness.render import write_tree
from reef.harness.tree import HarnessTree, Node
from reef.service.app import create_app
from tests.fakes.service_app import in_process_edge

AGENT, ADMIN = "agent-token", "admin-token"
SCENARIO = "h"
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
SECRET_METRICS = {"proposer_reply": "the proposer's reply", "instruction": "the operator's instruction"}


@dataclass
class World:
    http: httpx.AsyncClient
    settings: Settings
    published: Release  # the head in the store, not the one the engine serves (pinning it reads the store)
    pending: Release


async def _world(tmp_path: Path, tokens: bool) -> AsyncIterator[World]:
    settings = Settings(
        reef=ServerSettings(
            tokens=[SecretStr(AGENT)] if tokens else [], admin_tokens=[SecretStr(ADMIN)] if tokens else []
        ),
        storage=StorageSettings(dir=tmp_path / "state"),
        learning=LearningSettings(recipe="evolve"),
    )
    async for http, runtime in in_process_edge(settings, tmp_path):
        releases = runtime.release_store
        created = await http.post("/reef/scenarios", json={"name": SCENARIO}, headers=_as(ADMIN if tokens else None))
        assert created.status_code < 300, created.text
        base = releases.head(SCENARIO)
        assert base is not None
        write_tree(HarnessTree.of([Node("rules", "rules", {"text": "Be brief."})]), tmp_path / "published")
        published = releases.publish(SCENARIO, tmp_path / "published", base.release_id)
        tree = HarnessTree.of([Node("ext", "extension", {"name": "ext", "text": "export {}"})])
        write_tree(tree, tmp_path / "pending")
        metrics = {**SECRET_METRICS, "consumed_record_ids": ["r1"]}
        pending = releases.publish(SCENARIO, tmp_path / "pending", published.release_id, metrics=metrics, pending=True)
        yield World(http, settings, published, pending)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async for made in _world(tmp_path, tokens=True):
        yield made


def _as(token: str | None, pin: str | None = None) -> dict[str, str]:
    headers = {"x-reef-scenario": SCENARIO}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    if pin is not None:
        headers["x-reef-release-id"] = pin
    return headers


async def _listed(http: httpx.AsyncClient, token: str | None) -> list[dict]:
    rows = []
    for route, key in (("/reef/harness/releases", "releases"), ("/reef/harness/versions", "versions")):
        answered = await http.get(route, headers=_as(token))
        assert answered.status_code == 200, answered.text
        rows.append(answered.json()[key])
    assert rows[0] == rows[1]
    return rows[0]


async def test_an_agent_token_lists_no_pending_release_and_none_of_its_metrics(world: World) -> None:
    seen = await _listed(world.http, AGENT)
    assert world.published.release_id in {row["release_id"] for row in seen}
    assert world.pending.release_id not in {row["release_id"] for row in seen}
    assert "operator's instruction" not in str(seen)
    shown = await _listed(world.http, ADMIN)
    pending_row = next(row for row in shown if row["release_id"] == world.pending.release_id)
    assert pending_row["pending"] and pending_row["metrics"]["instruction"] == "the operator's instruction"


async def test_an_agent_or_an_episode_cannot_pin_a_pending_release_but_an_admin_can(world: World) -> None:
    http, pending = world.http, world.pending.release_id
    refused = await http.post("/v1/chat/completions", json=BODY, headers=_as(AGENT, pending))
    assert refused.status_code == 403, refused.text
    assert "admin scope" in refused.json()["error"]["message"]
    counted = await http.post("/v1/messages/count_tokens", json=BODY, headers=_as(AGENT, pending))
    assert counted.status_code == 403
    episode = EpisodeKey.for_settings(world.settings).mint(SCENARIO, "e1", 60)
    assert (await http.post("/v1/chat/completions", json=BODY, headers=_as(episode, pending))).status_code == 403
    served = await http.post("/v1/chat/completions", json=BODY, headers=_as(ADMIN, pending))
    assert served.status_code == 200 and served.headers["x-reef-release-id"] == pending
    published = world.published.release_id
    for _ in range(2):  # the second answer comes from what the first learned about the release
        pinned = await http.post("/v1/chat/completions", json=BODY, headers=_as(AGENT, published))
        assert pinned.status_code == 200 and pinned.headers["x-reef-release-id"] == published


async def test_an_agent_cannot_fetch_or_propose_against_a_pending_release(world: World) -> None:
    http, pending = world.http, world.pending.release_id
    fetched = await http.get("/reef/harness", params={"release_id": pending, "adapter": "pi"}, headers=_as(AGENT))
    assert fetched.status_code == 403
    proposal = {"release_id": pending, "mutations": [], "reason": "r"}
    proposed = await http.post("/reef/harness/proposals", json=proposal, headers=_as(AGENT))
    assert proposed.status_code == 403 and "pending" in proposed.json()["error"]["message"]
    shown = await http.get("/reef/harness", params={"release_id": pending, "adapter": "pi"}, headers=_as(ADMIN))
    assert shown.status_code == 200


async def test_with_no_token_configured_the_loopback_operator_sees_and_pins_pending_releases(tmp_path: Path) -> None:
    async for world in _world(tmp_path, tokens=False):
        pending = world.pending.release_id
        assert pending in {row["release_id"] for row in await _listed(world.http, None)}
        served = await world.http.post("/v1/chat/completions", json=BODY, headers=_as(None, pending))
        assert served.status_code == 200 and served.headers["x-reef-release-id"] == pending
        episode = EpisodeKey.for_settings(world.settings).mint(SCENARIO, "e1", 60)
        refused = await world.http.post("/v1/chat/completions", json=BODY, headers=_as(episode, pending))
        assert refused.status_code == 403  # an episode is an episode, token or none configured


async def test_an_agents_status_names_no_pending_release_nor_the_operators_instruction(world: World) -> None:
    from reef.service.routes import system

    entry = {
        "requested": {"step_id": "stp_1", "text": "the operator's instruction", "release_id": "r1", "state": "queued"},
        "last_commit": {"step": 3, "verdict": "pending", "release_id": world.pending.release_id},
    }
    system._as_an_agent_sees(entry)
    assert entry["requested"] == {"step_id": "stp_1", "state": "queued"}
    assert entry["last_commit"]["release_id"] is None and entry["last_commit"]["verdict"] == "pending"
    assert (await world.http.get("/reef/status", headers=_as(AGENT))).status_code == 200


async def test_an_open_canary_may_be_pinned_and_listed_by_an_agent_and_not_once_it_is_rolled_back(
    tmp_path: Path,
) -> None:
    from tests.fakes.learning_world import QUESTIONS, make_settings, open_world

    base = make_settings(tmp_path)
    server = ServerSettings(tokens=[SecretStr(AGENT)], admin_tokens=[SecretStr(ADMIN)])
    world = open_world(tmp_path, base.model_copy(update={"reef": server}))
    app = create_app(world.settings, world.runtime, world.engine)
    await world.runtime.start()
    admin, agent = {"authorization": f"Bearer {ADMIN}"}, {"authorization": f"Bearer {AGENT}"}
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://reef.test") as http:
            assert (await http.post("/reef/scenarios", json={"name": "math"}, headers=admin)).status_code == 201
            update = {"rollout_mode": "canary"}
            assert (await http.post("/reef/scenarios/math/update", json=update, headers=admin)).status_code == 200
            for question in list(QUESTIONS)[:2]:
                world.report("math", question, QUESTIONS[question])
            await world.runtime.step("math")
            canary = (await http.get("/reef/scenarios/math/rollout", headers=admin)).json()["candidate_release_id"]
            pinned = {**agent, "x-reef-scenario": "math", "x-reef-release-id": canary}
            served = await http.post("/v1/chat/completions", json=BODY, headers=pinned)
            assert served.status_code == 200 and served.headers["x-reef-release-id"] == canary
            rolled_back = await http.post("/reef/scenarios/math/rollout", json={"action": "rollback"}, headers=admin)
            assert rolled_back.status_code == 200, rolled_back.text
            assert (await http.post("/v1/chat/completions", json=BODY, headers=pinned)).status_code == 403
    finally:
        await world.runtime.stop()
