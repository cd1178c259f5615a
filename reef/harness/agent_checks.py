"""An agent task's workspace and check inside an episode root: the files the agent starts with, and the check run
after it (a command and its expected exit status, or a file and the text it must hold).

A check command runs where the agent ran (`<root>/work`), sandboxed like the agent (no network, only the system
directories and its root visible; unsandboxed only where the operator allowed it), with an empty environment and
its own timeout.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import signal
from pathlib import Path

from reef.learning.evaluation.agent_tasks import AgentCheck, Workspace
from reef.sandbox.bubblewrap import bwrap_prefix

OUTPUT_TAIL_CHARS = 2_000


@dataclasses.dataclass(frozen=True, slots=True)
class CheckResult:
    """Whether the check passed, and what it saw (exit status or the file's state; the output's tail)."""

    passed: bool
    detail: str


def prepare_workspace(work: Path, workspace: Workspace | None) -> None:
    """Copy the fixture directory into `work`, then write the task's files over it."""
    if workspace is None:
        return
    if workspace.fixture_dir is not None:
        shutil.copytree(workspace.fixture_dir, work, dirs_exist_ok=True, symlinks=True)
    for relative, text in workspace.files.items():
        path = work / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


async def run_check(root: Path, work: Path, check: AgentCheck, sandbox: bool) -> CheckResult:
    """Run `check` in `work` (the episode's working directory inside `root`)."""
    if check.file is not None:
        path = (work / check.file).resolve()
        if not path.is_relative_to(work.resolve()) or not path.is_file():
            return CheckResult(False, f"{check.file} does not exist")
        found = check.contains is not None and check.contains in path.read_text(encoding="utf-8", errors="replace")
        return CheckResult(found, f"{check.file} {'holds' if found else 'lacks'} the expected text")
    assert check.command is not None
    argv = [*(bwrap_prefix(root, work) if sandbox else []), *check.command]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root / "home"), "LANG": "C.UTF-8"}
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=work,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), check.timeout_s)
    except TimeoutError:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        await process.communicate()
        return CheckResult(False, f"the check timed out after {check.timeout_s:g} s")
    tail = output.decode("utf-8", "replace")[-OUTPUT_TAIL_CHARS:]
    passed = process.returncode == check.expect_exit
    return CheckResult(passed, f"exit {process.returncode} (expected {check.expect_exit}): {tail}")
