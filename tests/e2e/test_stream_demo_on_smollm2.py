"""`reef demo --stream` end to end on the real SmolLM2, two small lessons of one step each, the guarded arm: the second
lesson's step is judged on the first lesson's items too (the retention set) and replays the first lesson's
demonstrations (rehearsal), and the document and the report carry every figure of the stream (measured at full size
in docs/results/2026-12-07-stream-demo.md; here once, for the wiring, not for the scores)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.model]

CODES = 6  # half a default lesson: the wiring, at half the training


def test_the_guarded_arm_keeps_a_retention_set_and_rehearses_the_first_lesson(tmp_path: Path) -> None:
    report = tmp_path / "stream.html"
    command = [sys.executable, "-m", "reef.cli.main", "demo", "--stream", "--lessons", "2", "--arms", "guarded",
               "--lesson-codes", str(CODES), "--rounds", "1", "--json", "--report", str(report),
               "--time-budget", "1200"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=850, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["error"] is None
    guarded = result["stream"]["arms"]["guarded"]
    assert [len(row) for row in guarded["matrix"]] == [1, 2]
    for figure in ("learning_curve", "forgetting", "transfer", "peaks", "final_average", "final_over_peak"):
        assert guarded[figure] is not None, figure
    first, second = guarded["rounds"]
    # The first lesson is learnt (a published step), so the second lesson's steps know what to keep.
    assert any(r["verdict"] == "published" for r in first), first
    assert guarded["matrix"][0][0] > guarded["before"][0]
    judged = [r for r in second if r["retention"] is not None]
    assert judged, second
    # The first of them is judged on the first lesson's gate items, all of them; once a step of the second lesson is
    # published, its items join the set too.
    assert judged[0]["retention"]["tasks"] == CODES, judged[0]
    assert all(r["retention"]["tasks"] in (CODES, 2 * CODES) for r in judged), judged
    assert all(r["rehearsal_samples"] > 0 for r in second if r["step"] is not None)
    assert result["stream"]["lessons"][0]["codes"] == CODES
    assert "after lesson 2" in report.read_text(encoding="utf-8")
