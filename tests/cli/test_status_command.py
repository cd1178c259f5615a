"""`reef status` names the replica that answered and, per scenario, where its learner runs."""

from __future__ import annotations

import argparse
from typing import Any

import httpx
import pytest

from reef.cli import status as status_command

STATUS = {
    "version": "0", "replica_id": "host-b:42",
    "scenarios": {
        "math": {"leader": False, "leader_id": "host-a:7", "current_release_id": "abc", "learning": False},
        "code": {"leader": True, "leader_id": "host-b:42", "step": 3, "ready": 1, "batch_size": 8,
                 "job": {"state": "growing"}, "current_release_id": "def"},
    },
}  # fmt: skip


def test_status_shows_the_replica_and_each_scenarios_learner(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def answer(url: str, **_: Any) -> httpx.Response:
        return httpx.Response(200, json=STATUS)

    monkeypatch.setattr(status_command.httpx, "get", answer)
    monkeypatch.setenv("COLUMNS", "200")
    assert status_command.run_status(argparse.Namespace(url="http://x", token=None, json=False)) == 0
    out = capsys.readouterr().out
    assert "replica host-b:42" in out
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in out.splitlines() if line.count("│") > 3}
    assert rows["math"] == "host-a:7" and rows["code"] == "here"
