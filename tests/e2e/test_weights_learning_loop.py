"""The learning loop on weights, end to end: `reef serve` with the real SmolLM2, reports in, a release out.

A good batch (demonstrations that agree with the held-out task) is published and then serves; a harmful batch
(demonstrations that teach a wrong answer to the held-out question) is rejected by the evaluation gate and the
previous release keeps serving. After a restart nothing consumed is trained again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fakes.reef_process import ReefProcess, wait_considered

pytestmark = [pytest.mark.e2e, pytest.mark.model]

FRANCE = "What is the capital of France? Answer in one word."


def _flags(tasks: Path) -> list[str]:
    return [
        "--inference.model-path", "smollm2",
        "--learning.recipe", "sft",
        "--learning.batch-size", "4",
        "--training.lora-rank", "8",
        "--training.learning-rate", "0.002",
        "--training.epochs", "3",
        "--training.micro-batch-size", "4",
        "--training.max-seq-len", "96",
        "--evaluation.tasks", str(tasks),
        "--evaluation.policy", "score_comparison",
        "--evaluation.max-new-tokens", "12",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("weights-loop")


@pytest.fixture(scope="module")
def tasks(state: Path) -> Path:
    path = state / "heldout.jsonl"
    # The base answers "The capital of France is Paris.": right by `contains`, not by `exact`. So a candidate taught
    # "Paris" wins (the exact task) and one taught "Banana" loses three tasks, past the gate's noise.
    messages = [{"role": "user", "content": FRANCE}]
    rows = [{"messages": messages, "checker": "exact", "answer": "Paris"}]
    rows += [{"id": f"contains-{n}", "messages": messages, "checker": "contains", "answer": "Paris"} for n in range(3)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture(scope="module")
def server(state: Path, tasks: Path) -> Iterator[ReefProcess]:
    with ReefProcess(state / "reef", *_flags(tasks)) as proc:
        yield proc


def _ask(client: httpx.Client, scenario: str, question: str) -> httpx.Response:
    response = client.post(
        "/v1/chat/completions",
        headers={"x-reef-scenario": scenario},
        json={
            "model": "smollm2",
            "temperature": 0,
            "max_tokens": 12,
            "messages": [{"role": "user", "content": question}],
        },
    )
    assert response.status_code == 200, response.text
    return response


def _teach(client: httpx.Client, scenario: str, pairs: list[tuple[str, str]]) -> None:
    for question, demonstration in pairs:
        receipt = _ask(client, scenario, question).headers["x-reef-agent-record-id"]
        report = client.post(
            "/reef/report",
            headers={"x-reef-scenario": scenario},
            json={"score": 0.0, "references": [receipt], "metadata": {"demonstration": demonstration}},
        )
        assert report.status_code == 200, report.text


def _first_commit(client: httpx.Client, scenario: str, timeout_s: float = 600) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        commits = client.get(f"/reef/scenarios/{scenario}/commits").json()["commits"]
        if commits:
            return commits[0]
        time.sleep(1)
    raise AssertionError(f"no learner step in {timeout_s} s: {client.get('/reef/status').json()}")


def test_a_batch_of_reports_produces_a_release_that_then_serves(server: ReefProcess) -> None:
    with httpx.Client(base_url=server.url, timeout=120) as client:
        base_release = _ask(client, "good", "Say hi.").headers["x-reef-release-id"]
        _teach(client, "good", [(FRANCE, "Paris")] * 4)
        commit = _first_commit(client, "good")
        assert commit["verdict"] == "published", commit
        assert commit["candidate_scores"] and commit["current_scores"]
        new_release = commit["release_id"]
        assert new_release != base_release
        deadline = time.monotonic() + 60  # the commit log is written just before the engine activates the release
        served = _ask(client, "good", FRANCE)
        while served.headers["x-reef-release-id"] != new_release and time.monotonic() < deadline:
            time.sleep(0.5)
            served = _ask(client, "good", FRANCE)
        assert served.headers["x-reef-release-id"] == new_release
        record = client.get(f"/reef/scenarios/good/records/{served.headers['x-reef-agent-record-id']}").json()
        assert record["payload"]["release_id"] == new_release
        releases = client.get("/reef/scenarios/good/releases").json()["releases"]
        assert [r["operation"] for r in releases] == ["training", "creation"]
        assert releases[0]["current"] and releases[0]["parent_release_id"] == base_release


def test_a_harmful_candidate_is_rejected_and_the_old_release_keeps_serving(server: ReefProcess) -> None:
    with httpx.Client(base_url=server.url, timeout=120) as client:
        base_release = _ask(client, "bad", FRANCE).headers["x-reef-release-id"]
        _teach(client, "bad", [(FRANCE, "Banana")] * 4)
        commit = _first_commit(client, "bad")
        assert commit["verdict"] == "rejected", commit
        assert sum(commit["candidate_scores"]) < sum(commit["current_scores"])
        again = _ask(client, "bad", FRANCE)
        assert again.headers["x-reef-release-id"] == base_release
        assert "Paris" in again.json()["choices"][0]["message"]["content"]


def test_after_a_restart_consumed_records_are_not_trained_again(server: ReefProcess, state: Path, tasks: Path) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        before = client.get("/reef/scenarios/good/commits").json()["commits"]
        head = client.get("/reef/scenarios/good/releases").json()["releases"][0]["release_id"]
    server.stop()
    with (
        ReefProcess(state / "reef", *_flags(tasks), port=server.port) as again,
        httpx.Client(base_url=again.url, timeout=60) as client,
    ):
        records = client.get("/reef/scenarios/good/records", params={"limit": 100}).json()["records"]
        wait_considered(client, "good", max(r["sequence"] for r in records))  # a wrong resume would step by now
        after = client.get("/reef/scenarios/good/commits").json()["commits"]
        assert after == before
        reports = [r for r in records if r["request_type"] == "report"]
        assert reports and all(r["consumed_step"] == before[0]["step"] for r in reports)
        assert _ask(client, "good", "Say hi.").headers["x-reef-release-id"] == head
