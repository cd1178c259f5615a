"""With no gate tasks at all, `reef serve` on SmolLM2 judges candidates on a held-out split of its own feedback:
demonstrations (`sft`, scored by `f1`) and scored rollouts (`rl`, the ranking gate), never training on them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from reef.learning.evaluation.holdout import is_held_out
from tests.fakes.reef_process import ReefProcess

pytestmark = [pytest.mark.e2e, pytest.mark.model]

ANIMALS = ["cat", "dog", "horse", "goat", "lion", "tiger", "bear", "duck"]


def _flags(recipe: str) -> list[str]:
    return [
        "--inference.model-path", "smollm2",
        "--learning.recipe", recipe,
        "--learning.batch-size", "4",
        "--training.lora-rank", "8",
        "--training.max-seq-len", "96",
    ]  # fmt: skip


@pytest.fixture()
def state(tmp_path: Path) -> Path:
    return tmp_path / "reef"


def _report_ids(held_out: int, trained: int) -> tuple[list[str], list[str]]:
    """Report ids that fall in and out of the default held-out split (one in 4, by id)."""
    inside, outside = [], []
    number = 0
    while len(inside) < held_out or len(outside) < trained:
        number += 1
        rid = f"report-{number}"
        bucket = inside if is_held_out(rid, 4) else outside
        if len(bucket) < (held_out if bucket is inside else trained):
            bucket.append(rid)
    return inside, outside


def _ask(client: httpx.Client, question: str) -> str:
    response = client.post(
        "/v1/chat/completions",
        headers={"x-reef-scenario": "mine"},
        json={"model": "m", "temperature": 0, "max_tokens": 8, "messages": [{"role": "user", "content": question}]},
    )
    assert response.status_code == 200, response.text
    return response.headers["x-reef-agent-record-id"]


def _first_judged_commit(client: httpx.Client, timeout_s: float = 600) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        commits = client.get("/reef/scenarios/mine/commits").json()["commits"]
        judged = [c for c in commits if c["verdict"] != "skipped"]
        if judged:
            return judged[0]
        time.sleep(1)
    raise AssertionError(f"no judged step in {timeout_s} s: {client.get('/reef/status').json()}")


def _unconsumed(client: httpx.Client) -> set[str]:
    records = client.get("/reef/scenarios/mine/records", params={"limit": 1000}).json()["records"]
    return {r["agent_record_id"] for r in records if r["consumed_step"] is None}


def test_sft_with_no_tasks_gates_on_held_out_demonstrations(state: Path) -> None:
    held, trained = _report_ids(4, 4)
    with ReefProcess(state, *_flags("sft")) as server, httpx.Client(base_url=server.url, timeout=120) as client:
        for index, rid in enumerate(held + trained):
            animal = ANIMALS[index]
            receipt = _ask(client, f"Which animal is mentioned: 'We saw a {animal} at the farm.'")
            body = {"agent_record_id": rid, "references": [receipt], "metadata": {"demonstration": animal}}
            assert client.post("/reef/report", headers={"x-reef-scenario": "mine"}, json=body).status_code == 200

        commit = _first_judged_commit(client)
        gate = client.get("/reef/status").json()["scenarios"]["mine"]["gate"]

        assert gate["source"] == "held_out" and gate["tasks"] == 4
        assert commit["metrics"]["tasks"] == 4 and commit["verdict"] in ("published", "kept", "rejected")
        assert set(commit["consumed_record_ids"]) >= set(trained)
        assert set(held) <= _unconsumed(client)
        shown = subprocess.run(
            [sys.executable, "-m", "reef.cli.main", "status", "--url", server.url],
            capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip
        assert shown.returncode == 0 and "held_out (4)" in shown.stdout, shown.stdout + shown.stderr


def test_rl_with_no_tasks_gates_on_how_held_out_rollouts_are_ranked(state: Path) -> None:
    held, trained = _report_ids(4, 4)
    with ReefProcess(state, *_flags("rl")) as server, httpx.Client(base_url=server.url, timeout=120) as client:
        for index, rid in enumerate(held + trained):
            receipt = _ask(client, f"Name an animal like a {ANIMALS[index]}.")
            body = {"agent_record_id": rid, "references": [receipt], "score": float(index % 2)}
            assert client.post("/reef/report", headers={"x-reef-scenario": "mine"}, json=body).status_code == 200

        commit = _first_judged_commit(client)
        gate = client.get("/reef/status").json()["scenarios"]["mine"]["gate"]

        assert gate["source"] == "held_out" and gate["ranked_rollouts"] == 4 and gate["ranking_pairs"] == 4
        assert len(commit["candidate_scores"]) == len(commit["current_scores"]) == 4
        assert set(commit["candidate_scores"]) <= {0.0, 1.0}
        assert set(held) <= _unconsumed(client)
