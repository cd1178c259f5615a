"""The harness routes over a real runtime (SQLite records, git releases, commit log) and a fake engine:
serve → report → one evolution step → the evolved tree, its release chain, the installer and proposals."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

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


@pytest.fixture
async def client(tmp_path: Path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"prompt": q, "answer": a}) + "\n" for q, a in QUESTIONS.items()))
    settings = Settings(
        storage=StorageSettings(dir=tmp_path / "state"),
        learning=LearningSettings(recipe="evolve", mode="manual", batch_size=4),
        evaluation=EvaluationSettings(tasks=tasks),
    )
    records = open_record_store("sqlite", directory=tmp_path / "records")
    releases = open_release_store(str(tmp_path / "releases.git"), tmp_path / "release-work")
    engine = PromptEngine()
    commits = FileCommitLog(tmp_path / "state" / "commits")
    runtime = Runtime(settings, records, releases, commits, engine, recipe=Evolve(settings))
    app = create_app(settings, runtime, engine)
    await runtime.start()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://reef.test") as http:
        http.runtime = runtime  # type: ignore[attr-defined]
        yield http
    await runtime.stop()
    records.close()


async def ask(client: httpx.AsyncClient, question: str) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": question}]}
    return await client.post("/v1/chat/completions", json=body, headers=HEADERS)


async def test_the_harness_of_an_unknown_scenario_is_404(client):
    response = await client.get("/reef/harness", headers={"x-reef-scenario": "nobody"})
    assert response.status_code == 404
    assert (await client.get("/reef/harness")).status_code == 400


async def test_a_new_scenario_serves_the_seed_tree_rendered_per_adapter(client):
    await ask(client, "what is 1 + 1?")
    stored = await client.get("/reef/harness", headers=HEADERS)
    assert stored.status_code == 200
    assert stored.headers["x-reef-release-id"] == stored.json()["release_id"]
    assert list(stored.json()["files"]) == ["system_prompt.md"] and stored.json()["tree"]["nodes"]
    pi = (await client.get("/reef/harness", params={"adapter": "pi"}, headers=HEADERS)).json()
    assert list(pi["files"]) == ["AGENTS.md"] and "only the answer" in pi["files"]["AGENTS.md"]
    assert pi["requires"]["binary"] == "pi"
    bad = await client.get("/reef/harness", params={"adapter": "emacs"}, headers=HEADERS)
    assert bad.status_code == 400 and "adapter" in bad.json()["error"]["message"]
    adapters = (await client.get("/reef/harness/adapters")).json()["adapters"]
    assert {a["name"] for a in adapters} >= {"chat", "pi", "claude", "codex", "opencode"}


async def test_an_evolution_step_publishes_a_better_tree_and_the_chain_reads_oldest_first(client, tmp_path):
    for question, expected in list(QUESTIONS.items())[:4]:
        response = await ask(client, question)
        receipt = response.headers["x-reef-agent-record-id"]
        report = {"score": 0, "feedback": {"expected": expected}, "references": [receipt]}
        assert (await client.post("/reef/report", json=report, headers=HEADERS)).status_code == 200
    commit = await client.runtime.step("h")
    assert commit["verdict"] == "published", commit
    assert commit["metrics"]["mutations"]
    chain = (await client.get("/reef/harness/releases", headers=HEADERS)).json()["releases"]
    assert [r["operation"] for r in chain] == ["creation", "training"]
    assert chain[1]["parent_release_id"] == chain[0]["release_id"]
    versions = (await client.get("/reef/harness/versions", headers=HEADERS)).json()["versions"]
    assert [v["release_id"] for v in versions] == [r["release_id"] for r in chain]
    # The serving path now carries the evolved prompt: the fake model answers from its examples.
    answered = await ask(client, "what is 1 + 1?")
    assert answered.json()["choices"][0]["message"]["content"] == "2"
    older = await client.get("/reef/harness", params={"release_id": chain[0]["release_id"]}, headers=HEADERS)
    assert older.json()["release_id"] == chain[0]["release_id"]

    script = (await client.get("/reef/harness/install", params={"adapter": "pi"}, headers=HEADERS)).text
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "REEF_TOKEN": "secret-token"}
    first = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, check=True).stdout
    second = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, check=True).stdout
    assert "installed" in first and "already current" in second
    agents = (tmp_path / "home" / ".pi" / "agent" / "AGENTS.md").read_text()
    assert "A: 2" in agents
    models = json.loads((tmp_path / "home" / ".pi" / "agent" / "models.json").read_text())
    assert models["providers"]["reef"]["baseUrl"] == "http://127.0.0.1:8900/v1"  # reef.host:reef.port, not Host


async def test_proposals_are_validated_then_queued(client):
    await ask(client, "what is 1 + 1?")
    good = {
        "mutations": [{"op": "create", "node": {"id": "r2", "kind": "rules", "config": {"text": "Be terse."}}}],
        "reason": "shorter answers score better",
    }
    accepted = await client.post("/reef/harness/proposals", json=good, headers=HEADERS)
    assert accepted.status_code == 202 and accepted.json()["proposal_id"].startswith("prop_")
    leaky = {"mutations": [{"op": "update", "id": "rules", "config": {"text": "key sk-abcdefghijklmnopqrstuv"}}]}
    refused = await client.post("/reef/harness/proposals", json=leaky, headers=HEADERS)
    assert refused.status_code == 400 and "refused" in refused.json()["error"]["message"]
    ghost = {"mutations": [{"op": "remove", "id": "ghost"}], "reason": ""}
    assert (await client.post("/reef/harness/proposals", json=ghost, headers=HEADERS)).status_code == 400
    extra = {**good, "priority": 1}
    assert (await client.post("/reef/harness/proposals", json=extra, headers=HEADERS)).status_code == 400
