"""Quickstart (c) runs as written: the README's `reef discover` command, with a smaller budget appended."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.quickstart_blocks import PAGES, ROOT, discover_arguments

# The fields the discovery guide says `--json` prints (docs/guides/discovery.md).
DOCUMENTED_FIELDS = (
    "problem", "recipe", "seed_best", "best", "control_best", "best_known", "best_known_source", "steps",
    "valid_fraction", "parsed_fraction", "copy_fraction", "wall_s", "curve", "control_curve",
)  # fmt: skip
# One step ends the run; the budget only has to cover a slow or busy machine.
SMALLER_BUDGET = ["--steps", "1", "--grid", "2x2", "--time-budget", "600"]


def test_the_readme_and_the_quickstart_page_show_the_same_discover_command() -> None:
    readme, page = PAGES
    assert discover_arguments(readme) == discover_arguments(page)
    assert {"--control", "--json", "--report"} <= set(discover_arguments(readme))


@pytest.mark.model
@pytest.mark.e2e
def test_quickstart_c_searches_with_a_control_and_writes_the_json_and_the_report(tmp_path: Path) -> None:
    readme, _ = PAGES
    arguments = discover_arguments(readme)
    report = tmp_path / arguments[arguments.index("--report") + 1]
    done = subprocess.run(
        [sys.executable, "-m", "reef.cli.main", "discover", *arguments, *SMALLER_BUDGET],
        cwd=tmp_path,  # the README's relative `--report` path lands here
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout)
    assert [field for field in DOCUMENTED_FIELDS if field not in result] == [], result
    assert "error" not in result and result["steps"] == result["control_steps"] == 1, result
    assert len(result["curve"]) == len(result["control_curve"]) == 2, result  # the seed, then one step
    assert report.read_text().lstrip().lower().startswith("<!doctype html"), report
