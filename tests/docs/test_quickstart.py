"""Quickstart (a) runs as written: `reef serve` on the embedded model, the page's Python against it, a release."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.quickstart_blocks import PAGES, quickstart_code, serve_flags
from tests.fakes.reef_process import ReefProcess


def test_the_readme_and_the_quickstart_page_show_the_same_code_and_command() -> None:
    readme, page = PAGES
    assert quickstart_code(readme) == quickstart_code(page)
    assert serve_flags(readme) == serve_flags(page)


@pytest.mark.model
@pytest.mark.e2e
def test_quickstart_a_publishes_a_release_that_then_answers(tmp_path: Path) -> None:
    readme, _ = PAGES
    script = tmp_path / "quickstart.py"
    script.write_text(quickstart_code(readme))
    with ReefProcess(tmp_path / "state", *serve_flags(readme)) as reef:
        done = subprocess.run(
            [sys.executable, str(script)],
            env={**os.environ, "REEF_URL": reef.url},
            capture_output=True,
            text=True,
            timeout=900,
        )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    verdict = next(line for line in lines if line.startswith("verdict: "))
    assert verdict.startswith("verdict: published "), done.stdout
    release = verdict.split()[-1]
    assert lines[-1].startswith(f"now served by release {release}: "), done.stdout
