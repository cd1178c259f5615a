"""`reef demo --rollout canary` end to end on the real SmolLM2: the better release is promoted and the disliked one
rolled back by the scripted users' reports, each rollout reporting its arms (measured twice by hand in
docs/results/2026-12-06-rollout-demo.md; here once, for the outcome, not for the report counts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.model]


def test_the_users_promote_the_better_release_and_roll_back_the_disliked_one() -> None:
    command = [sys.executable, "-m", "reef.cli.main", "demo", "--rollout", "canary", "--json"]
    # A bound for a hung demo, not a speed check (beside another worker's training on 2 cores it took 9-10 minutes),
    # under pytest-timeout's 900 s so that a hung demo's own output is what the failure shows.
    done = subprocess.run(command, capture_output=True, text=True, timeout=850, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["error"] is None
    outcomes = {r["label"]: r for r in result["rollouts"]}
    assert outcomes["better"]["state"] == "promoted" and outcomes["worse"]["state"] == "rolled_back"
    for outcome in outcomes.values():
        assert outcome["decided_by"] == "test"  # the sequential test, not a manual action or the question cap
        arms = outcome["arms"]
        assert outcome["reports"] == arms["candidate"]["reports"] + arms["incumbent"]["reports"]
        assert 0.0 < outcome["exposed_share"] < 1.0
    assert outcomes["worse"]["arms"]["candidate"]["mean"] < outcomes["worse"]["arms"]["incumbent"]["mean"]
