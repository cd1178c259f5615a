"""Every deployment accepts every well-formed report: a plain score on an `sft` deployment is stored, and its
learner counts it as skipped with the reason; only a malformed field is a 400, and then nothing is stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from reef.application.runtime import Runtime
from reef.core.settings import LearningSettings, Settings, StorageSettings
from tests.fakes.service_app import in_process_edge

SCENARIO = "support"
HEADERS = {"x-reef-scenario": SCENARIO}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "Capital of France?"}]}


@pytest.fixture
async def sft(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime]]:
    settings = Settings(
        storage=StorageSettings(dir=tmp_path / "state"),
        learning=LearningSettings(recipe="sft", mode="manual", batch_size=1, poll_interval_s=0.05),
    )
    async for edge in in_process_edge(settings, tmp_path, start=True):
        yield edge


async def _receipt(http: httpx.AsyncClient) -> str:
    answered = await http.post("/v1/chat/completions", headers=HEADERS, json=CHAT)
    assert answered.status_code == 200, answered.text
    return answered.headers["x-reef-agent-record-id"]


async def _records(http: httpx.AsyncClient) -> list[dict]:
    listed = await http.get(f"/reef/scenarios/{SCENARIO}/records", params={"limit": 100})
    return list(listed.json()["records"])


async def test_a_plain_score_on_an_sft_deployment_is_stored_and_skipped_as_no_demonstration(sft) -> None:
    http, runtime = sft
    receipt = await _receipt(http)

    reported = await http.post("/reef/report", headers=HEADERS, json={"score": 1.0, "references": [receipt]})

    assert reported.status_code == 200, reported.text
    report_id = reported.json()["agent_record_id"]
    stored = await http.get(f"/reef/scenarios/{SCENARIO}/records/{report_id}")
    assert stored.status_code == 200 and stored.json()["payload"] == {"score": 1.0, "references": [receipt]}
    assert await runtime.step(SCENARIO) is None  # nothing it can train from: no step
    scenario = (await http.get("/reef/status")).json()["scenarios"][SCENARIO]
    assert scenario["skipped"] == {"no_demonstration": 1} and scenario["ready"] == 0
    contract = (await http.get(f"/reef/scenarios/{SCENARIO}/contract")).json()
    assert "required" not in contract["report_schema"]
    assert "no_demonstration" in contract["report_schema"]["description"]


async def test_feedback_alone_and_a_demonstration_are_accepted_too_and_the_gate_says_what_it_needs(sft) -> None:
    http, runtime = sft
    receipt = await _receipt(http)
    feedback = await http.post("/reef/report", headers=HEADERS, json={"feedback": "too long", "references": [receipt]})
    demonstrated = await http.post(
        "/reef/report", headers=HEADERS, json={"references": [receipt], "metadata": {"demonstration": "Paris"}}
    )
    assert feedback.status_code == demonstrated.status_code == 200
    await runtime.step(SCENARIO)
    scenario = (await http.get("/reef/status")).json()["scenarios"][SCENARIO]
    assert scenario["skipped"] == {"no_demonstration": 1}
    assert "metadata.demonstration" in (scenario["gate"]["waiting"] or "")  # it says what would give it tasks


@pytest.mark.parametrize("demonstration", [4, "", ["Paris"], {"text": "Paris"}])
async def test_a_malformed_demonstration_is_a_400_naming_the_field_and_nothing_is_stored(sft, demonstration) -> None:
    http, _ = sft
    receipt = await _receipt(http)
    before = await _records(http)

    body = {"score": 1.0, "references": [receipt], "metadata": {"demonstration": demonstration}}
    refused = await http.post("/reef/report", headers=HEADERS, json=body)

    assert refused.status_code == 400, refused.text
    assert "metadata.demonstration" in refused.json()["error"]["message"]
    assert await _records(http) == before
