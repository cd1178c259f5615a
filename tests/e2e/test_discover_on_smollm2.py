"""`reef discover` end to end on the embedded defaults (the real SmolLM2, `reef serve` twice: trained and control),
with a tiny budget: the command completes, every attempt is an edit of its parent, and both curves are reported.
Whether the search beats the seed is measured by hand (docs/results/2026-12-05-discovery.md), not asserted: one
step proves nothing either way."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.model]


def test_reef_discover_completes_a_step_with_a_control_and_reports_both_curves(tmp_path) -> None:
    # One step ends each run; the time budgets only have to cover a slow or busy machine (workers side by side).
    command = [
        sys.executable, "-m", "reef.cli.main", "discover", "circle-packing",
        "--option", "n=3", "--grid", "2x2", "--steps", "1", "--control", "--json",
        "--max-tokens", "60", "--time-budget", "600", "--report", str(tmp_path / "discover.html"),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["problem"] == "circle-packing" and "error" not in result
    # The model answers with edits of its parent, on the default (coarse) move menu.
    assert result["options"] == {"n": 3, "answer": "edit", "moves": "coarse"}
    assert result["steps"] == result["control_steps"] == 1
    assert len(result["curve"]) == len(result["control_curve"]) == 2  # the seed, then the step
    assert result["seed_best"] == pytest.approx(0.75) and result["best"] >= result["seed_best"]
    assert result["control_best"] >= result["seed_best"]
    assert result["random_best"] >= result["seed_best"] and len(result["random_curve"]) == 2  # the random policy arm
    # Every answer is an edit of its parent (constrained decoding), and only edits that change the parent are
    # offered: every answer holds a solution and none is a copy. Whether it is valid is the checker's call.
    assert result["copy_fraction"] == result["control_copy_fraction"] == 0.0
    assert result["parsed_fraction"] == result["control_parsed_fraction"] == 1.0
    assert 0.0 <= result["valid_fraction"] <= result["parsed_fraction"] <= 1.0
    report = (tmp_path / "discover.html").read_text()
    assert "best_known_source" in result and report.count("<polyline") == 3  # trained, frozen, random


def test_guidance_ttt_runs_the_executor_on_the_guides_advice(tmp_path) -> None:
    """The guide is asked for its `<guidance>` block (left free, SmolLM2 never wrote one), so the executor runs and
    the attempts hold solutions."""
    command = [
        sys.executable, "-m", "reef.cli.main", "discover", "circle-packing", "--recipe", "guidance_ttt",
        "--option", "n=3", "--grid", "2x2", "--steps", "1", "--json", "--max-tokens", "80", "--time-budget", "600",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["recipe"] == "guidance_ttt" and "error" not in result and result["steps"] == 1
    # The executor ran on the guide's advice and answered with an edit (not every time: a sampled 135M executor
    # sometimes answers with prose; 0.75 of the attempts in one run on 2 cores).
    assert result["parsed_fraction"] > 0
