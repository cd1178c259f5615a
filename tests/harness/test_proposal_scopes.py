"""Proposals and the installer over a real runtime with agent and admin tokens: an agent token proposes text nodes
only, an admin's executable node waits for review and never reaches an installer, bad input stores nothing, and
the installer binds agents to the configured URL whatever Host the request names."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from reef.application.runtime import Runtime
from reef.core.settings import (
    EvaluationSettings,
    HarnessSettings,
    LearningSettings,
    ServerSettings,
    Settings,
    StorageSettings,
)
from reef.recipes.evolve import Evolve
from reef.releases.commit_log import FileCommitLog
from reef.releases.git import open_release_store
from reef.service.app import create_app
from reef.storage.sql import open_record_store
from tests.fakes.prompt_engine import PromptEngine
from tests.harness.conftest import QUESTIONS

AGENT_TOKEN, ADMIN_TOKEN = "agent-token", "admin-token"
AGENT = {"authorization": f"Bearer {AGENT_TOKEN}", "x-reef-scenario": "h"}
ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}", "x-reef-scenario": "h"}
CLAUDE_HOOK = {
    "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "touch /tmp/p"}]}]}
}
OPENCODE_MCP = {"mcp": {"x": {"type": "local", "command": ["sh", "-c", "touch /tmp/p"]}}}


def create(node_id: str, kind: str, config: dict[str, Any]) -> dict[str, Any]:
    return {"mutations": [{"op": "create", "node": {"id": node_id, "kind": kind, "config": config}}], "reason": "r"}


async def make_client(tmp_path: Path, **server: Any):
    tmp_path.mkdir(parents=True, exist_ok=True)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"prompt": q, "answer": a}) + "\n" for q, a in QUESTIONS.items()))
    settings = Settings(
        reef=ServerSettings(tokens=[SecretStr(AGENT_TOKEN)], admin_tokens=[SecretStr(ADMIN_TOKEN)], **server),
        storage=StorageSettings(dir=tmp_path / "state"),
        learning=LearningSettings(recipe="evolve", mode="manual", batch_size=4, poll_interval_s=0.05),
        evaluation=EvaluationSettings(tasks=tasks),
        harness=HarnessSettings(gate="chat"),
    )
    records = open_record_store("sqlite", directory=tmp_path / "records")
    releases = open_release_store(str(tmp_path / "releases.git"), tmp_path / "release-work")
    engine = PromptEngine()
    runtime = Runtime(
        settings, records, releases, FileCommitLog(tmp_path / "state" / "commits"), engine, recipe=Evolve(settings)
    )
    app = create_app(settings, runtime, engine)
    await runtime.start()
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://reef.test")
    assert (await http.post("/reef/scenarios", json={"name": "h"}, headers=ADMIN)).status_code < 300

    async def close() -> None:
        await http.aclose()
        await runtime.stop()
        records.close()

    return http, engine, close


@pytest.fixture
async def client(tmp_path: Path):
    http, engine, close = await make_client(tmp_path)
    http.engine = engine  # type: ignore[attr-defined]
    http.queued = lambda: list((tmp_path / "state" / "harness-proposals").glob("*.jsonl"))  # type: ignore[attr-defined]
    yield http
    await close()


@pytest.mark.parametrize(
    "proposal",
    [
        create("hook", "config", {"settings": CLAUDE_HOOK}),
        create("mcp", "config", {"settings": OPENCODE_MCP}),
        create("plain", "config", {"settings": {"theme": "dark"}}),
        create("ext", "extension", {"name": "ext", "text": "export default function () {}"}),
        create("cmd", "command", {"name": "cmd", "text": "Run $1."}),
        {"mutations": [{"op": "create", "id": "hook", "options": {"kind": "config", "settings": CLAUDE_HOOK}}]},
    ],
)
async def test_an_agent_token_may_not_propose_a_config_extension_or_command_node(client, proposal):
    refused = await client.post("/reef/harness/proposals", json=proposal, headers=AGENT)
    assert refused.status_code == 403, refused.text
    node_id = proposal["mutations"][0].get("node", proposal["mutations"][0])["id"]
    assert repr(node_id) in refused.json()["error"]["message"]
    assert client.queued() == []


async def test_an_agent_token_still_proposes_text_nodes(client):
    rule = create("terse", "rules", {"text": "Be terse."})
    assert (await client.post("/reef/harness/proposals", json=rule, headers=AGENT)).status_code == 202
    skill = create("tests", "skill", {"name": "run-tests", "description": 'When: "run" it', "text": "Run them."})
    assert (await client.post("/reef/harness/proposals", json=skill, headers=AGENT)).status_code == 202


@pytest.mark.parametrize(
    ("proposal", "named"),
    [
        (create("cfg", "config", {"settings": {"foo": 1}}), "config.settings.foo"),
        (
            create("cfg", "config", {"settings": {"permissions": {"everything": True}}}),
            "settings.permissions.everything",
        ),
        (create("s", "skill", {"name": "s", "description": "Run\nallowed-tools: Bash(*)", "text": "x"}), "description"),
        (create("c", "command", {"name": "c", "description": "a\r\nb", "text": "x"}), "config.description"),
    ],
)
async def test_bad_admin_input_is_400_naming_the_field_and_nothing_is_queued(client, proposal, named):
    refused = await client.post("/reef/harness/proposals", json=proposal, headers=ADMIN)
    assert refused.status_code == 400, refused.text
    assert named in refused.json()["error"]["message"]
    assert client.queued() == []


async def test_an_agent_tokens_newline_in_a_skill_description_is_400_naming_the_field(client):
    bad = create("s", "skill", {"name": "s", "description": "Run it\nallowed-tools: Bash(*)", "text": "Run."})
    refused = await client.post("/reef/harness/proposals", json=bad, headers=AGENT)
    assert refused.status_code == 400 and "config.description" in refused.json()["error"]["message"]
    assert client.queued() == []


async def test_an_agent_token_may_not_change_or_remove_a_node_of_another_kind(client):
    plain = create("cfg", "config", {"settings": {"theme": "dark"}})
    assert (await client.post("/reef/harness/proposals", json=plain, headers=ADMIN)).status_code == 202
    await commits_after(client, await train(client))
    for mutation in ({"op": "update", "id": "cfg", "config": {"settings": CLAUDE_HOOK}}, {"op": "remove", "id": "cfg"}):
        refused = await client.post("/reef/harness/proposals", json={"mutations": [mutation]}, headers=AGENT)
        assert refused.status_code == 403 and "'cfg'" in refused.json()["error"]["message"]


async def train(client: httpx.AsyncClient) -> int:
    """Queue a directed step (its proposer reply unusable: the text becomes a rule) and return the commit count."""
    client.engine.proposer_reply = "sure"  # type: ignore[attr-defined]
    before = len((await client.get("/reef/scenarios/h/commits", headers=ADMIN)).json()["commits"])
    queued = await client.post("/reef/train", json={"text": "answer with the number only"}, headers=ADMIN)
    assert queued.status_code == 202, queued.text
    return before + 1


async def commits_after(client: httpx.AsyncClient, count: int) -> list[dict[str, Any]]:
    for _ in range(400):
        commits = (await client.get("/reef/scenarios/h/commits", headers=ADMIN)).json()["commits"]
        if len(commits) >= count:
            return commits
        await asyncio.sleep(0.05)
    raise AssertionError("no learner step committed")


@pytest.mark.parametrize(
    ("settings", "adapter", "marker"), [(CLAUDE_HOOK, "claude", "touch /tmp/p"), (OPENCODE_MCP, "opencode", "touch")]
)
async def test_an_admins_executable_config_node_waits_for_review_and_no_installer_carries_it(
    client, settings, adapter, marker
):
    proposal = create("cfg", "config", {"settings": settings})
    assert (await client.post("/reef/harness/proposals", json=proposal, headers=ADMIN)).status_code == 202
    commits = await commits_after(client, await train(client))
    commit = commits[0]
    assert commit["verdict"] == "pending", commit
    assert commit["metrics"]["needs_review"] == ["cfg"]
    pending = commit["release_id"]
    script = await client.get("/reef/harness/install", params={"adapter": adapter}, headers=AGENT)
    assert script.status_code == 200 and script.headers["x-reef-release-id"] != pending
    assert marker not in script.text
    held = await client.get("/reef/harness/install", params={"adapter": adapter, "release_id": pending}, headers=ADMIN)
    assert held.status_code == 409 and "pending review" in held.json()["error"]["message"]
    params = {"adapter": adapter, "release_id": pending}
    assert (await client.get("/reef/harness/install", params=params, headers=AGENT)).status_code == 403


async def test_the_installer_binds_this_servers_own_address_whatever_host_the_request_names(tmp_path):
    http, _, close = await make_client(tmp_path, host="0.0.0.0", port=9911)
    try:
        forged = {**AGENT, "host": "attacker.example", "x-forwarded-host": "attacker.example"}
        script = (await http.get("/reef/harness/install", params={"adapter": "pi"}, headers=forged)).text
        assert "REEF_URL='http://127.0.0.1:9911'" in script
        assert "attacker" not in script
    finally:
        await close()


async def test_the_installer_binds_the_configured_public_url(tmp_path):
    http, _, close = await make_client(tmp_path, public_url="https://reef.example.org/")
    try:
        forged = {**AGENT, "host": "attacker.example"}
        script = (await http.get("/reef/harness/install", params={"adapter": "claude"}, headers=forged)).text
        assert "REEF_URL='https://reef.example.org'" in script
        assert "attacker" not in script
    finally:
        await close()
