"""User-directed harness steps (`POST /reef/train {"text"}`) over a real runtime and a fake engine: the proposer's
request carries the instruction, policy `floor` selects, and an `extension` node waits for review."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from reef.application.runtime import Runtime
from reef.core.settings import EvaluationSettings, LearningSettings, Settings, StorageSettings
from reef.recipes.evolve import Evolve
from reef.releases.commit_log import FileCommitLog
from reef.releases.git import open_release_store
from reef.service.app import create_app
from reef.storage.sql import open_record_store
from tests.fakes.prompt_engine import PromptEngine
from tests.harness.conftest import QUESTIONS

HEADERS = {"x-reef-scenario": "h"}
INSTRUCTION = "always run the tests before answering"


@pytest.fixture
async def client(tmp_path: Path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"prompt": q, "answer": a}) + "\n" for q, a in QUESTIONS.items()))
    settings = Settings(
        storage=StorageSettings(dir=tmp_path / "state"),
        learning=LearningSettings(recipe="evolve", mode="manual", batch_size=4, poll_interval_s=0.05),
        evaluation=EvaluationSettings(tasks=tasks),
    )
    records = open_record_store("sqlite", directory=tmp_path / "records")
    releases = open_release_store(str(tmp_path / "releases.git"), tmp_path / "release-work")
    engine = PromptEngine()
    runtime = Runtime(
        settings, records, releases, FileCommitLog(tmp_path / "state" / "commits"), engine, recipe=Evolve(settings)
    )
    app = create_app(settings, runtime, engine)
    await runtime.start()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://reef.test") as http:
        http.engine = engine  # type: ignore[attr-defined]
        http.state_dir = tmp_path / "state"  # type: ignore[attr-defined]
        await http.post("/reef/scenarios", json={"name": "h"})
        yield http
    await runtime.stop()
    records.close()


async def commits_after(client: httpx.AsyncClient, count: int) -> list[dict[str, Any]]:
    for _ in range(400):
        commits = (await client.get("/reef/scenarios/h/commits")).json()["commits"]
        if len(commits) >= count:
            return commits
        await asyncio.sleep(0.05)
    raise AssertionError("no learner step committed")


async def test_a_step_without_text_on_a_harness_scenario_with_nothing_ready_is_refused_naming_text(client):
    response = await client.post("/reef/train", json={}, headers=HEADERS)
    assert response.status_code == 400
    assert "text" in response.json()["error"]["message"]
    contract = (await client.get("/reef/scenarios/h/contract")).json()
    assert contract["requested"] is None  # nothing stored
    assert (await client.get("/reef/scenarios/h/commits")).json()["commits"] == []


async def test_a_directed_step_hands_the_text_to_the_proposer_and_its_extension_waits_for_review(client):
    client.engine.proposer_reply = json.dumps(
        [
            {"kind": "rules", "text": "Run the tests before you answer."},
            {"kind": "extension", "name": "test-runner", "text": "export default function () {}"},
        ]
    )
    queued = await client.post("/reef/train", json={"text": INSTRUCTION}, headers=HEADERS)
    assert queued.status_code == 202, queued.text
    [commit] = await commits_after(client, 1)
    asked = [json.dumps(messages) for messages in client.engine.proposer_calls]
    assert any(INSTRUCTION in text for text in asked)
    assert commit["metrics"]["request"]["text"] == INSTRUCTION
    assert commit["metrics"]["instruction"] == INSTRUCTION
    assert "floor_score" in commit["reason"]  # selected by policy floor, not the scenario's `mean`
    assert commit["verdict"] == "pending"
    [extension_id] = commit["metrics"]["needs_review"]
    releases = (await client.get("/reef/scenarios/h/releases")).json()["releases"]
    newest = releases[0]
    assert newest["pending"] and not newest["current"]
    tree = (await client.get("/reef/harness", params={"release_id": newest["release_id"]}, headers=HEADERS)).json()
    assert extension_id in json.dumps(tree["tree"])


async def test_a_directed_step_of_rules_only_publishes_under_the_floor_even_without_a_gain(client):
    client.engine.proposer_reply = "sure, I will do that"  # unusable: the instruction itself becomes a rule
    assert (await client.post("/reef/train", json={"text": INSTRUCTION}, headers=HEADERS)).status_code == 202
    [commit] = await commits_after(client, 1)
    assert commit["verdict"] == "published", commit
    assert commit["metrics"]["source"] == "fallback"
    assert commit["candidate_scores"] == commit["current_scores"]  # no gain: `mean` would have refused it
    harness = (await client.get("/reef/harness", params={"adapter": "pi"}, headers=HEADERS)).json()
    assert INSTRUCTION in harness["files"]["AGENTS.md"]


@pytest.mark.parametrize(
    ("task", "field"),
    [
        ({"prompt": "p", "check": {"command": {"run": "make"}}}, "check.command"),
        ({"prompt": "p", "check": {"command": "true"}, "workspace": {"files": {"../../x": "y"}}}, "workspace.files"),
    ],
)
async def test_a_bad_agent_task_is_refused_naming_the_field_and_nothing_is_stored(client, task, field):
    response = await client.post("/reef/scenarios/h/tasks", json={"tasks": [task]})
    assert response.status_code == 400 and field in response.json()["error"]["message"]
    assert (await client.get("/reef/scenarios/h/tasks")).json()["tasks"] == []


async def test_a_proposal_naming_an_unknown_node_is_refused_and_nothing_is_queued(client):
    ghost = {"mutations": [{"op": "remove", "id": "ghost", "options": {}}], "reason": "tidy"}
    response = await client.post("/reef/harness/proposals", json=ghost, headers=HEADERS)
    assert response.status_code == 400 and "mutations[0].id" in response.json()["error"]["message"]
    assert not list((client.state_dir / "harness-proposals").glob("*.jsonl"))
