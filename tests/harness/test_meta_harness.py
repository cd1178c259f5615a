"""`meta_harness` over a real runtime (SQLite records, git releases, commit log) and a fake engine that answers
from worked examples in its system prompt: a non-winner stays in the population and is proposed from later, and
the population survives a restart."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from reef.application.runtime import Runtime
from reef.core.settings import EvaluationSettings, LearningSettings, Settings, StorageSettings
from reef.harness.tree import tree_from_json
from reef.recipes.meta_harness import MetaHarness, candidate_id
from reef.releases.commit_log import FileCommitLog
from reef.releases.git import open_release_store
from reef.service.app import create_app
from reef.storage.sql import open_record_store
from tests.fakes.prompt_engine import PromptEngine
from tests.harness.conftest import QUESTIONS

HEADERS = {"x-reef-scenario": "m"}
ITEMS = list(QUESTIONS.items())


class World:
    """A runtime over stores in `tmp_path` that can be stopped and started again on the same stores."""

    def __init__(self, tmp_path: Path) -> None:
        tasks = tmp_path / "tasks.jsonl"
        tasks.write_text("".join(json.dumps({"prompt": q, "answer": a}) + "\n" for q, a in ITEMS))
        self.settings = Settings(
            storage=StorageSettings(dir=tmp_path / "state"),
            learning=LearningSettings(
                recipe="meta_harness", mode="manual", batch_size=2, recipe_config={"max_candidates": 4}
            ),
            evaluation=EvaluationSettings(tasks=tasks),
        )
        self.tmp_path = tmp_path
        self.engine = PromptEngine()

    async def start(self) -> httpx.AsyncClient:
        tmp = self.tmp_path
        self.records = open_record_store("sqlite", directory=tmp / "records")
        releases = open_release_store(str(tmp / "releases.git"), tmp / "release-work")
        commits = FileCommitLog(tmp / "state" / "commits")
        self.runtime = Runtime(
            self.settings, self.records, releases, commits, self.engine, recipe=MetaHarness(self.settings)
        )
        await self.runtime.start()
        app = create_app(self.settings, self.runtime, self.engine)
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://reef.test")

    async def stop(self, client: httpx.AsyncClient) -> None:
        await client.aclose()
        await self.runtime.stop()
        self.records.close()


async def feed(client: httpx.AsyncClient, pairs: list[tuple[str, str]]) -> None:
    for question, expected in pairs:
        body = {"model": "m", "messages": [{"role": "user", "content": question}]}
        receipt = (await client.post("/v1/chat/completions", json=body, headers=HEADERS)).headers[
            "x-reef-agent-record-id"
        ]
        report = {"score": 0, "feedback": {"expected": expected}, "references": [receipt]}
        assert (await client.post("/reef/report", json=report, headers=HEADERS)).status_code == 200


def composition(parent: str, answers: list[tuple[str, str]]) -> str:
    nodes = [{"kind": "rules", "text": "Reply with only the answer."}]
    nodes += [{"kind": "memory", "text": f"Q: {q}\nA: {a}"} for q, a in answers]
    return json.dumps({"parent": parent, "nodes": nodes})


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


async def test_a_non_winner_stays_in_the_population_and_is_proposed_from_later_even_after_a_restart(world):
    client = await world.start()
    await feed(client, ITEMS[:2])
    # Step 1: the proposer offers a composition with wrong examples: no mean gain, not published.
    head = (await client.get("/reef/harness", headers=HEADERS)).json()
    seed_id = candidate_id(tree_from_json(head["tree"]))
    world.engine.proposer_reply = composition(seed_id, [(q, "wrong") for q, _ in ITEMS[:2]])
    first = await world.runtime.step("m")
    assert first["verdict"] == "rejected", first
    loser = first["metrics"]["candidate_id"]
    assert first["metrics"]["parent"] == seed_id and loser != seed_id

    # A restart: the non-winner lives only in the commit log; the search resumes with it.
    await world.stop(client)
    client = await world.start()
    await feed(client, ITEMS[2:4])
    world.engine.proposer_reply = composition(loser, ITEMS[:4])
    second = await world.runtime.step("m")
    asked = json.dumps(world.engine.proposer_calls[-1])
    assert loser in asked and seed_id in asked  # the proposer saw every retained candidate
    assert "mean 0.00" in asked  # with the loser's gate scores
    assert second["metrics"]["parent"] == loser  # and proposed from the non-winner
    assert second["verdict"] == "published", second
    assert sum(second["candidate_scores"]) > sum(second["current_scores"])

    # The population is committed with the release: after another restart it is read back from there.
    await world.stop(client)
    client = await world.start()
    state_release = (await client.get("/reef/harness", headers=HEADERS)).json()
    assert state_release["release_id"] == second["release_id"]
    await feed(client, ITEMS[4:6])
    world.engine.proposer_reply = "no idea"  # unusable: the best candidate plus this step's failures
    third = await world.runtime.step("m")
    asked = json.dumps(world.engine.proposer_calls[-1])
    assert loser in asked and seed_id in asked and second["metrics"]["candidate_id"] in asked
    assert third["metrics"]["source"] == "fallback"
    assert third["metrics"]["parent"] == second["metrics"]["candidate_id"]  # the best mean so far
    assert third["metrics"]["population"] <= 4
    await world.stop(client)
