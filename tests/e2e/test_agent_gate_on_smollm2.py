"""The gate of the pi adapter runs the real pi binary: `reef serve` on SmolLM2, a user-directed step, and a pair of
sandboxed pi episodes (candidate tree, serving tree) on one tiny agent task decide it; the commit log holds both
score vectors and every episode (agent, exit status, duration, trajectory pointer)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from reef.harness.episodes import PiEpisodes
from tests.fakes.reef_process import ReefProcess

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.model,
    pytest.mark.skipif(
        not PiEpisodes.available(), reason="pi (npm i -g @mariozechner/pi-coding-agent) is not installed"
    ),
]

SCENARIO = "pi-gate"
TASK = {
    "id": "greet",
    "prompt": "Say hello.",
    "workspace": {"files": {"hello.txt": "hello from the workspace\n"}},
    "check": {"file": "hello.txt", "contains": "hello"},
    "max_tokens": 8,
}


def test_a_real_pi_episode_pair_on_smollm2_decides_a_gate_step(tmp_path: Path) -> None:
    flags = [
        "--inference.model-path", "smollm2",
        "--learning.recipe", "evolve",
        "--learning.mode", "manual",
        "--learning.poll-interval-s", "0.2",
        "--harness.default-adapter", "pi",
        "--harness.episode-timeout-s", "300",
        "--harness.episode-max-tokens", "8",
        "--harness.proposer-url", "http://127.0.0.1:9",  # unreachable: the instruction becomes the rule itself
    ]  # fmt: skip
    with ReefProcess(tmp_path / "state", *flags) as reef, httpx.Client(base_url=reef.url, timeout=60) as api:
        headers = {"x-reef-scenario": SCENARIO}
        assert api.post("/reef/scenarios", json={"name": SCENARIO}).status_code in (200, 201)
        assert api.post(f"/reef/scenarios/{SCENARIO}/tasks", json={"tasks": [TASK]}).status_code in (200, 201)
        assert api.post("/reef/train", json={"text": "Greet the user by name."}, headers=headers).status_code == 202
        deadline = time.monotonic() + 900
        commits: list[dict] = []
        while not commits:
            assert time.monotonic() < deadline, api.get("/reef/status").text
            time.sleep(1)
            commits = api.get(f"/reef/scenarios/{SCENARIO}/commits").json()["commits"]
        [commit] = commits
        evaluation = commit["metrics"].get("evaluation")
        assert evaluation, commit
        episodes = evaluation["episodes"]
        assert [e["side"] for e in episodes] == ["candidate", "current"], json.dumps(evaluation)[:2000]
        for episode in episodes:
            assert episode["agent"] == "pi" and isinstance(episode["duration_s"], float)
            assert (tmp_path / "state" / episode["trajectory"]).is_file()
        assert all(e["exit_status"] == 0 and e["error"] is None for e in episodes), json.dumps(episodes)[:2000]
        assert commit["candidate_scores"] == [1.0] and commit["current_scores"] == [1.0]
        assert commit["verdict"] == "published", commit["reason"]  # policy floor: no regression below 0
        # The episodes' model requests went through this Reef, tagged, with the tree in pi's own AGENTS.md.
        rows = api.get(f"/reef/scenarios/{SCENARIO}/records", params={"limit": 50}).json()["records"]
        assert rows, "pi sent no request to Reef"
        record = api.get(f"/reef/scenarios/{SCENARIO}/records/{rows[0]['agent_record_id']}").json()
        assert "reef-episode" in json.dumps(record["payload"].get("metadata", record["payload"]))
