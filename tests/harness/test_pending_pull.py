"""A pending release (model-written code awaiting review) is never handed to an agent token: only an admin sees it."""

from __future__ import annotations

from pathlib import Path

import httpx
from pydantic import SecretStr

from reef.application.runtime import Runtime
from reef.core.settings import LearningSettings, ServerSettings, Settings, StorageSettings
from reef.harness.render import write_tree
from reef.harness.tree import HarnessTree, Node
from reef.releases.commit_log import FileCommitLog
from reef.releases.git import open_release_store
from reef.service.app import create_app
from reef.storage.sql import open_record_store
from tests.fakes.dict_engine import DictEngine

AGENT, ADMIN = "agent-token", "admin-token"


async def test_an_agent_token_cannot_pull_a_pending_release_but_an_admin_can(tmp_path: Path) -> None:
    settings = Settings(
        reef=ServerSettings(tokens=[SecretStr(AGENT)], admin_tokens=[SecretStr(ADMIN)]),
        storage=StorageSettings(dir=tmp_path / "state"),
        learning=LearningSettings(recipe="evolve"),
    )
    records = open_record_store("sqlite", directory=tmp_path / "records")
    releases = open_release_store(str(tmp_path / "releases.git"), tmp_path / "release-work")
    engine = DictEngine()
    runtime = Runtime(settings, records, releases, FileCommitLog(tmp_path / "state" / "commits"), engine)
    runtime_scenario = "h"
    tree = HarnessTree.of([Node("ext", "extension", {"name": "ext", "text": "export {}"})])
    write_tree(tree, tmp_path / "content")
    edge = create_app(settings, runtime, engine)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=edge), base_url="http://reef.test") as http:
        admin = {"authorization": f"Bearer {ADMIN}", "x-reef-scenario": runtime_scenario}
        agent = {"authorization": f"Bearer {AGENT}", "x-reef-scenario": runtime_scenario}
        assert (await http.post("/reef/scenarios", json={"name": runtime_scenario}, headers=admin)).status_code < 300
        pending = releases.publish(runtime_scenario, tmp_path / "content", None, pending=True)
        params = {"release_id": pending.release_id, "adapter": "pi"}
        refused = await http.get("/reef/harness", params=params, headers=agent)
        assert refused.status_code == 403 and "pending review" in refused.json()["error"]["message"]
        shown = await http.get("/reef/harness", params=params, headers=admin)
        assert shown.status_code == 200, shown.text
    records.close()
