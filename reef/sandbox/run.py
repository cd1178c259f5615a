"""Run one untrusted command to completion in a fresh root, with CPU-time, memory and wall-clock limits.

The limits are rlimits set in the child before it execs (so they hold for bubblewrap and everything it starts:
RLIMIT_CPU kills with SIGXCPU/SIGKILL, RLIMIT_AS makes allocations fail) plus a wall timeout after which the whole
process group is killed. The environment is emptied but for PATH, HOME and TMPDIR inside the root.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from reef.sandbox.bubblewrap import bwrap_prefix
from reef.sandbox.policy import choose_sandbox

OUTPUT_TAIL_CHARS = 4_000


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """What one sandboxed run may use: CPU seconds, address-space bytes, wall seconds."""

    cpu_s: int = 10
    memory_bytes: int = 1 << 30
    wall_s: float = 20.0


@dataclasses.dataclass(frozen=True, slots=True)
class SandboxResult:
    """How the run went; `stdout`/`stderr` are the tails of its output."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool  # killed at the wall timeout
    sandboxed: bool  # ran under bubblewrap
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def killed(self) -> bool:
        """Ended by a signal (a limit, or the timeout); bubblewrap reports its child's signal as 128 + signum."""
        code = self.exit_code
        return self.timed_out or (code is not None and (code < 0 or (self.sandboxed and code > 128)))


def run_sandboxed(
    command: Sequence[str],
    files: dict[str, str] | None = None,
    limits: Limits = Limits(),
    *,
    sandbox: bool | None = None,
    temp_dir: Path | None = None,
) -> SandboxResult:
    """Write `files` (name -> text) into a fresh root, run `command` there (blocking) and remove the root.

    `sandbox` None: bubblewrap, or `SandboxRefused` where it cannot start; False: unsandboxed (the caller has the
    operator's `sandbox.allow_unsandboxed`). Raises OSError only when the command cannot be started at all (an
    infrastructure failure, not a failed attempt).
    """
    use_bwrap = choose_sandbox(False, "this run") if sandbox is None else sandbox
    root = Path(tempfile.mkdtemp(prefix="reef-sandbox-", dir=temp_dir))
    try:
        (root / "tmp").mkdir()
        (root / "home").mkdir()
        for name, text in (files or {}).items():
            (root / name).write_text(text)
        argv = [*(bwrap_prefix(root, root) if use_bwrap else []), *command]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root / "home"), "LANG": "C.UTF-8"}
        env["TMPDIR"] = str(root / "tmp")
        return _run(argv, root, env, limits, use_bwrap)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run(argv: list[str], cwd: Path, env: dict[str, str], limits: Limits, sandboxed: bool) -> SandboxResult:
    started = time.monotonic()
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: a timeout kills every child too
        preexec_fn=_apply(limits),
    )
    timed_out = False
    try:
        stdout, stderr = process.communicate(timeout=limits.wall_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(process.pid)
        stdout, stderr = process.communicate()
    _kill_group(process.pid)  # anything it left running
    return SandboxResult(
        exit_code=process.returncode,
        stdout=stdout.decode("utf-8", "replace")[-OUTPUT_TAIL_CHARS:],
        stderr=stderr.decode("utf-8", "replace")[-OUTPUT_TAIL_CHARS:],
        timed_out=timed_out,
        sandboxed=sandboxed,
        duration_s=time.monotonic() - started,
    )


def _apply(limits: Limits) -> Callable[[], None]:
    def set_limits() -> None:  # runs in the child between fork and exec
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return set_limits


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
