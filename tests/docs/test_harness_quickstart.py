"""Quickstart (b) runs as written: `reef serve` with the `evolve` recipe, the page's Python against it, and a new
harness release that serves.

The fast test serves a fake provider (`recall`: it answers a question from a worked example of the same question
earlier in the conversation, as the `chat` adapter serves memory items) in place of the embedded model, so a tree
that remembers the reported facts really scores better at the gate; the model test runs the page's command as is.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.quickstart_blocks import HARNESS_FIRST_LINE, PAGES, quickstart_code, serve_flags
from tests.fakes.reef_process import ReefProcess
from tests.fakes.upstream import start_fake_upstream


def test_the_readme_and_the_quickstart_page_show_the_same_harness_code_and_command() -> None:
    readme, page = PAGES
    assert quickstart_code(readme, HARNESS_FIRST_LINE) == quickstart_code(page, HARNESS_FIRST_LINE)
    assert serve_flags(readme, "evolve") == serve_flags(page, "evolve")


def run_the_readme_harness_code(tmp_path: Path, flags: list[str]) -> list[str]:
    """The README's `harness.py` against `reef serve FLAGS`; its output lines."""
    script = tmp_path / "harness.py"
    script.write_text(quickstart_code(PAGES[0], HARNESS_FIRST_LINE))
    with ReefProcess(tmp_path / "state", *flags) as reef:
        done = subprocess.run(
            [sys.executable, str(script)],
            env={**os.environ, "REEF_URL": reef.url},
            capture_output=True,
            text=True,
            timeout=1200,
        )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def published_release(lines: list[str]) -> str:
    verdict = next(line for line in lines if line.startswith("verdict: "))
    assert verdict.startswith("verdict: published "), "\n".join(lines)
    return verdict.split()[-1]


@pytest.fixture
def recall_upstream_flags() -> Iterator[list[str]]:
    """The README's flags with a fake provider in place of the embedded model."""
    upstream = start_fake_upstream()
    flags = serve_flags(PAGES[0], "evolve")
    at = flags.index("--inference.model-path")
    del flags[at : at + 2]
    try:
        yield [*flags, "--inference.upstream-url", upstream.url, "--inference.upstream-model", "recall"]
    finally:
        upstream.stop()


@pytest.mark.e2e
def test_quickstart_b_publishes_a_tree_that_remembers_what_was_reported(
    tmp_path: Path, recall_upstream_flags: list[str]
) -> None:
    lines = run_the_readme_harness_code(tmp_path, recall_upstream_flags)
    assert [line[0] for line in lines[:4]] == ["0", "0", "0", "0"], lines
    release = published_release(lines)
    assert lines[-2] == f"now served by release {release}: '8443'", lines
    assert lines[-1].startswith("files for pi: ") and "AGENTS.md" in lines[-1].split(), lines


@pytest.mark.model
@pytest.mark.e2e
def test_quickstart_b_on_smollm2_publishes_a_tree_that_then_answers(tmp_path: Path) -> None:
    lines = run_the_readme_harness_code(tmp_path, serve_flags(PAGES[0], "evolve"))
    release = published_release(lines)
    assert lines[-2].startswith(f"now served by release {release}: "), lines
    assert lines[-1].startswith("files for pi: ") and "AGENTS.md" in lines[-1].split(), lines
