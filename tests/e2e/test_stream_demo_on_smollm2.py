"""`reef demo --stream` end to end on the real SmolLM2, kept short: two lessons, one round each, one arm. It checks
the stream runs through a real `reef serve` and reports its figures, not how well the lessons are kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.model]


def test_a_short_stream_measures_every_lesson_so_far_after_each_lesson() -> None:
    command = [
        sys.executable, "-m", "reef.cli.main", "demo", "--stream", "--lessons", "2", "--rounds", "1",
        "--arms", "default", "--json",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    arm = result["stream"]["arms"]["default"]
    assert result["error"] is None and arm["error"] is None
    assert [len(row) for row in arm["matrix"]] == [1, 2]
    assert arm["published"] >= 1
    # A published step taught the first lesson's facts, which the base model cannot know.
    assert arm["matrix"][0][0] > arm["before"][0]
    assert arm["final_average"] is not None and len(arm["forgetting"]) == 2
