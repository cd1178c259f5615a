"""The distillation recipes end to end: `reef serve` with the real SmolLM2, reports in, a release out that serves.

One state directory for the module: `sdft` trains scenario `sdft` first; `opd` then distils scenario `opd` from
that scenario's release (`scenario:sdft`); `sdpo` trains a 1 × 2 grid, then discards a grid whose attempts were
served by two releases (a skipped commit says why). Every server gates with `always`: these tests are about the
mechanism (a teacher pass, a release, serving), not about how much a few steps teach.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fakes.reef_process import ReefProcess, wait_for_commits

pytestmark = [pytest.mark.e2e, pytest.mark.model]

QUESTION = "Reply with only the answer. 17 + 5 ="


def _flags(state: Path, recipe: str, batch_size: int, recipe_config: dict) -> list[str]:
    tasks = state / "tasks.jsonl"
    row = {"messages": [{"role": "user", "content": QUESTION}], "checker": "contains", "answer": "22"}
    tasks.write_text(json.dumps(row) + "\n")
    return [
        "--inference.model-path", "smollm2",
        "--learning.recipe", recipe,
        "--learning.recipe-config", json.dumps(recipe_config),
        "--learning.batch-size", str(batch_size),
        "--training.lora-rank", "8",
        "--training.target-modules", "[q_proj, v_proj]",
        "--training.learning-rate", "0.002",
        "--training.max-seq-len", "96",
        "--evaluation.tasks", str(tasks),
        "--evaluation.policy", "always",
        "--evaluation.max-new-tokens", "8",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("distillation")


def _server(state: Path, recipe: str, batch_size: int, recipe_config: dict) -> Iterator[ReefProcess]:
    with ReefProcess(state / "reef", *_flags(state, recipe, batch_size, recipe_config)) as proc:
        yield proc


def _ask(client: httpx.Client, scenario: str, release_id: str | None = None, temperature: float = 0.0) -> dict:
    headers = {"x-reef-scenario": scenario, **({"x-reef-release-id": release_id} if release_id else {})}
    body = {"model": "smollm2", "temperature": temperature, "max_tokens": 8}
    response = client.post(
        "/v1/chat/completions", headers=headers, json={**body, "messages": [{"role": "user", "content": QUESTION}]}
    )
    assert response.status_code == 200, response.text
    return {
        "receipt": response.headers["x-reef-agent-record-id"],
        "release_id": response.headers["x-reef-release-id"],
        "text": response.json()["choices"][0]["message"]["content"],
    }


def _report(client: httpx.Client, scenario: str, body: dict) -> httpx.Response:
    return client.post("/reef/report", headers={"x-reef-scenario": scenario}, json=body)


def _serves(client: httpx.Client, scenario: str, release_id: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s  # the commit log is written just before the engine activates
    while _ask(client, scenario)["release_id"] != release_id:
        assert time.monotonic() < deadline, f"{release_id} does not serve"
        time.sleep(0.5)


def _skipped(client: httpx.Client, scenario: str) -> dict:
    return client.get("/reef/status").json()["scenarios"][scenario]["skipped"]


def _records(client: httpx.Client, scenario: str) -> list[dict]:
    return client.get(f"/reef/scenarios/{scenario}/records", params={"limit": 100}).json()["records"]


def test_sdft_skips_a_report_without_context_and_publishes_a_release_that_serves(state: Path) -> None:
    for server in _server(state, "sdft", 2, {"context_as": "turn", "context_template": "{context}"}):
        with httpx.Client(base_url=server.url, timeout=120) as client:
            first = _ask(client, "sdft")
            kept = _report(client, "sdft", {"references": [_ask(client, "sdft")["receipt"]], "metadata": {}})
            assert kept.status_code == 200, kept.text  # stored, and skipped: nothing to distil from
            assert [r for r in _records(client, "sdft") if r["request_type"] == "report"]
            for answer in (first, _ask(client, "sdft")):
                body = {"references": [answer["receipt"]], "metadata": {"demonstration": "22"}}
                assert _report(client, "sdft", body).status_code == 200
            (commit,) = wait_for_commits(client, "sdft", 1, timeout_s=600, poll_s=1)
            assert commit["verdict"] == "published", commit
            assert commit["metrics"]["teacher"] == "self" and commit["metrics"]["teacher_s"] > 0
            _serves(client, "sdft", commit["release_id"])
            assert _skipped(client, "sdft") == {"no_context": 1}


def test_opd_distils_from_another_scenarios_release_and_skips_a_report_without_a_receipt(state: Path) -> None:
    for server in _server(state, "opd", 2, {"teacher": "scenario:sdft"}):
        with httpx.Client(base_url=server.url, timeout=120) as client:
            kept = _report(client, "opd", {"score": 1.0})
            assert kept.status_code == 200, kept.text  # a plain score: stored, and skipped (it cites no rollout)
            for _ in range(2):
                assert _report(client, "opd", {"references": [_ask(client, "opd")["receipt"]]}).status_code == 200
            (commit,) = wait_for_commits(client, "opd", 1, timeout_s=600, poll_s=1)
            assert commit["verdict"] == "published", commit
            assert commit["metrics"]["teacher"] == "model"
            _serves(client, "opd", commit["release_id"])
            assert _skipped(client, "opd") == {"no_references": 1}


def test_sdpo_trains_a_full_grid_and_discards_one_that_spans_two_releases(state: Path) -> None:
    grid = {"groups": 1, "rollouts": 2}
    for server in _server(state, "sdpo", 2, grid):
        with httpx.Client(base_url=server.url, timeout=120) as client:
            attempts = [_ask(client, "sdpo", temperature=0.8) for _ in range(2)]
            no_group = {"score": 1.0, "references": [attempts[0]["receipt"]], "metadata": {"step": 1, "rollout": 0}}
            refused = _report(client, "sdpo", no_group)
            assert refused.status_code == 400 and "metadata.group" in refused.text
            base_release = attempts[0]["release_id"]
            for rollout, (attempt, score) in enumerate(zip(attempts, (1.0, 0.0), strict=True)):
                metadata = {"step": "g1", "group": "q", "rollout": rollout}
                body = {"score": score, "references": [attempt["receipt"]], "metadata": metadata}
                assert _report(client, "sdpo", body).status_code == 200
            (trained,) = wait_for_commits(client, "sdpo", 1, timeout_s=600, poll_s=1)
            assert trained["verdict"] == "published" and trained["metrics"]["teacher"] == "ema", trained
            _serves(client, "sdpo", trained["release_id"])

            # One attempt from the new release, one pinned to the old: not one policy's grid.
            mixed = [_ask(client, "sdpo"), _ask(client, "sdpo", release_id=base_release)]
            assert mixed[0]["release_id"] != mixed[1]["release_id"]
            for rollout, attempt in enumerate(mixed):
                metadata = {"step": "g2", "group": "q", "rollout": rollout}
                body = {"score": 1.0, "references": [attempt["receipt"]], "metadata": metadata}
                assert _report(client, "sdpo", body).status_code == 200
            discarded = wait_for_commits(client, "sdpo", 2, timeout_s=600, poll_s=1)[-1]
            assert discarded["verdict"] == "skipped" and "spans releases" in discarded["reason"], discarded
            assert _ask(client, "sdpo")["release_id"] == trained["release_id"]
