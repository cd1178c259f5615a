"""Whether untrusted code may run here: an isolating sandbox (bubblewrap that starts), or the operator's explicit
`sandbox.allow_unsandboxed`, or a refusal.

`isolation()` tries bubblewrap once per process (a binary on PATH is not enough: in a container without user
namespaces it cannot start, and that is the same as having none). `choose_sandbox` is what every caller that runs
untrusted code asks before it runs: True (use bubblewrap), False (run unsandboxed: the operator said so), or
`SandboxRefused` naming the setting — the step fails closed with that reason.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import tempfile
from pathlib import Path

from reef.sandbox.bubblewrap import bwrap_prefix

PROBE_TIMEOUT_S = 10.0


class SandboxRefused(RuntimeError):
    """Untrusted code was about to run without an isolating sandbox, and the operator did not allow it."""


@dataclasses.dataclass(frozen=True, slots=True)
class Isolation:
    """Whether an isolating sandbox can start here, and in words why (not)."""

    available: bool
    reason: str


def probe_isolation(binary: str = "bwrap") -> Isolation:
    """Start `binary` (bubblewrap) once on `true` with the sandbox's own command line."""
    if shutil.which(binary) is None:
        return Isolation(False, f"{binary} (bubblewrap) is not installed")
    with tempfile.TemporaryDirectory(prefix="reef-probe-") as root:
        argv = [shutil.which(binary) or binary, *bwrap_prefix(Path(root), Path(root))[1:], "true"]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=PROBE_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            return Isolation(False, f"bubblewrap cannot start: {error}")
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip()[-300:]
        return Isolation(False, f"bubblewrap cannot start here (exit {done.returncode}: {detail})")
    return Isolation(True, "bubblewrap")


_probed: list[Isolation] = []


def isolation() -> Isolation:
    """`probe_isolation()`, once per process."""
    if not _probed:
        _probed.append(probe_isolation())
    return _probed[0]


def choose_sandbox(allow_unsandboxed: bool, what: str) -> bool:
    """True: run `what` under bubblewrap; False: run it unsandboxed (allowed); else SandboxRefused saying why."""
    found = isolation()
    if found.available:
        return True
    if allow_unsandboxed:
        return False
    raise SandboxRefused(
        f"{what} runs untrusted code and needs an isolating sandbox, but {found.reason}; install bubblewrap "
        "(and allow user namespaces) or set sandbox.allow_unsandboxed true"
    )


def describe_sandbox(allow_unsandboxed: bool) -> str:
    """One line for `reef serve`'s start: how untrusted code will run here."""
    found = isolation()
    if found.available:
        return "sandbox: bubblewrap (episodes, checks and discovery attempts see only their own root)"
    if allow_unsandboxed:
        return f"sandbox: NONE ({found.reason}); untrusted code runs unsandboxed (sandbox.allow_unsandboxed true)"
    return (
        f"sandbox: none ({found.reason}); agent episodes, checks and discovery attempts will refuse to run "
        "(install bubblewrap or set sandbox.allow_unsandboxed true)"
    )
