"""The reference client package (`reef-client`, unchanged) pulls a harness tree from a real `reef serve` (fake
upstream, `evolve`, default adapter pi): `harness_versions`, `harness_pull` (twice, the older version second:
nothing of the newer one left behind) and `fetch_skill`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from reef_client import ReefClient
from reef_client.client import HARNESS_VERSION_SIDECAR
from reef_client.skill import fetch_skill

from tests.fakes.reef_process import ReefProcess
from tests.fakes.upstream import start_fake_upstream

pytestmark = pytest.mark.e2e

SCENARIO = "pulled"
HEADERS = {"x-reef-scenario": SCENARIO}
SKILL = {"kind": "skill", "name": "run-tests", "description": "How to run the tests", "text": "Run `make test`."}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReefProcess]:
    upstream = start_fake_upstream()
    flags = [
        "--inference.upstream-url", upstream.url,
        "--inference.upstream-model", "fake-model",
        "--learning.recipe", "evolve",
        "--learning.mode", "manual",
        "--learning.poll-interval-s", "0.1",
        "--harness.default-adapter", "pi",
        "--harness.gate", "chat",  # the agent gate has its own tests; here the wire format is under test
    ]  # fmt: skip
    try:
        with ReefProcess(tmp_path_factory.mktemp("reference-client"), *flags) as process:
            yield process
    finally:
        upstream.stop()


def evolve_a_skill(server: ReefProcess) -> None:
    """Version 2: an agent's proposal in the reference's form adds a skill; a directed step publishes it."""
    with httpx.Client(base_url=server.url, headers=HEADERS, timeout=30) as api:
        assert api.post("/reef/scenarios", json={"name": SCENARIO}).status_code in (200, 201)
        tasks = {"tasks": [{"prompt": "say ok", "checker": "contains", "answer": "ok"}]}
        assert api.post(f"/reef/scenarios/{SCENARIO}/tasks", json=tasks).status_code in (200, 201)
        ghost = {"mutations": [{"op": "update", "id": "ghost", "options": {"text": "x"}}], "reason": "r"}
        refused = api.post("/reef/harness/proposals", json=ghost)
        assert refused.status_code == 400 and "mutations[0].id" in refused.json()["error"]["message"]
        proposal = {"mutations": [{"op": "create", "id": "run-tests", "options": SKILL}], "reason": "", "session": "s1"}
        assert api.post("/reef/harness/proposals", json=proposal).status_code == 202
        assert api.post("/reef/train", json={"text": "keep answers short"}).status_code == 202
        deadline = time.monotonic() + 60
        while not api.get(f"/reef/scenarios/{SCENARIO}/commits").json()["commits"]:
            assert time.monotonic() < deadline, api.get("/reef/status").text
            time.sleep(0.1)
        [commit] = api.get(f"/reef/scenarios/{SCENARIO}/commits").json()["commits"]
        assert commit["verdict"] == "published", commit


def test_the_reference_client_lists_pulls_and_fetches_the_skill(server: ReefProcess, tmp_path: Path) -> None:
    evolve_a_skill(server)
    client = ReefClient(server.url)
    versions = client.harness_versions(SCENARIO)
    assert [v["operation"] for v in versions] == ["creation", "training"]
    older, newer = versions[0]["artifact_version"], versions[1]["artifact_version"]
    assert "mean_candidate" in json.dumps(versions[1]["metrics"]) or versions[1]["metrics"]

    destination = tmp_path / "agent"
    assert client.harness_pull(SCENARIO, destination) == newer
    assert (destination / "skills" / "SKILL.md").read_text().startswith("---\nname: run-tests")
    assert (destination / "skills" / "run-tests" / "SKILL.md").is_file()
    assert "keep answers short" in (destination / "AGENTS.md").read_text()

    assert client.harness_pull(SCENARIO, destination, version=older) == older
    assert not (destination / "skills" / "SKILL.md").exists()
    assert not (destination / "skills" / "run-tests" / "SKILL.md").exists()
    assert "keep answers short" not in (destination / "AGENTS.md").read_text()
    sidecar = json.loads((destination / HARNESS_VERSION_SIDECAR).read_text())
    assert sidecar == {"artifact_version": older, "files": ["AGENTS.md"]}

    text, version = fetch_skill(server.url, SCENARIO)
    assert version == newer and "Run `make test`." in text
